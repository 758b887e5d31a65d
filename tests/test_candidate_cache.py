"""A large scope's candidates are read once while the scope is unchanged (issue 38: the
heavy user's search page), and never stand in for a scope that changed.

Each search reads its scope's stamp first; these tests count the candidate reads that
follow, and change the scope every way the library can, through a second store on the
same database (another process, as far as the first one can tell).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from agents_sqlalchemy import SessionStore
from agents_sqlalchemy.candidate_cache import CACHE_FROM, CandidateCache
from agents_sqlalchemy.repository import SearchIndex
from agents_sqlalchemy.types import Candidates, ScopeStamp

from .support.clock import travel
from .support.items import message
from .support.threads import on_threads

# A user with two sessions, each with more live items than CACHE_FROM.
FILLER = CACHE_FROM + 10
QUERY = "zanzibar sunset ferry"


def _candidates(count: int) -> Candidates:
    return Candidates(
        item_pks=list(range(count)),
        session_hashes=["h"] * count,
        seqs=list(range(count)),
        positions=[float(n) for n in range(count)],
        terms=[b"x" * 12] * count,
        has_vector=[False] * count,
        vectors=[None] * count,
        wrapped_keys=[None] * count,
        kek_ids=[None] * count,
    )


def test_kept_candidates_answer_only_their_own_stamp_and_the_oldest_go_first() -> None:
    cache = CandidateCache(limit=10, smallest=3)
    one, two = ScopeStamp(5, (1, 2, 3)), ScopeStamp(5, (1, 2, 4))
    cache.put("small", one, _candidates(2), 0)  # read in a few milliseconds: not kept
    assert cache.get("small", one) is None
    kept = _candidates(4)
    cache.put("a", one, kept, 0)
    assert cache.get("a", one) == (one, kept)
    assert cache.get("a", two) is None  # another stamp: dropped ...
    assert cache.get("a", one) is None  # ... for good
    cache.put("a", one, _candidates(4), 0)
    cache.put("b", one, _candidates(4), 0)
    assert cache.get("a", one) is not None  # "a" used last: "b" is the oldest
    cache.put("c", one, _candidates(4), 0)  # 12 candidates > 10
    assert cache.get("b", one) is None
    assert cache.get("a", one) is not None and cache.get("c", one) is not None
    cache.put("huge", one, _candidates(11), 0)  # more than the whole cache: not kept
    assert cache.get("huge", one) is None
    assert cache.large("a") and not cache.large("small") and not cache.large("huge")
    cache.note("b", 3)  # seen large beside a stamp: its next search reads the stamp first
    assert cache.large("b") and cache.get("b", one) is None
    cache.note("a", 2)  # shrunk: neither large nor kept
    assert not cache.large("a") and cache.get("a", one) is None


def test_kept_candidates_of_an_older_stamp_are_given_if_items_may_have_been_added() -> None:
    cache = CandidateCache(limit=100, smallest=3)
    old = ScopeStamp(4, (10, 6, 4), newest=4)
    added = ScopeStamp(2, (11, 9, 2), newest=6)  # rows 5 and 6: numbers 4 and 5, session 1
    assert old.plus(added) == ScopeStamp(6, (21, 15, 6), newest=6)
    kept = _candidates(4)
    cache.put("a", old, kept, 0)
    assert cache.get("a", old.plus(added)) == (old, kept)  # more items, a newer newest
    assert cache.get("a", ScopeStamp(5, (15, 9, 5), newest=4)) is None  # no newer row: dropped
    cache.put("a", old, kept, 0)
    assert cache.get("a", ScopeStamp(3, (6, 3, 3), newest=6)) is None  # fewer items: dropped


def test_forgetting_drops_what_was_kept_and_what_was_being_read() -> None:
    cache = CandidateCache(limit=100, smallest=3)
    one = ScopeStamp(5, (1, 2, 3))
    since = cache.generation  # a search notes it, then reads its candidates ...
    kept = _candidates(4)
    cache.put("a", one, kept, since)
    late = cache.generation  # ... and this one reads while a removal forgets
    held = cache.forget()
    assert [found for _, found, _ in held.values()] == [kept]  # for the caller to free
    assert cache.get("a", one) is None
    cache.put("b", one, _candidates(4), late)  # read before the removal: not kept
    assert cache.get("b", one) is None
    assert cache.large("a") and cache.large("b")  # their next searches read the stamp first
    cache.put("b", one, _candidates(4), cache.generation)
    assert cache.get("b", one) is not None


def test_kept_candidates_stay_within_their_bytes_the_oldest_going_first() -> None:
    # Each candidate weighs its packed terms (12 bytes here) and its vector, if read.
    cache = CandidateCache(limit=1000, smallest=3, budget=120)
    one = ScopeStamp(5, (1, 2, 3))
    cache.put("a", one, _candidates(4), 0)
    cache.put("b", one, _candidates(4), 0)
    cache.put("c", one, _candidates(4), 0)  # 144 bytes > 120
    assert cache.get("a", one) is None
    assert cache.get("b", one) is not None and cache.get("c", one) is not None
    heavy = _candidates(4)
    heavy.has_vector[:], heavy.vectors[:] = [True] * 4, [b"v" * 30] * 4
    cache.put("heavy", one, heavy, 0)  # 168 bytes: more than the whole cache, not kept
    assert cache.get("heavy", one) is None
    assert cache.get("b", one) is not None and cache.get("c", one) is not None


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many candidates each candidate read returned, in order."""
    counted: list[int] = []
    real = SearchIndex.candidates

    async def candidates(self: SearchIndex, *args: Any, **kwargs: Any) -> Any:
        found = await real(self, *args, **kwargs)
        counted.append(len(found[0]))
        return found

    monkeypatch.setattr(SearchIndex, "candidates", candidates)
    yield counted


