"""The SDK's public-API `SQLAlchemySession` tests, from its sdist, pass against our class."""

from __future__ import annotations

from pathlib import Path

import pytest

from . import harness

pytestmark = [pytest.mark.sdk_compat, pytest.mark.slow]


@pytest.fixture(scope="module")
def sdk_root() -> Path:
    """Extracted sdist of the installed openai-agents version (downloaded on first use)."""
    return harness.sdk_source_dir()


def _assert_clean(result: harness.RunResult) -> None:
    found = harness.problems(result)
    if found:
        pytest.fail(
            "\n".join(
                [
                    *found,
                    f"command: {' '.join(result.command)}",
                    "---- pytest output ----",
                    result.output,
                ]
            ),
            pytrace=False,
        )


def test_kept_and_excluded_lists_are_disjoint() -> None:
    """A test is either run or excluded with a reason, never both."""
    assert not harness.kept_functions() & harness.EXCLUDED.keys()
    assert all(reason.strip() for reason in harness.EXCLUDED.values())


def test_every_sdk_test_is_classified(sdk_root: Path) -> None:
    """A test added to (or removed from) the SDK file must be kept or excluded explicitly."""
    source = (sdk_root / harness.SDK_TEST_FILE).read_text(encoding="utf-8")
    functions = harness.sdk_test_functions(source)
    assert len(functions) == len(set(functions))
    classified = harness.kept_functions() | harness.EXCLUDED.keys()
    assert sorted(set(functions) - classified) == [], "unclassified SDK tests"
    assert sorted(classified - set(functions)) == [], "classified tests missing from the SDK"


def test_rewrite_swaps_in_our_class(sdk_root: Path) -> None:
    """The rewritten module imports our class, guarded, and no longer the SDK's."""
    source = (sdk_root / harness.SDK_TEST_FILE).read_text(encoding="utf-8")
    rewritten = harness.rewrite_test_file(source, harness.OUR_MODULE)
    assert harness.SDK_IMPORT not in rewritten
    assert "agents.extensions.memory" not in rewritten
    assert "\nfrom agents_sqlalchemy import SQLAlchemySession\n" in rewritten
    assert harness.CLASS_FILE_ENV in rewritten


def test_rewrite_fails_loudly_without_the_sdk_import() -> None:
    """If the SDK changes its import, the harness must not silently test the SDK's class."""
    with pytest.raises(harness.HarnessError):
        harness.rewrite_test_file("from agents import SQLAlchemySession\n", harness.OUR_MODULE)


def test_selected_sdk_tests_pass_against_sdk_class(sdk_root: Path, tmp_path: Path) -> None:
    """Control: the selection passes against the SDK's own class, so failures below are ours."""
    _assert_clean(harness.run_sdk_tests(sdk_root, harness.SDK_MODULE, tmp_path))


def test_selected_sdk_tests_pass_against_ours(sdk_root: Path, tmp_path: Path) -> None:
    """The SDK's public-API tests pass with `agents_sqlalchemy.SQLAlchemySession`."""
    _assert_clean(harness.run_sdk_tests(sdk_root, harness.OUR_MODULE, tmp_path))
