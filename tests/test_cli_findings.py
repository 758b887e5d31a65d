"""The command line says what happened and what to do: `sessions check|repair`, exit codes
for ids that do not exist, words that agree with their numbers, one-line owners, `db
downgrade -1`, advice for a command line (not Python), keys with no terminal, and Alembic's
lines kept out of an app's logs."""

from __future__ import annotations

import asyncio
import logging
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from agents_sqlalchemy import CorruptItemError, SchemaError, SessionStore, TableNames
from agents_sqlalchemy.advanced import AdvancedSQLiteSession
from agents_sqlalchemy.cli import app
from agents_sqlalchemy.history_check import INTERRUPTED_OUTPUT
from agents_sqlalchemy.migrations.config import head_revision

from .support.items import ASSISTANT, FUNCTION_CALL, FUNCTION_OUTPUT, USER
from .support.tables import SESSIONS, execute

NO_KEY: dict[str, str | None] = {"AGENTS_SQLALCHEMY_KEY": None}
ORPHAN = {"type": "function_call_output", "call_id": "call_gone", "output": "late"}
UNANSWERED = {**FUNCTION_CALL, "id": "fc_9", "call_id": "call_9"}


def cli(*args: str, env: dict[str, str | None] | None = None, input: str | None = None) -> Result:
    return CliRunner().invoke(
        app, list(args), env={**NO_KEY, **(env or {})}, input=input, catch_exceptions=False
    )


def seed(
    url: str, sessions: dict[str, list[Any]], user_id: str | None = None, **options: Any
) -> None:
    async def write() -> None:
        async with SessionStore(url, create_tables=True, search=False, **options) as store:
            for session_id, items in sessions.items():
                await store.session(session_id, user_id=user_id).add_items(items)

    asyncio.run(write())


def items_of(url: str, session_id: str) -> list[Any]:
    async def read() -> list[Any]:
        async with SessionStore(url, search=False) as store:
            return await store.session(session_id).get_items()

    return asyncio.run(read())


def test_sessions_check_and_repair(db_url: str) -> None:
    healthy = [USER, FUNCTION_CALL, FUNCTION_OUTPUT, ASSISTANT]
    seed(
        db_url,
        {
            "healthy": healthy,
            "orphan": [USER, ORPHAN, ASSISTANT],
            "interrupted": [USER, UNANSWERED],
        },
    )
    found = cli("sessions", "check", "--url", db_url)
    assert found.exit_code == 1, found.output
    assert "'orphan': 1 orphaned tool output (3 items)" in found.output
    # Counted from 1, as `sessions show` numbers the items: the orphan is the second.
    assert "item 2: function_call_output for call 'call_gone', which is not there" in found.output
    assert "'interrupted': 1 unanswered tool call (2 items)" in found.output
    assert "'healthy'" not in found.output  # every session: only those to repair are listed
    assert "Checked 3 sessions: 2 to repair" in found.output
    # The whole command, with the URL to fill in (it said "--url ..."), then the ids.
    assert re.search(r"sessions repair --url '[^']+' interrupted orphan", found.output)
    one = cli("sessions", "check", "healthy", "--url", db_url)
    assert one.exit_code == 0 and "'healthy': healthy (4 items)" in one.output
    assert "Checked 1 session: healthy" in one.output
    missing = cli("sessions", "check", "nosuch", "--url", db_url)
    assert missing.exit_code == 1 and "No session 'nosuch'" in missing.output

    refused = cli("sessions", "repair", "orphan", "--url", db_url, input="n\n")
    assert refused.exit_code == 1 and items_of(db_url, "orphan") == [USER, ORPHAN, ASSISTANT]
    repaired = cli("sessions", "repair", "orphan", "interrupted", "--url", db_url, "--yes")
    assert repaired.exit_code == 0, repaired.output
    assert "'orphan': repaired 1 orphaned tool output (3 items)" in repaired.output
    assert "Repaired 2 sessions" in repaired.output
    assert items_of(db_url, "orphan") == [USER, ASSISTANT]
    assert items_of(db_url, "interrupted") == [
        USER,
        UNANSWERED,
        {"type": "function_call_output", "call_id": "call_9", "output": INTERRUPTED_OUTPUT},
    ]
    assert items_of(db_url, "healthy") == healthy
    again = cli("sessions", "check", "--url", db_url)
    assert again.exit_code == 0 and "Checked 3 sessions: healthy" in again.output
    assert cli("sessions", "repair", "nosuch", "--url", db_url, "--yes").exit_code == 1


