"""Every benchmarked backend, opened on a fresh database as a ``Handle``.

All SQLite backends run in WAL mode with ``synchronous=NORMAL``, our store's default: the
SDK's ``SQLiteSession`` defaults to ``synchronous=FULL`` (an fsync per commit) and its
``SQLAlchemySession`` to a rollback journal, so the benchmark sets the same two pragmas on
their connections; it then compares code, not durability settings.

To add a backend, write ``open_x(Location) -> async context manager yielding a Handle``
and append a ``Backend`` to ``BACKENDS`` (in the order its rows should be printed).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from .core import BenchSession, Handle, Location, Unsupported
from .floor import mariadb_floor, postgres_floor, postgres_floor_sqlalchemy, sqlite_floor

BOTH = frozenset({"sqlite", "postgres"})
ALL = frozenset({"sqlite", "postgres", "mariadb"})
SQLITE = frozenset({"sqlite"})
POSTGRES = frozenset({"postgres"})


@dataclass(frozen=True)
class Backend:
    key: str
    label: str
    databases: frozenset[str]
    open: Callable[[Location], AbstractAsyncContextManager[Handle]]
    note: str  # what it is, printed once per database
    default: bool = True  # False: only when named with --backends


def asyncpg_dsn(url: str) -> str:
    """A SQLAlchemy ``postgresql+asyncpg://`` URL as a plain DSN for ``asyncpg.connect``."""
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@asynccontextmanager
async def open_floor(location: Location) -> AsyncIterator[Handle]:
    if location.path is not None:
        floor = sqlite_floor(location.path)
    elif location.database == "mariadb":
        floor = mariadb_floor(location.url)
    else:
        floor = postgres_floor(asyncpg_dsn(location.url))
    async with floor as factory:
        yield Handle(location, factory)


@asynccontextmanager
async def open_floor_sqlalchemy(location: Location) -> AsyncIterator[Handle]:
    async with postgres_floor_sqlalchemy(location.url) as factory:
        yield Handle(location, factory)


def open_ours(*, search: bool, encrypted: bool) -> Callable[[Location], Any]:
    """Our ``SessionStore`` with the given settings (and a raw 32-byte key if encrypted).

    A raw key keeps scrypt out of the figures; ``oneoffs.store_open_cost`` prints what a
    passphrase costs. Big sessions are built through a second store on the same database
    and key with search off: indexing them is not what the big-session figures time.
    """

    @asynccontextmanager
    async def open_(location: Location) -> AsyncIterator[Handle]:
        from agents_sqlalchemy import SessionStore

        key = (location.key or os.urandom(32)) if encrypted else None
        store = SessionStore(location.url, create_tables=True, key=key, search=search)
        bulk = store
        if search:
            bulk = SessionStore(location.url, create_tables=True, key=key, search=False)
        try:
            yield Handle(
                location,
                store.session,
                settle=store.flush,
                bulk=bulk.session,
                store=store,
                key=key,
            )
        finally:
            await store.close()
            if bulk is not store:
                await bulk.close()

    return open_


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode = WAL")
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.close()


def _sdk_engine(location: Location) -> Any:
    """One engine for all of a backend's sessions, as an app would make it."""
    from sqlalchemy import event
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(location.url)
    if location.path is not None:
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
    return engine


@asynccontextmanager
async def open_sdk_sqlalchemy(location: Location) -> AsyncIterator[Handle]:
    from agents.extensions.memory import SQLAlchemySession

    engine = _sdk_engine(location)

    def factory(session_id: str) -> BenchSession:
        return SQLAlchemySession(session_id, engine=engine, create_tables=True)

    try:
        yield Handle(location, factory)
    finally:
        await engine.dispose()


