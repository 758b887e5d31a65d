"""Fetch the SDK's source distribution and run its session tests against a chosen class.

Nothing from the SDK is copied into this repository: the sdist of the installed openai-agents
version is downloaded with pip into `.cache/sdk-sdist/` (gitignored) at test time, and a copy of
a test module with the class's import swapped is written next to the original, so the SDK's
own `tests` package, conftest and pytest settings apply unchanged. A `Suite` names the test
module, the import to swap, and which of its tests run (the rest excluded with a reason):
`SQLALCHEMY` here, `advanced_suite.ADVANCED` for `AdvancedSQLiteSession`.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import inspect
import os
import shutil
import site
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

SDK_DISTRIBUTION = "openai-agents"
SDK_TEST_FILE = PurePosixPath("tests/extensions/memory/test_sqlalchemy_session.py")
SDK_MODULE = "agents.extensions.memory.sqlalchemy_session"
SDK_IMPORT = f"from {SDK_MODULE} import SQLAlchemySession"
OUR_MODULE = "agents_sqlalchemy"
CLASS_NAME = "SQLAlchemySession"
# The rewritten test module refuses to load unless its class is defined in this file.
CLASS_FILE_ENV = "AGENTS_SQLALCHEMY_SDK_COMPAT_CLASS_FILE"
# Where SDK import lines start (any other import of them left in a test file is refused).
SDK_PACKAGE = "agents.extensions.memory"

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = REPO_ROOT / ".cache" / "sdk-sdist"
RUN_TIMEOUT = 600.0

# Test cases (pytest node names) that use only the public API; every one must pass.
KEPT: tuple[str, ...] = (
    "test_sqlalchemy_session_direct_ops",
    "test_runner_integration",
    "test_session_isolation",
    "test_get_items_with_limit",
    "test_pop_from_empty_session",
    "test_concurrent_pop_item_returns_each_row_once",
    "test_get_items_limit_returns_fewer_when_history_exhausted",
    "test_add_empty_items_list",
    "test_add_items_concurrent_first_access_with_create_tables",
    "test_add_items_concurrent_first_write_after_tables_exist",
    "test_add_items_waits_for_transient_sqlite_write_lock",
    "test_add_items_concurrent_first_access_across_sessions_with_shared_engine",
    "test_add_items_concurrent_first_access_across_from_url_sessions",
    "test_add_items_concurrent_first_access_across_from_url_sessions_cross_loop",
    "test_add_items_concurrent_first_access_with_shared_session_cross_loop",
    "test_engine_property_from_url",
    "test_engine_property_from_external_engine",
    "test_engine_property_is_read_only",
    "test_session_settings_default",
    "test_session_settings_from_url[class]",
    "test_session_settings_from_url[dictionary]",
    "test_get_items_uses_session_settings_limit",
    "test_get_items_explicit_limit_overrides_session_settings",
    "test_session_settings_resolve",
    "test_runner_with_session_settings_override",
)

# Test functions that depend on the SDK's internals or storage layout, with the reason.
EXCLUDED: dict[str, str] = {
    "test_sqlalchemy_session_defaults_to_escaped_non_ascii_storage": (
        "reads raw rows via private _session_factory/_messages to check the SDK's JSON escaping"
    ),
    "test_sqlalchemy_session_can_store_non_ascii_without_escaping": (
        "SDK-only ensure_ascii option, checked on raw rows via _session_factory/_messages"
    ),
    "test_sqlite_fallback_reserves_writer_before_tail_claim": (
        "asserts the SDK's own SQL ('UPDATE agent_sessions SET ...') for its pop fallback"
    ),
    "test_pop_item_supports_unknown_delete_rowcount": (
        "monkeypatches private _ensure_tables/_session_factory with fake DB sessions"
    ),
    "test_pop_item_retries_returning_claim_lost_to_concurrent_delete": (
        "monkeypatches private _ensure_tables/_session_factory with fake DB sessions"
    ),
    "test_mutation_cancellation_waits_for_transaction_exit": (
        "monkeypatches private _ensure_tables/_session_factory with fake transactions"
    ),
    "test_pop_item_skips_corrupt_most_recent": (
        "injects corrupt raw rows into the SDK's agent_messages table via _messages"
    ),
    "test_get_items_limit_skips_corrupt_newest_rows": (
        "injects corrupt raw rows into the SDK's agent_messages table via _messages"
    ),
    "test_pop_item_returns_none_after_dropping_only_corrupt_rows": (
        "injects corrupt raw rows into the SDK's agent_messages table via _messages"
    ),
    "test_add_items_cancelled_waiter_does_not_strand_table_init_lock": (
        "acquires the SDK's private _init_lock directly"
    ),
    "test_create_tables_false_does_not_allocate_shared_init_lock": (
        "inspects private _init_lock/_table_init_locks"
    ),
    "test_get_items_same_timestamp_consistent_order": (
        "rewrites created_at in agent_messages and wraps private _session_factory"
    ),
    "test_pop_item_same_timestamp_returns_latest": (
        "raw 'UPDATE agent_messages' through private _session_factory"
    ),
    "test_get_items_orders_by_id_for_ties": (
        "wraps private _session_factory and asserts ORDER BY on agent_messages columns"
    ),
    "test_sqlite_configuration_registry_releases_collected_engines": (
        "inspects private class registry _sqlite_configured_engines"
    ),
    "test_sqlite_configuration_registry_does_not_grow_unbounded": (
        "inspects private class registry _sqlite_configured_engines"
    ),
}


@dataclass(frozen=True)
class Suite:
    """One SDK test module run against a class of ours: what to swap and what to run."""

    test_file: PurePosixPath
    sdk_module: str
    class_name: str
    kept: tuple[str, ...]
    excluded: dict[str, str]
    # `kept` lists test functions (every parametrised case of each runs), not case names.
    by_function: bool = False
    # Kept cases that fail against the SDK's own class here (with the reason): the control
    # run tolerates them; against ours they must pass.
    sdk_failures: dict[str, str] = field(default_factory=dict)
    # Other imports from the SDK's memory package the test file may keep (lines as written):
    # SDK classes that wrap ours in the tests, such as its `EncryptedSession`.
    other_imports: tuple[str, ...] = ()

    @property
    def sdk_import(self) -> str:
        return f"from {self.sdk_module} import {self.class_name}"


SQLALCHEMY = Suite(SDK_TEST_FILE, SDK_MODULE, CLASS_NAME, KEPT, EXCLUDED)


_GUARD = """
# Added by the agents_sqlalchemy SDK-compat harness: refuse to run against another class.
import inspect as _sdk_compat_inspect
import os as _sdk_compat_os

