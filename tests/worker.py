"""Work done in another Python process by the tests: `python -m tests.worker COMMAND ...`.

- `run URL SESSION TEXT`: one Runner.run turn with a scripted model that replies "seen N".
- `write URL SESSION WRITER BATCHES`: append BATCHES batches of 3 tagged items.
- `pop URL SESSION COUNT`: pop COUNT times, print the popped items as JSON lines.
"""

from __future__ import annotations

import asyncio
import json
import sys

from agents import Agent, Runner
from agents.testing import ModelStep, ScriptedModel, assistant_message

from agents_sqlalchemy import SessionStore


def counting_model() -> ScriptedModel:
    """Replies with how many input items it was given, so a caller can see the history."""
    return ScriptedModel(
        [ModelStep.respond(lambda call: [assistant_message(f"seen {len(call.input)}")])]
    )


async def run(url: str, session_id: str, text: str) -> None:
    async with SessionStore(url) as store:
        agent = Agent(name="worker", model=counting_model())
        result = await Runner.run(agent, text, session=store.session(session_id))
        print(result.final_output)


async def write(url: str, session_id: str, writer: int, batches: int) -> None:
    async with SessionStore(url) as store:
        session = store.session(session_id)
        for batch in range(batches):
            await session.add_items(
                [{"role": "user", "content": json.dumps([writer, batch, i])} for i in range(3)]
            )


async def pop(url: str, session_id: str, count: int) -> None:
    async with SessionStore(url) as store:
        session = store.session(session_id)
        for _ in range(count):
            print(json.dumps(await session.pop_item()), flush=True)


if __name__ == "__main__":
    command, url, session_id, *rest = sys.argv[1:]
    if command == "run":
        asyncio.run(run(url, session_id, rest[0]))
    elif command == "write":
        asyncio.run(write(url, session_id, int(rest[0]), int(rest[1])))
    elif command == "pop":
        asyncio.run(pop(url, session_id, int(rest[0])))
    else:
        raise SystemExit(f"unknown command {command!r}")
