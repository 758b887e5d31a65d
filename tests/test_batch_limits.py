"""An append past the documented bounds is refused before anything is written: memory stays
bounded by design (a call is one transaction, held whole in memory)."""

from __future__ import annotations

import pytest

from agents_sqlalchemy import ItemError, SessionStore
from agents_sqlalchemy import codec as codec_module
from agents_sqlalchemy.validation import MAX_BATCH_ITEMS


async def test_too_many_items_in_one_call_are_refused(sqlite_url: str) -> None:
    async with SessionStore(sqlite_url, create_tables=True) as store:
        session = store.session("s")
        await session.add_items([{"role": "user", "content": "kept"}])
        too_many = [{"role": "user", "content": "x"}] * (MAX_BATCH_ITEMS + 1)
        with pytest.raises(ItemError, match="at most 100,000 items"):
            await session.add_items(too_many)
        assert await session.get_items() == [{"role": "user", "content": "kept"}]
        # nor did the SDK's compaction hook bound what replaces a history (300,000 went in)
        with pytest.raises(ItemError, match="replacement takes at most 100,000 items"):
            await session._atomic_replace_items(too_many)
        assert await session.get_items() == [{"role": "user", "content": "kept"}]
        branch = await session.create_branch_from_turn(1, "b")  # (encoded off the loop)
        await session.add_items([{"role": "user", "content": f"b{i}"} for i in range(2_000)])
        assert len(await session.get_items(branch_id=branch)) == 2_000


async def test_too_much_json_in_one_call_is_refused(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(codec_module, "MAX_BATCH_BYTES", 10_000)
    async with SessionStore(db_url, create_tables=True, key="k") as store:
        session = store.session("s")
        items = [{"role": "user", "content": "y" * 3_000} for _ in range(4)]
        with pytest.raises(ItemError, match="split it"):
            await session.add_items(items)
        # The bound is in bytes: 3,000 euro signs are 9,000 of them (it counted characters).
        with pytest.raises(ItemError, match="split it"):
            await session.add_items([{"role": "user", "content": "€" * 3_000}] * 2)
        assert await store.session_info("s") is None  # nothing written
        await session.add_items(items[:3])  # under the bound: stored
        assert len(await session.get_items()) == 3


async def test_a_big_read_and_append_decode_off_the_loop_the_same(sqlite_url: str) -> None:
    """Past a thousand items a read decodes, and an append encodes, in a worker thread: the
    items are the same, in order."""
    async with SessionStore(sqlite_url, create_tables=True, key="k") as store:
        session = store.session("s")
        items = [{"role": "user", "content": f"n{i}"} for i in range(2_500)]
        await session.add_items(items)
        assert await session.get_items() == items
        assert await session.get_items(limit=1_500) == items[-1_500:]
