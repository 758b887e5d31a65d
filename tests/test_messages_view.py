"""The migrations make a read-only view in the layout of the SDK's `agent_messages` table
(`id, session_id, message_data, created_at`), under the configured names, on every dialect:
queries written for the SDK's tables run against it with the view's name."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from agents_sqlalchemy import SessionStore, TableNames
from agents_sqlalchemy.database.engines import normalize_url

from .support.items import ALL, ASSISTANT, USER

# The query people run against the SDK's SQLiteSession/SQLAlchemySession tables.
SDK_QUERY = (
    "SELECT session_id, COUNT(*) AS items, MAX(created_at) AS last_active "
    "FROM {view} GROUP BY session_id ORDER BY session_id"
)


async def query(url: str, sql: str) -> list[Any]:
    engine = create_async_engine(normalize_url(url))
    try:
        async with engine.connect() as conn:
            return list((await conn.execute(text(sql))).all())
    finally:
        await engine.dispose()


@pytest.mark.parametrize(
    ("tables", "view"),
    [
        (TableNames(), "agents_sqlalchemy_messages_view"),
        (TableNames(prefix="chat_"), "chat_messages_view"),
        (TableNames(prefix="chat_", messages_view="agent_messages_v"), "agent_messages_v"),
    ],
    ids=["default", "prefix", "named"],
)
async def test_sdk_queries_run_against_the_view(db_url: str, tables: TableNames, view: str) -> None:
    assert tables.messages_view_name == view
    async with SessionStore(db_url, tables=tables, create_tables=True, search=False) as store:
        await store.session("alice-1").add_items(ALL)
        await store.session("bob-\x00-2").add_items([USER])
        branched = store.session("carol")
        await branched.add_items([USER, ASSISTANT])
        await branched.create_branch_from_turn(1, "retry")
        await branched.add_items([{"role": "user", "content": "only on the branch"}])
        await store.session("expiring", ttl=timedelta(microseconds=1)).add_items([USER])
        await store.session("kept", ttl=timedelta(days=1)).add_items([USER])
    rows = await query(db_url, SDK_QUERY.format(view=view))
    counts = {row.session_id: row.items for row in rows}
    bob = "bob-\x00-2" if "postgresql" not in db_url else "bob-\uffff0-2"  # stored form
    assert counts == {"alice-1": len(ALL), bob: 1, "carol": 2, "kept": 1}
    assert all(row.last_active is not None for row in rows)
    ordered = await query(
        db_url,
        f"SELECT message_data FROM {view} WHERE session_id = 'alice-1' ORDER BY created_at, id",
    )
    assert [json.loads(row.message_data) for row in ordered] == ALL


async def test_the_view_shows_no_sealed_item(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True, key="passphrase", search=False) as store:
        await store.session("secret").add_items([USER])
    assert await query(db_url, "SELECT * FROM agents_sqlalchemy_messages_view") == []


async def test_the_view_follows_a_schema(pg_url: str) -> None:
    tables = TableNames(prefix="chat_", schema="agents")
    async with SessionStore(pg_url, tables=tables, create_tables=True, search=False) as store:
        await store.session("s").add_items([USER, ASSISTANT])
    rows = await query(pg_url, SDK_QUERY.format(view="agents.chat_messages_view"))
    assert [(row.session_id, row.items) for row in rows] == [("s", 2)]


async def test_downgrade_drops_the_view(sqlite_url: str) -> None:
    from agents_sqlalchemy import downgrade, upgrade

    await upgrade(sqlite_url)
    assert await query(sqlite_url, "SELECT * FROM agents_sqlalchemy_messages_view") == []
    await downgrade(sqlite_url, "base")
    names = await query(sqlite_url, "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")
    assert names == []
