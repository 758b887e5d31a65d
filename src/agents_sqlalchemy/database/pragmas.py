"""How every SQLite connection the library opens is set up: lock waits, foreign keys, WAL,
secure deletes, and the durability asked for; and whether a file not there is created.

Example::

    sqlite_pragmas(engine.sync_engine, lock_timeout=30.0)
    open_existing(engine.sync_engine, lambda: False)    # a missing file is an error
"""

from __future__ import annotations

import sqlite3
import time
import weakref
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from sqlalchemy import event
from sqlalchemy.engine import Engine

_PREPARED: weakref.WeakSet[Engine] = weakref.WeakSet()
#: A pooled connection's `info` key: set up by `sqlite_pragmas`.
_SET_UP = "agents_sqlalchemy_pragmas"


def sqlite_pragmas(
    engine: Engine,
    *,
    synchronous: str | None = None,
    lock_timeout: float,
    checkpoint: bool = True,
) -> None:
    """Set every SQLite connection of `engine` up: lock waits, foreign keys, WAL, secure
    deletes. A new one as it connects; one an app's engine opened before it was given to
    a store, at its first checkout by the store (without WAL the scrub of removals did
    nothing, and foreign keys were off).

    `synchronous` ("NORMAL", "FULL", ...) is set only on engines the library made;
    `lock_timeout=0` makes a locked database fail at once, `checkpoint=False` leaves the
    WAL's checkpoints to other connections.
    """
    if engine.dialect.name != "sqlite" or engine in _PREPARED:
        return
    _PREPARED.add(engine)
    busy_ms = max(1, round(lock_timeout * 1000)) if lock_timeout > 0 else 0

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        if not record.info.get(_SET_UP):
            _on_connect(dbapi_connection, record)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, record: Any) -> None:
        record.info[_SET_UP] = True
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.execute("PRAGMA secure_delete = ON")
            _wal(cursor, busy_ms / 1000)
            if synchronous:
                cursor.execute(f"PRAGMA synchronous = {synchronous}")
            if not checkpoint:
                cursor.execute("PRAGMA wal_autocheckpoint = 0")
        finally:
            cursor.close()


def open_existing(engine: Engine, may_create: Callable[[], bool]) -> None:
    """Unless `may_create()` (asked at each new connection), `engine`'s connections open a
    SQLite file only if it is there (SQLite's `mode=rw`): a file moved or deleted away is
    an error, not a new, empty database. Memory and URI (`file:`) databases are left alone.
    """
    if engine.dialect.name != "sqlite":
        return

    @event.listens_for(engine, "do_connect")
    def _on_connect(_dialect: Any, _record: Any, cargs: list[Any], cparams: dict[str, Any]) -> None:
        path = cargs[0] if cargs else ":memory:"  # SQLAlchemy gives a file as an absolute path
        if path != ":memory:" and not cparams.get("uri") and not may_create():
            cargs[0] = f"file:{quote(path)}?mode=rw"
            cparams["uri"] = True


def _wal(cursor: Any, wait: float) -> None:
    """Put the file in WAL mode, as its first connection does once for good. Connections
    opening a new file at once all try it, and SQLite answers the switch "database is
    locked" at once, without waiting for `busy_timeout` (it needs the file alone): such a
    connection tries again, as that wait allows, until another's switch is done."""
    deadline = time.monotonic() + wait
    while True:
        try:
            cursor.execute("PRAGMA journal_mode")  # a DB-API cursor: its row comes apart
            if str(cursor.fetchone()[0]).lower() != "wal":
                cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.005)
