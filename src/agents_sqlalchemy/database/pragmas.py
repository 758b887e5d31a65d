"""How every SQLite connection the library opens is set up: lock waits, foreign keys, WAL,
secure deletes, and the durability asked for.

Example::

    sqlite_pragmas(engine.sync_engine, lock_timeout=30.0)
"""

from __future__ import annotations

import weakref
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

_PREPARED: weakref.WeakSet[Engine] = weakref.WeakSet()


def sqlite_pragmas(
    engine: Engine,
    *,
    synchronous: str | None = None,
    lock_timeout: float,
    checkpoint: bool = True,
) -> None:
    """Set every new SQLite connection of `engine` up: lock waits, foreign keys, WAL.

    `synchronous` ("NORMAL", "FULL", ...) is set only on engines the library made;
    `lock_timeout=0` makes a locked database fail at once, `checkpoint=False` leaves the
    WAL's checkpoints to other connections.
    """
    if engine.dialect.name != "sqlite" or engine in _PREPARED:
        return
    _PREPARED.add(engine)
    busy_ms = max(1, round(lock_timeout * 1000)) if lock_timeout > 0 else 0

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.execute("PRAGMA secure_delete = ON")
            cursor.execute("PRAGMA journal_mode = WAL")
            if synchronous:
                cursor.execute(f"PRAGMA synchronous = {synchronous}")
            if not checkpoint:
                cursor.execute("PRAGMA wal_autocheckpoint = 0")
        finally:
            cursor.close()
