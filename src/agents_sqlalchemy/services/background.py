"""Work that follows a write, done off the caller's path on a worker thread.

After `add_items` commits, its session's new items are indexed for search; after a removal
in encrypted mode, the SQLite WAL is checkpointed so that no copy of a destroyed key stays
in it. Both run on one worker thread per store (started on first use, with an event loop
of its own), coalesced by what they are for and gathered until the writes pause: ten
writes to one session in a burst are indexed in one pass, after it, and ten removals
scrubbed by one checkpoint. `flush()` waits for the work submitted before it (not for what
writes go on submitting meanwhile); a search flushes first, and `close()` finishes the
work before it stops the thread.

A store never closed has its worker stopped at interpreter exit, before the interpreter
finalizes: a worker it kills inside the driver aborts the whole process (greenlet's C++
frames: "terminate called without an active exception", exit status 134, in 2 runs of 30
of a script that ended while its PostgreSQL store was indexing). The jobs waiting run first,
for `EXIT_SECONDS` at most, on a server; on SQLite they cannot (the interpreter's thread
pools take no more work by then). What is left is caught up by the next search.

Example::

    background = Background(release=db.release_loop)
    background.submit(("index", key.hash), lambda: indexer.catch_up(Scope(session=key)))
    await background.flush()
    await background.close()
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Coroutine, Hashable
from concurrent.futures import Future
from typing import Any

from ..telemetry import Probe

logger = logging.getLogger("agents_sqlalchemy")

# How long the writes must pause before the worker does what they call for ...
GATHER_SECONDS = 0.2
# ... waiting at most this many such pauses in all while writes keep coming.
GATHER_LIMIT = 10
# At interpreter exit, how long a store never closed may finish its waiting jobs.
EXIT_SECONDS = 2.0

Job = Callable[[], Coroutine[Any, Any, Any]]


class Background:
    """Runs jobs off the caller's path, one per key at a time; `flush` waits for them all.

    On a worker thread of its own (`thread=True`) when the store makes its engines, so
    that the thread can have one; as tasks on the caller's event loop when the app gave an
    engine, whose connections belong to the app's loop.
    """

    def __init__(
        self, *, release: Job, thread: bool = True, telemetry: Probe | None = None
    ) -> None:
        self._release = release  # frees the worker loop's connections before it stops
        self._threaded = thread
        self._last_submit = 0.0  # time.monotonic() of the latest submit
        self._telemetry = telemetry
        self._afresh()

    def _afresh(self) -> None:
        """No worker, nothing waiting: as made, and in a child this process forked."""
        self._lock = threading.Lock()
        self._pending: dict[Hashable, Job] = {}
        self._idle = threading.Event()
        self._idle.set()
        self._submitted = 0  # submits so far; a drain's round runs those it found
        self._flushes: list[tuple[int, Future[None]]] = []  # (submits it waits for, done)
        self._hurry: asyncio.Event | None = None  # of the running drain, set on its loop
        self._hurried = False  # a flush came before the drain made its event
        self._loop: asyncio.AbstractEventLoop | None = None  # the worker thread's
        self._thread: threading.Thread | None = None
        self._running: Future[None] | asyncio.Task[None] | None = None
        self._running_loop: asyncio.AbstractEventLoop | None = None
        # Set by `close`: indexing submitted from then on is left to the next search (a
        # stream of writes would keep the drain busy for ever); once it ended, everything.
        self._closing = False
        self._closed = False

    def submit(self, key: Hashable, job: Job) -> None:
        """Run `job` soon; a job already waiting under the same key is replaced.

        Traced, it runs under the caller's current span, as an operation named by the
        key's first part (`index`, `scrub`). Once `close` has begun, indexing is not
        taken (the next search catches it up), and nothing is after it ended.
        """
        if self._telemetry is not None and isinstance(key, tuple):
            job = self._telemetry.background(str(key[0]), job)
        with self._lock:
            if self._closed or (self._closing and _kind(key) == "index"):
                return  # no worker starts again after `close`
            self._pending[key] = job
            self._submitted += 1
            self._last_submit = time.monotonic()
            self._idle.clear()
            if self._running is not None and not self._running.done():
                return
            if self._threaded:
                loop = self._start()
                self._running = asyncio.run_coroutine_threadsafe(self._drain(), loop)
            else:
                loop = asyncio.get_running_loop()
                self._running = loop.create_task(self._drain())
            self._running_loop = loop

    def backlog(self) -> dict[str, int]:
        """Jobs waiting, by kind (`index`: sessions to index, `scrub`: scrubs)."""
        with self._lock:
            keys = list(self._pending)
        counts: dict[str, int] = {}
        for key in keys:
            kind = _kind(key)
            counts[kind] = counts.get(kind, 0) + 1
        return counts

    async def flush(self) -> None:
        """Wait until every job submitted so far has run (or failed, and been logged); not
        for those submitted meanwhile (a search beside writes that never pause waited for
        all of them: 0.8 to 5.8 s beside four writers)."""
        done = Future[None]()
        with self._lock:
            if self._idle.is_set():
                return
            self._flushes.append((self._submitted, done))
        self._hurry_now()
        await asyncio.wrap_future(done)

    async def close(self) -> None:
        """Finish the jobs submitted, then stop the worker thread (if there is one)."""
        with self._lock:
            self._closing = True
        running, loop = self._hurry_now()
        if isinstance(running, asyncio.Task) and loop is asyncio.get_running_loop():
            await asyncio.shield(running)
        elif not self._idle.is_set():
            await asyncio.to_thread(self._idle.wait)
        with self._lock:
            self._closed = True
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is not None and thread is not None:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._release(), loop))
            loop.call_soon_threadsafe(loop.stop)
            await asyncio.to_thread(thread.join)

    def _hurry_now(
        self,
    ) -> tuple[Future[None] | asyncio.Task[None] | None, asyncio.AbstractEventLoop | None]:
        """End the running drain's gathering: what waits runs now. Its future and loop."""
        with self._lock:
            running, loop, hurry = self._running, self._running_loop, self._hurry
            self._hurried = True
        if loop is not None and hurry is not None and not loop.is_closed():
            loop.call_soon_threadsafe(hurry.set)
        return running, loop

    def stop_at_exit(self, seconds: float = EXIT_SECONDS) -> None:
        """`close()` from a thread with no loop, each wait bounded: the waiting jobs run for
        `seconds` at most, then are cancelled (caught up later); the worker's connections
        are released and its thread ends. For a store never closed, at interpreter exit."""
        with self._lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None or not thread.is_alive():  # closed, or a forked child
            return
        running, _ = self._hurry_now()
        if not self._idle.wait(seconds) and running is not None:
            running.cancel()  # its drain then marks the queue idle
            self._idle.wait(1.0)
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._release(), loop).result(seconds)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(seconds)

    def _start(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=_serve, args=(loop,), name="agents-sqlalchemy-background", daemon=True
            )
            thread.start()
            self._loop, self._thread = loop, thread
            _WORKING.add(self)
        return self._loop

    async def _drain(self) -> None:
        hurry = asyncio.Event()
        with self._lock:
            self._hurry = hurry
            if self._hurried:
                hurry.set()
        finished = False
        try:
            await self._gather(hurry)
            while not finished:
                with self._lock:
                    jobs = list(self._pending.items())
                    self._pending.clear()
                    taken = self._submitted  # this round runs every job submitted so far
                    if not jobs:  # a submit from now on starts a new drain
                        finished, self._running, self._hurry = True, None, None
                        self._hurried = False
                        self._idle.set()
                for key, job in jobs:
                    try:
                        await job()
                    except Exception as exc:  # the next search or removal tries again
                        if _at_exit(exc):  # the process is ending: left for the next one
                            logger.debug("background job %r left at exit", key)
                        else:
                            logger.warning("background job %r failed: %s", key, described(exc))
                self._flushed(taken)
        finally:
            if not finished:  # cancelled with its loop: what is left is caught up later
                with self._lock:
                    self._pending.clear()
                    self._running, self._hurry, self._hurried = None, None, False
                    self._idle.set()
                self._flushed(self._submitted)

    def _flushed(self, upto: int) -> None:
        """The jobs of the first `upto` submits have run: the flushes waiting for no more
        return. A flush whose caller was cancelled has its future cancelled with it: it is
        passed over (setting it raised, and every flush after it in the list waited for
        ever)."""
        with self._lock:
            ready = [done for waits_for, done in self._flushes if waits_for <= upto]
            self._flushes = [pair for pair in self._flushes if pair[0] > upto]
        for done in ready:
            if not done.done():
                done.set_result(None)

    async def _gather(self, hurry: asyncio.Event) -> None:
        """Let writes gather until they pause for `GATHER_SECONDS` (at most `GATHER_LIMIT`
        times that in all), or a caller waits in `flush`.

        One pass over many items costs far less than many passes over a few, and a pass
        while the app is still writing holds the GIL the app's own work is waiting for: on
        PostgreSQL, a burst of 300 appends then took 1.5 ms each instead of 1.0.
        """
        started = time.monotonic()
        while not hurry.is_set():
            with self._lock:
                quiet_from = self._last_submit
            until = min(quiet_from + GATHER_SECONDS, started + GATHER_SECONDS * GATHER_LIMIT)
            wait = until - time.monotonic()
            if wait <= 0:
                return
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(hurry.wait(), wait)


