"""The library's in-memory caches stay within their size, and are emptied a slice at a time
while the event loop keeps running."""

from __future__ import annotations

import asyncio

from agents_sqlalchemy import caches
from agents_sqlalchemy.caches import add_bounded, release


def test_a_full_cache_drops_its_oldest_eighth_at_once() -> None:
    cache: dict[int, int] = {}
    add_bounded(cache, {n: n for n in range(800)}, 800)
    assert len(cache) == 800  # at its size: nothing dropped
    add_bounded(cache, {800: 800}, 800)
    assert list(cache) == list(range(101, 801))  # the oldest, down to seven eighths
    for n in range(801, 900):  # room again: no more drops until it is full
        add_bounded(cache, {n: n}, 800)
    assert len(cache) == 799 and min(cache) == 101


async def test_releasing_a_cache_lets_the_event_loop_run_between_slices() -> None:
    held = {n: str(n) for n in range(5 * caches.RELEASE_STEP)}
    ticks: list[int] = []

    async def ticker() -> None:
        while True:
            ticks.append(len(held))
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    await release(held)
    task.cancel()
    assert held == {}
    # The other task ran while the cache was being emptied, not only before or after it.
    assert any(0 < left < 5 * caches.RELEASE_STEP for left in ticks)
