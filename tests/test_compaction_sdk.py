"""The SDK's own `OpenAIResponsesCompactionSession` over our session, driven by the real
`Runner`: it must take our atomic hooks, never its clear-then-add fallback.

Only `client.responses.compact` is a stand-in (`CompactEndpoint`, a fixed output).
"""

from __future__ import annotations

import os
import time

import agents.memory.session as sdk_session
import pytest
from agents import RunConfig, Runner
from agents.extensions.memory import EncryptedSession
from agents.memory import SessionSettings

from agents_sqlalchemy import SessionStore

from .support.compaction import (
    SUMMARY,
    CompactEndpoint,
    HookCalls,
    compacting,
    hooks,
    replying_agent,
    turns,
)
from .support.items import message, texts

__all__ = ["hooks"]  # the fixture, imported to be found by pytest

KEY = os.urandom(32)
SDK_CHANGED = (
    "the installed openai-agents no longer calls {hook}: compaction falls back to "
    "clear_session() + add_items(), which a crash in between empties; adapt the hooks "
    "(session.py) to this SDK version, or keep the upper bound on openai-agents in pyproject.toml"
)


@pytest.fixture(params=[None, KEY], ids=["plain", "sealed"])
def key(request: pytest.FixtureRequest) -> bytes | None:
    return request.param  # type: ignore[no-any-return]


async def test_the_sdk_still_calls_our_hooks(sqlite_url: str, hooks: HookCalls) -> None:
    assert hasattr(sdk_session, "_CompactionSnapshot"), SDK_CHANGED.format(hook="snapshots")
    async with SessionStore(sqlite_url, create_tables=True) as store:
        ours = store.session("s")
        await turns(ours, 3)
        await turns(compacting(ours, CompactEndpoint()), 1, "last")
        assert hooks.snapshots, SDK_CHANGED.format(hook="_get_compaction_snapshot")
        assert hooks.suffixes == [True] and hooks.cleared == 0, SDK_CHANGED.format(
            hook="replace_suffix"
        )
        await compacting(ours, CompactEndpoint()).run_compaction({"force": True})
        assert hooks.replaced_all == [2], SDK_CHANGED.format(hook="_atomic_replace_items")
        assert hooks.cleared == 0, SDK_CHANGED.format(hook="_atomic_replace_items")
        assert await ours.get_items() == SUMMARY


async def test_manual_compaction(db_url: str, key: bytes | None, hooks: HookCalls) -> None:
    async with SessionStore(db_url, create_tables=True, key=key, search=True) as store:
        ours = store.session("s", user_id="u")
        await turns(ours, 3)
        old = await ours.get_items()
        endpoint = CompactEndpoint()
        await compacting(ours, endpoint).run_compaction({"force": True})
        assert endpoint.calls[0]["input"] == old
        assert hooks.atomic() and hooks.replaced_all == [2]
        assert await ours.get_items() == SUMMARY
        assert [info.item_count for info in await store.list_sessions(user_id="u")] == [2]
        assert await ours.search("Mochi", limit=5, mode="keyword") == [SUMMARY[0]]


async def test_automatic_compaction_after_a_run(
    db_url: str, key: bytes | None, hooks: HookCalls
) -> None:
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        ours = store.session("s")
        await turns(ours, 3)
        endpoint = CompactEndpoint()
        await turns(compacting(ours, endpoint), 1, "last")
        assert len(endpoint.calls) == 1
        assert hooks.atomic() and hooks.suffixes == [True] and not hooks.replaced_all
        assert await ours.get_items() == SUMMARY
        # The next turn sees the compacted history and builds on it.
        await turns(compacting(ours, CompactEndpoint(), trigger=False), 1, "next")
        assert texts(await ours.get_items()) == [
            "summary: the dog is called Mochi 🐶",
            "next 0: tell me about Mochi",
            "next 0",
        ]


async def test_history_outside_the_window_survives(db_url: str, hooks: HookCalls) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        ours = store.session("s", session_settings=SessionSettings(limit=4))
        await turns(ours, 6)
        old = await ours.get_items(limit=100)
        assert len(old) == 12
        endpoint = CompactEndpoint()
        await turns(compacting(ours, endpoint), 1, "last")
        # The model saw the latest 4 items and the new input: that is what was compacted.
        assert texts(endpoint.calls[0]["input"]) == [
            *texts(old[-4:]),
            "last 0: tell me about Mochi",
            "last 0",
        ]
        assert hooks.atomic() and hooks.suffixes == [True]
        assert await ours.get_items(limit=100) == old[:-4] + SUMMARY


