"""Fill a demo database for the session browser, then serve it (`make ui-demo`).

Several users, conversations run by the Agents SDK's real `Runner` (a scripted model, so
nothing goes over the network) with tool calls, a tool that fails, reasoning, token usage
on several days, branches, and a run that stopped before its tool answered.

    python examples/ui_demo.py demo.db            # fill demo.db (replaced) and serve it
    python examples/ui_demo.py demo.db --fill     # only fill it
"""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.usage import Usage

from agents_sqlalchemy import SessionStore

set_tracing_disabled(True)

WEATHER = {"Zürich": "21.5 °C, sunny", "Oslo": "4 °C, rain", "Lisbon": "19 °C, clear"}


@function_tool
def lookup_weather(city: str) -> str:
    """The weather in a city."""
    if city not in WEATHER:
        raise ValueError(f"no station near {city}")
    return json.dumps({"city": city, "weather": WEATHER[city]}, ensure_ascii=False)


@function_tool
def create_ticket(title: str, priority: str) -> str:
    """Open a support ticket."""
    return json.dumps({"ticket": f"T-{abs(hash(title)) % 9000 + 1000}", "priority": priority})


def reasoning(text: str, item_id: str) -> dict[str, Any]:
    return {"type": "reasoning", "id": item_id, "summary": [{"type": "summary_text", "text": text}]}


def answer(text: str) -> Any:
    """The model's message, with an id of its own (the API refuses a history that holds
    one id twice, and the browser marks it)."""
    return assistant_message(text, item_id=f"msg_{next(_MESSAGE_IDS)}")


_MESSAGE_IDS = itertools.count(1)


def usage(tokens: int) -> Usage:
    return Usage(
        requests=1, input_tokens=tokens, output_tokens=tokens // 4, total_tokens=tokens * 5 // 4
    )


class Script:
    """One conversation: what the user says, and what the model answers (steps)."""

    def __init__(self, turns: list[tuple[str, list[list[Any]]]], tokens: int) -> None:
        self.turns, self.tokens = turns, tokens


def weather_turn(city: str, n: int) -> tuple[str, list[list[Any]]]:
    call = f"call_{city.lower()}_{n}"
    found = WEATHER.get(city)
    reply = f"In {city} it is {found}." if found else f"I could not get the weather in {city}."
    return (
        f"What is the weather in {city}?",
        [
            [
                reasoning(f"The user asks about {city}: call the weather tool.", f"rs_{call}"),
                function_call("lookup_weather", {"city": city}, call_id=call),
            ],
            [answer(reply)],
        ],
    )


def chat_turn(question: str, reply: str) -> tuple[str, list[list[Any]]]:
    return question, [[answer(reply)]]


def ticket_turn(title: str) -> tuple[str, list[list[Any]]]:
    call = f"call_ticket_{abs(hash(title)) % 1000}"
    return (
        f"Please open a ticket: {title}",
        [
            [function_call("create_ticket", {"title": title, "priority": "high"}, call_id=call)],
            [answer(f"Done: a high-priority ticket for “{title}” is open.")],
        ],
    )


SCRIPTS: dict[tuple[str, str], Script] = {
    ("alice", "trip-planning"): Script(
        [
            weather_turn("Zürich", 1),
            weather_turn("Oslo", 2),
            chat_turn("Which one is warmer?", "Zürich, by about 17 degrees."),
            weather_turn("Atlantis", 3),
        ],
        900,
    ),
    ("alice", "dog-names"): Script(
        [
            chat_turn("Remember: my dog is called Mochi 🐶.", "Noted: your dog is Mochi."),
            chat_turn("What is my dog called?", "Your dog is called Mochi."),
        ],
        300,
    ),
    ("bob", "support-42"): Script(
        [
            chat_turn("The export button does nothing.", "Which browser are you using?"),
            chat_turn("Firefox 128 on Linux.", "Thanks. Let me open a ticket for this."),
            ticket_turn("Export button unresponsive in Firefox 128"),
        ],
        1500,
    ),
    ("bob", "weather-check"): Script([weather_turn("Lisbon", 1)], 600),
    ("carol", "release-notes"): Script(
        [
            chat_turn("Summarise the 2.0 release notes.", "2.0 adds branching, search and a UI."),
            chat_turn("What broke in 2.0?", "The old export format was removed."),
            chat_turn("Draft a migration note.", "Export with 1.x first, then upgrade."),
        ],
        2400,
    ),
    ("dave", "sql-help"): Script(
        [chat_turn("How do I page through 100,000 rows?", "Use keyset pagination, not OFFSET.")],
        400,
    ),
}


async def run_script(
    store: SessionStore, user: str, session_id: str, script: Script, day: int
) -> None:
    steps = [step for _, replies in script.turns for step in replies]
    model = ScriptedModel(steps, default_usage=usage(script.tokens))
    agent = Agent(name="assistant", model=model, tools=[lookup_weather, create_ticket])
    session = store.session(
        session_id,
        user_id=user,
        metadata={"channel": "web" if day % 2 else "app", "tier": day % 3 + 1},
    )
    for question, _ in script.turns:
        await Runner.run(agent, question, session=session)


async def fill(url: str, *, now: Any = None) -> None:
    """Write the demo conversations into `url` (tables created), spread over past days when
    `now` (a one-element list holding the clock's time) can be moved."""
    start = datetime.now(timezone.utc) - timedelta(days=len(SCRIPTS))
    async with SessionStore(url, create_tables=True) as store:
        for day, ((user, session_id), script) in enumerate(SCRIPTS.items()):
            if now is not None:
                now[0] = start + timedelta(days=day, hours=9 + day)
            await run_script(store, user, session_id, script, day)
        # A branch: alice retries the weather question of turn 2 with another city.
        trip = store.session("trip-planning")
        await trip.create_branch_from_turn(2, "retry-lisbon")
        agent = Agent(
            name="assistant",
            model=ScriptedModel(weather_turn("Lisbon", 9)[1], default_usage=usage(700)),
            tools=[lookup_weather],
        )
        await Runner.run(agent, "What is the weather in Lisbon?", session=trip)
        # A run that stopped between the model's tool call and the tool's answer (the
        # process died): the history the model API would now refuse, as the browser marks.
        await store.session("support-42").add_items(
            [
                {"role": "user", "content": "Is the ticket fixed yet?"},
                {
                    "type": "function_call",
                    "call_id": "call-interrupted",
                    "name": "create_ticket",
                    "arguments": json.dumps({"title": "Follow-up", "priority": "low"}),
                },
            ]
        )
        await store.archive_session("weather-check")
        await store.flush()


def backdating() -> list[datetime]:
    """A clock the store's writes read (the repository's, which tests move too), so the
    demo spreads over past days."""
    from agents_sqlalchemy.repository import schema

    now = [datetime.now(timezone.utc)]
    schema.utcnow = lambda: now[0]
    return now


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "ui-demo.db")
    path.unlink(missing_ok=True)
    asyncio.run(fill(str(path), now=backdating()))
    print(f"Filled {path} with {len(SCRIPTS)} sessions of {len({u for u, _ in SCRIPTS})} users")
    if "--fill" not in sys.argv:
        command = [sys.executable, "-m", "agents_sqlalchemy.cli", "ui", "--url", str(path)]
        subprocess.run([*command, *[a for a in sys.argv[2:] if a != "--fill"]], check=False)


if __name__ == "__main__":
    main()
