"""`sessions show --branch/--usage` and `sessions usage`, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from agents.run_context import RunContextWrapper
from agents.usage import Usage

from agents_sqlalchemy import SessionStore
from agents_sqlalchemy.repository import schema as repository_module

from .support.cli import cli
from .support.items import message
from .support.tables import raw_rows

T0 = datetime(2026, 11, 29, 14, 3, 27, tzinfo=timezone.utc)


def reply(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def ran(tokens: int) -> RunContextWrapper[Any]:
    """A Runner's context after one model call of `tokens` input tokens."""
    return RunContextWrapper(None, Usage(requests=1, input_tokens=tokens, total_tokens=tokens))


def seed(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """alice's "chat" (two turns on main, a branch retrying the second) and bob's "other",
    recorded on T0; alice's "later" a day after."""
    now = [T0]
    monkeypatch.setattr(repository_module, "utcnow", lambda: now[0])

    async def turn(session: Any, n: int, tokens: int, answer: str = "answer") -> None:
        await session.add_items([message(f"question {n}")])
        await session.add_items([reply(f"{answer} {n}")], wrapper=ran(tokens))

    async def write() -> None:
        async with SessionStore(url, create_tables=True) as store:
            chat = store.session("chat", user_id="alice")
            await turn(chat, 1, 100)
            await turn(chat, 2, 200)
            await chat.create_branch_from_turn(2, "retry")
            await turn(chat, 2, 50, answer="retried")
            await turn(store.session("other", user_id="bob"), 1, 1000)
            await store.session("plain", user_id="carol").add_items([message("hi")])
            now[0] = T0 + timedelta(days=1)
            await turn(store.session("later", user_id="alice"), 1, 7)

    asyncio.run(write())


def test_show_a_branch_and_its_usage(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seed(db_url, monkeypatch)
    result = cli("sessions", "show", "chat", "--url", db_url, "--branch", "retry", "--usage")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "Items     4" in lines
    assert "Branches  main (4 items), retry* (4 items)" in lines
    assert [line for line in lines if line.startswith("[")] == [
        "[1] user: question 1",
        "[2] assistant: answer 1",
        "[3] user: question 2",
        "[4] assistant: retried 2",
    ]
    usage = [re.split(r" {2,}", line.strip()) for line in lines[lines.index("") + 1 :]]
    assert usage[-3:] == [
        ["TURN", "REQUESTS", "INPUT", "OUTPUT", "TOTAL"],
        ["2", "1", "50", "0", "50"],
        ["all", "1", "50", "0", "50"],
    ]

    main = cli("sessions", "show", "chat", "--url", db_url, "--usage", "--json")
    shown = json.loads(main.output)
    assert shown["branch"] == "main" and len(shown["items"]) == 4
    assert [(row["user_turn_number"], row["input_tokens"]) for row in shown["usage"]] == [
        (1, 100),
        (2, 200),
    ]
    assert [b["branch_id"] for b in shown["branches"]] == ["main", "retry"]

    missing = cli("sessions", "show", "chat", "--url", db_url, "--branch", "nope")
    assert missing.exit_code == 1
    assert "no branch 'nope' in this session (it has: main, retry)" in missing.output


def test_show_writes_nothing_for_a_session_that_never_branched(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(db_url, monkeypatch)
    before = asyncio.run(raw_rows(db_url, "SELECT COUNT(*) FROM agents_sqlalchemy_branches"))
    result = cli("sessions", "show", "plain", "--url", db_url, "--usage")
    assert result.exit_code == 0, result.output
    assert "Branches" not in result.output
    assert "(no usage recorded)" in result.output
    after = asyncio.run(raw_rows(db_url, "SELECT COUNT(*) FROM agents_sqlalchemy_branches"))
    assert before == after


def test_usage_sums_per_day_and_user(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seed(db_url, monkeypatch)
    result = cli("sessions", "usage", "--url", db_url)
    assert result.exit_code == 0, result.output
    rows = [re.split(r" {2,}", line.strip()) for line in result.output.splitlines()]
    assert rows == [
        ["DAY (UTC)", "USER", "TURNS", "REQUESTS", "INPUT", "OUTPUT", "TOTAL"],
        ["2026-11-29", "alice", "3", "3", "350", "0", "350"],
        ["2026-11-29", "bob", "1", "1", "1,000", "0", "1,000"],
        ["2026-11-30", "alice", "1", "1", "7", "0", "7"],
        ["total", "5", "5", "1,357", "0", "1,357"],
    ]
    alice = cli("sessions", "usage", "--url", db_url, "--user", "alice", "--json")
    assert [json.loads(line) for line in alice.output.splitlines()] == [
        {"day": "2026-11-29", "user_id": "alice", "turns": 3, "requests": 3}
        | {"input_tokens": 350, "output_tokens": 0, "total_tokens": 350},
        {"day": "2026-11-30", "user_id": "alice", "turns": 1, "requests": 1}
        | {"input_tokens": 7, "output_tokens": 0, "total_tokens": 7},
    ]
    later = cli("sessions", "usage", "--url", db_url, "--since", "2026-11-30")
    assert [line.split()[0] for line in later.output.splitlines()[1:]] == ["2026-11-30", "total"]
    none = cli("sessions", "usage", "--url", db_url, "--user", "carol")
    assert none.output == "No usage recorded.\n"
