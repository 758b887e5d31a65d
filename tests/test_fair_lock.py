"""`FairLock`: the store's in-process locks go to their waiters first come first served, from
coroutines on any event loop and from threads, and no waiter strands them."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agents_sqlalchemy import aio
from agents_sqlalchemy.aio import FairLock


async def _queued(lock: FairLock, count: int) -> None:
    """Until `count` waiters hold a ticket."""
    while len(lock._tickets) < count:  # noqa: ASYNC110 (a thread's tickets too)
        await asyncio.sleep(0.001)


async def test_a_waiter_is_not_overtaken_by_a_later_one() -> None:
    lock, order = FairLock(), list[str]()
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with lock:
            held.set()
            release.wait()

    def late() -> None:
        with lock:
            order.append("thread that came later")

    first = threading.Thread(target=holder)
    first.start()
    held.wait()
    waiter = asyncio.ensure_future(lock.__aenter__())
    await _queued(lock, 1)
    second = threading.Thread(target=late)
    second.start()
    await _queued(lock, 2)
    release.set()  # a thread lock went to the thread, which waits in the kernel, not polls
    await waiter
    order.append("coroutine that came first")
    lock.release()
    await asyncio.to_thread(second.join)
    first.join()
    assert order == ["coroutine that came first", "thread that came later"]


async def test_a_worker_taking_the_lock_job_after_job_lets_a_waiter_in() -> None:
    # The store's worker indexing beside busy writers kept a search out for 12 s.
    lock, stop, rounds = FairLock(), threading.Event(), [0]

    async def worker() -> None:
        while not stop.is_set():
            async with lock:
                rounds[0] += 1
                await asyncio.sleep(0.002)

    thread = threading.Thread(target=asyncio.run, args=(worker(),))
    thread.start()
    try:
        while rounds[0] < 3:  # noqa: ASYNC110 (another loop's rounds)
            await asyncio.sleep(0.001)
        seen = rounds[0]
        await asyncio.wait_for(lock.__aenter__(), 30)  # a polled thread lock: never
        waited = rounds[0] - seen
        lock.release()
    finally:
        stop.set()
        await asyncio.to_thread(thread.join)
    assert waited <= 2


async def test_a_cancelled_waiter_passes_the_lock_on() -> None:
    lock = FairLock()
    await lock.__aenter__()
    cancelled = asyncio.ensure_future(lock.__aenter__())
    await _queued(lock, 1)
    second = asyncio.ensure_future(lock.__aenter__())
    await _queued(lock, 2)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    lock.release()
    await asyncio.wait_for(second, 5)
    lock.release()
    async with lock:  # free again
        pass


async def test_a_waiter_whose_loop_stopped_loses_its_ticket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(aio, "FAIR_LOST", 0.05)
    lock = FairLock()
    await lock.__aenter__()
    stopped = asyncio.new_event_loop()  # a waiter on it, not resumed until the end
    waiter = stopped.create_task(lock.__aenter__())
    await asyncio.to_thread(stopped.run_until_complete, asyncio.sleep(0.02))
    assert len(lock._tickets) == 1
    after = asyncio.ensure_future(lock.__aenter__())
    await _queued(lock, 2)
    lock.release()
    await asyncio.wait_for(after, 5)
    assert len(lock._tickets) == 0
    lock.release()
    waiter.cancel()
    await asyncio.to_thread(stopped.run_until_complete, asyncio.wait([waiter]))
    stopped.close()
