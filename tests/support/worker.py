"""Work done in another Python process by the tests: `python -m tests.support.worker COMMAND ...`.

- `run URL SESSION TEXT`: one Runner.run turn with a scripted model that replies "seen N".
- `write URL SESSION WRITER BATCHES`: append BATCHES batches of 3 tagged items.
- `pop URL SESSION COUNT`: pop COUNT times, print the popped items as JSON lines.
- `branch URL SESSION TURN NAME`: create branch NAME from TURN; print it, or the error's name.
- `write-branch URL SESSION BRANCH WRITER BATCHES`: `write`, on branch BRANCH.

Only `run` loads the Agents SDK (about 2.5 s a process): the library does not need it to
write, pop or branch, and the races start many of these processes.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import TYPE_CHECKING

from agents_sqlalchemy import BranchError, SessionStore

if TYPE_CHECKING:
    from agents.testing import ScriptedModel


def counting_model() -> ScriptedModel:
    """Replies with how many input items it was given, so a caller can see the history."""
    from agents.testing import ModelStep, ScriptedModel, assistant_message

    return ScriptedModel(
        [ModelStep.respond(lambda call: [assistant_message(f"seen {len(call.input)}")])]
    )


async def run(url: str, session_id: str, text: str) -> None:
    from agents import Agent, Runner

    async with SessionStore(url) as store:
        agent = Agent(name="worker", model=counting_model())
        result = await Runner.run(agent, text, session=store.session(session_id))
        print(result.final_output)


async def write(
    url: str, session_id: str, writer: int, batches: int, branch: str | None = None
) -> None:
    async with SessionStore(url) as store:
        session = store.session(session_id)
        if branch is not None:
            await session.switch_to_branch(branch)
        for batch in range(batches):
            await session.add_items(
                [{"role": "user", "content": json.dumps([writer, batch, i])} for i in range(3)]
            )


async def pop(url: str, session_id: str, count: int) -> None:
    async with SessionStore(url) as store:
        session = store.session(session_id)
        for _ in range(count):
            print(json.dumps(await session.pop_item()), flush=True)


async def branch(url: str, session_id: str, turn: int, name: str) -> None:
    async with SessionStore(url) as store:
        try:
            print(await store.session(session_id).create_branch_from_turn(turn, name))
        except BranchError:
            print("BranchError")


if __name__ == "__main__":
    command, url, session_id, *rest = sys.argv[1:]
    if command == "run":
        asyncio.run(run(url, session_id, rest[0]))
    elif command == "write":
        asyncio.run(write(url, session_id, int(rest[0]), int(rest[1])))
    elif command == "pop":
        asyncio.run(pop(url, session_id, int(rest[0])))
    elif command == "branch":
        asyncio.run(branch(url, session_id, int(rest[0]), rest[1]))
    elif command == "write-branch":
        asyncio.run(write(url, session_id, int(rest[1]), int(rest[2]), branch=rest[0]))
    else:
        raise SystemExit(f"unknown command {command!r}")
