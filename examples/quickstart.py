"""Quick start: a conversation that continues in a second process, kept in SQLite.

    make demo                      # or: python examples/quickstart.py

With OPENAI_API_KEY set the agent uses OpenAI's default model; without it, an offline
stand-in model answers (and says that it is one), so the demo runs anywhere.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from agents import Agent, Runner, set_tracing_disabled
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message

from agents_sqlalchemy import SessionStore

DATABASE = Path(__file__).with_name("quickstart.db")
SESSION_ID = "quickstart-user-123"


def offline_reply(call: ModelCall) -> list[Any]:
    """What the offline stand-in says: it only recalls facts stated earlier in the session."""
    history = " ".join(str(item.get("content", "")) for item in call.input)
    found = re.search(r"my dog is called (\w+)", history, re.IGNORECASE)
    turns = sum(1 for item in call.input if item.get("role") == "user")
    if turns == 1:
        text = "Noted."
    elif found:
        text = f"Your dog is called {found.group(1)}."
    else:
        text = "I don't know yet."
    note = f"[offline demo model, no OPENAI_API_KEY; given {len(call.input)} items] "
    return [assistant_message(note + text)]


def make_agent() -> Agent:
    if os.environ.get("OPENAI_API_KEY"):
        return Agent(name="assistant", instructions="Answer in one short sentence.")
    set_tracing_disabled(True)
    model = ScriptedModel([ModelStep.respond(offline_reply)])
    return Agent(name="assistant", model=model)


async def turn(text: str, *, fresh: bool = False) -> None:
    async with SessionStore(DATABASE, create_tables=True) as store:
        session = store.session(SESSION_ID, user_id="alice", metadata={"channel": "demo"})
        if fresh:
            await session.clear_session()
        result = await Runner.run(make_agent(), text, session=session)
        print(f"[process {os.getpid()}] user: {text}")
        print(f"[process {os.getpid()}] assistant: {result.final_output}")
        stored = await session.get_items()
        print(f"[process {os.getpid()}] {len(stored)} items stored in {DATABASE.name}")


def main() -> None:
    if sys.argv[1:] == ["--second-process"]:
        asyncio.run(turn("What is my dog called?"))
        return
    asyncio.run(turn("Remember: my dog is called Mochi.", fresh=True))
    # A new Python process opens the same file and continues the conversation.
    subprocess.run([sys.executable, __file__, "--second-process"], check=True)


if __name__ == "__main__":
    main()
