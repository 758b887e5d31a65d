"""Another client holding a session's write lock, for tests of what waits behind it."""

from __future__ import annotations

from collections.abc import AsyncIterator

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from agents_sqlalchemy.types import SessionKey

from .tables import SESSIONS


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