def test_unknown_ids_exit_1_and_counts_agree(sqlite_url: str) -> None:
    seed(sqlite_url, {"a": [USER], "b": [USER, ASSISTANT]})
    deleted = cli("sessions", "delete", "a", "nosuch", "--url", sqlite_url, "--yes")
    assert deleted.exit_code == 1
    assert "No session 'nosuch'" in deleted.output
    assert "Removed 1 session (1 item)" in deleted.output
    archived = cli("sessions", "archive", "b", "nosuch", "--url", sqlite_url)
    assert archived.exit_code == 1 and "Archived 1 session\n" in archived.output
    restored = cli("sessions", "restore", "b", "nosuch", "--url", sqlite_url)
    assert restored.exit_code == 1 and "Restored 1 session\n" in restored.output
    fine = cli("sessions", "delete", "b", "--url", sqlite_url, "--yes")
    assert fine.exit_code == 0 and "Removed 1 session (2 items)" in fine.output


def test_show_keeps_an_owner_on_one_line(sqlite_url: str) -> None:
    """A newline or a bidi control in a user id cannot forge a line of `sessions show`."""
    owner = "mallory\nItems     0\u202e\u200f"
    seed(sqlite_url, {"s": [USER]}, user_id=owner)
    shown = cli("sessions", "show", "s", "--url", sqlite_url)
    assert shown.exit_code == 0, shown.output
    header = shown.output.splitlines()
    owner_lines = [line for line in header if line.startswith("Owner")]
    assert owner_lines == ["Owner     mallory\\x0aItems     0\\u202e\\u200f"]
    assert [line for line in header if line.startswith("Items")] == ["Items     1"]


def test_two_ids_never_look_alike_and_nothing_missing_is_healthy(sqlite_url: str) -> None:
    """The id holding a NUL and the id of the four characters `\x00` showed alike in
    `sessions list` and `show`; `sessions check` of a session not there said "healthy"."""
    seed(sqlite_url, {"nul\x00id": [USER], r"nul\x00id": [USER]}, user_id=r"a\b")
    listed = cli("sessions", "list", "--url", sqlite_url)
    assert listed.exit_code == 0, listed.output
    assert "nul\\x00id " in listed.output and "nul\\\\x00id " in listed.output
    shown = cli("sessions", "show", r"nul\x00id", "--url", sqlite_url)
    assert shown.exit_code == 0, shown.output
    header = shown.output.splitlines()
    assert "Session   nul\\\\x00id" in header and "Owner     a\\\\b" in header
    missing = cli("sessions", "check", "nosuch", "--url", sqlite_url)
    assert missing.exit_code == 1 and "healthy" not in missing.output
    assert "Checked 0 sessions\n" in missing.output


def test_db_downgrade_takes_a_relative_revision(sqlite_url: str) -> None:
    assert cli("db", "upgrade", "--url", sqlite_url).exit_code == 0
    head = head_revision()
    previous = f"{int(head) - 1:04d}" if head != "0001" else "none"
    down = cli("db", "downgrade", "-1", "--url", sqlite_url, "--yes")
    assert down.exit_code == 0, down.output
    assert f"downgraded from {head} to {previous}" in down.output


