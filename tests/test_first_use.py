"""The first minutes: paths that do not exist, the SDK's own tables, forgotten prefixes, and
errors that say what to do where the user is (Python or the command line)."""

from __future__ import annotations

import asyncio
import warnings
from pathlib import Path

import pytest
from agents import Agent, Runner
from agents.extensions.memory import SQLAlchemySession as SDKSQLAlchemySession
from agents.testing import ScriptedModel, assistant_message
from click.testing import CliRunner, Result

from agents_sqlalchemy import (
    DatabaseError,
    SchemaError,
    SdkHistoryError,
    SdkHistoryWarning,
    SessionStore,
    SQLAlchemySession,
    TableNames,
    WrongKeyError,
    import_sdk,
)
from agents_sqlalchemy.cli import app
from agents_sqlalchemy.migrations import api as migrate

from .support.app_alembic import objects, table_names
from .support.items import message
from .support.sdk_tables import make_sdk_tables, sdk_needs_tables_made

NO_KEYS = {"AGENTS_SQLALCHEMY_KEY": None, "AGENTS_SQLALCHEMY_URL": None}


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env=NO_KEYS)


def tables_in(url: str) -> set[str]:
    return table_names(asyncio.run(objects(url)))


# -- SQLite paths --------------------------------------------------------------------------------


@pytest.mark.parametrize("create", [False, True])
def test_a_sqlite_path_that_cannot_be_opened_names_the_path_and_why(
    tmp_path: Path, create: bool
) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    cases = {
        tmp_path / "no-such-dir" / "agent.db": "does not exist",
        tmp_path / "a-file" / "agent.db": "not a directory",
        tmp_path: "is a directory",
    }
    for path, cause in cases.items():
        store = SessionStore(path, create_tables=create)
        with pytest.raises(DatabaseError) as raised:
            asyncio.run(store.session("s").add_items([message("x")]))
        assert str(path) in str(raised.value) and cause in str(raised.value), raised.value
        asyncio.run(store.close())
    assert not (tmp_path / "no-such-dir").exists()


def test_read_only_commands_do_not_create_a_database(tmp_path: Path) -> None:
    path = tmp_path / "missing.db"
    for args in (
        ["sessions", "list"],
        ["sessions", "show", "s"],
        ["search", "anything"],
        ["sessions", "delete", "s", "--yes"],
        ["sessions", "purge", "--expired", "--yes"],
        ["db", "stamp"],
        ["db", "downgrade", "base", "--yes"],
        ["db", "current"],  # it said "no tables", as of a database there, and exit 0
    ):
        result = cli(*args, "--url", str(path))
        assert result.exit_code == 1, (args, result.output)
        assert f"no SQLite database at {path}" in result.output, (args, result.output)
        assert not path.exists(), args
    result = cli("db", "check", "--url", str(path))  # not at head: upgrade would make it
    assert "no tables and no revision" in result.output and result.exit_code == 1
    assert not path.exists()
    assert cli("db", "upgrade", "--url", str(path)).exit_code == 0  # this one creates it
    assert path.exists()


# -- the SDK's own tables ------------------------------------------------------------------------


async def sdk_history(url: str, **names: str) -> None:
    made = sdk_needs_tables_made(url)
    if made:
        await make_sdk_tables(url, *names.values())
    sdk = SDKSQLAlchemySession.from_url("u1", url=url, create_tables=not made, **names)
    await sdk.add_items([message("said with the SDK")])
    await sdk.engine.dispose()


async def test_sdk_history_beside_empty_tables_is_announced(db_url: str) -> None:
    await sdk_history(db_url)
    session = SQLAlchemySession("u1", db_url, create_tables=True)
    with pytest.warns(SdkHistoryWarning) as warned, pytest.raises(SdkHistoryError) as refused:
        await session.get_items()
    # Only ours: a ResourceWarning of another test's garbage may be caught beside it.
    [text] = [str(w.message) for w in warned if w.category is SdkHistoryWarning]
    assert "agent_messages" in text and "1 " in text
    assert "agents-sqlalchemy import-sdk --from" in text and "import_sdk(" in text
    assert "agents-sqlalchemy import-sdk --from" in str(refused.value)
    await session.close()

    await import_sdk(db_url, db_url)  # the one call the warning names
    with warnings.catch_warnings():
        warnings.simplefilter("error", SdkHistoryWarning)
        async with SessionStore(db_url) as store:
            assert await store.session("u1").get_items() == [message("said with the SDK")]


async def test_a_session_with_sdk_history_is_never_split(db_url: str) -> None:
    """Moving from the SDK's class: a session id with SDK history and none of ours is refused
    (nothing written), or imported on first use and continued; other ids work as usual."""
    await sdk_history(db_url)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SdkHistoryWarning)
        async with SessionStore(db_url, create_tables=True) as store:
            for call in (
                store.session("u1").get_items(),
                store.session("u1").add_items([message("new")]),
                store.session("u1").pop_item(),
            ):
                with pytest.raises(SdkHistoryError, match="import-sdk"):
                    await call
            assert await store.session_info("u1") is None  # nothing written
            await store.session("u2").add_items([message("a new one")])
            assert await store.session("u2").get_items() == [message("a new one")]
        async with SessionStore(db_url, import_sdk_history=True) as store:
            session = store.session("u1")
            agent = Agent(name="a", model=ScriptedModel([[assistant_message("noted")]]))
            result = await Runner.run(agent, "and now?", session=session)
            assert result.final_output == "noted"
            items = await session.get_items()
            assert items[0] == message("said with the SDK")
            assert items[1] == {"role": "user", "content": "and now?"} and len(items) == 3
        report = await import_sdk(db_url, db_url)  # present on both sides: reported
        assert report.sessions == 0 and report.skipped_ids == ("u1",)


