"""The library's in-memory caches stay within their size, and are emptied a slice at a time
while the event loop keeps running."""

from __future__ import annotations

import asyncio

from agents_sqlalchemy import caches
from agents_sqlalchemy.caches import Weighed, add_bounded, lengths, release


def test_a_full_cache_drops_its_oldest_eighth_at_once() -> None:
    cache: dict[int, int] = {}
    add_bounded(cache, {n: n for n in range(800)}, 800)
    assert len(cache) == 800  # at its size: nothing dropped
    add_bounded(cache, {800: 800}, 800)
    assert list(cache) == list(range(101, 801))  # the oldest, down to seven eighths
    for n in range(801, 900):  # room again: no more drops until it is full
        add_bounded(cache, {n: n}, 800)
    assert len(cache) == 799 and min(cache) == 101


def test_a_weighed_cache_stays_within_its_bytes_the_oldest_going_first() -> None:
    cache = Weighed[int, bytes](most=1000, budget=800, weigh=lengths)
    cache.add({n: b"x" * 100 for n in range(8)})
    assert cache.weight == 800 and list(cache.kept) == list(range(8))  # at its budget
    cache.add({8: b"x" * 50})
    assert list(cache.kept) == [2, 3, 4, 5, 6, 7, 8]  # the oldest, down to seven eighths
    assert cache.weight == 650
    cache.add({3: b"x" * 10})  # replaced: its old weight goes
    assert cache.weight == 560 and list(cache.kept)[-1] == 3
    cache.pop(2)
    assert cache.weight == 460 and 2 not in cache.kept


def test_a_weighed_cache_keeps_no_entry_heavier_than_an_eighth_of_its_budget() -> None:
    cache = Weighed[int, bytes](most=1000, budget=800, weigh=lengths)
    cache.add({n: b"x" * 10 for n in range(5)})
    cache.add({5: b"x" * 101})  # would push out most of the others
    assert list(cache.kept) == list(range(5)) and cache.weight == 50
    held = cache.take()
    assert cache.kept == {} and cache.weight == 0 and len(held) == 5


def test_a_weighed_cache_stays_within_its_entries_too() -> None:
    cache = Weighed[int, bytes](most=8, budget=10**6, weigh=lengths)
    cache.add({n: b"x" for n in range(9)})
    assert list(cache.kept) == list(range(2, 9)) and cache.weight == 7


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
