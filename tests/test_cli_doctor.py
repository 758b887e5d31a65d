"""`agents-sqlalchemy doctor` finds, in one run, what a deployment gets wrong, each finding
with the command that fixes it; and the fixes it names work."""

from __future__ import annotations

import asyncio
import shlex
import subprocess
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from agents_sqlalchemy import SessionStore, TableNames
from agents_sqlalchemy.cli import app
from agents_sqlalchemy.database.engines import normalize_url
from agents_sqlalchemy.migrations.config import head_revision
from agents_sqlalchemy.search import HashingEmbedder

from .support.items import ASSISTANT, USER
from .support.sdk_tables import make_sdk_tables, sdk_needs_tables_made
from .support.tables import ITEMS, SESSIONS, execute

NO_KEY: dict[str, str | None] = {"AGENTS_SQLALCHEMY_KEY": None}
ORPHAN = {"type": "function_call_output", "call_id": "call_gone", "output": "late"}


def cli(*args: str, env: dict[str, str | None] | None = None) -> Result:
    return CliRunner().invoke(app, list(args), env={**NO_KEY, **(env or {})},
                              catch_exceptions=False)  # fmt: skip


def fix_of(output: str, check: str, url: str) -> list[str]:
    """The command a finding names, as arguments for `cli` (without the program name), with
    the URL's password put back (the output hides it)."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if f"PROBLEM  {check}" in line)
    command = lines[start + 1].split("fix: ", 1)[1].split(" (or ")[0]
    words = shlex.split(command)[1:]
    return [url if words[i - 1] in ("--url", "--from") else w for i, w in enumerate(words)]


def seed(url: str, **options: Any) -> None:
    async def write() -> None:
        async with SessionStore(url, create_tables=True, **options) as store:
            await store.session("healthy").add_items([USER, ASSISTANT])
            await store.session("broken").add_items([USER, ORPHAN])

    asyncio.run(write())


async def sdk_history(url: str) -> None:
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession as SdkSession

    if sdk_needs_tables_made(url):
        await make_sdk_tables(normalize_url(url).render_as_string(hide_password=False))
    create = not sdk_needs_tables_made(url)
    session = SdkSession.from_url("from-the-sdk", url=normalize_url(url), create_tables=create)
    await session.add_items([USER])
    await session.engine.dispose()


def test_doctor_finds_each_problem_and_names_its_fix(db_url: str) -> None:
    seed(db_url, embedder=HashingEmbedder(dim=64))
    asyncio.run(sdk_history(db_url))
    found = cli("doctor", "--url", db_url)
    assert found.exit_code == 1, found.output
    assert f"ok       schema      at revision {head_revision()} (head)" in found.output
    assert "ok       key         plaintext database" in found.output
    assert "PROBLEM  embedder    items were indexed with hashing-v2-64" in found.output
    assert "PROBLEM  sdk tables  agent_messages holds 1 session not imported" in found.output
    assert "PROBLEM  histories   1 session of 2 holds a history" in found.output
    assert "ok       index       every live item is indexed with hashing-v2-64" in found.output
    assert "3 problems found" in found.output
    for check in ("histories", "sdk tables"):
        command = fix_of(found.output, check, db_url)
        fixed = cli(*command, *(["--yes"] if check == "histories" else []))
        assert fixed.exit_code == 0, fixed.output
    again = cli("doctor", "--url", db_url)
    assert "ok       sdk tables  every session of agent_messages was imported" in again.output
    assert "ok       histories   3 sessions, all healthy" in again.output
    # An import indexes nothing, nor a repair's item: found by no search until a reindex.
    assert "PROBLEM  index       2 live items not indexed with hashing-v2-64" in again.output
    assert "PROBLEM  embedder" in again.output and "2 problems found" in again.output
    reindexed = cli(*fix_of(again.output, "index", db_url))
    assert reindexed.exit_code == 0, reindexed.output
    healed = cli("doctor", "--url", db_url)
    assert healed.exit_code == 0 and "No problems found" in healed.output, healed.output


def test_doctor_on_the_schema_and_the_key(sqlite_url: str) -> None:
    seed(sqlite_url, tables=TableNames(prefix="chat_"), key="right key")
    wrong_prefix = cli("doctor", "--url", sqlite_url)
    assert wrong_prefix.exit_code == 1
    assert "PROBLEM  schema" in wrong_prefix.output and "--prefix chat_" in wrong_prefix.output
    no_key = cli("doctor", "--url", sqlite_url, "--prefix", "chat_")
    assert "PROBLEM  key         the database is encrypted" in no_key.output
    assert "$AGENTS_SQLALCHEMY_KEY" in no_key.output
    wrong = cli("doctor", "--url", sqlite_url, "--prefix", "chat_",
                env={"AGENTS_SQLALCHEMY_KEY": "wrong key"})  # fmt: skip
    assert "PROBLEM  key" in wrong.output and "AGENTS_SQLALCHEMY_KEY" in wrong.output
    right = cli("doctor", "--url", sqlite_url, "--prefix", "chat_",
                env={"AGENTS_SQLALCHEMY_KEY": "right key"})  # fmt: skip
    assert "ok       key         encrypted; the key given opens it" in right.output
    assert "PROBLEM  histories   1 session of 2" in right.output
    assert "ok       embedder" in right.output and "ok       sdk tables" in right.output


def test_doctor_runs_every_check_past_a_row_altered_outside_the_library(sqlite_url: str) -> None:
    """An item or a session's metadata altered into what does not read ended `doctor` at
    the first check that met it, with that error alone: the other checks never ran, and
    nothing named the session."""
    seed(sqlite_url)
    healthy = f"(SELECT id FROM {SESSIONS} WHERE session_id = 'healthy')"
    altered = f"UPDATE {ITEMS} SET payload = '{{bad' WHERE seq = 1 AND session_pk = {healthy}"
    asyncio.run(execute(sqlite_url, altered))
    found = cli("doctor", "--url", sqlite_url)
    assert found.exit_code == 1, found.output
    assert "ok       embedder" in found.output and "ok       sdk tables" in found.output
    assert "PROBLEM  histories   1 session of 2 do not read" in found.output
    assert "outside the library): 'healthy'" in found.output
    asyncio.run(execute(sqlite_url, f"UPDATE {SESSIONS} SET metadata = '{{bad'"))
    listed = cli("doctor", "--url", sqlite_url)
    assert "ok       embedder" in listed.output, listed.output
    assert "PROBLEM  histories   a stored JSON value" in listed.output


def test_doctor_takes_the_built_in_model_a_store_given_none_takes(sqlite_url: str) -> None:
    """A database indexed with a built-in model other than the default: a store opened
    without `embedder=` searches with that model, so it is no problem; `doctor` reported
    one, measuring against the hashing default."""
    seed(sqlite_url, embedder="model2vec")
    found = cli("doctor", "--url", sqlite_url)
    assert "ok       embedder    items indexed with model2vec:" in found.output, found.output
    assert "as a store given no embedder indexes" in found.output
    named = cli("doctor", "--url", sqlite_url, "--embedder", "hashing")
    assert "PROBLEM  embedder    items were indexed with model2vec:" in named.output


def argv_of(command: str) -> list[str]:
    """The arguments bash hands a program from the command line `command` (after its first
    word): what a user who pastes it runs."""
    words = command.split(" ", 1)[1]
    done = subprocess.run(["bash", "-c", f"printf '%s\\0' {words}"], capture_output=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.decode().split("\0")[:-1]


def test_a_fix_names_each_odd_session_id_as_it_is(sqlite_url: str, tmp_path: Path) -> None:
    """The ids of a fix were Python's `repr`: in double quotes where an id held a quote, in
    which the shell runs `$(...)`; an id with a newline came out as `\\n`, naming another
    session. Pasted, the command now names each as it is and runs nothing else."""
    ran = tmp_path / "ran"
    ids = [f"it's $(touch {ran})", "two\nlines\ttab", "both ' and \" `touch x`", "rtl\u202e\x85"]

    async def write() -> None:
        async with SessionStore(sqlite_url, create_tables=True) as store:
            for session_id in ids:
                await store.session(session_id).add_items([USER, ORPHAN])

    asyncio.run(write())
    found = cli("doctor", "--url", sqlite_url)
    lines = found.output.splitlines()
    start = next(i for i, line in enumerate(lines) if "PROBLEM  histories" in line)
    from_doctor = argv_of(lines[start + 1].split("fix: ", 1)[1])
    checked = cli("sessions", "check", "--url", sqlite_url)
    fix = next(line for line in checked.output.splitlines() if line.startswith("Fix with: "))
    from_check = argv_of(fix.removeprefix("Fix with: "))
    assert from_doctor == from_check
    assert sorted(from_doctor[-4:]) == sorted(ids)
    assert not ran.exists()
    repaired = cli(*from_doctor, "--yes")
    assert repaired.exit_code == 0, repaired.output
    assert "4 sessions, all healthy" in cli("doctor", "--url", sqlite_url).output

    asyncio.run(seed_nul(sqlite_url))
    nul = cli("sessions", "check", "--url", sqlite_url)
    assert "Fix with: repair() of each session from Python (an id holds a NUL" in nul.output


async def seed_nul(url: str) -> None:
    async with SessionStore(url) as store:
        await store.session("nul\x00inside").add_items([USER, ORPHAN])