@asynccontextmanager
async def open_sdk_encrypted(location: Location) -> AsyncIterator[Handle]:
    # Fernet under a key derived per session (HKDF), over the SDK's SQLAlchemySession.
    from agents.extensions.memory import EncryptedSession, SQLAlchemySession
    from cryptography.fernet import Fernet

    engine = _sdk_engine(location)
    master_key = location.key or Fernet.generate_key()

    def factory(session_id: str) -> BenchSession:
        underlying = SQLAlchemySession(session_id, engine=engine, create_tables=True)
        return EncryptedSession(
            session_id=session_id,
            underlying_session=underlying,
            encryption_key=master_key.decode(),
            ttl=7 * 24 * 3600,  # nothing expires during the run
        )

    try:
        yield Handle(location, factory, key=master_key)
    finally:
        await engine.dispose()


def _sqlite_session_class() -> type[Any]:
    """The SDK's ``SQLiteSession``, its connections set to ``synchronous=NORMAL``."""
    from agents import SQLiteSession

    found = getattr(SQLiteSession, "_configure_connection", None)
    if found is None:  # another SDK release: keep its own settings
        return SQLiteSession
    configure: Callable[[sqlite3.Connection], None] = found

    class NormalSyncSQLiteSession(SQLiteSession):
        @staticmethod
        def _configure_connection(conn: sqlite3.Connection) -> None:
            configure(conn)
            conn.execute("PRAGMA synchronous = NORMAL")

    return NormalSyncSQLiteSession


@asynccontextmanager
async def open_sdk_sqlite(location: Location) -> AsyncIterator[Handle]:
    if location.path is None:
        raise Unsupported("SQLiteSession needs a SQLite file")
    path = location.path
    session_class = _sqlite_session_class()
    opened: list[Any] = []

    def factory(session_id: str) -> BenchSession:
        session = session_class(session_id, path)
        opened.append(session)
        return session  # type: ignore[no-any-return]

    try:
        yield Handle(location, factory)
    finally:
        for session in opened:
            session.close()


BACKENDS: list[Backend] = [
    Backend(
        "floor",
        "floor (bare driver + json)",
        ALL,
        open_floor,
        "one items table, stdlib json; SQLite: sqlite3, one asyncio.to_thread hop a call; "
        "PostgreSQL: one asyncpg connection, one statement a call; MariaDB: one asyncmy "
        "connection in autocommit, one statement a call",
    ),
    Backend(
        "floor_sqlalchemy",
        "floor through SQLAlchemy",
        POSTGRES,
        open_floor_sqlalchemy,
        "the floor's statements, each on a pooled connection of SQLAlchemy's AsyncEngine "
        "(autocommit, exec_driver_sql): what SQLAlchemy costs before any work of ours",
    ),
    Backend(
        "sdk_sqlite",
        "SDK SQLiteSession",
        SQLITE,
        open_sdk_sqlite,
        "agents.SQLiteSession, its connections set to synchronous=NORMAL",
    ),
    Backend(
        "sdk_sqlalchemy",
        "SDK SQLAlchemySession",
        BOTH,  # its tables do not compile on MySQL and MariaDB (a VARCHAR without a length)
        open_sdk_sqlalchemy,
        "agents.extensions.memory.SQLAlchemySession, one engine for all sessions",
    ),
    Backend(
        "sdk_encrypted",
        "SDK EncryptedSession",
        BOTH,
        open_sdk_encrypted,
        "the SDK's EncryptedSession (Fernet, a key per session) over its SQLAlchemySession",
        default=False,
    ),
    Backend(
        "ours_nosearch",
        "ours, search=False",
        ALL,
        open_ours(search=False, encrypted=False),
        "SessionStore(url, search=False)",
    ),
    Backend(
        "ours",
        "ours (defaults)",
        ALL,
        open_ours(search=True, encrypted=False),
        "SessionStore(url): search on, items indexed just after the write on a worker thread",
    ),
    Backend(
        "ours_encrypted",
        "ours, encrypted",
        ALL,
        open_ours(search=True, encrypted=True),
        "SessionStore(url, key=os.urandom(32)): a data key per item, AES-256-GCM, search on",
    ),
]
LABELS = {backend.key: backend.label for backend in BACKENDS}
