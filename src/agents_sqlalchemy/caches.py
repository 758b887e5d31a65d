"""The library's in-memory caches: bounded, and emptied without holding the event loop.

A cache is a plain dict, oldest entries first. `add_bounded` keeps it within its size;
`release` empties one a slice at a time. Freeing many objects at once holds the GIL, and
with it the event loop of every other thread: emptying the search layer's 58,000 hashed
term features in one call took 67 ms, during which no other task of the app ran.

Example::

    cache: dict[str, bytes] = {}
    add_bounded(cache, {"disk": b"..."}, 20_000)
    held, cache = cache, {}      # forgotten at once: nothing looks in `held` any more
    await release(held)          # and freed a slice at a time
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from itertools import islice
from typing import Any

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


async def release(held: dict[Any, Any]) -> None:
    """Empty `held` (a cache nothing looks in any more) `RELEASE_STEP` entries at a time,
    sleeping `RELEASE_PAUSE` after each slice."""
    while held:
        for _ in range(min(RELEASE_STEP, len(held))):
            held.popitem()
        await asyncio.sleep(RELEASE_PAUSE)
