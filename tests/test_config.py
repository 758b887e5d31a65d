"""Construction: URLs, app engines, table names, the SDK-compatible constructors, failures."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agents.memory import SessionSettings, SQLiteSession
from sqlalchemy import inspect, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from agents_sqlalchemy import (
    AdvancedSQLiteSession,
    ConfigurationError,
    DatabaseError,
    HashingEmbedder,
    KeyDirectory,
    SessionStore,
    SQLAlchemySession,
    TableNames,
    Telemetry,
    downgrade,
    import_sdk,
    upgrade,
)
from agents_sqlalchemy.search import MAX_MODEL_ID_CHARS, index_id

from .support.items import message
from .support.tables import dump


async def table_names(engine: AsyncEngine, schema: str | None = None) -> set[str]:
    async with engine.connect() as conn:
        return set(await conn.run_sync(lambda c: inspect(c).get_table_names(schema=schema)))


def test_table_names_defaults_and_overrides() -> None:
    default = TableNames()
    assert (default.sessions_table, default.items_table, default.version_table) == (
        "agents_sqlalchemy_sessions",
        "agents_sqlalchemy_items",
        "agents_sqlalchemy_version",
    )
    custom = TableNames(prefix="chat_", items="transcript", schema="agents")
    assert (custom.sessions_table, custom.items_table) == ("chat_sessions", "transcript")
    assert "agent_sessions" not in {default.sessions_table, default.items_table}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"prefix": "bad-prefix"},
        {"items": "items; DROP TABLE users"},
        {"sessions": '"quoted"'},
        {"schema": "public.x"},
        {"items": "1starts_with_digit"},
        {"items": "x" * 37},
        {"sessions": "same", "items": "same"},
    ],
)
def test_unsafe_table_names_are_rejected(kwargs: dict[str, str]) -> None:
    with pytest.raises(ConfigurationError):
        TableNames(**kwargs)


async def test_custom_table_names_leave_other_tables_alone(db_url: str) -> None:
    engine = create_async_engine(db_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE app_users (id INTEGER PRIMARY KEY, name TEXT)"))
            await conn.execute(text("INSERT INTO app_users VALUES (1, 'alice')"))
        tables = TableNames(prefix="chat_", items="chat_transcript")
        async with SessionStore(engine, tables=tables, create_tables=True) as store:
            await store.session("s").add_items([message("hi")])
            assert await store.session("s").get_items() == [message("hi")]
        ours = {"chat_sessions", "chat_transcript", "chat_keyring", "chat_owner_keys"}
        ours |= {"chat_search_index", "chat_version"}
        ours |= {"chat_branches", "chat_branch_items", "chat_turn_usage"}
        assert await table_names(engine) == {"app_users", *ours}
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT name FROM app_users"))).all() == [("alice",)]
    finally:
        await engine.dispose()


async def test_schema_on_postgresql(pg_url: str) -> None:
    tables = TableNames(schema="agents")
    async with SessionStore(pg_url, tables=tables, create_tables=True) as store:
        await store.session("s").add_items([message("in a schema")])
        assert await store.session("s").get_items() == [message("in a schema")]
        found = await table_names(store.engine, "agents")
        assert {"agents_sqlalchemy_sessions", "agents_sqlalchemy_items"} <= found
        assert await table_names(store.engine) == set()  # nothing outside the schema


async def test_an_app_engine_is_used_and_left_open(db_url: str) -> None:
    engine = create_async_engine(db_url)
    try:
        async with SessionStore(engine, create_tables=True) as store:
            assert store.engine is engine
            await store.session("s").add_items([message("x")])
        async with engine.connect() as conn:  # still usable after the store closed
            assert (await conn.execute(text("SELECT 1"))).scalar() == 1
    finally:
        await engine.dispose()


async def test_an_app_engine_s_connections_opened_before_are_set_up_too(
    sqlite_url: str,
) -> None:
    """A SQLite connection an app's engine opened before it gave the engine to a store kept
    its own settings: no WAL (the scrub of removals did nothing), no foreign keys."""
    engine = create_async_engine(sqlite_url, pool_size=1, max_overflow=0)
    try:
        async with engine.connect() as conn:  # pooled, before the store sees the engine
            await conn.execute(text("SELECT 1"))
        async with SessionStore(engine, create_tables=True, key="k") as store:
            await store.session("s").add_items([message("sealed")])
            async with store.engine.connect() as conn:
                settings = [
                    (await conn.execute(text(f"PRAGMA {name}"))).scalar()
                    for name in ("journal_mode", "foreign_keys", "secure_delete")
                ]
        assert settings == ["wal", 1, 1]
    finally:
        await engine.dispose()


@pytest.mark.parametrize("key", [None, "passphrase"], ids=["plain", "sealed"])
async def test_an_app_engine_in_autocommit_still_writes_each_batch_whole(
    db_url: str, key: str | None
) -> None:
    """An app's engine made with isolation_level="AUTOCOMMIT": the store's writes of many
    statements still run in a transaction (MariaDB's lost batches to duplicate places, as
    `begin()` started none), and the app's own statements still autocommit afterwards."""
    engine = create_async_engine(db_url, isolation_level="AUTOCOMMIT")
    try:
        async with SessionStore(engine, create_tables=True, key=key, search=False) as store:
            session = store.session("s")

            async def append(n: int) -> None:
                await store.session("s").add_items([message(f"{n}-{i}") for i in range(3)])

            await asyncio.gather(*(append(n) for n in range(12)))
            contents = [item["content"] for item in await session.get_items()]
            assert len(contents) == 36
            assert all(
                len({c.split("-")[0] for c in contents[k : k + 3]}) == 1 for k in range(0, 36, 3)
            )
            popped = await asyncio.gather(*(session.pop_item() for _ in range(6)))
            assert len({item["content"] for item in popped if item}) == 6
            assert len(await session.get_items()) == 30
            if not db_url.startswith("sqlite"):  # the server says a write unit is one transaction
                mysql = "mysql" in db_url
                ask = "SELECT @@autocommit" if mysql else "SELECT txid_current()"
                db = store._services.conversation._items._schema.db
                seen = await db.write(
                    lambda conn: [conn.exec_driver_sql(ask).scalar() for _ in "ab"]
                )
                assert seen == [0, 0] if mysql else seen[0] == seen[1]
        async with engine.connect() as conn:  # no commit: autocommit as the app made it
            await conn.execute(text("CREATE TABLE app_notes (n INTEGER)"))
            await conn.execute(text("INSERT INTO app_notes VALUES (1)"))
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT n FROM app_notes"))).all() == [(1,)]
    finally:
        await engine.dispose()


