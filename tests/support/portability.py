"""What the export tests fill a store with: two users' sessions, run by the Runner with a tool,
usage per turn, state, a branch and an archived session."""

from __future__ import annotations

from agents import Agent, Runner
from agents.testing import ScriptedModel

from agents_sqlalchemy import SessionStore

from .items import message
from .runs import lookup, steps


async def fill(store: SessionStore) -> None:
    """Alice: a session run by the Runner (usage per turn, a tool) with a branch that ran
    too, and state; an archived session of plain items; Bob: one session."""
    agent = Agent(name="a", model=ScriptedModel([*steps(1), *steps(2), *steps(3)]), tools=[lookup])
    chat = store.session("chat-1", user_id="alice", metadata={"channel": "web", "n": 1})
    await Runner.run(agent, "one", session=chat)
    await Runner.run(agent, "two", session=chat)
    await chat.set_state("cart", {"items": ["tea", "ça"], "total": 12.5})
    await chat.set_state("step", 3)
    await chat.create_branch_from_turn(2, "retry")
    await Runner.run(agent, "two, again", session=chat)
    plain = store.session("chat-2", user_id="alice")
    await plain.add_items([{"role": "system", "content": "be brief"}, message("héllo 日本")])
    await plain.add_items([{"role": "assistant", "content": "hi", "extra": [1, None, True]}])
    await store.archive_session("chat-2")
    await store.session("bob-1", user_id="bob").add_items([message("not alice's")])