def test_db_check_and_current_speak_to_the_command_line(sqlite_url: str) -> None:
    seed(sqlite_url, {"s": [USER]}, tables=TableNames(prefix="chat_"))
    checked = cli("db", "check", "--url", sqlite_url)
    assert checked.exit_code == 1
    assert "create_tables" not in checked.output
    assert "agents-sqlalchemy db upgrade" in checked.output and "--prefix chat_" in checked.output
    current = cli("db", "current", "--url", sqlite_url)
    assert "no tables and no revision" in current.output
    assert "chat_version (--prefix chat_)" in current.output


def test_table_options_are_named_when_wrong(sqlite_url: str) -> None:
    seed(sqlite_url, {"s": [USER]})
    prefix = cli("sessions", "list", "--url", sqlite_url, "--prefix", "bad prefix!")
    assert prefix.exit_code == 2 and "Invalid value for '--prefix'" in prefix.output
    table = cli("sessions", "list", "--url", sqlite_url, "--items-table", "x y")
    assert table.exit_code == 2 and "Invalid value for '--items-table'" in table.output
    schema = cli("sessions", "list", "--url", sqlite_url, "--schema", "chat")
    assert schema.exit_code == 2 and "Invalid value for '--schema'" in schema.output
    assert "has no schemas" in schema.output
    assert cli("sessions", "list", "--url", sqlite_url, "--schema", "main").exit_code == 0


def test_advice_asks_for_the_password_it_hides() -> None:
    named = TableNames(prefix="chat_")
    line = named.command_line("upgrade", "postgresql+asyncpg://app:***@db:5432/app")
    assert "--url 'postgresql+asyncpg://app:PASSWORD@db:5432/app'" in line
    assert "***" not in line


async def test_an_in_memory_database_is_not_sent_to_the_command_line() -> None:
    session = AdvancedSQLiteSession(session_id="memory")
    with pytest.raises(SchemaError) as caught:
        await session.add_items([USER])
    assert "create_tables=True" in str(caught.value)
    assert "db upgrade" not in str(caught.value) and "db upgrade" not in caught.value.cli_message
    session.close()


def test_import_sdk_without_a_key_names_the_variable(sqlite_url: str, tmp_path: Path) -> None:
    seed(sqlite_url, {"s": [USER]}, key="passphrase")
    source = tmp_path / "sdk.db"
    from agents import SQLiteSession

    async def sdk() -> None:
        session = SQLiteSession("from-sdk", str(source))
        await session.add_items([USER])
        session.close()

    asyncio.run(sdk())
    result = cli("import-sdk", "--from", str(source), "--url", sqlite_url, "--no-progress")
    assert result.exit_code == 1
    assert "$AGENTS_SQLALCHEMY_KEY" in result.output and "key=..." not in result.output


