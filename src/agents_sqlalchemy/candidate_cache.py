"""The candidates of the largest scopes searched lately, kept while their scope is unchanged.

A search ranks every live item of its scope, and reading them (their packed terms and
vectors) is most of its time once a scope holds thousands: a user's 50,000 items take
150-300 ms to read, and under 60 ms to rank. Each search reads its scope's `ScopeStamp`
anyway (to tell whether items are missing from the index): while the stamp is the one
read before the kept candidates were, no item of the scope was written, removed or
expired since, and the candidates are those a read would return.

What is kept is never the answer by itself: every hit is read again before it is returned
(`Searcher.search`), at the place it was ranked for and only if still live and in scope,
so a change the stamp could not see (changes cancelling out in all its numbers) can cost
a hit, never return one that is gone.

Each store's codec holds its cache (`Codec.kept`). An encrypted store's candidates hold
what its rows hold (keyed hashes of terms, wrapped data keys, key ids), so they go with
the rest of what its codec keeps: a pop's, those of the scopes that held the popped items
(`drop_holding`, off the caller's path with the rest a removal left in memory); any other
removal's, all of them; and all when data keys are wrapped anew (a session given to
another user, a rotation), which the stamp does not see. Each `forget` or `outdate` starts
a new `generation`: candidates read before it are not kept (`put`), so a search that a
removal overtook keeps nothing of what it read.

A search of a small scope (or of one not searched before) reads the stamp and the
candidates at once and keeps nothing; once a scope is seen to be large, its searches read
the stamp first, so that no candidates are ever kept with a stamp newer than they are.
When a scope only gained items since its candidates were kept (an agent's next turns),
a search reads those alone: the stamp of the items after the kept stamp's newest, added to
the kept stamp, must come to the scope's stamp (`Searcher._grown`).

Example::

    cache = CandidateCache()
    key = ("session-hash", None, "model", True, True)
    since = cache.generation                    # before anything is read
    if cache.large(key):                        # seen with CACHE_FROM candidates or more
        kept = cache.get(key, stamp)            # (their stamp, candidates): this one or older
    cache.put(key, stamp, candidates, since)    # read after `stamp`
    cache.note(key, len(candidates))            # read beside a stamp: only its size counts
    held = cache.forget()                       # a removal: nothing kept any more
    cache.outdate()                             # a pop: nothing read before it is kept ...
    held = cache.drop_holding({wrapped_key})    # ... nor a scope that held the popped item
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection, Hashable

from .types import Candidates, ScopeStamp

#: Candidates kept at most, over all scopes (about 720 bytes each with the default
#: embedder: some 70 MB at most) ...
CACHE_CANDIDATES = 100_000
#: ... and bytes of their packed terms and vectors: a long item's terms, or a big
#: embedder's vectors (3 KB each for OpenAI's largest), weigh many times the default's.
CACHE_BYTES = 128 * 2**20
#: A scope with fewer candidates is read every time (it reads in a few milliseconds).
CACHE_FROM = 2000
#: Large scopes remembered as such (their keys only), the least recently seen forgotten.
LARGE_SCOPES = 1024


class CandidateCache:
    """The candidates of recently searched large scopes, each with the stamp read before
    them; the least recently used go first past `limit` candidates or `budget` bytes of
    packed terms and vectors in all. Safe to share between threads (a store may serve
    several event loops)."""

    def __init__(
        self, limit: int = CACHE_CANDIDATES, smallest: int = CACHE_FROM, budget: int = CACHE_BYTES
    ) -> None:
        self._limit = limit
        self._smallest = smallest
        self._budget = budget
        self._kept: OrderedDict[Hashable, tuple[ScopeStamp, Candidates, int]] = OrderedDict()
        self._large: OrderedDict[Hashable, None] = OrderedDict()
        self._size = self._weight = 0
        self._lock = threading.Lock()
        self.generation = 0

    def large(self, key: Hashable) -> bool:
        """Whether `key`'s scope was last seen with candidates worth keeping."""
        return key in self._large

    def get(self, key: Hashable, stamp: ScopeStamp) -> tuple[ScopeStamp, Candidates] | None:
        """The candidates kept for `key`, with the stamp they were read under: `stamp`
        itself, or an older one that items added since may have turned into `stamp`
        (`ScopeStamp.may_follow`: the caller reads those and checks). Else None, and what
        was kept is dropped."""
        with self._lock:
            found = self._kept.get(key)
            if found is None:
                return None
            if found[0] != stamp and not stamp.may_follow(found[0]):
                self._drop(key)
                return None
            self._kept.move_to_end(key)
            return found[0], found[1]

    def put(self, key: Hashable, stamp: ScopeStamp, candidates: Candidates, since: int) -> None:
        """Keep `candidates`, read after `stamp`, if the scope is large enough to gain and
        nothing was forgotten since they were read (`since`: `generation` before)."""
        weight = sum(map(len, filter(None, candidates.terms)))
        weight += sum(map(len, filter(None, candidates.vectors)))
        with self._lock:
            if not self._noted(key, len(candidates)) or since != self.generation:
                return
            self._drop(key)
            if weight > self._budget:
                return
            self._kept[key] = (stamp, candidates, weight)
            self._size += len(candidates)
            self._weight += weight
            while self._size > self._limit or self._weight > self._budget:
                self._drop(next(iter(self._kept)))

    def note(self, key: Hashable, size: int) -> None:
        """`key`'s scope has `size` candidates: enough to gain from keeping them (and few
        enough to fit), or no longer."""
        with self._lock:
            self._noted(key, size)

    def _noted(self, key: Hashable, size: int) -> bool:
        """`note`, under the lock; whether the scope is large."""
        if not self._smallest <= size <= self._limit:
            self._large.pop(key, None)
            self._drop(key)
            return False
        self._large[key] = None
        self._large.move_to_end(key)
        if len(self._large) > LARGE_SCOPES:
            self._large.popitem(last=False)
        return True

    def forget(self) -> dict[Hashable, tuple[ScopeStamp, Candidates, int]]:
        """Drop every scope's candidates, and those being read (a new `generation`); what
        was kept, for the caller to free (`caches.release`). Which scopes are large stays
        known (their keys hold no content)."""
        with self._lock:
            held, self._kept = self._kept, OrderedDict()
            self._size = self._weight = 0
            self.generation += 1
            return held

    def outdate(self) -> None:
        """A new `generation`: candidates being read are not kept (they may hold an item a
        removal just took); what is kept stays."""
        with self._lock:
            self.generation += 1

    def drop_holding(
        self, wrapped_keys: Collection[bytes]
    ) -> dict[Hashable, tuple[ScopeStamp, Candidates, int]]:
        """Drop the candidates of the scopes holding any of these wrapped data keys (items
        removed); what was dropped, for the caller to free. A scan of every candidate kept
        (under 2 ms for 100,000)."""
        wanted = set(wrapped_keys)
        if not wanted:
            return {}
        with self._lock:
            held = {
                key: kept
                for key, kept in self._kept.items()
                if not wanted.isdisjoint(kept[1].wrapped_keys)
            }
            for key in held:
                self._drop(key)
        return held

    def _drop(self, key: Hashable) -> None:
        found = self._kept.pop(key, None)
        if found is not None:
            self._size -= len(found[1])
            self._weight -= found[2]