async def _fill(store: SessionStore) -> None:
    for name in ("ana-1", "ana-2"):
        session = store.session(name, user_id="ana")
        await session.add_items([message(f"note {n} on the {name} garden") for n in range(FILLER)])
    await store.flush()


async def _found(store: SessionStore) -> list[tuple[str, int]]:
    hits = await store.search(QUERY, user_id="ana", mode="keyword", limit=5)
    return sorted((hit.session_id, hit.seq) for hit in hits)


async def test_an_unchanged_scope_is_read_once_and_every_change_is_seen(
    db_url: str, reads: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with (
        SessionStore(db_url, create_tables=True) as store,
        SessionStore(db_url) as other,
    ):
        await _fill(store)
        ride = ("ana-1", FILLER + 1)
        await store.session("ana-1").add_items([message("a zanzibar sunset ferry ride")])
        await store.flush()
        for _ in range(3):  # hybrid: vectors and terms
            [hit] = await store.search(QUERY, user_id="ana", limit=1)
            assert (hit.session_id, hit.seq) == ride
        # Read with the stamp at once (a scope not seen yet), then after it (and kept); the
        # scope is unchanged since: the third search ranks the kept candidates.
        assert reads == [2 * FILLER + 1] * 2
        for _ in range(3):  # keyword mode reads no vectors: its own candidates
            assert await _found(store) == [ride]
        assert len(reads) == 4

        async def after(
            change: Awaitable[Any] | None,
            expected: list[tuple[str, int]],
            added: int = 0,
            whole: bool = True,
        ) -> None:
            """The search after `change` reads the candidates of the items written after
            the newest it kept (at most `added`), if the scope has more live items and a
            newer one, then (if the scope changed otherwise) the scope `whole`; and keeps
            them. (SQLite gives a popped last row's id to the next item written.)"""
            before = len(reads)
            if change is not None:
                await change
                await other.flush()
            assert await _found(store) == expected
            done = reads[before:]
            assert not added or 0 < done[0] <= added
            assert [size > CACHE_FROM for size in done[1 if added else 0 :]] == [True] * whole
            assert await _found(store) == expected  # kept: not read again
            assert len(reads) == before + bool(added) + whole

        # Another process writes, pops, moves a session away and back, an item expires, and
        # a session is deleted.
        ana2 = other.session("ana-2", user_id="ana")
        table = message("the zanzibar sunset ferry timetable")
        await after(ana2.add_items([table]), [ride, ("ana-2", FILLER + 1)], 1, whole=False)

        async def pop_and_write(count: int) -> None:
            await ana2.pop_item()
            await ana2.add_items([message("a plain note")] * count)

        await after(pop_and_write(1), [ride])  # as many live items as before
        await after(pop_and_write(2), [ride], 2)  # one more, but not only added: the sums tell
        await after(other.session("ana-1").set_user_id("bea"), [])
        await after(other.session("ana-1").set_user_id("ana"), [ride])
        expiring = other.session("ana-2", user_id="ana", ttl=timedelta(minutes=10))
        again = message("zanzibar sunset ferry, again")
        await after(expiring.add_items([again]), [ride, ("ana-2", FILLER + 5)], 1, whole=False)
        travel(monkeypatch, timedelta(minutes=11))
        await after(None, [ride])
        await after(other.delete_session("ana-1"), [])


async def test_an_item_written_after_the_stamp_is_read_is_ranked_once(
    db_url: str, reads: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An item written between a search's stamp and its read of the candidates is not
    kept with them (the stamp does not count it): the next search adds it once, with the
    items written after the kept stamp."""
    async with (
        SessionStore(db_url, create_tables=True) as store,
        SessionStore(db_url) as other,
    ):
        await _fill(store)
        assert len(await _found(store)) == 0  # seen large: the next search reads the stamp first
        real = SearchIndex.stamp

        async def stamp_then_write(self: SearchIndex, scope: Any, *args: Any) -> ScopeStamp:
            monkeypatch.setattr(SearchIndex, "stamp", real)
            found = await real(self, scope, *args)
            await other.session("ana-1").add_items([message("a zanzibar sunset ferry ride")])
            await other.flush()
            return found

        monkeypatch.setattr(SearchIndex, "stamp", stamp_then_write)
        assert await _found(store) == []  # as of its stamp: read without the new item
        assert reads[-1] == 2 * FILLER
        await store.session("ana-2").add_items([message("the zanzibar sunset ferry timetable")])
        await store.flush()
        both = [("ana-1", FILLER + 1), ("ana-2", FILLER + 1)]
        assert await _found(store) == both  # each once
        assert reads[-1] == 2  # the two items written since the kept stamp, alone
        assert await _found(store) == both


async def test_kept_candidates_that_missed_a_change_never_return_what_is_gone(
    db_url: str, reads: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Were a change to cancel out in every number of the stamp, the kept candidates would
    be stale: each hit is read again, and one removed, expired or moved out of the scope
    is left out (a stamp that never changes stands in for such a change)."""
    async with SessionStore(db_url, create_tables=True) as store:
        await _fill(store)
        ana1 = store.session("ana-1", user_id="ana")
        expiring = store.session("ana-2", user_id="ana", ttl=timedelta(minutes=10))
        await ana1.add_items([message("a zanzibar sunset ferry ride")])
        await expiring.add_items([message("zanzibar sunset ferry, again")])
        await store.flush()
        blind = ScopeStamp(1, (1, 1, 1), newest=2**62)  # reads up to any row id

        async def stamp(self: SearchIndex, scope: Any) -> ScopeStamp:
            return blind

        monkeypatch.setattr(SearchIndex, "stamp", stamp)
        for _ in range(2):
            assert await _found(store) == [("ana-1", FILLER + 1), ("ana-2", FILLER + 1)]
        travel(monkeypatch, timedelta(minutes=11))
        assert await _found(store) == [("ana-1", FILLER + 1)]
        await store.session("ana-1").set_user_id("bea")
        assert await _found(store) == []
        await store.session("ana-1").set_user_id("ana")
        assert await _found(store) == [("ana-1", FILLER + 1)]
        await ana1.pop_item()
        await ana1.add_items([message("bea's private note")])  # may take the popped row's id
        assert await _found(store) == []
        assert len(reads) == 2  # the rest from the kept candidates


def test_one_store_on_three_threads_sees_each_write_in_a_kept_scope(db_url: str) -> None:
    """One store serves three event loops on three threads: one writes into the large
    scope and searches for what it wrote, the others search the scope all along (keeping
    and checking its candidates at the same time); the writer always finds its item."""
    store = SessionStore(db_url, create_tables=True)
    asyncio.run(_fill(store))

    async def write_and_find() -> None:
        for n in range(6):
            item = message(f"a quokka{n} sighting")
            await store.session("ana-1").add_items([item])
            await store.flush()
            hits = await store.search(f"quokka{n}", user_id="ana", mode="keyword")
            assert [hit.item for hit in hits] == [item]

    async def search_along() -> None:
        for _ in range(12):
            hits = await store.search("garden", user_id="ana", mode="keyword", limit=3)
            assert len(hits) == 3

    on_threads(lambda index: asyncio.run(write_and_find() if index == 0 else search_along()), 3)
    asyncio.run(store.close())


async def test_an_encrypted_store_keeps_its_candidates_until_keys_change(
    db_url: str, reads: list[int]
) -> None:
    """An encrypted store keeps a large scope's candidates as a plaintext one does, through
    a pop in another session too, and reads them again once the items' keys are wrapped
    anew (a session given to another user, the owner keys rotated): the stamp does not see
    that in a session's scope, where the kept candidates would hold the old wrapped keys."""
    async with SessionStore(db_url, create_tables=True, key=os.urandom(32)) as store:
        await _fill(store)
        session = store.session("ana-1")

        async def searches() -> list[int]:
            """How many candidate reads each of three searches in the session made."""
            done = []
            for _ in range(3):
                before = len(reads)
                assert await session.search("garden", limit=1)
                done.append(len(reads) - before)
            return done

        # With the stamp at once (not seen yet), then after it (and kept), then kept.
        assert await searches() == [1, 1, 0]
        await store.session("ana-2").pop_item()  # not an item of this scope: kept
        await store.flush()  # (once the scopes that held it are dropped)
        assert await searches() == [0, 0, 0]
        await session.set_user_id("bea")
        assert await searches() == [1, 0, 0]
        await store.rotate_owner_keys()
        assert await searches() == [1, 0, 0]
        assert [hit.session_id for hit in await store.search("garden", user_id="bea")] == [
            "ana-1"
        ] * 5
