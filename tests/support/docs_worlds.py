"""The databases the docs' shell blocks talk about, made for real so that the blocks run.

Each page whose commands read a database (`sessions list`, `sessions show`, `search`, ...)
has a world here: a function that writes, in the current directory, what the page's
commands expect to find (`agent.db` with the sessions it shows, the SDK's
`conversations.db`). They write through the library, the SDK's real `Runner` (its scripted
model answering as the page shows) and the SDK's own `SQLiteSession`; only the times that
the pages show as past are set by SQL.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from agents import Agent, Runner, SQLiteSession, set_tracing_disabled
from agents.testing import ModelStep, ScriptedModel, assistant_message
from agents.usage import Usage

from agents_sqlalchemy import SessionStore

#: The key the pages' `AGENTS_SQLALCHEMY_KEY=...` lines name (the passphrase "...").
PAGE_KEY = "..."


def _message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": text}


async def management() -> None:
    """support-42 (alice's, encrypted, seven items ending with a tool call), 12 expired
    items, and three sessions idle for 100 days holding 41 items between them."""
    async with SessionStore("agent.db", create_tables=True, key=PAGE_KEY) as store:
        session = store.session("support-42", user_id="alice", metadata={"channel": "web"})
        await session.update_metadata({"tier": 2})
        await session.add_items(
            [
                _message("user", "Hello"),
                _message("assistant", "Hi! How can I help?"),
                _message("user", "What is the weather in Zürich?"),
                _message("assistant", "Let me look it up."),
                {
                    "type": "function_call",
                    "call_id": "call_1",
                    "name": "lookup_weather",
                    "arguments": '{"city": "Zürich", "units": "metric"}',
                },
                {
                    "type": "function_call_output",
                    "call_id": "call_1",
                    "output": '{"temp_c": 21.5, "sky": "☀️"}',
                },
                _message("assistant", "It is 21.5 °C and sunny."),
            ]
        )
        brief = store.session("otp-codes", user_id="bob", ttl=timedelta(microseconds=1))
        await brief.add_items([_message("user", f"code {n}") for n in range(12)])
        for n, count in enumerate((14, 14, 13)):
            idle = store.session(f"old-{n}", user_id="bob")
            await idle.add_items([_message("user", f"old {k}") for k in range(count)])
    past = (datetime.now(timezone.utc) - timedelta(days=100)).strftime("%Y-%m-%d %H:%M:%S.%f")
    with sqlite3.connect("agent.db") as db:
        db.execute(
            "UPDATE agents_sqlalchemy_sessions SET updated_at = ? WHERE session_id LIKE 'old-%'",
            (past,),
        )


#: The replies and token usage of each run of the branches page's trip.
TRIP = [
    ("Plan a day in Lisbon.", "Tram 28, Alfama, Belém.", 150),
    ("Add a museum in the afternoon.", "The Gulbenkian at 2 pm.", 160),
    ("And dinner near the river.", "Time Out Market at 8 pm.", 170),
    ("Add a beach in the afternoon instead.", "Carcavelos beach at 3 pm.", 165),
]


def _agent(reply: str, input_tokens: int) -> Agent[Any]:
    usage = Usage(
        requests=1, input_tokens=input_tokens, output_tokens=30, total_tokens=input_tokens + 30
    )
    step = ModelStep(output=[assistant_message(reply)], usage=usage)
    return Agent(name="Guide", model=ScriptedModel([step]))


async def branches() -> None:
    """trip-7: three turns on main, a branch `retry` from turn 2 and one turn on it."""
    set_tracing_disabled(True)  # a scripted model: no traces to send
    async with SessionStore("agent.db", create_tables=True) as store:
        session = store.session("trip-7", user_id="alice")
        for question, reply, tokens in TRIP[:3]:
            await Runner.run(_agent(reply, tokens), question, session=session)
        await session.create_branch_from_turn(2, "retry")
        question, reply, tokens = TRIP[3]
        await Runner.run(_agent(reply, tokens), question, session=session)


async def search() -> None:
    """The search page's `ops` session, alice's."""
    async with SessionStore("agent.db", create_tables=True) as store:
        await store.session("ops", user_id="alice").add_items(
            [
                _message("user", "the deployment failed because the disk was full"),
                _message("user", "lunch plans for friday"),
            ]
        )


async def encryption() -> None:
    """An encrypted database under the old passphrase of the page's rotation."""
    async with SessionStore("agent.db", create_tables=True, key="the old passphrase") as store:
        await store.session("s").add_items([_message("user", "sealed")])


async def migrations() -> None:
    """The SDK's own SQLite file, `conversations.db`, with one conversation."""
    session = SQLiteSession("user-123", "conversations.db")
    await session.add_items([_message("user", "hi"), _message("assistant", "hello")])
    session.close()


WORLDS: dict[str, Callable[[], Awaitable[None]]] = {
    "docs/guide/management.md": management,
    "docs/guide/branches.md": branches,
    "docs/guide/search.md": search,
    "docs/guide/encryption.md": encryption,
    "docs/guide/migrations.md": migrations,
}