async def test_an_app_engine_gets_its_connection_back_in_transactions(pg_url: str) -> None:
    """The store reads and writes single statements on PostgreSQL in autocommit. The app's
    engine has one connection: after the store used it, the app's own rollback still undoes
    what the app wrote."""
    engine = create_async_engine(pg_url, pool_size=1, max_overflow=0)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE app_notes (note TEXT)"))
        async with SessionStore(engine, create_tables=True) as store:
            session = store.session("s")
            await session.add_items([message("x"), message("y")])
            assert await session.get_items(limit=1) == [message("y")]
            assert await session.pop_item() == message("y")
            async with engine.connect() as conn:
                await conn.execute(text("INSERT INTO app_notes VALUES ('draft')"))
                await conn.rollback()
                assert (await conn.execute(text("SELECT count(*) FROM app_notes"))).scalar() == 0
    finally:
        await engine.dispose()


@pytest.mark.parametrize(
    "url",
    ["{path}", "sqlite:///{path}", "sqlite+aiosqlite:///{path}"],
)
async def test_bare_paths_and_sync_urls_mean_aiosqlite(tmp_path: object, url: str) -> None:
    path = f"{tmp_path}/agent.db"
    async with SessionStore(url.format(path=path), create_tables=True) as store:
        assert store.engine.url.drivername == "sqlite+aiosqlite"
        await store.session("s").add_items([message("x")])
    async with SessionStore(path) as store:
        assert await store.session("s").get_items() == [message("x")]


def test_postgresql_urls_mean_asyncpg() -> None:
    for url in ("postgresql://u@localhost/db", "postgres://u@localhost/db"):
        store = SessionStore(url)
        assert store.engine.url.drivername == "postgresql+asyncpg"


def test_unsupported_database_is_a_clear_error() -> None:
    with pytest.raises(ConfigurationError, match="SQLite, PostgreSQL, MySQL or MariaDB"):
        SessionStore("oracle+oracledb://u@localhost/db")


