"""A compaction killed with SIGKILL at random points leaves the old history or the new one,
never a mix and never nothing: on SQLite and PostgreSQL, manual and automatic compaction.

Each child process compacts its own session (tests/support/crash_worker.py) and is killed at a
random delay after the compaction request returns, spread over twice the time the
replacement takes (measured first), so that kills land before, inside and after its
transaction.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import random
import time
from collections import Counter
from collections.abc import Iterator
from multiprocessing.context import BaseContext
from typing import Any

import pytest

from agents_sqlalchemy import SessionStore

from .support.compaction import turns
from .support.crash_worker import compact, compacted

pytestmark = pytest.mark.slow  # child processes, killed and restarted

KILLS = 24  # per dialect, half of them manual compactions, half automatic
MODES = ("manual", "automatic")


@pytest.fixture(scope="module")
def forkserver() -> Iterator[BaseContext]:
    """Children forked from a server that has imported the SDK and the library once."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tests.support.crash_worker"])
    yield context


class Child:
    """One compaction in a child process: started warm, then told to go, then killed."""

    def __init__(self, context: Any, url: str, session_id: str, mode: str) -> None:
        self._signals, theirs = context.Pipe()
        self.process = context.Process(
            target=compact, args=(url, session_id, mode, theirs), daemon=True
        )
        self.process.start()
        theirs.close()

    def wait_for(self, signal: str) -> float:
        """Wait for `signal`; return when it came (perf_counter)."""
        assert self._signals.poll(60), (
            f"the child sent no {signal!r} (exit {self.process.exitcode})"
        )
        assert self._signals.recv() == signal
        return time.perf_counter()

    def go(self) -> None:
        self.wait_for("ready")
        self._signals.send("go")

    def kill(self) -> None:
        self.process.kill()  # SIGKILL
        self.process.join(30)
        self._signals.close()


def outcome(items: list[Any], before: list[Any], session_id: str) -> str:
    if items == before:
        return "old"
    if items == compacted(session_id):
        return "compacted"
    return "nothing" if not items else "mixed"


async def test_a_killed_compaction_leaves_the_old_or_the_new_history(
    db_url: str, forkserver: BaseContext
) -> None:
    seed = random.randrange(2**32)
    chance = random.Random(seed)
    async with SessionStore(db_url, create_tables=True, search=True) as store:
        template = store.session("template")
        await turns(template, 20)
        old = {"manual": await template.get_items()}
        await turns(template, 1, "last")  # what the automatic mode's turn adds before compacting
        old["automatic"] = await template.get_items()
        sessions = [f"{MODES[i % 2]}-{i}" for i in range(KILLS + 2)]
        for session_id in sessions:
            await store.session(session_id).add_items(old["manual"])

        # How long a replacement takes, per mode: the span the kills are spread over.
        window = {}
        children = [Child(forkserver, db_url, s, s.split("-")[0]) for s in sessions]
        for child, session_id in zip(children[KILLS:], sessions[KILLS:], strict=True):
            mode = session_id.split("-")[0]
            child.go()
            started = child.wait_for("replacing")
            window[mode] = child.wait_for("done") - started
            child.kill()
            assert await store.session(session_id).get_items() == compacted(session_id)

        seen: Counter[str] = Counter()
        for i, (child, session_id) in enumerate(
            zip(children[:KILLS], sessions[:KILLS], strict=True)
        ):
            mode = session_id.split("-")[0]
            stratum = (i // 2 + chance.random()) / (KILLS // 2)  # spread over 0..2 windows
            child.go()
            child.wait_for("replacing")
            await asyncio.sleep(2 * window[mode] * stratum)
            child.kill()
            items = await store.session(session_id).get_items()
            found = outcome(items, old[mode], session_id)
            assert found in ("old", "compacted"), f"{session_id}: {found} (seed {seed})"
            seen[found] += 1
        print(f"{db_url.split(':')[0]}: {dict(seen)}, windows {window} (seed {seed})")
        assert seen["old"] and seen["compacted"], f"kills all landed on one side: {seen}"


async def test_the_harness_sees_a_loss_without_the_hooks(
    db_url: str, forkserver: BaseContext
) -> None:
    """The same kill between the SDK's fallback clear and add leaves nothing: what the hooks
    prevent, and proof that the check above would see it."""
    async with SessionStore(db_url, create_tables=True) as store:
        await turns(store.session("fallback"), 3)
        before = await store.session("fallback").get_items()
        child = Child(forkserver, db_url, "fallback", "fallback")
        child.go()
        child.wait_for("replacing")
        child.wait_for("cleared")
        child.kill()
        assert outcome(await store.session("fallback").get_items(), before, "fallback") == "nothing"
