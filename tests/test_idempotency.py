"""Writes a caller can retry: an append commits whole or not at all even when its caller is
cancelled, and a batch sent again with the same idempotency key is stored once."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
from datetime import timedelta

import pytest

from agents_sqlalchemy import ConfigurationError, SessionStore

from .support.clock import travel
from .support.items import message


@pytest.mark.parametrize("key", [None, "passphrase"], ids=["plaintext", "encrypted"])
async def test_retries_after_random_cancellations_store_each_batch_once(
    db_url: str, key: str | None
) -> None:
    """Hundreds of appends, each cancelled at a random point and sent again (with its key)
    until one call finishes: every batch is stored exactly once, whole, in order. A retry
    waits up to twice as long as the one before (as a caller backing off would): a
    cancelled call can cost its connection, and a new one may take longer to open than
    the shortest waits."""
    rounds, rng = 200, random.Random(7)
    cancelled = 0
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        session = store.session("retried")
        for n in range(rounds):
            # some big enough to leave the caller's thread on SQLite (where a small one never waits)
            size = rng.choice([1, 2, 3, 80])
            batch = [message(f"batch {n} item {i}") for i in range(size)]
            for tries in itertools.count():
                try:
                    await asyncio.wait_for(
                        session.add_items(batch, idempotency_key=f"batch-{n}"),
                        rng.uniform(0, 0.004) * 2 ** min(tries, 8),
                    )
                    break
                except asyncio.TimeoutError:
                    cancelled += 1
        await asyncio.sleep(0.2)  # cancelled appends that still commit are done by now
        items = await session.get_items()
    contents = [item["content"] for item in items]
    assert len(contents) == len(set(contents)), "a batch was stored twice"
    batches = [int(c.split()[1]) for c in contents]
    assert batches == sorted(batches) and set(batches) == set(range(rounds))
    assert cancelled > 10  # the test did cancel, often


async def test_a_cancelled_append_is_whole_or_absent_and_a_keyed_retry_adds_it_once(
    sqlite_url: str,
) -> None:
    """A cancelled append still commits whole or not at all; sent again with a key (twice
    here), the batch is added exactly once more."""
    async with SessionStore(sqlite_url, create_tables=True) as store:
        session = store.session("s")
        batch = [message(f"n{i}") for i in range(2_000)]
        task = asyncio.ensure_future(session.add_items(batch))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.5)
        before = len(await session.get_items())
        assert before in (0, 2_000)  # whole or nothing
        await session.add_items(batch, idempotency_key="b")
        await session.add_items(batch, idempotency_key="b")  # the retry: nothing more
        assert len(await session.get_items()) == before + 2_000


async def test_a_cancelled_append_has_ended_when_its_caller_hears_of_it(db_url: str) -> None:
    """A caller cancelled at any point of its append sees CancelledError only once the write
    has ended: the batch is then stored whole or not at all, and stays so. (80 items: on
    SQLite a small write runs on the caller's thread, where no cancellation reaches it.)"""
    rng, size = random.Random(11), 80
    stored = 0
    told_in_flight = 0
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("told")
        for n in range(40):
            batch = [message(f"batch {n} item {i}") for i in range(size)]
            call = asyncio.ensure_future(session.add_items(batch))
            for _ in range(rng.randrange(8)):  # the cancellation lands anywhere in the call
                await asyncio.sleep(0)
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await call
            when_told = len(await session.get_items())
            assert when_told in (stored, stored + size)
            told_in_flight += when_told > stored and call.cancelled()
            await asyncio.sleep(0.02)
            stored = len(await session.get_items())
            assert stored == when_told, "the append went on after its caller was told"
    assert told_in_flight > 0  # some cancellations landed while the write was under way


async def test_the_key_of_a_batch_and_where_it_applies(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("s")
        await session.add_items([message("a")], idempotency_key="k1")
        await session.add_items([message("a again")], idempotency_key="k1")
        await store.session("other").add_items([message("b")], idempotency_key="k1")
        assert await session.get_items() == [message("a")]  # keys are per session
        assert await store.session("other").get_items() == [message("b")]
        for bad in ("", "x" * 256, 7):
            with pytest.raises(ConfigurationError, match="idempotency_key"):
                await session.add_items([message("c")], idempotency_key=bad)  # type: ignore[arg-type]
        await session.add_items([message("d")])
        await session.create_branch_from_turn(1, "b")
        with pytest.raises(ConfigurationError, match="main"):
            await session.add_items([message("e")], idempotency_key="k2")
        await session.switch_to_branch("main")
        assert await session.get_items() == [message("a"), message("d")]


async def test_a_keyed_retry_after_the_batch_expired_stores_it_purged_or_not(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An expired batch counted as held until purged: the same retry was dropped before
    `purge_expired` and stored after it."""
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("s", ttl=60)
        await session.add_items([message("batch")], idempotency_key="k1")
        await session.add_items([message("batch")], idempotency_key="k1")  # a retry: held
        assert await session.get_items() == [message("batch")]
        travel(monkeypatch, timedelta(minutes=2))
        assert await session.get_items() == []
        await session.add_items([message("batch")], idempotency_key="k1")
        assert await session.get_items() == [message("batch")]