@pytest.mark.parametrize(
    ("url", "asked"),
    [("mysql+pymysql://u@h/db", "asyncmy"), ("postgresql+psycopg2://u@h/db", "asyncpg")],
)
async def test_a_synchronous_driver_is_a_clear_error(url: str, asked: str) -> None:
    """pymysql escaped as SQLAlchemy's InvalidRequestError; psycopg2 was said to be missing,
    with an extra to install that brings another driver."""
    with pytest.raises(ConfigurationError, match=f"not an asyncio driver.*{asked}"):
        async with SessionStore(url) as store:
            await store.session("s").get_items()


@pytest.mark.parametrize("url", ["", "   "])
def test_an_empty_url_is_a_clear_error(url: str) -> None:
    """An unset variable gave an in-memory SQLite database, and then a SchemaError about
    its missing tables (or, with create_tables=True, a store that forgets everything)."""
    for make in (SessionStore, lambda u: SQLAlchemySession.from_url("s", url=u)):
        with pytest.raises(ConfigurationError, match="the database URL is empty"):
            make(url)


async def test_session_settings_of_a_store_and_a_session_can_be_set(sqlite_url: str) -> None:
    store = SessionStore(sqlite_url, create_tables=True)
    assert store.session_settings == SessionSettings()  # the SDK's default, made when asked
    store.session_settings = {"limit": 2}  # coerced, as the SDK does
    assert store.session_settings == SessionSettings(limit=2)
    session = store.session("s")
    await session.add_items([message(str(n)) for n in range(4)])
    assert await session.get_items() == [message("2"), message("3")]
    session.session_settings = {"limit": 1}  # type: ignore[assignment]  # the SDK takes a dict
    assert await session.get_items() == [message("3")]
    assert await session.get_items(limit=3) == [message(str(n)) for n in (1, 2, 3)]
    for bad in (5, [("limit", 1)]):  # the SDK's TypeError, "session must be ..."
        with pytest.raises(ConfigurationError, match="session_settings must be a"):
            store.session_settings = bad  # type: ignore[assignment]
        with pytest.raises(ConfigurationError, match="session_settings must be a"):
            store.session("t", session_settings=bad)  # type: ignore[arg-type]
    # The SDK takes a negative limit; every read would then fail: refused when set.
    for negative in ({"limit": -1}, SessionSettings(limit=-1)):
        with pytest.raises(ConfigurationError, match="session_settings limit must be"):
            store.session_settings = negative
        with pytest.raises(ConfigurationError, match="session_settings limit must be"):
            store.session("t", session_settings=negative)
        with pytest.raises(ConfigurationError, match="session_settings limit must be"):
            SessionStore(sqlite_url, session_settings=negative)
    assert store.session_settings == SessionSettings(limit=2)
    await store.close()


async def test_sdk_style_constructors_share_one_store(sqlite_url: str) -> None:
    a = SQLAlchemySession("a", sqlite_url, create_tables=True)
    b = SQLAlchemySession.from_url("b", url=sqlite_url, create_tables=True)
    c = SQLAlchemySession("c", url_or_engine=sqlite_url, session_settings={"limit": 1})
    # The SDK's `ensure_ascii` is taken (items are UTF-8 JSON either way).
    SQLAlchemySession.from_url("e", url=sqlite_url, ensure_ascii=False)
    with pytest.raises(TypeError, match="bogus"):  # as the SDK says it, when the session is made
        a.store.session("d", session_settings={"bogus": 1})
    assert a.store is b.store is c.store
    assert c.session_settings == SessionSettings(limit=1)
    await a.add_items([message("from a")])
    await b.add_items([message("from b")])
    assert await b.get_items() == [message("from b")]
    other_tables = SQLAlchemySession(
        "a", sqlite_url, sessions_table="s2", messages_table="m2", create_tables=True
    )
    assert other_tables.store is not a.store
    assert await other_tables.get_items() == []
    await a.store.close()
    await other_tables.store.close()


async def test_sdk_style_constructors_take_the_search_options(sqlite_url: str) -> None:
    a = SQLAlchemySession("a", sqlite_url, create_tables=True, embedder="hashing")
    await a.add_items([message("the disk was full"), message("lunch at noon")])
    assert await a.search("disk", limit=1) == [message("the disk was full")]
    with pytest.raises(ConfigurationError, match="embedder"):
        SQLAlchemySession("b", sqlite_url, embedder=HashingEmbedder(dim=64))
    with pytest.raises(ConfigurationError, match="belong to the store"):
        SQLAlchemySession("b", store=a.store, search=False)
    await a.store.close()
    off = SQLAlchemySession("c", sqlite_url, search=False, sessions_table="s3")
    with pytest.raises(ConfigurationError, match="search=True"):
        await off.search("disk")
    await off.store.close()


