"""The SDK's compaction tests of its `SQLAlchemySession`, from its sdist, pass against ours;
`compaction_suite.py` lists the excluded ones with their reasons."""

from __future__ import annotations

from pathlib import Path

import pytest

from . import harness
from .compaction_suite import COMPACTION

pytestmark = pytest.mark.sdk_compat


@pytest.fixture(scope="module")
def sdk_root() -> Path:
    """Extracted sdist of the installed openai-agents version (downloaded on first use)."""
    return harness.sdk_source_dir()


def _assert_clean(result: harness.RunResult) -> None:
    found = harness.problems(result, COMPACTION)
    if found:
        pytest.fail(
            "\n".join([*found, f"command: {' '.join(result.command)}", result.output[-20_000:]]),
            pytrace=False,
        )


def test_every_sdk_test_is_classified(sdk_root: Path) -> None:
    """A test added to (or removed from) the SDK file must be kept or excluded explicitly."""
    source = (sdk_root / COMPACTION.test_file).read_text(encoding="utf-8")
    functions = harness.sdk_test_functions(source)
    classified = harness.kept_functions(COMPACTION) | COMPACTION.excluded.keys()
    assert not harness.kept_functions(COMPACTION) & COMPACTION.excluded.keys()
    assert sorted(set(functions) - classified) == [], "unclassified SDK tests"
    assert sorted(classified - set(functions)) == [], "classified tests missing from the SDK"


def test_kept_sdk_tests_pass_against_sdk_class(sdk_root: Path, tmp_path: Path) -> None:
    """Control: the selection passes against the SDK's own class, so failures below are ours."""
    _assert_clean(harness.run_sdk_tests(sdk_root, COMPACTION.sdk_module, tmp_path, COMPACTION))


def test_kept_sdk_tests_pass_against_ours(sdk_root: Path, tmp_path: Path) -> None:
    """In memory too: `engine=session.engine` reaches the session's database, each
    `from_url(":memory:")` is a database of its own, a trigger's refusal is IntegrityError."""
    _assert_clean(harness.run_sdk_tests(sdk_root, harness.OUR_MODULE, tmp_path, COMPACTION))