def test_rotate_key_with_no_terminal_says_where_the_key_goes(sqlite_url: str) -> None:
    seed(sqlite_url, {"s": [USER]}, key="old passphrase")
    command = [sys.executable, "-m", "agents_sqlalchemy.cli", "rotate-key", "--url", sqlite_url]
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("AGENTS_SQL")}
    proc = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          env=env, timeout=120)  # fmt: skip
    assert proc.returncode == 2
    assert "GetPassWarning" not in proc.stderr and "Aborted" not in proc.stderr
    assert "set $AGENTS_SQLALCHEMY_KEY" in proc.stderr
    piped = subprocess.run([*command, "--no-progress"], input="old passphrase\nnew passphrase\n",
                           capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    assert "Re-wrapped 1 data key in" in piped.stdout


async def test_a_store_keeps_alembic_out_of_the_app_logs(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        async with SessionStore(sqlite_url, create_tables=True) as store:
            await store.session("s").add_items([USER])
        async with SessionStore(sqlite_url) as store:
            assert await store.session("s").get_items() == [USER]
        assert not [r for r in caplog.records if r.name.startswith("alembic")], caplog.text
        # Alembic's own logger still speaks outside a store's checks.
        logging.getLogger("alembic.runtime.migration").info("an app's own migration")
    assert "an app's own migration" in caplog.text


def test_metadata_changed_into_what_is_not_json_is_a_corrupt_row(sqlite_url: str) -> None:
    """Metadata changed outside the library into what is not JSON (a SQLite file does not
    check it) made `sessions list`, `show`, `doctor` and `users export` end in the JSON
    parser's traceback, and the library raise the parser's error."""
    seed(sqlite_url, {"s1": [USER], "s2": [USER]}, user_id="alice")
    asyncio.run(execute(sqlite_url, f"UPDATE {SESSIONS} SET metadata = '{{bad' WHERE id = 1"))

    async def listed() -> None:
        async with SessionStore(sqlite_url, search=False) as store:
            with pytest.raises(CorruptItemError, match="changed outside the library"):
                await store.list_sessions()

    asyncio.run(listed())
    for command in (
        ("sessions", "list"),
        ("sessions", "show", "s1"),
        ("users", "export", "alice", "--no-progress"),
    ):
        done = CliRunner().invoke(app, [*command, "--url", sqlite_url], env=NO_KEY)
        assert done.exit_code == 1, (command, done.output)
        assert "Error:" in done.output and "does not parse" in done.output, done.output
        assert done.exception is None or isinstance(done.exception, SystemExit), command
    assert items_of(sqlite_url, "s2") == [USER]


def test_nan_days_and_session_ids_with_newlines_are_refused_or_escaped(sqlite_url: str) -> None:
    """`--inactive-days nan` passed every bound and ended in a traceback (after `--expired`
    had purged); `search` printed a session id's newline as it was, so an id could forge a
    hit of its own."""
    for command in ("purge", "archive"):
        done = cli("sessions", command, "--inactive-days", "nan", "--yes", "--url", sqlite_url)
        assert done.exit_code == 2 and "is not a number of days" in done.output, done.output

    async def write() -> None:
        async with SessionStore(sqlite_url, create_tables=True) as store:
            forged = "x\n2. forged-session [1]  score 1.0000"
            await store.session(forged).add_items([{"role": "user", "content": "zebra"}])

    asyncio.run(write())
    found = cli("search", "zebra", "--url", sqlite_url)
    assert found.exit_code == 0, found.output
    assert not any(line.startswith("2. forged") for line in found.output.splitlines())
    assert "x\\x0a2. forged-session" in found.output


def test_a_repair_from_the_command_line_indexes_what_it_wrote(sqlite_url: str) -> None:
    """`sessions repair` opened its store with search off: the answer it wrote for an
    unanswered call was found by no search until a reindex (doctor flagged it)."""

    async def write() -> None:
        async with SessionStore(sqlite_url, create_tables=True) as store:
            await store.session("interrupted").add_items([USER, UNANSWERED])

    asyncio.run(write())
    assert "every live item is indexed" in cli("doctor", "--url", sqlite_url).output
    repaired = cli("sessions", "repair", "interrupted", "--url", sqlite_url, "--yes")
    assert repaired.exit_code == 0, repaired.output
    assert "every live item is indexed" in cli("doctor", "--url", sqlite_url).output


def test_sessions_list_shows_odd_ids_as_sessions_show_does(sqlite_url: str) -> None:
    """`sessions list` showed a newline or a tab as a space and a zero-width space as
    nothing, so "a\\tb", "a b" and "a\\u200bb"-like ids looked alike there; it escapes them
    as `sessions show` does."""
    odd = ["tab\there", "tab here", "zero\u200bwidth", "zerowidth", "new\nline"]

    async def write() -> None:
        async with SessionStore(sqlite_url, create_tables=True) as store:
            for session_id in odd:
                await store.session(session_id).add_items([USER])

    asyncio.run(write())
    listed = cli("sessions", "list", "--url", sqlite_url)
    assert listed.exit_code == 0, listed.output
    for shown in ("tab\\x09here", "tab here", "zero\\u200bwidth", "zerowidth", "new\\x0aline"):
        assert shown in listed.output, (shown, listed.output)
        assert (
            shown
            in cli(
                "sessions", "show", "--url", sqlite_url, shown.encode().decode("unicode_escape")
            ).output
        )
