"""Holes around keys: an overwritten sealed state leaves no copy on disk, and a store still
holding a key that was rotated away is refused before it writes anything."""

from __future__ import annotations

import os

from agents_sqlalchemy import SessionStore

from .items import message
from .test_encryption import on_disk, pieces
from .test_state_scrub import sealed_state


async def test_set_state_scrubs_the_state_it_overwrites(sqlite_url: str) -> None:
    async with SessionStore(sqlite_url, create_tables=True, key=os.urandom(32)) as store:
        session = store.session("s")
        await session.add_items([message("x")])
        await session.set_state("card", os.urandom(3000).hex())
        before = await sealed_state(sqlite_url)
        assert sum(piece in on_disk(sqlite_url) for piece in pieces(before)) > 300
        await session.set_state("card", "replaced")  # an overwrite, not a deletion
        await store.flush()  # the WAL is checkpointed just after, on the store's thread
        after = await sealed_state(sqlite_url)
        disk = on_disk(sqlite_url)
        left = [piece for piece in pieces(before) if piece not in after and piece in disk]
        assert left == [], f"{len(left)} pieces of the overwritten state are still on disk"
        assert await session.get_state("card") == "replaced"
