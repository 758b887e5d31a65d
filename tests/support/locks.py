"""Another client holding a session's write lock, for tests of what waits behind it; and
waiting until some transactions wait for a lock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from agents_sqlalchemy.types import SessionKey

from .tables import SESSIONS, raw_rows


async def holding_the_lock(url: str, session_id: str) -> AsyncIterator[AsyncConnection]:
    """A connection of another client that holds the session's row (SQLite: the database)
    locked in an open transaction."""
    engine = create_async_engine(make_url(url).difference_update_query(["pgbouncer"]))
    conn = await engine.connect()
    try:
        await conn.begin()
        await conn.execute(
            text(f"UPDATE {SESSIONS} SET next_seq = next_seq WHERE session_hash = :hash"),
            {"hash": SessionKey.of(session_id).hash},
        )
        yield conn
    finally:
        await conn.close()
        await engine.dispose()


async def until_waiting(url: str, count: int) -> None:
    """Until `count` transactions of the database wait for a lock (on MariaDB: run a
    statement, a locking one not listed as waiting until it has locked a row; a prepared
    one runs as an `Execute` command)."""
    query = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock'"
        if url.startswith("postgresql")
        else "SELECT count(*) FROM information_schema.processlist WHERE db = database() "
        "AND command IN ('Query', 'Execute') AND id <> connection_id()"
    )
    for _ in range(1000):
        if (await raw_rows(url, query))[0][0] >= count:
            await asyncio.sleep(0.05)  # a statement just sent reaches its lock
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{count} transactions never waited for a lock")
