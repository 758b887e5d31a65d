"""Two small asyncio tools: finish a write whatever the caller does, hold a thread lock."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import TypeVar

T = TypeVar("T")


async def settle(operation: Awaitable[T]) -> T:
    """Await a write to its end even if the caller is cancelled, then re-raise the cancellation.

    The caller then knows the write either committed or rolled back, never "maybe".
    """
    task = asyncio.ensure_future(operation)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    if cancelled is not None:
        task.exception()  # retrieved: the cancellation is what the caller sees
        raise cancelled
    return task.result()


@asynccontextmanager
async def holding(lock: threading.Lock) -> AsyncIterator[None]:
    """Hold a thread lock from a coroutine without blocking its loop; works across loops.

    Polled rather than awaited: an `asyncio.Lock` belongs to one loop, and a cancelled
    waiter of a lock acquired in a worker thread would strand it.
    """
    while not lock.acquire(blocking=False):  # noqa: ASYNC110
        await asyncio.sleep(0.005)
    try:
        yield
    finally:
        lock.release()