def _kind(key: Hashable) -> str:
    """What a job's key says it does (`index`, `scrub`, `forget`), from its first part."""
    return str(key[0]) if isinstance(key, tuple) and key else "other"


def _at_exit(exc: Exception) -> bool:
    """Whether `exc` says the interpreter is ending (its thread pools take no more work)."""
    return isinstance(exc, RuntimeError) and (
        sys.is_finalizing() or "after shutdown" in str(exc) or "interpreter shutdown" in str(exc)
    )


#: Set on a worker's own thread (`_serve`), whose loop is no app's.
_WORKER = threading.local()


def on_worker_thread() -> bool:
    """Whether the caller runs on a worker's thread, not on an app's event loop."""
    return getattr(_WORKER, "serving", False)


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    _WORKER.serving = True
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


#: Backgrounds that started a worker thread (a busy worker keeps its own alive: its drain).
_WORKING: weakref.WeakSet[Background] = weakref.WeakSet()


@atexit.register
def _stop_workers() -> None:
    """At interpreter exit, before it finalizes: stop every worker still running."""
    for background in list(_WORKING):
        background.stop_at_exit()


def _forget_workers() -> None:
    """In a forked child: the parent's worker threads did not come along, and a lock one
    held at the fork would stay held for ever (the child's exit waited on it, in 1 run of
    13 with the machine busy). Each of their Backgrounds starts afresh, with nothing
    waiting: the parent runs what was."""
    for background in list(_WORKING):
        background._afresh()
    _WORKING.clear()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_forget_workers)


def described(exc: BaseException) -> str:
    """`exc` and the exceptions behind it, each by its class and where it was raised, with
    no message: a model's API may quote the texts it was given, and a log carries no item.

    >>> text = "a secret"
    >>> try:
    ...     raise RuntimeError(f"refused {text!r}")
    ... except RuntimeError as exc:
    ...     "secret" in described(exc), described(exc).startswith("builtins.RuntimeError")
    (False, True)
    """
    parts, seen = [], set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        where = "".join(traceback.format_tb(current.__traceback__)).rstrip()
        kind = type(current)
        parts.append(f"{kind.__module__}.{kind.__qualname__}" + (f"\n{where}" if where else ""))
        current = current.__cause__ or (
            None if current.__suppress_context__ else current.__context__
        )
    return "\ncaused by ".join(parts)