if not _sdk_compat_os.path.samefile(
    _sdk_compat_inspect.getfile({name}), _sdk_compat_os.environ["{env}"]
):
    raise RuntimeError(
        "SDK-compat harness: {name} under test is defined in "
        + _sdk_compat_inspect.getfile({name})
    )
"""


class HarnessError(RuntimeError):
    """The SDK sources could not be obtained or no longer match what the harness expects."""


@dataclass(frozen=True)
class CaseResult:
    """One `<testcase>` of the junit report."""

    name: str
    classname: str
    outcome: str  # "passed", "failed", "error" or "skipped"
    message: str


@dataclass(frozen=True)
class RunResult:
    """What the pytest subprocess did."""

    command: list[str]
    returncode: int
    output: str
    cases: list[CaseResult]
    module_name: str


def kept_functions(suite: Suite = SQLALCHEMY) -> set[str]:
    """Names of the SDK test functions that are run."""
    return {case.split("[", 1)[0] for case in suite.kept}


def sdk_version() -> str:
    """Version of the installed openai-agents distribution."""
    return importlib.metadata.version(SDK_DISTRIBUTION)


def _find_archive(directory: Path, version: str) -> Path | None:
    for stem in ("openai_agents", "openai-agents"):
        candidate = directory / f"{stem}-{version}.tar.gz"
        if candidate.is_file():
            return candidate
    return None


def download_sdist(version: str, cache_dir: Path = CACHE_DIR) -> Path:
    """Return the sdist archive for `version`, downloading it with pip unless cached."""
    cached = _find_archive(cache_dir, version)
    if cached is not None:
        return cached
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix=".download-") as tmp:
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"{SDK_DISTRIBUTION}=={version}",
            "-d",
            tmp,
        ]
        proc = subprocess.run(command, capture_output=True, text=True, check=False)
        archive = _find_archive(Path(tmp), version)
        if proc.returncode != 0 or archive is None:
            raise HarnessError(
                f"could not download the {SDK_DISTRIBUTION}=={version} sdist "
                f"(exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
            )
        target = cache_dir / archive.name
        os.replace(archive, target)
    return target


def _check_members(tar: tarfile.TarFile, dest: Path) -> list[tarfile.TarInfo]:
    """Fallback for Pythons without extraction filters: only plain files and dirs inside dest."""
    root = dest.resolve()
    members = tar.getmembers()
    for member in members:
        target = (dest / member.name).resolve()
        if not (member.isfile() or member.isdir()) or not target.is_relative_to(root):
            raise HarnessError(f"refusing to extract suspicious sdist member {member.name!r}")
    return members


def _safe_extract(archive: Path, dest: Path) -> None:
    with tarfile.open(archive, "r:gz") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:  # pragma: no cover - Python releases without PEP 706
            tar.extractall(dest, members=_check_members(tar, dest))


def sdk_source_dir(version: str | None = None, cache_dir: Path = CACHE_DIR) -> Path:
    """Return the extracted sdist root of the installed (or given) SDK version."""
    version = version or sdk_version()
    archive = download_sdist(version, cache_dir)
    root = cache_dir / archive.name.removesuffix(".tar.gz")
    if not (root / SDK_TEST_FILE).is_file():
        if root.exists():  # not one of our atomic renames: start over
            shutil.rmtree(root)
        with tempfile.TemporaryDirectory(dir=cache_dir, prefix=".extract-") as tmp:
            _safe_extract(archive, Path(tmp))
            extracted = Path(tmp) / root.name
            if not (extracted / SDK_TEST_FILE).is_file():
                raise HarnessError(f"{archive.name} does not contain {SDK_TEST_FILE}")
            try:
                extracted.rename(root)
            except OSError:  # a concurrent run extracted it first
                if not (root / SDK_TEST_FILE).is_file():
                    raise
    return root


def sdk_test_functions(source: str) -> list[str]:
    """Names of the module-level test functions in the SDK test file."""
    tree = ast.parse(source)
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    ]


def rewrite_test_file(source: str, module: str, suite: Suite = SQLALCHEMY) -> str:
    """Swap the SDK's import of the suite's class for `module`'s, adding an origin guard.

    The file must import from the SDK's memory package on exactly that one line (mentions
    in strings, such as `patch()` targets of excluded tests, are left as they are).
    """
    lines = source.splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if line.strip() == suite.sdk_import]
    if len(hits) != 1:
        raise HarnessError(f"expected exactly one line {suite.sdk_import!r}, found {len(hits)}")
    imports = [
        line
        for line in lines
        if line.lstrip().startswith((f"from {SDK_PACKAGE}", f"import {SDK_PACKAGE}"))
        and line.strip() not in suite.other_imports
    ]
    if len(imports) != 1:
        raise HarnessError(f"the SDK test file imports from {SDK_PACKAGE} elsewhere: {imports}")
    guard = _GUARD.format(name=suite.class_name, env=CLASS_FILE_ENV)
    lines[hits[0]] = f"from {module} import {suite.class_name}\n{guard}"
    return "".join(lines)


def _import_path_entry(module: str) -> str | None:
    """Directory to put on the child's PYTHONPATH so it imports the same `module` as we do."""
    top = importlib.import_module(module.split(".", 1)[0])
    origin = getattr(top, "__file__", None)
    if origin is None:
        return None
    entry = Path(origin).resolve().parent.parent
    site_dirs = {Path(p).resolve() for p in [*site.getsitepackages(), site.getusersitepackages()]}
    return None if entry in site_dirs else str(entry)