async def test_sdk_style_engine_constructor(db_url: str) -> None:
    engine = create_async_engine(db_url)
    try:
        first = SQLAlchemySession("s", engine=engine, create_tables=True)
        second = SQLAlchemySession("t", engine=engine)
        assert first.store is second.store
        assert first.engine is engine
        await first.add_items([message("x")])
        assert await first.get_items() == [message("x")]
    finally:
        await engine.dispose()


@pytest.mark.parametrize(
    ("option", "said"),
    [
        ({"tables": "chat_"}, "tables must be a TableNames"),
        ({"engine_kwargs": [("echo", True)]}, "engine_kwargs must be a dict"),
        ({"sqlite_synchronous": 1}, "unknown SQLite synchronous mode 1"),
        ({"create_tables": "yes"}, "create_tables must be True or False"),
        ({"import_sdk_history": "no"}, "import_sdk_history must be True or False"),
    ],
)
def test_store_options_of_the_wrong_kind_are_refused(
    sqlite_url: str, option: dict[str, Any], said: str
) -> None:
    # They raised AttributeError or TypeError, or counted "no" as True.
    with pytest.raises(ConfigurationError, match=said):
        SessionStore(sqlite_url, **option)
    if "engine_kwargs" in option:  # the SDK-style constructors share stores by them
        with pytest.raises(ConfigurationError, match=said):
            SQLAlchemySession.from_url("s", url=sqlite_url, **option)


def test_session_settings_the_sdk_refuses_are_configuration_errors(sqlite_url: str) -> None:
    """{"limit": 2.5} raised pydantic's ValidationError; an unknown name stays the SDK's
    TypeError, as its own sessions raise it."""
    store = SessionStore(sqlite_url, create_tables=True)
    with pytest.raises(ConfigurationError, match="session_settings refused"):
        store.session("s", session_settings={"limit": 2.5})
    with pytest.raises(TypeError, match="Unknown session settings"):
        store.session("s", session_settings={"limits": 2})


@pytest.mark.parametrize("model_id", ["x" * 181, "", "   ", "a\x00b", "a\ud800", 5, None])
def test_an_embedder_whose_model_id_names_no_index_is_refused(
    sqlite_url: str, model_id: object
) -> None:
    """The index stores `index_id(model_id)` in 200 characters: PostgreSQL cut a longer one
    short, so the store never again found its own model in the database and searched by
    keyword only; a NUL failed every index write there."""

    class Named(HashingEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self.model_id = model_id  # type: ignore[assignment]

    with pytest.raises(ConfigurationError, match="model_id must be text of 1 to 180"):
        SessionStore(sqlite_url, embedder=Named())
    assert len(index_id("x" * MAX_MODEL_ID_CHARS)) <= 200


async def test_a_progress_that_cannot_be_called_is_refused_before_anything_starts(
    sqlite_url: str,
) -> None:
    """`reindex(progress=5)` dropped the other models' index rows, then failed with
    TypeError at its first report; each long operation now refuses it up front."""
    key = os.urandom(32)
    async with SessionStore(sqlite_url, create_tables=True, key=key) as store:
        await store.session("s", user_id="alice").add_items([message("hello")])
        await store.flush()
        before = await dump(sqlite_url)
        calls = {
            "reindex": lambda: store.reindex(progress=5),
            "rotate_key": lambda: store.rotate_key(os.urandom(32), progress="bar"),
            "rotate_owner_keys": lambda: store.rotate_owner_keys(progress=[]),
            "export_user": lambda: store.export_user("alice", progress=1).__anext__(),
        }
        for name, call in calls.items():
            with pytest.raises(ConfigurationError, match="progress must be a function"):
                await call()
            assert await dump(sqlite_url) == before, name
        assert await store.session("s").get_items() == [message("hello")]


async def test_batch_sizes_of_the_key_rotations_are_checked_before_anything_starts(
    sqlite_url: str,
) -> None:
    """`rotate_key(batch_size="5")` and `batch_size=None` raised TypeError from a
    comparison; `True` and `1.5` were taken. `reindex` checked already."""
    async with SessionStore(sqlite_url, create_tables=True, key=os.urandom(32)) as store:
        await store.session("s", user_id="alice").add_items([message("hello")])
        await store.flush()
        before = await dump(sqlite_url)
        for size in ("5", None, True, 1.5, 0):
            with pytest.raises(ConfigurationError, match="batch_size must be"):
                await store.rotate_key(os.urandom(32), batch_size=size)  # type: ignore[arg-type]
            with pytest.raises(ConfigurationError, match="batch_size must be"):
                await store.rotate_owner_keys(batch_size=size)  # type: ignore[arg-type]
            assert await dump(sqlite_url) == before, size


@pytest.mark.parametrize(
    ("option", "said"),
    [
        ({"dim": "8"}, "dim must be an integer"),  # TypeError from a comparison
        ({"dim": 10**9}, "dim must be between 8 and 4096"),  # 4 GB a vector, at first use
        ({"ngrams": "ab"}, "ngrams must be a .min, max. pair"),  # TypeError
        ({"ngrams": (4, 2)}, "ngrams' max must be between 4 and 64"),
        ({"ngram_weight": float("nan")}, "ngram_weight must be a finite number"),  # taken
    ],
)
def test_hashing_embedder_options_out_of_range_are_refused(
    option: dict[str, Any], said: str
) -> None:
    with pytest.raises(ConfigurationError, match=said):
        HashingEmbedder(**option)
    assert HashingEmbedder(ngrams=[2, 4]).model_id == "hashing-v2-256-2-4-0.5"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("option", "said"),
    [
        ({"tracer_provider": 5}, "tracer_provider must be an OpenTelemetry provider"),
        ({"meter_provider": "x"}, "meter_provider must be an OpenTelemetry provider"),
    ],
)
def test_telemetry_providers_that_are_no_providers_are_refused(
    option: dict[str, Any], said: str
) -> None:
    """They were taken, and the store's first operation failed with TypeError."""
    with pytest.raises(ConfigurationError, match=said):
        Telemetry(**option)


