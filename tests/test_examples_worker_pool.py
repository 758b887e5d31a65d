"""examples/worker_pool.py: four processes answer three sessions; no turn interleaves."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agents_sqlalchemy import SessionStore

pytestmark = pytest.mark.slow  # four worker processes

SCRIPT = Path(__file__).resolve().parent.parent / "examples" / "worker_pool.py"


async def transcripts(url: str, session_ids: list[str]) -> dict[str, list[Any]]:
    async with SessionStore(url) as store:
        return {sid: await store.session(sid).get_items() for sid in session_ids}


def reply_text(item: dict[str, Any]) -> str:
    assert (item["type"], item["role"]) == ("message", "assistant"), item
    return str(item["content"][0]["text"])


def test_four_workers_never_interleave_the_turns_of_a_session(db_url: str) -> None:
    env = {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"}
    args = [db_url, "--workers", "4", "--sessions", "3", "--messages", "6"]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "18 turns by 4 workers" in done.stdout
    assert "(from when all had started)" in done.stdout  # start-up is not timed
    workers = [line for line in done.stdout.splitlines() if line.startswith("worker ")]
    assert len(workers) == 4
    assert sum(int(line.split()[2]) for line in workers) == 18

    found = asyncio.run(transcripts(db_url, ["pool-0", "pool-1", "pool-2"]))
    for session_id, items in found.items():
        assert len(items) == 12
        users = items[0::2]
        assert {item["role"] for item in users} == {"user"}
        sent = sorted(f"{session_id} message {n}" for n in range(6))
        assert sorted(item["content"] for item in users) == sent
        for turn, (user, reply) in enumerate(zip(users, items[1::2], strict=True)):
            # Its own reply, given exactly the complete turns before it and the new message.
            assert reply_text(reply) == f"re: {user['content']} (saw {2 * turn + 1} items)"