def _child_env(
    module: str, class_file: str, extra_path: Path | None, extra_env: dict[str, str] | None
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env[CLASS_FILE_ENV] = class_file
    env.update(extra_env or {})
    entries = [_import_path_entry(module), str(extra_path) if extra_path else None]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [*entries, env.get("PYTHONPATH")]))
    return env


def _summary(message: str, details: str, max_lines: int = 4) -> str:
    """The first few `E` lines of the traceback, else the report's first message line."""
    e_lines = [line[1:].strip() for line in details.splitlines() if line.startswith("E ")]
    useful = [line for line in e_lines if line and not line.startswith("Use -v")]
    if useful:
        return " | ".join(useful[:max_lines])
    return message.strip().partition("\n")[0]


def parse_junit(path: Path) -> list[CaseResult]:
    """Read every `<testcase>` of a pytest junit XML report."""
    results: list[CaseResult] = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed"}.get(child.tag, child.tag)
                message = _summary(child.get("message") or "", child.text or "")
                break
        results.append(
            CaseResult(case.get("name", ""), case.get("classname", ""), outcome, message)
        )
    return results


def run_sdk_tests(
    root: Path,
    module: str,
    work_dir: Path,
    suite: Suite = SQLALCHEMY,
    *,
    module_file: Path | None = None,
    extra_env: dict[str, str] | None = None,
) -> RunResult:
    """Run the suite's kept SDK tests with `module`'s class in a pytest subprocess.

    `module_file` is a module file of the tests' own to import the class from (it is copied
    into `work_dir`, put on the child's path, and imported as `module`); `extra_env` goes to
    the child's environment.
    """
    if module_file is not None:
        target = work_dir / f"{module}.py"
        shutil.copyfile(module_file, target)
        class_file = str(target)
    else:
        class_file = inspect.getfile(getattr(importlib.import_module(module), suite.class_name))

    original = root / suite.test_file
    rewritten = original.with_name(f"{original.stem}__{module.replace('.', '_')}.py")
    source = original.read_text(encoding="utf-8")
    text = rewrite_test_file(source, module, suite)
    tmp = rewritten.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, rewritten)

    relative = rewritten.relative_to(root).as_posix()
    # In the SDK file's order, as its own test run would have them.
    kept = kept_functions(suite)
    node_ids = [f"{relative}::{name}" for name in sdk_test_functions(source) if name in kept]
    junit = work_dir / "junit.xml"
    junit.unlink(missing_ok=True)
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-c",
        str(root / "pyproject.toml"),
        "--rootdir",
        str(root),
        "-p",
        "no:cacheprovider",
        "-q",
        "-rA",
        f"--junitxml={junit}",
        *node_ids,
    ]
    proc = subprocess.run(
        command,
        cwd=root,
        env=_child_env(
            OUR_MODULE if module_file else module,
            class_file,
            work_dir if module_file else None,
            extra_env,
        ),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    cases = parse_junit(junit) if junit.is_file() else []
    module_name = relative.removesuffix(".py").replace("/", ".")
    return RunResult(command, proc.returncode, proc.stdout + proc.stderr, cases, module_name)


def problems(result: RunResult, suite: Suite = SQLALCHEMY, *, control: bool = False) -> list[str]:
    """Every way `result` differs from "exactly the kept tests ran, from our file, and passed".

    With `control` (a run against the SDK's own class), the suite's `sdk_failures` may fail.
    """
    found: list[str] = []
    kept = set(suite.kept)
    tolerated = set(suite.sdk_failures) if control else set()
    failed = {case.name for case in result.cases if case.outcome != "passed"}
    if result.returncode != 0 and not (failed and failed <= tolerated):
        found.append(f"pytest exited with {result.returncode}")
    names = [case.name for case in result.cases]
    if len(names) != len(set(names)):
        found.append(f"duplicate test cases in the report: {sorted(names)}")
    ran = {name.split("[", 1)[0] for name in names} if suite.by_function else set(names)
    missing = sorted(kept - ran)
    unexpected = sorted(ran - kept)
    if missing:
        found.append(f"kept tests that did not run: {missing}")
    if unexpected:
        found.append(f"tests that are not in the kept list ran: {unexpected}")
    for case in result.cases:
        if case.classname != result.module_name:
            found.append(f"{case.name} ran from {case.classname}, not {result.module_name}")
        if case.outcome != "passed" and case.name not in tolerated:
            found.append(f"{case.name} {case.outcome}: {case.message}")
    passed = sum(case.outcome == "passed" or case.name in tolerated for case in result.cases)
    expected = len(result.cases) if suite.by_function else len(kept)
    if passed != expected or not passed:
        found.append(f"{passed} of {expected} kept tests passed")
    return found
