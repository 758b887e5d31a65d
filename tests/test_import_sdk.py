"""Importing the SDK's own sessions as the SDK reads them, whole or not at all: an
`AdvancedSQLiteSession`'s main line (its branches and usage named as left out), items the SDK
reads that the store cannot hold, and session ids the library refuses."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
from agents import SQLiteSession
from agents.extensions.memory import AdvancedSQLiteSession
from agents.usage import Usage
from click.testing import CliRunner, Result

from agents_sqlalchemy import (
    SdkHistoryError,
    SdkHistoryWarning,
    SessionStore,
    import_sdk,
)
from agents_sqlalchemy.cli import app

from .support.items import message

NO_KEYS = {"AGENTS_SQLALCHEMY_KEY": None, "AGENTS_SQLALCHEMY_URL": None}


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env=NO_KEYS)


def turn(n: int) -> list[dict[str, str]]:
    return [message(f"t{n}"), {"role": "assistant", "content": f"a{n}"}]


def run_usage(requests: int, tokens: int) -> object:
    usage = Usage(requests=requests, input_tokens=tokens, output_tokens=1, total_tokens=tokens + 1)
    return SimpleNamespace(context_wrapper=SimpleNamespace(usage=usage))


async def branched(path: Path) -> tuple[list[object], list[object]]:
    """An `AdvancedSQLiteSession` "adv" with two turns on main, a branch "alt" from turn 2
    with a turn of its own, and usage recorded per turn: (main's items, alt's items)."""
    session = AdvancedSQLiteSession(session_id="adv", db_path=path, create_tables=True)
    await session.add_items(turn(1))
    await session.store_run_usage(run_usage(1, 10))  # type: ignore[arg-type]
    await session.add_items(turn(2))
    await session.store_run_usage(run_usage(1, 20))  # type: ignore[arg-type]
    await session.create_branch_from_turn(2, "alt")
    await session.add_items([message("t2 alt"), {"role": "assistant", "content": "a2 alt"}])
    main, alt = await session.get_items(branch_id="main"), await session.get_items()
    session.close()
    assert main != alt and main[:2] == alt[:2]
    return main, alt


@pytest.mark.parametrize("key", [None, "pass phrase"])
async def test_an_advanced_session_is_imported_as_its_main_line(
    db_url: str, tmp_path: Path, key: str | None
) -> None:
    """Its branches were merged into one history that never existed (t1 a1 t2 a2 t2-alt
    a2-alt), with no word of the branch or of the usage left behind."""
    source = tmp_path / "advanced.db"
    main, _ = await branched(source)
    plain = SQLiteSession("plain", source)  # a SQLiteSession's session in the same file
    await plain.add_items([message("p1"), message("p2")])
    plain.close()

    report = await import_sdk(source, db_url, create_tables=True, key=key)
    assert (report.sessions, report.items, report.refused) == (2, 4 + 2, ())
    async with SessionStore(db_url, key=key) as store:
        assert await store.session("adv").get_items() == main
        assert await store.session("plain").get_items() == [message("p1"), message("p2")]
    reasons = [(o.session_id, o.reason) for o in report.left_out]
    assert reasons == [
        ("adv", "branch 'alt' (4 items, 2 not on main) left out"),
        ("adv", "token usage of 2 turn(s) (its turn_usage) left out"),
    ]


def test_the_command_line_names_what_it_left_out(sqlite_url: str, tmp_path: Path) -> None:
    source = tmp_path / "advanced.db"
    asyncio.run(branched(source))
    result = cli("import-sdk", "--from", str(source), "--url", sqlite_url, "--create")
    assert result.exit_code == 0, result.output
    assert "Imported 1 session (4 items)" in result.output
    assert "Left out of the sessions imported:" in result.output
    assert "'adv': branch 'alt' (4 items, 2 not on main) left out" in result.output
    assert "token usage of 2 turn(s)" in result.output


async def test_adopting_an_advanced_session_takes_its_main_line_and_says_so(
    sqlite_url: str, tmp_path: Path
) -> None:
    """`import_sdk_history=True` read the same merged history. Such a store also warned, as
    one without it does, that the SDK's history is not shown until it is copied."""
    path = Path(sqlite_url.split("///", 1)[1])
    main, _ = await branched(path)
    async with SessionStore(sqlite_url, create_tables=True, import_sdk_history=True) as store:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert await store.session("adv").get_items() == main
    said = [str(w.message) for w in caught if issubclass(w.category, SdkHistoryWarning)]
    assert len(said) == 1 and "main line only: branch 'alt'" in said[0], said


