"""The SDK's public-API `AdvancedSQLiteSession` tests, from its sdist, pass against ours on
SQLite and on PostgreSQL; `advanced_suite.py` lists the excluded ones with their reasons."""

from __future__ import annotations

from pathlib import Path

import pytest

from . import harness
from .advanced_suite import ADVANCED

pytestmark = [pytest.mark.sdk_compat, pytest.mark.slow]

PG_MODULE = "agents_sqlalchemy_pg_advanced"
PG_MODULE_FILE = Path(__file__).with_name("pg_advanced.py")


@pytest.fixture(scope="module")
def sdk_root() -> Path:
    """Extracted sdist of the installed openai-agents version (downloaded on first use)."""
    return harness.sdk_source_dir()


def _assert_clean(result: harness.RunResult, *, control: bool = False) -> None:
    found = harness.problems(result, ADVANCED, control=control)
    if found:
        pytest.fail(
            "\n".join([*found, f"command: {' '.join(result.command)}", result.output[-20_000:]]),
            pytrace=False,
        )


def test_kept_and_excluded_lists_are_disjoint() -> None:
    """A test is either run or excluded with a reason, never both."""
    assert len(ADVANCED.kept) == len(set(ADVANCED.kept))
    assert not harness.kept_functions(ADVANCED) & ADVANCED.excluded.keys()
    assert all(reason.strip() for reason in ADVANCED.excluded.values())


def test_every_sdk_test_is_classified(sdk_root: Path) -> None:
    """A test added to (or removed from) the SDK file must be kept or excluded explicitly."""
    source = (sdk_root / ADVANCED.test_file).read_text(encoding="utf-8")
    functions = harness.sdk_test_functions(source)
    classified = harness.kept_functions(ADVANCED) | ADVANCED.excluded.keys()
    assert sorted(set(functions) - classified) == [], "unclassified SDK tests"
    assert sorted(classified - set(functions)) == [], "classified tests missing from the SDK"


def test_rewrite_swaps_in_our_class(sdk_root: Path) -> None:
    """The rewritten module imports our class, guarded, and no longer the SDK's."""
    source = (sdk_root / ADVANCED.test_file).read_text(encoding="utf-8")
    rewritten = harness.rewrite_test_file(source, harness.OUR_MODULE, ADVANCED)
    assert ADVANCED.sdk_import not in rewritten
    assert "\nfrom agents_sqlalchemy import AdvancedSQLiteSession\n" in rewritten
    assert harness.CLASS_FILE_ENV in rewritten


def test_kept_sdk_tests_pass_against_sdk_class(sdk_root: Path, tmp_path: Path) -> None:
    """Control: the selection passes against the SDK's own class, so failures below are ours."""
    result = harness.run_sdk_tests(sdk_root, ADVANCED.sdk_module, tmp_path, ADVANCED)
    _assert_clean(result, control=True)


def test_kept_sdk_tests_pass_against_ours_on_sqlite(sdk_root: Path, tmp_path: Path) -> None:
    """The SDK's public-API tests pass with `agents_sqlalchemy.AdvancedSQLiteSession`."""
    _assert_clean(harness.run_sdk_tests(sdk_root, harness.OUR_MODULE, tmp_path, ADVANCED))


def test_kept_sdk_tests_pass_against_ours_on_postgresql(
    sdk_root: Path, tmp_path: Path, pg_url: str
) -> None:
    """The same tests with every SQLite path of theirs mapped to a PostgreSQL schema."""
    result = harness.run_sdk_tests(
        sdk_root,
        PG_MODULE,
        tmp_path,
        ADVANCED,
        module_file=PG_MODULE_FILE,
        extra_env={"AGENTS_SQLALCHEMY_SDK_COMPAT_PG_URL": pg_url},
    )
    _assert_clean(result)
