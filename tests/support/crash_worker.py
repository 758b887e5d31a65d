"""A child process that compacts one session, for test_compaction_crash.py to kill.

Started from a fork server that has imported this module (and so the SDK and the library)
once, so that each child costs milliseconds, not the two seconds of a fresh interpreter.
The child opens its store, says "ready" through its pipe and waits for "go" (so that many
children can warm up at once); then it says when the compaction request has been answered
("replacing": the replacement comes next) and when the compaction is over ("done").
"""

from __future__ import annotations

import asyncio
from multiprocessing.connection import Connection
from typing import Any

from agents_sqlalchemy import SessionStore, SQLAlchemySession

from .compaction import CompactEndpoint, compacting, turns

#: How many items the compacted output has: enough that its write takes a while.
OUTPUT_ITEMS = 400


def compacted(session_id: str) -> list[dict[str, Any]]:
    """The compacted history the stand-in endpoint returns for `session_id`."""
    return [
        {"role": "user", "content": f"summary {session_id} part {i}: the dog is Mochi"}
        for i in range(OUTPUT_ITEMS)
    ]


class WithoutHooks(SQLAlchemySession):
    """Our session as a subclass that overrides the protocol, so it declines the hooks and
    the SDK falls back to `clear_session()` then `add_items()`; it pauses in between, where
    a crash loses the history (what the hooks exist to prevent)."""

    signals: Connection | None = None

    async def clear_session(self) -> None:
        await super().clear_session()
        assert self.signals is not None
        self.signals.send("cleared")
        await asyncio.sleep(30)


def compact(url: str, session_id: str, mode: str, signals: Connection) -> None:
    """Compact `session_id`: "manual" (run_compaction), "automatic" (after a Runner turn),
    or "fallback" (manual, through `WithoutHooks`)."""
    asyncio.run(_compact(url, session_id, mode, signals))


async def _compact(url: str, session_id: str, mode: str, signals: Connection) -> None:
    async def replacing() -> None:
        signals.send("replacing")

    endpoint = CompactEndpoint(output=compacted(session_id), during=replacing)
    async with SessionStore(url, search=True) as store:
        ours = store.session(session_id)
        await ours.get_items(limit=1)  # schema checked, connection made
        signals.send("ready")
        assert signals.recv() == "go"
        if mode == "automatic":
            await turns(compacting(ours, endpoint), 1, "last")
        else:
            if mode == "fallback":
                ours = WithoutHooks(session_id, store=store)
                ours.signals = signals
            await compacting(ours, endpoint).run_compaction({"force": True})
        signals.send("done")  # before the store closes (and finishes indexing)
