"""`session.check()` finds what the model API would refuse in a history, `session.repair()`
mends it keeping everything else, `repair_on_read=True` mends every read; histories made by
the SDK's real Runner (the model scripted)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from agents import Agent, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from agents_sqlalchemy import BranchError, SessionStore
from agents_sqlalchemy.history_check import INTERRUPTED_OUTPUT, check_history, repaired

from .support.clock import travel
from .support.items import ASSISTANT, FUNCTION_CALL, FUNCTION_OUTPUT, REASONING, USER
from .support.tables import raw_rows


@function_tool(needs_approval=True)
def refund(order: str) -> str:
    """Refund an order (a person approves it first)."""
    return f"order {order} refunded"


def kinds(items: list[Any]) -> list[str]:
    return [item.get("type", "message") for item in items]


def call(call_id: str, kind: str = "function_call") -> dict[str, Any]:
    return {"type": kind, "id": f"fc_{call_id}", "call_id": call_id, "name": "f", "arguments": "{}"}


def output(call_id: str, kind: str = "function_call_output") -> dict[str, Any]:
    return {"type": kind, "call_id": call_id, "output": "ok"}


def test_a_healthy_history_is_left_as_it_is() -> None:
    items = [USER, REASONING, FUNCTION_CALL, FUNCTION_OUTPUT, ASSISTANT]
    report = check_history(items)
    assert report.ok and report.summary() == "healthy (5 items)"
    fix = repaired(items)
    assert not fix.changed and fix.items == items


def test_orphaned_outputs_are_found_and_dropped() -> None:
    items = [USER, output("gone"), FUNCTION_CALL, FUNCTION_OUTPUT, output("x", "shell_call_output")]
    report = check_history(items)
    assert [(p.kind, p.index, p.ref) for p in report.problems] == [
        ("orphan_output", 1, "gone"),
        ("orphan_output", 4, "x"),
    ]
    assert report.summary() == "2 orphaned tool outputs (5 items)"
    assert repaired(items).items == [USER, FUNCTION_CALL, FUNCTION_OUTPUT]
    assert check_history(repaired(items).items).ok


def test_unanswered_calls_get_an_output_after_their_run_of_calls() -> None:
    """Parallel calls stay together, their outputs after them; the made-up output says
    why; nothing else moves."""
    items = [USER, REASONING, call("a"), call("b", "custom_tool_call"), call("c"), output("c")]
    report = check_history(items)
    assert [(p.kind, p.ref) for p in report.problems] == [
        ("unanswered_call", "a"),
        ("unanswered_call", "b"),
    ]
    mended = repaired(items).items
    assert mended[:5] == items[:5]
    assert mended[5:7] == [
        {"type": "function_call_output", "call_id": "a", "output": INTERRUPTED_OUTPUT},
        {"type": "custom_tool_call_output", "call_id": "b", "output": INTERRUPTED_OUTPUT},
    ]
    assert mended[7:] == [output("c")]
    assert check_history(mended).ok


def test_an_unanswerable_call_goes_with_the_reasoning_that_led_to_it() -> None:
    computer = {"type": "computer_call", "id": "cu_1", "call_id": "cu", "action": {"type": "click"}}
    items = [USER, REASONING, computer, {"role": "user", "content": "still there?"}]
    assert check_history(items).count("unanswered_call") == 1
    assert repaired(items).items == [USER, items[3]]
    # Reasoning that still leads to a message of the model stays.
    items = [USER, REASONING, computer, ASSISTANT]
    assert repaired(items).items == [USER, REASONING, ASSISTANT]


def test_duplicate_ids_drop_same_copies_and_keep_different_ones_without_the_id() -> None:
    changed = {**ASSISTANT, "content": [{"type": "output_text", "text": "other"}]}
    items = [USER, ASSISTANT, USER, ASSISTANT, changed]
    report = check_history(items)
    assert [(p.kind, p.index, p.ref) for p in report.problems] == [
        ("duplicate_id", 3, "msg_1"),
        ("duplicate_id", 4, "msg_1"),
    ]
    mended = repaired(items).items
    without_id = {k: v for k, v in changed.items() if k != "id"}
    assert mended == [USER, ASSISTANT, USER, without_id]
    assert check_history(mended).ok


@pytest.mark.parametrize("key", [None, "passphrase"], ids=["plain", "sealed"])
async def test_an_abandoned_approval_is_found_and_repaired(db_url: str, key: str | None) -> None:
    """The Runner stops for an approval nobody gives: the call stays unanswered. `check`
    says so, `repair` answers it keeping every other item, and later runs carry on."""
    model = ScriptedModel(
        [
            [function_call("refund", {"order": "A7"}, call_id="call_refund")],
            [assistant_message("Anything else?")],
        ]
    )
    agent = Agent(name="support", model=model, tools=[refund])
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        session = store.session("support-1")
        result = await Runner.run(agent, "refund order A7", session=session)
        assert result.interruptions
        report = await session.check()
        assert [(p.kind, p.index, p.ref) for p in report.problems] == [
            ("unanswered_call", 1, "call_refund")
        ]
        assert report.summary() == "1 unanswered tool call (2 items)"
        before = await session.get_items()
        fixed = await session.repair()
        assert fixed.problems == report.problems
        after = await session.get_items()
        assert after[:2] == before
        assert after[2] == {
            "type": "function_call_output",
            "call_id": "call_refund",
            "output": INTERRUPTED_OUTPUT,
        }
        assert (await session.check()).ok
        assert (await session.repair()).ok  # nothing left to do
        await Runner.run(agent, "what about my refund?", session=session)
        seen = model.last_call.input if model.last_call else []
        assert [item.get("call_id") for item in seen if "call_id" in item] == ["call_refund"] * 2
        assert (await session.check()).ok


async def test_duplicate_ids_from_runs_are_found_and_repaired(sqlite_url: str) -> None:
    """Two runs whose model gives its messages the same id (as the scripted model does)
    leave an id twice; repair keeps the second message without its id."""
    model = ScriptedModel([[assistant_message("first")], [assistant_message("second")]])
    agent = Agent(name="assistant", model=model)
    async with SessionStore(sqlite_url, create_tables=True) as store:
        session = store.session("dup")
        await Runner.run(agent, "one", session=session)
        await Runner.run(agent, "two", session=session)
        report = await session.check()
        assert report.count("duplicate_id") == 1 and report.problems[0].index == 3
        await session.repair()
        items = await session.get_items()
        assert [item.get("content") for item in items[::2]] == ["one", "two"]
        assert "id" in items[1] and "id" not in items[3]
        assert items[3]["content"][0]["text"] == "second"
        assert (await session.check()).ok


async def test_repair_on_read_mends_what_the_runner_reads(db_url: str) -> None:
    """With `repair_on_read`, the model gets the abandoned call with its output (the SDK
    would otherwise drop the call), an orphaned output is left out, and nothing stored
    changes."""
    model = ScriptedModel(
        [
            [function_call("refund", {"order": "B2"}, call_id="call_b2")],
            [assistant_message("Done.")],
        ]
    )
    agent = Agent(name="support", model=model, tools=[refund])
    async with SessionStore(db_url, create_tables=True) as store:
        plain = store.session("support-2")
        await Runner.run(agent, "refund order B2", session=plain)
        await plain.add_items([output("lost_call")])
        stored = await plain.get_items()
        assert (await plain.check()).count("orphan_output") == 1
        mending = store.session("support-2", repair_on_read=True)
        read = await mending.get_items()
        assert read == [*stored[:2], {**output("call_b2"), "output": INTERRUPTED_OUTPUT}]
        await Runner.run(agent, "and now?", session=mending)
        seen = model.last_call.input if model.last_call else []
        assert kinds(seen) == ["message", "function_call", "function_call_output", "message"]
        stored_now = await plain.get_items()
        assert stored_now[:3] == stored  # still as written, the new turn after it
        assert await mending.get_items(limit=2) == stored_now[-2:]
        # A limited read stays within its limit: the outputs a repair adds count.
        await plain.add_items([{**FUNCTION_CALL, "call_id": "call_c3"}])
        [call_c3] = await plain.get_items(limit=1)
        answered = {**output("call_c3"), "output": INTERRUPTED_OUTPUT}
        assert await mending.get_items(limit=2) == [call_c3, answered]  # not 3 items
        assert await mending.get_items(limit=1) == []  # the call alone: not a history


async def test_repair_leaves_a_branched_session_alone(sqlite_url: str) -> None:
    async with SessionStore(sqlite_url, create_tables=True, search=False) as store:
        session = store.session("branched")
        await session.add_items([USER, ASSISTANT, output("orphan")])
        await session.create_branch_from_turn(1, "retry")
        with pytest.raises(BranchError, match="branches"):
            await session.repair()
        assert (await session.check()).ok  # the new branch holds no orphan yet
        await session.switch_to_branch("main")
        assert (await session.check()).count("orphan_output") == 1


async def test_repaired_items_keep_their_own_times_and_expiry(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Repair rewrote every kept item with one creation time and the longest expiry (none,
    if one item had none): an item past its TTL came back after a repair. Each now keeps
    its own `created_at` and `expires_at`, an answer made up for a call takes the call's."""
    call = {**FUNCTION_CALL, "call_id": "call_left"}
    orphan = {**FUNCTION_OUTPUT, "call_id": "call_gone"}
    async with SessionStore(db_url, create_tables=True) as store:
        await store.session("r").add_items([USER])
        await store.session("r", ttl=60).add_items([{**USER, "content": "card 4111"}, call])
        await store.session("r").add_items([orphan])
        times = "SELECT seq, created_at, expires_at FROM agents_sqlalchemy_items ORDER BY seq"
        before = await raw_rows(db_url, times)
        report = await store.session("r").repair()
        assert [p.kind for p in report.problems] == ["unanswered_call", "orphan_output"]
        after = await raw_rows(db_url, times)
        answered = {**FUNCTION_OUTPUT, "call_id": "call_left", "output": INTERRUPTED_OUTPUT}
        assert await store.session("r").get_items() == [
            USER,
            {**USER, "content": "card 4111"},
            call,
            answered,
        ]
        # USER, the card and the call as they were; the answer as the call.
        assert [row[1:] for row in after] == [row[1:] for row in before[:3]] + [before[2][1:]]
        travel(monkeypatch, timedelta(seconds=61))
        assert await store.session("r").get_items() == [USER]
