"""Deleting a sealed state value leaves none of its bytes in the SQLite file or its WAL."""

from __future__ import annotations

import os

from agents_sqlalchemy import SessionStore

from .support.disk import on_disk, pieces
from .support.items import message
from .support.sealed import sealed_state


async def test_delete_state_scrubs_the_sealed_state(sqlite_url: str) -> None:
    secret = os.urandom(3000).hex()
    async with SessionStore(sqlite_url, create_tables=True, key=os.urandom(32)) as store:
        session = store.session("s")
        await session.add_items([message("x")])
        await session.set_state("card", secret)
        await session.set_state("kept", "v")
        before = await sealed_state(sqlite_url)
        seen = on_disk(sqlite_url)
        assert sum(piece in seen for piece in pieces(before)) > 300  # the scan finds it
        await session.delete_state("card")
        await store.flush()  # the WAL is checkpointed just after, on the store's thread
        after = await sealed_state(sqlite_url)
        # Every 16-byte piece of the old sealed state, but its header (which the new one
        # shares), is gone from the file and the WAL.
        disk = on_disk(sqlite_url)
        left = [piece for piece in pieces(before) if piece not in after and piece in disk]
        assert left == [], f"{len(left)} pieces of the deleted state are still on disk"
        assert await session.get_state("card") is None
        assert await session.get_state("kept") == "v"
