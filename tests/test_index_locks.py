"""Indexing beside removals of the items it indexes: one order of locks, no deadlock."""

from __future__ import annotations

import asyncio
import os

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from agents_sqlalchemy import SessionStore

from .support.items import message
from .support.locks import until_waiting
from .support.tables import ITEMS
from .support.telemetry import Exported


@pytest.mark.dialects("postgresql", "mariadb")
@pytest.mark.parametrize("sealed", [False, True])
async def test_indexing_an_item_a_waiting_pop_takes_is_no_deadlock(
    db_url: str, sealed: bool
) -> None:
    """A pop and the indexer both wait for the item's row (another client holds it), the
    pop first: the pop takes the item, and the indexer skips it, neither a deadlock's
    victim. On MariaDB the indexer locked the item through its `(session_pk, seq)` entry
    and then its row, and the pop (by primary key) its row and then that entry."""
    exported = Exported()
    opened = {"key": os.urandom(32)} if sealed else {}
    async with SessionStore(db_url, create_tables=True, search=False, **opened) as writer:
        session = writer.session("held", user_id="alice")
        await session.add_items([message("kept"), message("popped")])
    async with SessionStore(db_url, telemetry=exported.telemetry(), **opened) as indexer:
        engine = create_async_engine(db_url)
        try:
            async with engine.begin() as holder:  # holds the newest item's row meanwhile
                newest = f"SELECT max(id) FROM {ITEMS}"
                await holder.execute(
                    text(f"SELECT id FROM {ITEMS} WHERE id = ({newest}) FOR UPDATE")
                )
                popping = asyncio.ensure_future(indexer.session("held").pop_item())
                await until_waiting(db_url, 1)
                indexing = asyncio.ensure_future(indexer.reindex())
                await until_waiting(db_url, 2)
        finally:
            await engine.dispose()
        assert await popping == message("popped")
        assert await indexing == 2
        assert exported.total("agents_sqlalchemy.retries") == 0
        held = indexer.session("held")
        assert await held.search("popped", mode="keyword") == []
        assert await held.search("kept", mode="keyword") == [message("kept")]