def odd_items() -> list[object]:
    """What the SDK's SQLiteSession writes and reads back, and this store cannot hold."""
    return [
        message("before"),
        {"role": "assistant", "content": "lone \ud800 surrogate"},
        {"role": "assistant", "content": "nan", "score": float("nan")},
        {"role": "assistant", "content": "deep", "d": json.loads("[" * 200 + "]" * 200)},
        message("after"),
    ]


async def odd_source(path: Path) -> None:
    session = SQLiteSession("odd", path)
    await session.add_items(odd_items())
    assert len(await session.get_items()) == 5  # the SDK reads every one of them
    session.close()
    fine = SQLiteSession("fine", path)
    await fine.add_items([message("fine")])
    fine.close()


async def test_items_the_store_cannot_hold_refuse_their_session_and_say_why(
    db_url: str, tmp_path: Path
) -> None:
    """They were dropped from the middle of the conversation, counted as rows "that did not
    hold a JSON object (the SDK skips them too)", both false."""
    source = tmp_path / "odd.db"
    await odd_source(source)
    report = await import_sdk(source, db_url, create_tables=True)
    assert (report.sessions, report.items, report.unreadable) == (1, 1, 0)
    [refused] = report.refused
    assert refused.session_id == "odd"
    for said in (
        "item 2 (row id 2) holds text that is not valid Unicode (a lone surrogate)",
        "item 3 (row id 3) holds nan",
        "item 4 (row id 4) is nested more than 128 levels deep",
    ):
        assert said in refused.reason
    async with SessionStore(db_url) as store:
        assert await store.session_info("odd") is None  # nothing of it written
        assert await store.session("fine").get_items() == [message("fine")]

    again = await import_sdk(source, db_url, skip_unstorable=True)
    assert (again.sessions, again.items, again.skipped_ids) == (1, 2, ("fine",))
    assert [o.reason[:6] for o in again.left_out] == ["item 2", "item 3", "item 4"]
    async with SessionStore(db_url) as store:
        assert await store.session("odd").get_items() == [message("before"), message("after")]


def test_the_command_line_fails_naming_the_sessions_not_imported(
    sqlite_url: str, tmp_path: Path
) -> None:
    source = tmp_path / "odd.db"
    asyncio.run(odd_source(source))
    result = cli("import-sdk", "--from", str(source), "--url", sqlite_url, "--create")
    assert result.exit_code == 1, result.output
    assert "Not imported (nothing of them written):" in result.output
    assert "'odd': session 'odd' holds 3 item(s)" in result.output
    assert "1 session not imported, listed above (--skip-unstorable imports those" in result.output
    assert "the SDK skips them too" not in result.output
    skipping = ("--skip-unstorable", "--no-progress")
    result = cli("import-sdk", "--from", str(source), "--url", sqlite_url, *skipping)
    assert result.exit_code == 0, result.output
    assert "'odd': item 4 (row id 4) is nested more than 128 levels deep" in result.output
    assert "To search them, run `agents-sqlalchemy reindex`" in result.output


async def test_adopting_a_session_the_store_cannot_hold_refuses_it(
    sqlite_url: str, tmp_path: Path
) -> None:
    path = Path(sqlite_url.split("///", 1)[1])
    await odd_source(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SdkHistoryWarning)
        async with SessionStore(sqlite_url, create_tables=True, import_sdk_history=True) as store:
            with pytest.raises(SdkHistoryError, match=r"item 4 .* nested more than 128") as raised:
                await store.session("odd").get_items()
            assert "--skip-unstorable" in str(raised.value)
            assert await store.session_info("odd") is None
            assert await store.session("fine").get_items() == [message("fine")]


