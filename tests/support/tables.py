"""The library's tables as they really are, read with plain SQL behind its back."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import inspect, text
from sqlalchemy.ext.asyncio import create_async_engine

PREFIX = "agents_sqlalchemy_"
ITEMS, SESSIONS, KEYRING, OWNER_KEYS = (
    f"{PREFIX}{name}" for name in ("items", "sessions", "keyring", "owner_keys")
)


async def raw_rows(url: str, sql: str) -> list[tuple[object, ...]]:
    """What really lies in the tables, read with plain SQL."""
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return [tuple(row) for row in await conn.execute(text(sql))]
    finally:
        await engine.dispose()


async def execute(url: str, sql: str, params: dict[str, Any] | None = None) -> None:
    """Change rows behind the library's back, with plain SQL."""
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text(sql), params or {})
    finally:
        await engine.dispose()


async def heap_pages_read(url: str, table: str) -> int:
    """How many pages of `table` PostgreSQL has read (from memory or disk), once the counts
    of the connections closed before have reached the server's statistics."""
    engine = create_async_engine(url)
    query = text(
        "SELECT heap_blks_read + heap_blks_hit FROM pg_statio_user_tables WHERE relname = :t"
    )
    try:
        seen: list[int] = []
        async with engine.connect() as conn:
            for _ in range(50):  # a closed connection's counts arrive as its backend ends
                await conn.execute(text("SELECT pg_stat_clear_snapshot()"))
                seen.append(int((await conn.execute(query, {"t": table})).scalar_one()))
                if len(seen) >= 3 and seen[-1] == seen[-2] == seen[-3]:
                    break
                await asyncio.sleep(0.1)
            await conn.rollback()
        return seen[-1]
    finally:
        await engine.dispose()


async def our_tables(url: str) -> dict[str, list[dict[str, Any]]]:
    """Every table of the library, its columns as the database reports them."""
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:

            def read(sync_conn: Any) -> dict[str, list[dict[str, Any]]]:
                found = inspect(sync_conn)
                return {
                    name: found.get_columns(name)
                    for name in found.get_table_names()
                    if name.startswith(PREFIX)
                }

            return await conn.run_sync(read)
    finally:
        await engine.dispose()


async def dump(url: str) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table of the library, in a stable order."""
    tables = await our_tables(url)
    assert {ITEMS, SESSIONS, KEYRING} <= set(tables)
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            found = {}
            for name in tables:
                rows = await conn.execute(text(f"SELECT * FROM {name}"))
                found[name] = sorted((tuple(map(_plain, row)) for row in rows), key=repr)
            return found
    finally:
        await engine.dispose()


def _plain(value: object) -> object:
    return bytes(value) if isinstance(value, memoryview) else value
