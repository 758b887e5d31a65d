"""Small asyncio tools: finish a write whatever the caller does, a fair lock for
every loop, run a coroutine from synchronous code, and CPU work off the event loop (an
operation's, `off_loop`; a unit of work's, `off_the_loop`)."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import sys
import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from types import FrameType
from typing import Any, TypeVar

from sqlalchemy.engine import Dialect
from sqlalchemy.util import await_only

T = TypeVar("T")


#: What cancels the task an `asyncio.timeout` was entered in, when it expires (3.11+).
_EXPIRY = getattr(getattr(asyncio, "Timeout", None), "_on_timeout", None)


class _Settling(asyncio.Task[T]):
    """A write's task. Cancelling it is refused (its caller's cancellation waits for it, and
    so does the end of `asyncio.run`, which cancels every task left), but by a timeout
    entered in it: SQLAlchemy's wait for a pool connection (`pool_timeout`) and, from
    Python 3.12, `asyncio.wait_for` (`statement_timeout`) end by cancelling the task they
    run in. A task that refused those too let a write wait past both."""

    def cancel(self, msg: Any | None = None) -> bool:
        if _expiring_in(self, sys._getframe(1)):
            return super().cancel(msg)
        return False


def _expiring_in(task: asyncio.Task[Any], caller: FrameType) -> bool:
    """Whether `caller`, who cancels `task`, is an `asyncio.timeout` entered in `task`
    expiring (a caller's own timeout cancels the caller, and the caller's task then this
    one: there the frame is the caller's timeout, whose task is another)."""
    return (
        _EXPIRY is not None
        and caller.f_code is _EXPIRY.__code__
        and getattr(caller.f_locals.get("self"), "_task", None) is task
    )


async def settle(operation: Awaitable[T]) -> T:
    """Await a write to its end even if the caller is cancelled, then re-raise the cancellation.

    The caller then knows the write either committed or rolled back, never "maybe". A
    coroutine runs as a task that refuses cancellation but by its own timeouts
    (`_Settling`): cancelling its awaiting caller only marks the caller, which wakes when
    the write ends and raises then (one turn of the loop after the write, as a plain
    `await` takes; waiting through `asyncio.wait` took one more). A future (a worker
    thread's) is waited for until it is done.
    """
    if asyncio.iscoroutine(operation):
        task: asyncio.Task[T] = _Settling(operation)
        try:
            return await task
        except asyncio.CancelledError:
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: the cancellation is what the caller sees
            raise
    future = asyncio.ensure_future(operation)
    cancelled: asyncio.CancelledError | None = None
    while not future.done():
        try:
            await asyncio.wait({future})
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    if cancelled is not None:
        if not future.cancelled():
            future.exception()  # retrieved: the cancellation is what the caller sees
        raise cancelled
    return future.result()


#: Told how long a `FairLock` waited, when something listens (telemetry sets it).
lock_waited: Callable[[float], None] | None = None

#: How often a coroutine waiting for a `FairLock` looks again (s).
FAIR_POLL = 0.005
#: A waiter that has not looked for this long (s) loses its ticket: its loop stopped, or is
#: held; it queues again at the back when it next looks.
FAIR_LOST = 1.0


class FairLock:
    """A lock held from coroutines on any event loop, and from threads, first come first
    served: no waiter is overtaken by one that came after it.

    A thread lock polled from coroutines goes to whoever asks just as it is released: the
    store's worker, indexing job after job beside busy writers, kept a search out of the
    indexer for 12 s. An `asyncio.Lock` would belong to one loop. Here each waiter takes a
    ticket once and the lock goes to the oldest ticket; coroutines poll (`FAIR_POLL`),
    threads wait.

    Example::

        lock = FairLock()
        async with lock:      # or `with lock:` in a thread
            ...
    """

    def __init__(self) -> None:
        self._guard = threading.Condition()
        self._held = False
        self._tickets: dict[object, float] = {}  # the waiters', oldest first: when each looked

    def _take(self, ticket: object) -> bool:
        """Take the lock if it is free and `ticket` is the oldest live one (under `_guard`)."""
        now = time.monotonic()
        self._tickets[ticket] = now  # queues at the back, or keeps its place in the queue
        oldest = next(iter(self._tickets))
        while oldest is not ticket and now - self._tickets[oldest] >= FAIR_LOST:
            del self._tickets[oldest]  # stopped looking
            oldest = next(iter(self._tickets))
        if self._held or oldest is not ticket:
            return False
        self._held = True
        del self._tickets[ticket]
        return True

    async def __aenter__(self) -> None:
        ticket, started = object(), None
        while True:
            with self._guard:
                if self._take(ticket):
                    break
            if started is None:
                started = time.perf_counter()
            try:
                await asyncio.sleep(FAIR_POLL)
            except BaseException:  # cancelled: the lock goes to the next ticket
                with self._guard:
                    self._tickets.pop(ticket, None)
                raise
        if started is not None and lock_waited is not None:
            lock_waited(time.perf_counter() - started)

    async def __aexit__(self, *exc: object) -> None:
        self.release()

    def __enter__(self) -> None:
        ticket = object()
        with self._guard:
            while not self._take(ticket):
                self._guard.wait(FAIR_POLL)  # timed: its ticket stays live

    def __exit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        with self._guard:
            self._held = False
            self._guard.notify_all()


def run_blocking(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run the coroutine `make()` to its end from synchronous code (a `with` block's exit).

    On the thread's default event loop when no loop runs here, as `Runner.run_sync` does,
    so that what was opened on that loop is closed on it; in a thread of its own when a
    loop is running (a sync `with` inside async code).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        policy = asyncio.get_event_loop_policy()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                loop = policy.get_event_loop()
            except RuntimeError:
                loop = None
        if loop is None or loop.is_closed():
            return asyncio.run(make())
        return loop.run_until_complete(make())
    with ThreadPoolExecutor(1, thread_name_prefix="agents-sqlalchemy") as pool:
        return pool.submit(lambda: asyncio.run(make())).result()


#: Past this many items or rows, `off_loop` decodes, encodes or checks them in a worker
#: thread: encoding 1,000 items held the loop 12 ms; a smaller batch is done on the loop,
#: where a thread hop would cost more than the work saves.
OFF_LOOP = 256


async def off_loop(
    count: int, work: Callable[..., T], *args: Any, past: int = OFF_LOOP, **kwargs: Any
) -> T:
    """`work(*args, **kwargs)` over `count` items or rows: in a worker thread past `past`
    of them, so that the event loop stays free (decoding 200,000 items on it held it for
    seconds), else here (a thread hop costs more than a few items take)."""
    if count > past:
        return await asyncio.to_thread(work, *args, **kwargs)
    return work(*args, **kwargs)


def off_the_loop(dialect: Dialect, work: Callable[..., T], *args: Any) -> T:
    """`work(*args)` for a unit of work, in a worker thread when `dialect` is async: such a
    unit runs in a greenlet on the event loop, which waits for the thread as it waits for
    the driver (SQLAlchemy's `await_only`), and runs other tasks meanwhile. For CPU work
    worth a thread hop (a statement's first compilation, sealing many items).

    The work runs where it is on a synchronous driver (the unit has a thread of its own,
    or is small enough to run on the caller's), and at interpreter exit, when the thread
    pools take no more work (a store never closed finishes its indexing then)."""
    if not dialect.is_async:
        return work(*args)
    in_context = functools.partial(contextvars.copy_context().run, work, *args)
    try:
        done = asyncio.get_running_loop().run_in_executor(None, in_context)
    except RuntimeError:  # "cannot schedule new futures after interpreter shutdown"
        return work(*args)
    return await_only(done)