async def test_a_session_id_the_library_refuses_does_not_stop_the_others(
    db_url: str, tmp_path: Path
) -> None:
    """An SDK session id "" stopped the whole import before anything was copied."""
    source = tmp_path / "ids.db"
    for session_id in ("", "kept"):
        session = SQLiteSession(session_id, source)
        await session.add_items([message(f"said in {session_id!r}")])
        session.close()
    report = await import_sdk(source, db_url, create_tables=True)
    assert (report.sessions, report.items) == (1, 1)
    assert [(o.session_id, o.reason, o.unstorable) for o in report.refused] == [
        ("", "session id must be a non-empty string, got ''", False)
    ]
    async with SessionStore(db_url) as store:
        assert await store.session("kept").get_items() == [message("said in 'kept'")]


def test_the_command_line_hints_skip_unstorable_only_where_it_helps(
    sqlite_url: str, tmp_path: Path
) -> None:
    """A session refused for its id was said to import with --skip-unstorable: it does not."""
    source = tmp_path / "ids.db"
    session = SQLiteSession("", source)
    asyncio.run(session.add_items([message("said in ''")]))
    session.close()
    result = cli("import-sdk", "--from", str(source), "--url", sqlite_url, "--create")
    assert result.exit_code == 1 and "1 session not imported" in result.output
    assert "--skip-unstorable" not in result.output, result.output


def test_a_source_that_is_not_the_sdks_fails_in_one_line_and_makes_no_target(
    tmp_path: Path,
) -> None:
    """A file that is no database, or one without the SDK's tables read with --order id,
    printed a traceback of SQLAlchemy's, after --create had made the target."""
    text_file, empty_db = tmp_path / "notes.txt", tmp_path / "empty.db"
    text_file.write_text("not a database\n" * 100)
    sqlite3.connect(empty_db).close()
    target = tmp_path / "target.db"
    for source, order, said in (
        (text_file, "auto", "file is not a database"),
        (empty_db, "id", "the source has no table 'agent_sessions'"),
    ):
        args = ("import-sdk", "--from", str(source), "--url", str(target), "--create")
        result = cli(*args, "--order", order)
        assert result.exit_code == 1, result.output
        assert said in result.output and "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1, result.output
        assert not target.exists()


async def test_imported_history_expires_as_the_stores_items_do(tmp_path: Path) -> None:
    """Imported items never expired, whatever the store's ttl (an export's import applied
    it): they expire that long from the import, on first use and through `import_sdk`."""
    path = tmp_path / "agent.db"
    for session_id in ("store's", "session's"):
        sdk = SQLiteSession(session_id, path)
        await sdk.add_items([message(f"{session_id} old")])
        sdk.close()
    async with SessionStore(path, create_tables=True, import_sdk_history=True, ttl=60) as store:
        assert await store.session("store's").get_items() == [message("store's old")]
        assert await store.session("session's", ttl=600).get_items() != []
    target = tmp_path / "target.db"
    await import_sdk(path, target, create_tables=True, ttl=3600)
    expected = [(path, "store's", 60), (path, "session's", 600)]
    expected += [(target, "store's", 3600), (target, "session's", 3600)]
    for db, session_id, ttl in expected:
        with sqlite3.connect(db) as conn:
            [(left,)] = conn.execute(
                "SELECT (julianday(i.expires_at) - julianday('now')) * 86400"
                " FROM agents_sqlalchemy_items i JOIN agents_sqlalchemy_sessions s"
                " ON s.id = i.session_pk WHERE s.session_id = ?",
                (session_id,),
            ).fetchall()
        assert ttl - 30 < left <= ttl, (db.name, session_id, left)
