"""A sealed store's whole reads, kept: the next read of the same rows is answered from them,
and only of rows equal byte for byte, under the same owner and key."""

from __future__ import annotations

import asyncio
import os
import threading
import tracemalloc
from typing import Any

import pytest

from agents_sqlalchemy import SessionStore, codec
from agents_sqlalchemy.codec import SealedCodec
from agents_sqlalchemy.errors import TamperedItemError
from agents_sqlalchemy.whole_reads import Recalled, WholeReads

from .support.items import message
from .support.sealed import sealed_rows
from .support.tables import ITEMS, execute

UNDER = ("owner", None)


def rows_of(count: int, start: int = 1) -> list[tuple[int, bytes, bytes, None]]:
    return [(seq, b"sealed %d" % seq, b"key %d" % seq, None) for seq in range(start, start + count)]


def texts_of(count: int, start: int = 1) -> list[bytes]:
    return [b'{"n":%d}' % seq for seq in range(start, start + count)]


def kept(reads: WholeReads, rows: list[Any], recalled: Recalled | None = None) -> WholeReads:
    start = recalled.count if recalled is not None else 0
    recalled = recalled or Recalled(0, [], None)
    reads.keep("s", UNDER, rows, recalled, texts_of(len(rows) - start, start + 1))
    return reads


def test_a_read_kept_answers_the_same_rows_and_the_rows_after_them() -> None:
    rows = rows_of(5)
    reads = kept(WholeReads(rows=100, chunk=2, budget=2**20), rows)
    again = reads.recall("s", UNDER, rows)
    assert again.count == 5 and again.items == [{"n": n} for n in range(1, 6)]
    # Turns appended since: the first rows are recalled, the others extend the read kept.
    longer = rows + rows_of(3, start=6)
    recalled = reads.recall("s", UNDER, longer)
    assert recalled.count == 5
    kept(reads, longer, recalled)
    assert reads.recall("s", UNDER, longer).items == [{"n": n} for n in range(1, 9)]


@pytest.mark.parametrize(
    "change",
    ["ciphertext", "wrapped key", "key id", "place", "a row gone", "owner"],
)
def test_rows_that_differ_in_anything_are_not_recalled(change: str) -> None:
    rows = rows_of(4)
    reads = kept(WholeReads(rows=100, chunk=1000, budget=2**20), rows)
    now: list[Any] = list(rows)
    under: object = UNDER
    seq, ciphertext, wrapped, kek_id = rows[2]
    if change == "ciphertext":
        now[2] = (seq, ciphertext[:-1] + b"!", wrapped, kek_id)
    elif change == "wrapped key":
        now[2] = (seq, ciphertext, b"!" + wrapped[1:], kek_id)
    elif change == "key id":
        now[2] = (seq, ciphertext, wrapped, "another-key")
    elif change == "place":
        now[2] = (seq + 10, ciphertext, wrapped, kek_id)
    elif change == "a row gone":
        del now[2]
    else:
        under = ("someone else", None)
    assert reads.recall("s", under, now).count == 0
    assert reads.recall("s", UNDER, rows).count == 4  # the read kept stays


def test_the_rows_kept_stay_within_their_bound_the_oldest_read_going_first() -> None:
    reads = WholeReads(rows=10, chunk=1000, budget=2**20)
    for session in ("a", "b", "c"):
        reads.keep(session, UNDER, rows_of(4), Recalled(0, [], None), texts_of(4))
    assert reads.recall("a", UNDER, rows_of(4)).count == 0  # a went: 12 rows > 10
    assert reads.recall("b", UNDER, rows_of(4)).count == 4
    reads.keep("big", UNDER, rows_of(11), Recalled(0, [], None), texts_of(11))
    assert reads.recall("big", UNDER, rows_of(11)).count == 0  # bigger than the bound


def test_the_bytes_kept_stay_within_their_budget_the_oldest_read_going_first() -> None:
    # Each row weighs its ciphertext (b"sealed N") and its plaintext (b'{"n":N}'): 15 bytes.
    reads = WholeReads(rows=1000, chunk=1000, budget=110)
    for session in ("a", "b"):
        reads.keep(session, UNDER, rows_of(3), Recalled(0, [], None), texts_of(3))
    reads.keep("c", UNDER, rows_of(4), Recalled(0, [], None), texts_of(4))
    assert reads.recall("a", UNDER, rows_of(3)).count == 0  # a went: 150 bytes > 110
    assert reads.recall("b", UNDER, rows_of(3)).count == 3
    assert reads.recall("c", UNDER, rows_of(4)).count == 4
    # Extended by rows appended since, past the budget: not kept, and the old read goes.
    recalled = reads.recall("c", UNDER, rows_of(8))
    reads.keep("c", UNDER, rows_of(8), recalled, texts_of(4, start=5))  # 120 bytes
    assert reads.recall("c", UNDER, rows_of(4)).count == 0
    assert reads.recall("b", UNDER, rows_of(3)).count == 3


