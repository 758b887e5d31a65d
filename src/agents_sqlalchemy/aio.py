"""Small asyncio tools: finish a write whatever the caller does, hold a thread lock, and run
a coroutine from synchronous code."""

from __future__ import annotations

import asyncio
import threading
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, TypeVar

T = TypeVar("T")


class _Settling(asyncio.Task[T]):
    """A write's task, which refuses to be cancelled: the caller's cancellation waits for it."""

    def cancel(self, msg: Any | None = None) -> bool:
        return False


async def settle(operation: Awaitable[T]) -> T:
    """Await a write to its end even if the caller is cancelled, then re-raise the cancellation.

    The caller then knows the write either committed or rolled back, never "maybe". A
    coroutine runs as a task that refuses cancellation: cancelling its awaiting caller only
    marks the caller, which wakes when the write ends and raises then (one turn of the loop
    after the write, as a plain `await` takes; waiting through `asyncio.wait` took one more).
    A future (a worker thread's) is waited for until it is done.
    """
    if asyncio.iscoroutine(operation):
        task: asyncio.Task[T] = _Settling(operation)
        try:
            return await task
        except asyncio.CancelledError:
            if task.done():
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
        future.exception()  # retrieved: the cancellation is what the caller sees
        raise cancelled
    return future.result()


#: Told how long `holding` waited for its lock, when something listens (telemetry sets it).
lock_waited: Callable[[float], None] | None = None


@asynccontextmanager
async def holding(lock: threading.Lock) -> AsyncIterator[None]:
    """Hold a thread lock from a coroutine without blocking its loop; works across loops.

    Polled rather than awaited: an `asyncio.Lock` belongs to one loop, and a cancelled
    waiter of a lock acquired in a worker thread would strand it.
    """
    if not lock.acquire(blocking=False):
        started = time.perf_counter()
        while not lock.acquire(blocking=False):  # noqa: ASYNC110
            await asyncio.sleep(0.005)
        if lock_waited is not None:
            lock_waited(time.perf_counter() - started)
    try:
        yield
    finally:
        lock.release()


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
