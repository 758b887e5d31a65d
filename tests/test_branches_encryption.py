"""Branches in encrypted mode: turn text never in the clear, and an item's key destroyed once
no branch holds the item, checked in the tables and in the SQLite file and its WAL."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import pytest

from agents_sqlalchemy import SessionStore

from .support.clock import travel
from .support.disk import found_on_disk, on_disk, sqlite_path
from .support.items import message
from .support.sealed import ITEM_MARKER, MARKERS, as_bytes, blobs_of, sealed_rows, secret_items
from .support.tables import dump


@pytest.fixture
def key() -> bytes:
    return os.urandom(32)


def ask(text: str) -> dict[str, Any]:
    return message(f"{ITEM_MARKER} {text}")


def reply(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


async def test_turn_text_is_never_stored_in_the_clear(db_url: str, key: bytes) -> None:
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        session = store.session("chat", user_id="alice")
        await session.add_items([ask("first"), *secret_items("1")])
        await session.add_items([ask("second")])
        turns = await session.get_conversation_turns()
        second = next(t["turn"] for t in turns if t["full_content"] == f"{ITEM_MARKER} second")
        branch = await session.create_branch_from_turn(second, "retry")
        await session.add_items([ask("second, again"), *secret_items("2")])
        found = await session.find_turns_by_content("second")
        assert [(t["turn"], t["full_content"]) for t in found] == [
            (second, f"{ITEM_MARKER} second, again")
        ]
        found = await session.find_turns_by_content("SECOND", branch_id="main")
        assert [t["full_content"] for t in found] == [f"{ITEM_MARKER} second"]
        assert "lookup_weather" in {name for name, _, _ in await session.get_tool_usage(branch)}

    rows = await dump(db_url)
    assert rows["agents_sqlalchemy_branch_items"], "the branch's references are stored"
    cells = [as_bytes(value) for table in rows.values() for row in table for value in row]
    for marker in MARKERS:
        assert not [cell for cell in cells if marker.encode() in cell], marker
    if sqlite_path(db_url) is not None:
        disk = on_disk(db_url)
        for marker in MARKERS:
            assert marker.encode() not in disk, marker


async def test_a_key_goes_when_no_branch_holds_its_item(
    db_url: str, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    is_sqlite = sqlite_path(db_url) is not None

    async def blobs() -> dict[int, list[bytes]]:
        """Each stored item's ciphertext and wrapped key, by its place (every line's)."""
        return {seq: blobs_of([row]) for row in await sealed_rows(db_url, "s") for seq in [row[0]]}

    async def gone(removed: list[bytes], kept: list[bytes]) -> None:
        await store.flush()  # the WAL is checkpointed just after a removal, off its path
        stored = {blob for pair in (await blobs()).values() for blob in pair}
        assert not stored & set(removed), "a removed item's bytes are still in the tables"
        assert set(kept) <= stored
        if is_sqlite:
            assert found_on_disk(db_url, removed) == [], "removed bytes remain in the file or WAL"
            assert found_on_disk(db_url, kept) == kept

    async with SessionStore(db_url, create_tables=True, key=key) as store:
        session = store.session("s", ttl=3600)
        await session.add_items([ask("q1"), reply("a1"), ask("q2"), reply("a2")])
        await session.create_branch_from_turn(2, "side")
        await session.add_items([ask("side q2"), reply("side a2")])
        at = await blobs()
        assert sorted(at) == [1, 2, 3, 4, 5, 6]

        # Off the branch: its own item goes, a shared one stays (main holds it).
        assert await session.pop_item() == reply("side a2")
        await gone(at[6], at[1] + at[2] + at[5])
        # Off main: a shared item moves aside for the branch, an unshared one goes.
        await session.switch_to_branch("main")
        for _ in range(3):
            await session.pop_item()
        await gone(at[3] + at[4], at[1] + at[2] + at[5])
        assert await session.get_items(branch_id="side") == [ask("q1"), reply("a1"), ask("side q2")]
        # Deleting the branch takes what only it held: all of it now.
        await session.delete_branch("side")
        await gone(at[2] + at[5], at[1])
        assert await session.get_items() == [ask("q1")]

        # A cleared session and expired items leave nothing either.
        await session.create_branch_from_turn(1, "later")
        await session.add_items([ask("later q1")])
        cleared = [blob for pair in (await blobs()).values() for blob in pair]
        await session.clear_session()
        await gone(cleared, [])
        await session.add_items([ask("short")])
        await session.create_branch_from_turn(1, "short")
        await session.add_items([ask("short on a branch")])
        expiring = [blob for pair in (await blobs()).values() for blob in pair]
        travel(monkeypatch, timedelta(hours=2))
        assert await store.purge_expired() == 2
        await gone(expiring, [])