async def test_a_window_given_to_the_runner_keeps_manual_compaction_whole(
    db_url: str, hooks: HookCalls
) -> None:
    """With the window in RunConfig rather than on the session, automatic compaction still
    keeps what the model did not see, and manual compaction sends all it replaces."""
    async with SessionStore(db_url, create_tables=True) as store:
        ours = store.session("s")
        await turns(ours, 6)
        old = await ours.get_items()
        endpoint = CompactEndpoint()
        compaction = compacting(ours, endpoint)
        window = RunConfig(session_settings=SessionSettings(limit=4))
        await Runner.run(replying_agent(1, "last"), "last 0", session=compaction, run_config=window)
        assert len(endpoint.calls[0]["input"]) == 6
        assert await ours.get_items() == old[:-4] + SUMMARY

        await compaction.run_compaction({"force": True, "compaction_mode": "input"})
        assert texts(endpoint.calls[1]["input"]) == texts(old[:-4] + SUMMARY)
        assert hooks.atomic() and hooks.replaced_all == [2]
        assert await ours.get_items() == SUMMARY


async def test_a_concurrent_writer_makes_the_replacement_refused(
    db_url: str, hooks: HookCalls
) -> None:
    async with SessionStore(db_url, create_tables=True) as store, SessionStore(db_url) as other:
        ours = store.session("s")
        await turns(ours, 3)

        async def another_writer() -> None:  # runs between the snapshot and the replacement
            await other.session("s").add_items([message("written by another process")])

        await turns(compacting(ours, CompactEndpoint(during=another_writer)), 1, "last")
        assert hooks.suffixes == [False] and hooks.cleared == 0
        stored = texts(await ours.get_items())
        assert len(stored) == 9  # 3 turns, the last turn, and the other writer's item
        assert stored[-3:] == [
            "last 0: tell me about Mochi",
            "last 0",
            "written by another process",
        ]


async def test_a_branch_made_meanwhile_keeps_its_items(db_url: str, hooks: HookCalls) -> None:
    """A branch made between the snapshot and the replacement (another process) shares the
    items the replacement deleted: it held only its own item afterwards, no turn 1. The
    replacement is refused now, with nothing changed."""
    async with SessionStore(db_url, create_tables=True) as store, SessionStore(db_url) as other:
        ours = store.session("s")
        await turns(ours, 2)

        async def brancher() -> None:  # runs between the snapshot and the replacement
            theirs = other.session("s")
            await theirs.create_branch_from_turn(2, "side")
            await theirs.add_items([message("side q2")])

        side = [*texts(await ours.get_items())[:2], "side q2"]
        await turns(compacting(ours, CompactEndpoint(during=brancher)), 1, "last")
        assert hooks.suffixes == [False] and hooks.cleared == 0
        assert texts(await ours.get_items(branch_id="side")) == side
        assert [turn["turn"] for turn in await ours.get_conversation_turns("side")] == [1, 2]


async def test_the_sdk_encrypted_session_above_ours(
    db_url: str, hooks: HookCalls, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        ours = store.session("s")
        trigger = {"on": False}
        compaction = compacting(ours, CompactEndpoint())
        compaction.should_trigger_compaction = lambda context: trigger["on"]
        encrypted = EncryptedSession("s", compaction, encryption_key="k" * 32, ttl=600)

        real_time = time.time
        monkeypatch.setattr(time, "time", lambda: real_time() - 3600)
        await turns(encrypted, 2, "expired")  # envelopes sealed an hour ago: expired
        monkeypatch.setattr(time, "time", real_time)
        await turns(encrypted, 2, "fresh")
        assert len(await ours.get_items()) == 8
        assert texts(await encrypted.get_items()) == [
            "fresh 0: tell me about Mochi",
            "fresh 0",
            "fresh 1: tell me about Mochi",
            "fresh 1",
        ]

        trigger["on"] = True
        await turns(encrypted, 1, "last")
        assert hooks.atomic() and hooks.suffixes == [True]
        # The expired prefix went with the replacement; only the sealed summary is left.
        stored = await ours.get_items()
        assert len(stored) == 2 and all(item.get("__enc__") == 1 for item in stored)
        assert await encrypted.get_items() == SUMMARY

        trigger["on"] = False
        await turns(encrypted, 1, "more")
        await encrypted.run_compaction({"force": True})
        assert hooks.replaced_all == [2] and hooks.cleared == 0
        assert await encrypted.get_items() == SUMMARY
