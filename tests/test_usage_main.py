"""Usage on a session that never branched: one row per turn and none per item, its user
turns counted across appends with and without usage and across pops, and a first branch
made afterwards agreeing with them (plaintext, counted by the database; encrypted, opened)."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import pytest
from agents.run_context import RunContextWrapper
from agents.usage import Usage

from agents_sqlalchemy import SessionStore

from .support.clock import travel
from .support.items import message
from .support.tables import raw_rows

P = "agents_sqlalchemy_"


def reply(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def ran(tokens: int) -> RunContextWrapper[None]:
    """A Runner context that has used `tokens` input tokens."""
    used = Usage(requests=1, input_tokens=tokens, output_tokens=1, total_tokens=tokens + 1)
    return RunContextWrapper(context=None, usage=used)


async def count(url: str, table: str) -> int:
    [(found,)] = await raw_rows(url, f"SELECT COUNT(*) FROM {P}{table}")
    return int(str(found))


async def usage_by_turn(session: Any, branch_id: str | None = None) -> list[tuple[int, int]]:
    rows = await session.get_turn_usage(branch_id=branch_id)
    return [(row["user_turn_number"], row["input_tokens"]) for row in rows]


@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "encrypted"])
async def test_usage_without_branches_is_one_row_per_turn(db_url: str, sealed: bool) -> None:
    key = os.urandom(32) if sealed else None
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        session = store.session("counted")
        await session.add_items([message("question 1")])  # the Runner's input: no usage yet
        await session.add_items([reply("answer 1")], wrapper=ran(10))
        await session.add_items([message("question 2"), reply("answer 2")], wrapper=ran(20))
        await session.add_items([message("question 3")])
        await session.add_items([reply("answer 3")], wrapper=ran(30))
        await session.add_items([reply("answer 3, more")], wrapper=ran(31))  # replaces turn 3's
        assert await usage_by_turn(session) == [(1, 10), (2, 20), (3, 31)]
        assert (await count(db_url, "branch_items"), await count(db_url, "turn_usage")) == (0, 3)

        # Turn 3 popped whole (its answers, then its question): its usage goes, and the next
        # turn recorded is turn 3 again.
        for _ in range(3):
            await session.pop_item()
        assert await usage_by_turn(session) == [(1, 10), (2, 20)]
        await session.add_items([message("question 3b"), reply("answer 3b")], wrapper=ran(40))
        assert await usage_by_turn(session) == [(1, 10), (2, 20), (3, 40)]
        assert [t["turn"] for t in await session.get_conversation_turns()] == [1, 2, 3]
        assert await session.get_session_usage() == {
            "requests": 3,
            "input_tokens": 70,
            "output_tokens": 3,
            "total_tokens": 73,
            "total_turns": 3,
        }
        assert await count(db_url, "branch_items") == 0

        # The first branch derives the main line's turns from its items: they agree.
        await session.create_branch_from_turn(3, "retry")
        await session.add_items([message("question 3c"), reply("answer 3c")], wrapper=ran(50))
        assert await usage_by_turn(session) == [(3, 50)]
        assert await usage_by_turn(session, "main") == [(1, 10), (2, 20), (3, 40)]
        assert [t["turn"] for t in await session.get_conversation_turns("main")] == [1, 2, 3]
        # From then on the main line records through its turn structure.
        await session.switch_to_branch("main")
        await session.add_items([message("question 4")])
        await session.add_items([reply("answer 4")], wrapper=ran(60))
        assert (await usage_by_turn(session))[-1] == (4, 60)


async def test_a_cleared_session_counts_its_turns_again(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("again")
        await session.add_items([message("one"), reply("a"), message("two")], wrapper=ran(5))
        assert await usage_by_turn(session) == [(2, 5)]
        await session.clear_session()
        assert await usage_by_turn(session) == []
        await session.add_items([message("one again"), reply("b")], wrapper=ran(7))
        assert await usage_by_turn(session) == [(1, 7)]
        assert await count(db_url, "branch_items") == 0


async def turns_of(session: Any, branch_id: str | None = None) -> list[int]:
    return [turn["turn"] for turn in await session.get_conversation_turns(branch_id)]


@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "encrypted"])
async def test_a_purge_renumbers_no_turn(
    db_url: str, sealed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Turns purged keep their numbers, and their usage: the turns left, and the next ones,
    are numbered after them (a purged turn's number is never taken again)."""
    key = os.urandom(32) if sealed else None
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        session = store.session("purged", ttl=60)
        await session.add_items([message("question 1")])
        await session.add_items([reply("answer 1")], wrapper=ran(10))
        await session.add_items([message("question 2")])
        await session.add_items([reply("answer 2")], wrapper=ran(20))
        await session.add_items([message("question 3")])  # its answer comes after the purge
        travel(monkeypatch, timedelta(seconds=50))
        await session.add_items([reply("answer 3")], wrapper=ran(30))
        travel(monkeypatch, timedelta(seconds=20))  # 70 s after the first items
        assert await store.purge_expired() == 5
        assert await turns_of(session) == []  # turn 3's question went: its answer stays in 3
        assert [item["content"] for item in await session.get_items()] == ["answer 3"]
        await session.add_items([message("question 4")])
        await session.add_items([reply("answer 4")], wrapper=ran(40))
        assert await turns_of(session) == [4]
        assert await usage_by_turn(session) == [(1, 10), (2, 20), (3, 30), (4, 40)]
        assert list(await session.get_conversation_by_turns()) == [3, 4]
        # A first branch derives the same numbers; the main line goes on from them.
        await session.create_branch_from_turn(4, "again")
        assert await turns_of(session, "main") == [4]
        await session.add_items([message("question 4, again")], wrapper=ran(41))
        assert await usage_by_turn(session) == [(4, 41)]
        await session.switch_to_branch("main")
        await session.add_items([message("question 5")], wrapper=ran(50))
        assert await turns_of(session) == [4, 5]
        assert (await usage_by_turn(session))[-2:] == [(4, 40), (5, 50)]


