"""The library's in-memory caches: bounded, and emptied without holding the event loop.

A cache is a plain dict, oldest entries first. `add_bounded` keeps it within a number of
entries; `Weighed` keeps one within a number of entries and of bytes, for entries whose
size is the app's (an item's plaintext: a tool's output may be megabytes). `release`
empties one a slice at a time. Freeing many objects at once holds the GIL, and with it the
event loop of every other thread: emptying the search layer's 58,000 hashed term features
in one call took 67 ms, during which no other task of the app ran.

Example::

    cache: dict[str, bytes] = {}
    add_bounded(cache, {"disk": b"..."}, 20_000)
    held, cache = cache, {}      # forgotten at once: nothing looks in `held` any more
    await release(held)          # and freed a slice at a time
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sized
from itertools import islice
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: Entries `release` frees at a time (about a millisecond's work) ...
RELEASE_STEP = 2000
#: ... and the pause after each: it sleeps, so that another thread can take the GIL.
RELEASE_PAUSE = 0.0005


def add_bounded(cache: dict[Any, Any], new: Mapping[Any, Any], size: int) -> None:
    """Add `new` to `cache`; past `size` entries, drop the oldest down to seven eighths of
    it, in one pass: a dict finds its oldest entry by scanning past the slots its removals
    freed, so evicting a few at every call rescanned them every time (an append of 4
    sealed items spent a tenth of its bookkeeping there)."""
    cache.update(new)
    if len(cache) > size:
        for oldest in list(islice(cache, len(cache) - size + size // 8)):
            cache.pop(oldest, None)  # another thread may have taken it first


class Weighed(Generic[K, V]):
    """A cache of at most `most` entries weighing at most `budget` bytes in all, the oldest
    dropped first, down to seven eighths of both or a little under (as `add_bounded`).
    `weigh` weighs many values at once (`lengths`, for bytes): a cold read adds thousands.
    An entry heavier than an eighth of the budget is not kept: it would push out most of
    the others. Look up in `kept` freely (a dict, oldest first); change it only through
    the methods, under the owner's lock.

    Example::

        cache = Weighed[str, bytes](20_000, 64 * 2**20, lengths)
        cache.add({"disk": b"..."})
        cache.kept.get("disk")
        held = cache.take()      # empty now; `release(held)` frees what it held
    """

    def __init__(
        self, most: int, budget: int, weigh: Callable[[Iterable[V]], Iterable[int]]
    ) -> None:
        self.most, self.budget = most, budget
        self._weigh = weigh
        self.kept: dict[K, V] = {}
        self.weight = 0

    def add(self, new: Mapping[K, V]) -> None:
        heaviest, kept = self.budget // 8, self.kept
        weights = list(self._weigh(new.values()))
        if max(weights, default=0) <= heaviest and kept.keys().isdisjoint(new):
            kept.update(new)  # the usual case, at once
            self.weight += sum(weights)
        else:
            for (key, value), weight in zip(new.items(), weights, strict=True):
                if weight <= heaviest:
                    self.pop(key)
                    kept[key] = value
                    self.weight += weight
        most, budget = self.most - self.most // 8, self.budget - self.budget // 8
        if len(kept) > self.most or self.weight > self.budget:
            while len(kept) > most or self.weight > budget:  # an eighth or more at a time
                self._drop(list(islice(kept, max(len(kept) - most, len(kept) // 8, 1))))

    def pop(self, key: K) -> None:
        self._drop((key,))

    def _drop(self, keys: Iterable[K]) -> None:
        gone = [value for key in keys if (value := self.kept.pop(key, None)) is not None]
        self.weight -= sum(self._weigh(gone))

    def take(self) -> dict[K, V]:
        """Empty the cache; what it held, for the caller to free (`release`)."""
        held, self.kept, self.weight = self.kept, {}, 0
        return held


def lengths(values: Iterable[Sized]) -> Iterator[int]:
    """Each value's `len`: a `Weighed` cache's weights of bytes."""
    return map(len, values)


def let_go(items: list[Any]) -> None:
    """Empty `items`, in a worker thread, `RELEASE_STEP` at a time from the end: freeing
    many objects is one call that holds the GIL throughout (200,000 rows of a read: 10 to
    20 ms, the event loop's thread held), and between two steps another thread may take
    it.

    >>> rows = [(n, "text") for n in range(5000)]
    >>> let_go(rows)
    >>> rows
    []
    """
    while items:
        del items[-RELEASE_STEP:]


async def release(held: dict[Any, Any]) -> None:
    """Empty `held` (a cache nothing looks in any more) `RELEASE_STEP` entries at a time,
    sleeping `RELEASE_PAUSE` after each slice."""
    while held:
        for _ in range(min(RELEASE_STEP, len(held))):
            held.popitem()
        await asyncio.sleep(RELEASE_PAUSE)