def test_a_read_replaced_meanwhile_is_not_extended_with_another_reads_rows() -> None:
    rows = rows_of(4)
    reads = kept(WholeReads(rows=100, chunk=1000, budget=2**20), rows)
    recalled = reads.recall("s", UNDER, rows + rows_of(1, start=5))
    # Meanwhile a removal forgot every read, and another read kept what it saw then.
    reads.forget()
    other = rows_of(3)
    reads.keep("s", UNDER, other, Recalled(0, [], None), [b'{"other":1}'] * 3)
    reads.keep("s", UNDER, rows + rows_of(1, start=5), recalled, texts_of(1, start=5))
    assert reads.recall("s", UNDER, other).items == [{"other": 1}] * 3


def test_reads_from_several_threads_each_get_their_items() -> None:
    reads = WholeReads(rows=10_000, chunk=50, budget=2**20)
    sessions = [f"s{n}" for n in range(8)]
    failures: list[str] = []

    def reader(session: str) -> None:
        rows: list[Any] = []
        for turn in range(30):
            rows = rows + rows_of(4, start=4 * turn + 1)
            recalled = reads.recall(session, UNDER, rows)
            reads.keep(
                session,
                UNDER,
                rows,
                recalled,
                texts_of(len(rows) - recalled.count, recalled.count + 1),
            )
            got = reads.recall(session, UNDER, rows)
            if got.count and got.items != [{"n": n} for n in range(1, len(rows) + 1)]:
                failures.append(session)

    threads = [threading.Thread(target=reader, args=(s,)) for s in sessions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


async def test_a_whole_read_opens_only_the_rows_appended_since_the_last(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    looked_up: list[int] = []
    plaintexts_of = SealedCodec._plaintexts_of

    def counting(
        self: SealedCodec, key: Any, rows: Any, usual: Any = None, start: int = 0, since: Any = None
    ) -> Any:
        looked_up.append(len(rows) - start)
        return plaintexts_of(self, key, rows, usual, start, since)

    monkeypatch.setattr(SealedCodec, "_plaintexts_of", counting)
    items = [message(f"m{n}") for n in range(30)]
    # No search: its indexer reads what is written, in the background.
    async with SessionStore(db_url, create_tables=True, key=os.urandom(32), search=False) as store:
        session = store.session("s")
        await session.add_items(items[:20])
        looked_up.clear()
        assert await session.get_items() == items[:20]
        read = await session.get_items()
        assert read == items[:20] and looked_up == [20, 0]
        read[0]["content"] = "changed by the caller"  # the next read's items are new
        await session.add_items(items[20:])
        assert await session.get_items() == items and looked_up[-1] == 10
        assert await session.get_items(limit=2) == items[-2:]  # a tail read: kept apart
        assert await session.get_items() == items and looked_up[-1] == 0
        await session.pop_item()  # a removal: nothing kept is recalled
        assert await session.get_items() == items[:-1] and looked_up[-1] == 29


async def test_a_row_altered_after_a_whole_read_fails_the_next_one(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True, key=os.urandom(32)) as store:
        session = store.session("s")
        await session.add_items([message("1"), message("2"), message("3")])
        assert len(await session.get_items()) == 3
        (_, first, _, _), (_, second, _, _), _ = await sealed_rows(db_url, "s")
        change = f"UPDATE {ITEMS} SET ciphertext = :c WHERE ciphertext = :was"
        await execute(db_url, change, {"c": second, "was": first})  # item 2's bytes at 1
        with pytest.raises(TamperedItemError, match="#1"):
            await session.get_items()
        await execute(db_url, change, {"c": first, "was": second})  # both rows now say 1's
        with pytest.raises(TamperedItemError, match="#2"):
            await session.get_items()


async def test_what_a_sealed_store_keeps_of_big_items_stays_within_its_bytes(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Items the size of a tool's output: counted in items, 200 of them are 32 MB kept.
    monkeypatch.setattr(codec, "PLAINTEXT_BYTES", 2**20)
    monkeypatch.setattr(codec, "WHOLE_READ_BYTES", 2**20)
    items = [message(f"{n} " + "x" * 40_000) for n in range(200)]
    async with SessionStore(db_url, create_tables=True, key=os.urandom(32), search=False) as store:
        session = store.session("s")
        for start in range(0, 200, 50):
            await session.add_items(items[start : start + 50])
        assert await session.get_items(limit=1) == items[-1:]
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(3):
                assert await session.get_items() == items
            await asyncio.sleep(0)  # the read's last step lets go of what it returned
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
    assert held < 3 * 2**20  # the two budgets, and room for the rest (not 4 x 8 MB)