@pytest.mark.parametrize("path", [5, None, ""])
def test_an_owner_key_directory_must_be_a_path(path: Any) -> None:
    """5 and None raised TypeError; "" (an unset variable) was the working directory."""
    with pytest.raises(ConfigurationError, match="an owner key directory is a path"):
        KeyDirectory(path)


def test_an_owner_key_directory_is_made_only_where_its_parent_is(tmp_path: Path) -> None:
    """A mistyped path (or a volume not mounted) was made whole, parents and all, and new
    owners' keys went there without a word."""
    with pytest.raises(ConfigurationError, match="No such file or directory"):
        KeyDirectory(tmp_path / "mnt" / "keys")
    assert not (tmp_path / "mnt").exists()
    made = KeyDirectory(tmp_path / "keys").path
    assert made.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702])
def test_an_owner_key_directory_others_may_write_to_is_refused(tmp_path: Path, mode: int) -> None:
    """Another user could delete the keys (erasing every owner) or replace them."""
    directory = tmp_path / "keys"
    directory.mkdir()
    directory.chmod(mode)
    with pytest.raises(ConfigurationError, match="writable by other users"):
        KeyDirectory(directory)
    directory.chmod(0o750)  # readable by a group: key ids only, each file is 0600
    KeyDirectory(directory)


async def test_migrations_refuse_a_revision_or_tables_of_the_wrong_kind(tmp_path: Path) -> None:
    """upgrade(url, 5) raised TypeError, upgrade(url, "") AssertionError, tables=5
    AttributeError; each is a ConfigurationError now, before any connection opens."""
    url = str(tmp_path / "m.db")
    for revision in (5, None, "", " "):
        with pytest.raises(ConfigurationError, match="a revision is a name"):
            await upgrade(url, revision)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="a revision is a name"):
            await downgrade(url, revision)  # type: ignore[arg-type]
    for tables in (5, "chat_"):
        with pytest.raises(ConfigurationError, match="tables must be a TableNames"):
            await upgrade(url, tables=tables)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="tables must be a TableNames"):
            await import_sdk(url, url, tables=tables)  # type: ignore[arg-type]
    assert not (tmp_path / "m.db").exists()


