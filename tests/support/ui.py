"""The session browser's test data: markup in every value the pages show, a secret word only
the items hold, and the demo's conversations (examples/ui_demo.py)."""

from __future__ import annotations

import asyncio
import importlib.util
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType

import pytest
from agents.run_context import RunContextWrapper
from agents.usage import Usage

from agents_sqlalchemy import SessionStore
from agents_sqlalchemy.repository import schema as repository_module

EVIL = '<script>alert("x")</script><b onmouseover=alert(1)>bold</b>'
EVIL_ID = '<img src=x onerror=alert(1)>"session"'
EVIL_USER = "<i>mallory</i>"
EVIL_BRANCH = "<svg onload=alert(2)>branch"
SECRET = "zebracorn-7731"  # a word only the items hold: never in a log
DEMO = Path(__file__).resolve().parents[2] / "examples" / "ui_demo.py"


def demo() -> ModuleType:
    """examples/ui_demo.py, loaded as a module."""
    spec = importlib.util.spec_from_file_location("ui_demo_example", DEMO)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fill_demo(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's conversations (the SDK's Runner, tools, usage), spread over six days."""
    now = [datetime.now(timezone.utc)]
    monkeypatch.setattr(repository_module, "utcnow", lambda: now[0])
    asyncio.run(demo().fill(url, now=now))
    monkeypatch.undo()


async def fill_evil(url: str, key: str | None = None) -> None:
    """Markup everywhere a value from the database is shown, and a secret word in items."""
    async with SessionStore(url, create_tables=True, key=key) as store:
        session = store.session(EVIL_ID, user_id=EVIL_USER, metadata={"<k>": EVIL})
        await session.add_items([{"role": "user", "content": f"{EVIL} {SECRET}"}])
        await session.add_items(
            [
                {"type": "function_call", "call_id": EVIL, "name": EVIL, "arguments": EVIL},
                {"type": "function_call_output", "call_id": EVIL, "output": EVIL},
                {"role": "assistant", "content": [{"type": "output_text", "text": EVIL}]},
            ],
            wrapper=RunContextWrapper(None, Usage(requests=1, input_tokens=5, total_tokens=5)),
        )
        await session.add_items([{"role": "user", "content": "second"}])
        await session.create_branch_from_turn(2, EVIL_BRANCH)
        await session.add_items([{"role": "user", "content": f"on the branch {EVIL}"}])
        await store.flush()