async def test_a_wrong_key_is_refused_before_any_table_is_read(db_url: str) -> None:
    """The SDK-history check reads the sessions table and the SDK's: a wrong key is refused
    before it (no warning), and the right key then gets the warning."""
    async with SessionStore(db_url, create_tables=True, key="right") as store:
        await store.session("mine").add_items([message("sealed")])
        await store.delete_session("mine")  # ours hold no session: the check would warn
    await sdk_history(db_url)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SdkHistoryWarning)
        async with SessionStore(db_url, key="wrong") as store:
            with pytest.raises(WrongKeyError, match="nothing was read or written"):
                await store.session("u2").get_items()
    with pytest.warns(SdkHistoryWarning):
        async with SessionStore(db_url, key="right") as store:
            assert await store.session("u2").get_items() == []


async def test_no_announcement_without_sdk_history(db_url: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", SdkHistoryWarning)
        async with SessionStore(db_url, create_tables=True) as store:
            assert await store.session("s").get_items() == []


def test_the_sdk_table_names_given_to_the_drop_in(db_url: str) -> None:
    names = {"sessions_table": "chat_sessions", "messages_table": "chat_messages"}
    asyncio.run(sdk_history(db_url, **names))
    before = tables_in(db_url)
    session = SQLAlchemySession("u1", db_url, create_tables=True, **names)
    with pytest.raises(SchemaError) as raised:
        asyncio.run(session.get_items())
    text = str(raised.value)
    assert "Agents SDK" in text and "chat_messages" in text
    assert "import-sdk" in text and "import_sdk(" in text
    assert "stamp" not in text
    asyncio.run(session.close())
    stamped = cli(
        "db", "stamp", "--url", db_url, "--prefix", "chat_sessions_",
        "--sessions-table", "chat_sessions", "--items-table", "chat_messages",
    )  # fmt: skip
    assert stamped.exit_code == 1 and "Agents SDK" in stamped.output, stamped.output
    with pytest.raises(SchemaError, match="Agents SDK"):
        asyncio.run(
            migrate.stamp(db_url, tables=TableNames(sessions="chat_sessions", prefix="chat_"))
        )
    assert tables_in(db_url) == before  # no stray version table

    # What the error says to run works, and then the drop-in (without the SDK's names) reads.
    imported = cli(
        "import-sdk", "--from", db_url, "--url", db_url, "--create",
        "--source-sessions-table", "chat_sessions", "--source-messages-table", "chat_messages",
    )  # fmt: skip
    assert imported.exit_code == 0, imported.output
    with SQLAlchemySession("u1", db_url) as session:
        assert asyncio.run(session.get_items()) == [message("said with the SDK")]


# -- prefixes ------------------------------------------------------------------------------------


def test_stamp_and_downgrade_refuse_a_prefix_without_tables(db_url: str) -> None:
    assert cli("db", "upgrade", "--url", db_url, "--prefix", "chat_").exit_code == 0
    before = tables_in(db_url)
    for args in (
        ["db", "stamp"],
        ["db", "downgrade", "base", "--yes"],
        ["db", "downgrade", "0001", "--yes"],
    ):
        result = cli(*args, "--url", db_url, "--prefix", "nope_")
        assert result.exit_code == 1, (args, result.output)
        assert "nope_" in result.output and "chat_" in result.output, result.output
    with pytest.raises(SchemaError, match="chat_"):
        asyncio.run(migrate.stamp(db_url, tables=TableNames(prefix="nope_")))
    with pytest.raises(SchemaError, match="chat_"):
        asyncio.run(migrate.downgrade(db_url, "base", tables=TableNames(prefix="nope_")))
    assert tables_in(db_url) == before


async def test_a_forgotten_prefix_is_hinted(db_url: str) -> None:
    await migrate.upgrade(db_url, tables=TableNames(prefix="chat_"))
    async with SessionStore(db_url) as store:
        with pytest.raises(SchemaError) as raised:
            await store.list_sessions()
    assert "chat_version" in str(raised.value) and "prefix='chat_'" in str(raised.value)
    assert "create_tables=True" in str(raised.value)  # Python advice, in Python


def test_cli_errors_give_cli_advice(db_url: str, tmp_path: Path) -> None:
    cli("db", "upgrade", "--url", db_url, "--prefix", "chat_")
    listed = cli("sessions", "list", "--url", db_url)
    assert listed.exit_code == 1
    assert "create_tables" not in listed.output, listed.output
    assert "agents-sqlalchemy db upgrade" in listed.output and "--prefix chat_" in listed.output

    source = tmp_path / "sdk.db"
    asyncio.run(sdk_history(f"sqlite+aiosqlite:///{source}"))
    empty = cli("import-sdk", "--from", str(source), "--url", db_url, "--prefix", "fresh_")
    assert empty.exit_code == 1 and "--create" in empty.output, empty.output
    assert "create_tables" not in empty.output
    created = cli(
        "import-sdk", "--from", str(source), "--url", db_url, "--prefix", "fresh_", "--create"
    )
    assert created.exit_code == 0, created.output
    assert "Imported 1 session (1 item)" in created.output
