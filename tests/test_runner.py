"""The SDK's real Runner drives our sessions; only the model is scripted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool
from agents.memory import SessionSettings
from agents.testing import ScriptedModel, assistant_message, function_call

from agents_sqlalchemy import SessionStore

from .support.items import texts

ROOT = Path(__file__).resolve().parent.parent


@function_tool
def lookup_pet(owner: str) -> str:
    """Look up the name of the owner's pet."""
    return f"{owner}'s dog is called Mochi"


@pytest.mark.pgbouncer
async def test_run_with_tools_then_history(db_url: str) -> None:
    model = ScriptedModel(
        [
            [function_call("lookup_pet", {"owner": "alice"}, call_id="call_1")],
            [assistant_message("Your dog is Mochi.")],
            [assistant_message("I remember: Mochi.")],
        ]
    )
    agent = Agent(name="assistant", model=model, tools=[lookup_pet])
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("runner")
        first = await Runner.run(agent, "What is my dog called?", session=session)
        assert first.final_output == "Your dog is Mochi."
        stored = await session.get_items()
        assert [item.get("type", "message") for item in stored] == [
            "message",
            "function_call",
            "function_call_output",
            "message",
        ]
        assert stored[2]["output"] == "alice's dog is called Mochi"
        await Runner.run(agent, "And again?", session=session)
        seen = model.last_call.input if model.last_call else []
        assert texts(seen) == [
            "What is my dog called?",
            "Your dog is Mochi.",
            "And again?",
        ]
        assert len(await session.get_items()) == 6


def test_run_sync(sqlite_url: str) -> None:
    model = ScriptedModel([[assistant_message("one")], [assistant_message("two")]])
    agent = Agent(name="assistant", model=model)
    store = SessionStore(sqlite_url, create_tables=True)
    session = store.session("sync")
    assert Runner.run_sync(agent, "first", session=session).final_output == "one"
    assert Runner.run_sync(agent, "second", session=session).final_output == "two"
    assert texts(model.last_call.input if model.last_call else []) == ["first", "one", "second"]


async def test_run_streamed(db_url: str) -> None:
    model = ScriptedModel([[assistant_message("streamed reply")]])
    agent = Agent(name="assistant", model=model)
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("stream")
        await session.add_items([{"role": "user", "content": "earlier"}])
        result = Runner.run_streamed(agent, "now", session=session)
        events = [event async for event in result.stream_events()]
        assert events
        assert result.final_output == "streamed reply"
        assert texts(await session.get_items()) == ["earlier", "now", "streamed reply"]


async def test_run_config_limit_and_input_callback(db_url: str) -> None:
    model = ScriptedModel([[assistant_message("a")], [assistant_message("b")]])
    agent = Agent(name="assistant", model=model)
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("limited")
        await session.add_items([{"role": "user", "content": str(i)} for i in range(10)])
        await Runner.run(
            agent,
            "limited",
            session=session,
            run_config=RunConfig(session_settings=SessionSettings(limit=3)),
        )
        assert texts(model.last_call.input if model.last_call else []) == [
            "7",
            "8",
            "9",
            "limited",
        ]

        async def keep_first_two(history: list[Any], new: list[Any]) -> list[Any]:
            return history[:2] + new

        await Runner.run(
            agent,
            "callback",
            session=session,
            run_config=RunConfig(session_input_callback=keep_first_two),
        )
        assert texts(model.last_call.input if model.last_call else []) == ["0", "1", "callback"]
        assert len(await session.get_items()) == 14


def run_in_process(url: str, session_id: str, text: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.worker", "run", url, session_id, text],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.slow
async def test_history_continues_in_another_process(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        await store.session("shared").get_items()  # tables exist before the child runs
    assert run_in_process(db_url, "shared", "hello from process one") == "seen 1"
    assert run_in_process(db_url, "shared", "hello from process two") == "seen 3"
    async with SessionStore(db_url) as store:
        assert texts(await store.session("shared").get_items()) == [
            "hello from process one",
            "seen 1",
            "hello from process two",
            "seen 3",
        ]
