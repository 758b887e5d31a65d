"""The scale benchmark's fast import writes the rows the library writes, and reads back.

`make bench-scale` loads ten million items with server-side SQL, not through `add_items`;
this test runs that loader at a tiny size, so it cannot drift from the schema unseen.
"""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from agents_sqlalchemy import SessionStore, TableNames
from agents_sqlalchemy.models import build_models
from benchmarks.scale_load import (
    Layout,
    asyncpg_dsn,
    check_loaded,
    expected_items,
    load,
    owner,
    session_name,
)

LAYOUT = Layout(sessions=40, items=200)
# Columns that differ between any two sessions' rows, or any two writes.
PER_ROW = {"id", "session_id", "session_hash", "session_pk", "created_at", "updated_at"}


async def _rows(url: str, table: str, where: str, *args: Any) -> list[dict[str, Any]]:
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        found = await conn.fetch(f"SELECT * FROM {table} WHERE {where}", *args)
    finally:
        await conn.close()
    return [{k: v for k, v in dict(row).items() if k not in PER_ROW} for row in found]


async def test_loaded_rows_are_the_rows_the_library_writes(pg_url: str) -> None:
    models = build_models(TableNames())
    sessions, items = models.sessions.fullname, models.items.fullname
    async with SessionStore(pg_url, create_tables=True, search=False) as store:
        await store.list_sessions(limit=1)  # makes the tables
        await load(pg_url, LAYOUT, log=lambda line: None)
        assert await check_loaded(store, LAYOUT) == []
        assert len(await store.list_sessions(limit=100)) == LAYOUT.sessions

        n = 7  # the same session written through the library, under another id
        written = store.session("written", user_id=owner(n), metadata={"n": n})
        await written.add_items(expected_items(n, LAYOUT))
        loaded_pk = f"(SELECT id FROM {sessions} WHERE session_id = $1)"
        by_library = await _rows(pg_url, sessions, "session_id = $1", "written")
        by_loader = await _rows(pg_url, sessions, "session_id = $1", session_name(n))
        assert by_loader == by_library != []
        order = "ORDER BY seq"
        by_library = await _rows(pg_url, items, f"session_pk = {loaded_pk} {order}", "written")
        by_loader = await _rows(pg_url, items, f"session_pk = {loaded_pk} {order}", session_name(n))
        assert by_loader == by_library
        assert len(by_loader) == LAYOUT.per_session

        # The expired sessions' items are hidden, then purged, as the library's would be.
        assert await store.purge_expired() == LAYOUT.expired_items > 0
        removed = await store.delete_user(owner(1))  # 36 loaded, and "written"
        assert removed.sessions == LAYOUT.sessions - LAYOUT.sessions // 10 + 1


def test_a_layout_that_does_not_divide_is_refused() -> None:
    with pytest.raises(ValueError, match="multiple"):
        Layout(sessions=30, items=100).check()
