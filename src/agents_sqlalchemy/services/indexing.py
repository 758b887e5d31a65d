"""Indexing after the write: a store's items are embedded off the caller's path.

`add_items` commits the items and returns; the sessions it wrote to are handed to a
worker thread (one per store, started on first use, with an event loop of its own), which
indexes their new items in batches, in transactions of its own. A search first waits for
the work this process handed over, then indexes whatever is still missing in its scope
(items written by another process, or by one that stopped before its worker caught up):
a search never misses an item, and no embedding runs while a write holds a lock.

Example::

    indexer = BackgroundIndexer(searcher.catch_up, release=repository.release_loop)
    indexer.submit(key)          # after a write commits
    await indexer.flush()        # before a search: this process's work is done
    await indexer.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future
from typing import Any

from ..types import Scope, SessionKey

logger = logging.getLogger("agents_sqlalchemy")

# How long the worker lets writes gather before it indexes them.
GATHER_SECONDS = 0.2

CatchUp = Callable[[Scope], Awaitable[int]]
Release = Callable[[], Coroutine[Any, Any, None]]


class BackgroundIndexer:
    """Indexes the sessions handed to it on a worker thread; `flush` waits for it."""

    def __init__(
        self, catch_up: CatchUp, *, release: Callable[[], Coroutine[Any, Any, None]]
    ) -> None:
        self._catch_up = catch_up
        self._release = release  # frees the worker loop's connections before it stops
        self._lock = threading.Lock()
        self._pending: dict[str, SessionKey] = {}
        self._idle = threading.Event()
        self._idle.set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._running: Future[None] | None = None

    def submit(self, key: SessionKey) -> None:
        """Index the new items of this session soon (called after a write commits)."""
        with self._lock:
            self._pending[key.hash] = key
            self._idle.clear()
            loop = self._start()
            if self._running is None or self._running.done():
                self._running = asyncio.run_coroutine_threadsafe(self._drain(), loop)

    async def flush(self) -> None:
        """Wait until every session handed over so far is indexed (or failed to be)."""
        if not self._idle.is_set():
            with self._lock:
                if self._loop is not None:
                    self._loop.call_soon_threadsafe(self._hurry.set)
            await asyncio.to_thread(self._idle.wait)

    async def close(self) -> None:
        """Finish the work handed over, then stop the worker thread."""
        await self.flush()
        with self._lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is not None and thread is not None:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._release(), loop))
            loop.call_soon_threadsafe(loop.stop)
            await asyncio.to_thread(thread.join)

    def _start(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=_serve, args=(loop,), name="agents-sqlalchemy-indexer", daemon=True
            )
            thread.start()
            self._loop, self._thread = loop, thread
            self._hurry = asyncio.Event()  # set from other threads via the loop only
        return self._loop

    async def _drain(self) -> None:
        # Let writes gather for a moment: one batch of many items costs far less than many
        # batches of a few (a search waiting for the work cuts the pause short).
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._hurry.wait(), GATHER_SECONDS)
        self._hurry.clear()
        while True:
            with self._lock:
                if not self._pending:
                    self._idle.set()
                    return
                keys = list(self._pending.values())
                self._pending.clear()
            for key in keys:
                try:
                    await self._catch_up(Scope(session=key))
                except Exception:  # the next search in its scope tries again, and raises
                    logger.warning("indexing session %r failed", key.session_id, exc_info=True)


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
