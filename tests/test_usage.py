"""Token usage: recorded from the Runner's context as it runs, per turn and branch, and summed
per owner and day by the database."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from agents import Agent, Runner
from agents.memory.session import _session_accepts_wrapper
from agents.run_context import RunContextWrapper
from agents.testing import ScriptedModel
from agents.usage import Usage

from agents_sqlalchemy import ConfigurationError, DailyUsage, ItemError, SessionStore, TokenUsage

from .support.clock import travel
from .support.items import message
from .support.runs import lookup, steps, usage
from .support.tables import raw_rows


def figures(row: dict[str, Any]) -> tuple[int, int, int, int]:
    return row["requests"], row["input_tokens"], row["output_tokens"], row["total_tokens"]


def of(used: Usage) -> tuple[int, int, int, int]:
    return used.requests, used.input_tokens, used.output_tokens, used.total_tokens


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("input_tokens", float("nan"), "usage.input_tokens must be an integer"),
        ("input_tokens", 10**30, "usage.input_tokens must be between 0 and"),
        ("requests", -1, "usage.requests must be between 0 and"),
    ],
)
async def test_usage_that_no_column_holds_is_refused_and_records_nothing(
    db_url: str, field: str, value: Any, said: str
) -> None:
    # NaN raised ValueError, 10**30 OverflowError (SQLite) or DatabaseError, -1 was kept.
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("odd usage")
        await session.add_items([message("hi")])
        used = Usage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15)
        setattr(used, field, value)
        wrapper = RunContextWrapper(context=None, usage=used)
        with pytest.raises(ConfigurationError, match=said):
            await session.store_run_usage(type("Result", (), {"context_wrapper": wrapper})())
        assert await session.get_turn_usage() == []
        assert await session.get_session_usage() is None


async def test_the_runner_hands_its_context_and_each_turn_is_recorded(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("runs", user_id="alice")
        assert _session_accepts_wrapper(session)
        model = ScriptedModel([*steps(1), *steps(2)])
        agent = Agent(name="a", model=model, tools=[lookup])
        first = await Runner.run(agent, "weather?", session=session)
        second = await Runner.run(agent, "and now?", session=session)
        rows = await session.get_turn_usage()
        assert isinstance(rows, list)
        assert [row["user_turn_number"] for row in rows] == [1, 2]
        assert [figures(row) for row in rows] == [
            of(first.context_wrapper.usage),
            of(second.context_wrapper.usage),
        ]
        assert of(first.context_wrapper.usage) == (2, 107, 10, 117)
        # Recording a run again (the SDK's way) replaces its figures: nothing counts twice.
        await session.store_run_usage(second)
        await session.store_run_usage(second)
        assert await session.get_session_usage() == {
            "requests": 4,
            "input_tokens": 221,
            "output_tokens": 21,
            "total_tokens": 242,
            "total_turns": 2,
        }
        assert await session.get_tool_usage() == [("lookup", 1, 1), ("lookup", 1, 2)]


async def test_usage_follows_the_branch_it_ran_on(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("branched")
        model = ScriptedModel([*steps(1), *steps(2), *steps(3)])
        agent = Agent(name="a", model=model, tools=[lookup])
        await Runner.run(agent, "one", session=session)
        await Runner.run(agent, "two", session=session)
        branch = await session.create_branch_from_turn(2, "retry")
        retried = await Runner.run(agent, "two, again", session=session)
        main_rows = await session.get_turn_usage(branch_id="main")
        branch_rows = await session.get_turn_usage(branch_id=branch)
        assert isinstance(main_rows, list) and isinstance(branch_rows, list)
        assert [row["user_turn_number"] for row in main_rows] == [1, 2]
        assert [(row["user_turn_number"], figures(row)) for row in branch_rows] == [
            (2, of(retried.context_wrapper.usage))
        ]
        assert await session.get_turn_usage(2) == {
            "requests": 2,
            "input_tokens": 121,
            "output_tokens": 12,
            "total_tokens": 133,
            "input_tokens_details": {"cache_write_tokens": 0, "cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        assert (await session.get_session_usage(branch))["total_turns"] == 1  # type: ignore[index]
        assert (await session.get_session_usage())["total_turns"] == 3  # type: ignore[index]
        # Popping a turn's last item drops its usage; deleting the branch drops the rest.
        await session.switch_to_branch("main")
        await session.delete_branch(branch)
        assert await session.get_turn_usage(branch_id=branch) == []
        assert (await session.get_session_usage())["total_turns"] == 2  # type: ignore[index]
        for _ in range(4):  # turn 2's user message, tool call, output and answer
            await session.pop_item()
        assert [row["user_turn_number"] for row in await session.get_turn_usage()] == [1]  # type: ignore[index]


async def test_appends_without_usage_or_without_a_turn_record_nothing(sqlite_url: str) -> None:
    async with SessionStore(sqlite_url, create_tables=True) as store:
        session = store.session("quiet")
        empty = RunContextWrapper(context=None, usage=Usage())
        await session.add_items([message("hi")], wrapper=empty)  # before any model call
        assert await session.get_turn_usage() == []
        assert await session.get_session_usage() is None
        # Asked to, it records even a run that used nothing (as the SDK's class does).
        await session.store_run_usage(type("Result", (), {"context_wrapper": empty})())
        assert (await session.get_session_usage()) == {
            "requests": 0,
            "input_tokens": 0,
            "output_tokens": 0,
            "total_tokens": 0,
            "total_turns": 1,
        }
        fresh = store.session("fresh")
        ran = RunContextWrapper(context=None, usage=usage(1, 50))
        await fresh.store_run_usage(type("Result", (), {"context_wrapper": ran})())
        assert await fresh.get_turn_usage() == []  # no turn to put it on
        await fresh.add_items([{"role": "assistant", "content": "hello"}], wrapper=ran)
        [row] = await fresh.get_turn_usage()  # type: ignore[misc]
        assert row["user_turn_number"] == 0  # items before any user message: turn 0
        # Asked by its number, as the SDK answers it (it was a ConfigurationError).
        by_number = await fresh.get_turn_usage(0)
        assert by_number == {k: v for k, v in row.items() if k != "user_turn_number"}


async def test_store_usage_sums_per_owner_and_day(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with SessionStore(db_url, create_tables=True) as store:

        async def record(session_id: str, user: str, tokens: int) -> None:
            session = store.session(session_id, user_id=user)
            await session.add_items([message(f"from {user}")])
            result = type(
                "Result", (), {"context_wrapper": RunContextWrapper(None, usage(1, tokens))}
            )
            await session.store_run_usage(result())

        day_one = datetime.now(timezone.utc).date()
        await record("a1", "alice", 100)
        await record("a1", "alice", 200)
        await record("b1", "bob", 1000)
        travel(monkeypatch, timedelta(days=1))
        await record("a2", "alice", 10)

        report = await store.usage()
        day_two = day_one + timedelta(days=1)
        assert report.days == [
            DailyUsage("alice", day_one, TokenUsage(2, 2, 300, 30, 330)),
            DailyUsage("bob", day_one, TokenUsage(1, 1, 1000, 100, 1100)),
            DailyUsage("alice", day_two, TokenUsage(1, 1, 10, 1, 11)),
        ]
        assert report.total == TokenUsage(4, 4, 1310, 131, 1441)
        alice = await store.usage(user_id="alice")
        assert alice.total == TokenUsage(3, 3, 310, 31, 341)
        since = datetime.combine(day_two, datetime.min.time(), tzinfo=timezone.utc)
        assert [row.day for row in (await store.usage(since=since)).days] == [day_two]
        assert [row.user_id for row in (await store.usage(until=since)).days] == ["alice", "bob"]
        # One row per turn of a branch, however often it was recorded.
        assert await raw_rows(db_url, "SELECT COUNT(*) FROM agents_sqlalchemy_turn_usage") == [(4,)]


@pytest.mark.parametrize("key", [None, "passphrase"], ids=["plain", "sealed"])
async def test_turn_zero_usage_goes_with_its_last_item(db_url: str, key: str | None) -> None:
    """Usage of turn 0 (items before any user message) outlived the popping of all its
    items in a session that never branched: get_session_usage still counted it, where the
    SDK's AdvancedSQLiteSession (and this library's branched path) had dropped it."""
    ran = RunContextWrapper(context=None, usage=usage(1, 15))
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        session = store.session("zero")
        await session.add_items([{"role": "assistant", "content": "before"}])
        await session.add_items([{"role": "assistant", "content": "hello"}], wrapper=ran)
        assert [row["user_turn_number"] for row in await session.get_turn_usage()] == [0]  # type: ignore[index]
        await session.pop_item()
        assert (await session.get_session_usage())["total_turns"] == 1  # type: ignore[index]
        await session.pop_item()  # the last item of turn 0
        assert await session.get_turn_usage() == []
        assert await session.get_session_usage() is None


async def test_an_append_with_usage_or_on_a_branch_checks_its_items(db_url: str) -> None:
    """An iterator given with `wrapper=` was stored without taking its places, and every
    later append to the session failed with a ConstraintError; None, 5 or an iterator on a
    branch raised TypeError or ValueError. Each is the ItemError of the main line now,
    with nothing written."""
    ran = RunContextWrapper(context=None, usage=usage(1, 15))
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("checked")
        await session.add_items([message("a")])
        with pytest.raises(ItemError, match="add_items takes a list of items, got list_iterator"):
            await session.add_items(iter([message("g1")]), wrapper=ran)  # type: ignore[arg-type]
        await session.add_items([message("b"), {"role": "assistant", "content": "rb"}])
        await session.create_branch_from_turn(2, "x")
        for given in (None, 5, iter([message("g")])):
            with pytest.raises(ItemError, match="add_items takes a list of items"):
                await session.add_items(given)  # type: ignore[arg-type]
        await session.add_items([message("c")])
        assert await session.get_items() == [message("a"), message("c")]
        assert await session.get_items(branch_id="main") == [
            message("a"),
            message("b"),
            {"role": "assistant", "content": "rb"},
        ]


async def test_items_with_a_nul_or_deep_nesting_take_usage_and_branches(db_url: str) -> None:
    """Turns are found in SQL where the database reads JSON: on PostgreSQL an item holding a
    NUL character ("\\u0000" in its text) made usage and branching fail, on MariaDB an item
    nested deeper than 32 levels (items may have 128)."""
    deep: Any = []
    for _ in range(100):
        deep = [deep]
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("odd", user_id="alice")
        answer = {"role": "assistant", "content": "ok"}
        await session.add_items([message("a\x00b"), answer])
        await session.add_items([{**message("second"), "deep": deep}, answer])
        await session.add_items([message("third")])
        model = ScriptedModel(steps(1))
        await Runner.run(Agent(name="a", model=model, tools=[lookup]), "fourth", session=session)
        rows = await session.get_turn_usage()
        assert isinstance(rows, list) and [row["user_turn_number"] for row in rows] == [4]
        branch = await session.create_branch_from_turn(2, "retry")
        assert await session.get_items() == [message("a\x00b"), answer]
        turns = await session.get_conversation_turns(branch_id="main")
        assert [turn["turn"] for turn in turns] == [1, 2, 3, 4]
        assert branch == "retry"