@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "encrypted"])
async def test_a_branched_main_line_purged_whole_goes_on_numbering(
    db_url: str, sealed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = os.urandom(32) if sealed else None
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        session = store.session("branched", ttl=60)
        await session.add_items([message("question 1"), reply("answer 1")], wrapper=ran(10))
        await session.add_items([message("question 2"), reply("answer 2")], wrapper=ran(20))
        await session.create_branch_from_turn(2, "b")
        await session.switch_to_branch("main")
        await session.add_items([message("question 3")])
        assert await session.pop_item() is not None  # the count loses the popped turn
        travel(monkeypatch, timedelta(seconds=70))
        assert await store.purge_expired() == 4
        await session.add_items([message("question 3"), reply("answer 3")], wrapper=ran(30))
        assert await turns_of(session) == [3]
        assert await usage_by_turn(session) == [(1, 10), (2, 20), (3, 30)]


@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "encrypted"])
async def test_a_repair_renumbers_no_turn(db_url: str, sealed: bool) -> None:
    key = os.urandom(32) if sealed else None
    call = {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"}
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        session = store.session("repaired")
        await session.add_items([message("question 1"), reply("answer 1")], wrapper=ran(10))
        await session.add_items([message("question 2"), call], wrapper=ran(20))
        assert not (await session.repair()).ok  # the call gets an answer, at a new place
        assert await turns_of(session) == [1, 2]
        await session.add_items([message("question 3")], wrapper=ran(30))
        assert await turns_of(session) == [1, 2, 3]
        assert await usage_by_turn(session) == [(1, 10), (2, 20), (3, 30)]


async def test_a_branch_holding_no_item_numbers_after_the_turn_it_was_made_from(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A branch made after its turns were purged, or popped empty, numbered its next turn 1
    (recording its usage as turn 1); it goes on from the turn it was made from."""
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("b", ttl=60)
        await session.add_items([message("question 1"), reply("answer 1")], wrapper=ran(10))
        await session.add_items([message("question 2"), reply("answer 2")], wrapper=ran(20))
        travel(monkeypatch, timedelta(seconds=50))
        await session.add_items([message("question 3"), reply("answer 3")], wrapper=ran(30))
        travel(monkeypatch, timedelta(seconds=20))
        assert await store.purge_expired() == 4
        await session.create_branch_from_turn(3, "retry")
        assert await session.get_items() == []
        await session.add_items([message("question 3, again")], wrapper=ran(31))
        assert await usage_by_turn(session) == [(3, 31)]
        assert await session.pop_item() is not None  # empty again
        await session.add_items([message("question 3, once more")], wrapper=ran(32))
        assert await turns_of(session) == [3]
        assert await usage_by_turn(session) == [(3, 32)]