async def test_import_sdk_refuses_an_unknown_order_and_a_progress_it_cannot_call(
    tmp_path: Path,
) -> None:
    """order="bogus" was read as created_at; progress=5 raised TypeError."""
    source, target = tmp_path / "sdk.db", tmp_path / "ours.db"
    sdk = SQLiteSession("s", str(source))
    await sdk.add_items([message("hello")])
    sdk.close()
    with pytest.raises(ConfigurationError, match="order must be one of"):
        await import_sdk(source, target, create_tables=True, order="bogus")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="progress must be a function"):
        await import_sdk(source, target, create_tables=True, progress=5)  # type: ignore[arg-type]
    assert not target.exists()


@pytest.mark.parametrize(
    ("option", "said"),
    [
        ({"db_path": 5}, "db_path must be a file path or ':memory:', got 5"),  # TypeError
        ({"db_path": ""}, "db_path must be a file path"),  # "it is a directory"
        ({"logger": 5}, "logger must be a logging.Logger"),  # accepted, then AttributeError
    ],
)
def test_advanced_session_options_of_the_wrong_kind_are_refused(
    option: dict[str, Any], said: str
) -> None:
    with pytest.raises(ConfigurationError, match=said):
        AdvancedSQLiteSession(session_id="s", **option)


def test_constructor_needs_exactly_one_target(sqlite_url: str) -> None:
    with pytest.raises(ConfigurationError):
        SQLAlchemySession("s")
    store = SessionStore(sqlite_url)
    with pytest.raises(ConfigurationError):
        SQLAlchemySession("s", sqlite_url, store=store)
    with pytest.raises(ConfigurationError):
        SQLAlchemySession("s", store=store, create_tables=True)


async def test_a_database_that_went_away(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("s")
        await session.add_items([message("kept")])
    said = "cannot reach the database"
    if db_url.startswith("postgresql"):
        nowhere = "postgresql+asyncpg://postgres@127.0.0.1:9/nowhere"
        gone = SessionStore(nowhere, engine_kwargs={"connect_args": {"timeout": 2}})
    elif db_url.startswith("mysql"):  # said "mysql error, nothing was changed: (2003, ...)"
        nowhere = "mysql+asyncmy://app@127.0.0.1:9/nowhere"
        gone = SessionStore(nowhere)
    else:
        nowhere = "sqlite+aiosqlite:////nonexistent-dir/for/sure/agent.db"
        gone = SessionStore(nowhere)
        said = "cannot open the SQLite database"
    with pytest.raises(DatabaseError, match=said):
        await gone.session("s").add_items([message("lost?")])
    await gone.close()
    with pytest.raises(DatabaseError, match=said):  # the migrations say the same
        await upgrade(nowhere)
    async with SessionStore(db_url) as store:
        assert await store.session("s").get_items() == [message("kept")]


@pytest.mark.slow
def test_a_session_that_only_writes_never_loads_the_sdk(tmp_path: Path) -> None:
    """The SDK (about 2.5 s to import) is loaded when a session's settings are first read,
    not when it is made without any: a worker that only writes, pops or branches starts
    without it. Settings given to a session are checked at once (test above)."""
    script = f"""
import asyncio, sys
from agents_sqlalchemy import SessionStore

async def main():
    async with SessionStore({str(tmp_path / "w.db")!r}, create_tables=True) as store:
        session = store.session("s")
        await session.add_items([{{"role": "user", "content": "a"}}])
        await session.add_items([{{"role": "user", "content": "b"}}])
        await session.create_branch_from_turn(2, "retry")
        await session.switch_to_branch("main")
        assert (await session.pop_item())["content"] == "b"
        assert "agents" not in sys.modules
        store.session_settings = {{"limit": 1}}  # for the sessions made from now on
        assert session.session_settings.limit is None
        assert store.session("t").session_settings.limit == 1
        assert [i["content"] for i in await store.session("s").get_items()] == ["a"]
    print("ok")

asyncio.run(main())
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_an_advanced_session_names_its_tables_as_the_sdks_does(tmp_path: Path) -> None:
    """The SDK's class has `sessions_table` and `messages_table`: code reading them failed."""
    path = tmp_path / "agent.db"
    default = AdvancedSQLiteSession(session_id="s", db_path=path, create_tables=True)
    named = AdvancedSQLiteSession(
        session_id="s", db_path=path, sessions_table="chat", messages_table="chat_items"
    )
    try:
        assert (default.sessions_table, default.messages_table) == (
            "agents_sqlalchemy_sessions", "agents_sqlalchemy_items"
        )  # fmt: skip
        assert (named.sessions_table, named.messages_table) == ("chat", "chat_items")
    finally:
        default.close()
        named.close()
