"""Our compaction hooks themselves: a snapshot of the tail, and its replacement in one
transaction (or the whole history's), on SQLite and PostgreSQL, plaintext and encrypted.

The SDK drives them in test_compaction_sdk.py; here each guarantee is checked directly.
"""

from __future__ import annotations

import asyncio
import os
import threading
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from agents_sqlalchemy import ItemError, SessionStore, SQLAlchemySession
from agents_sqlalchemy.database.engines import normalize_url, pgbouncer_mode, pgbouncer_options

from .support.clock import travel
from .support.compaction import SUMMARY
from .support.disk import found_on_disk, sqlite_path
from .support.items import message
from .support.sealed import blobs_of, sealed_rows
from .support.tables import ITEMS, SESSIONS, raw_rows

KEY = os.urandom(32)


@pytest.fixture(params=[None, KEY], ids=["plain", "sealed"])
def key(request: pytest.FixtureRequest) -> bytes | None:
    return request.param  # type: ignore[no-any-return]


async def rows(url: str, session_id: str) -> list[tuple[int, datetime, datetime | None]]:
    """(seq, created_at, expires_at) of a session's rows, in order."""
    found = await raw_rows(
        url,
        f"SELECT i.seq, i.created_at, i.expires_at FROM {ITEMS} i JOIN {SESSIONS} s "
        f"ON s.id = i.session_pk WHERE s.session_id = '{session_id}' ORDER BY i.seq",
    )
    return [(int(str(seq)), as_time(created), as_time(expires)) for seq, created, expires in found]


def as_time(value: object) -> Any:
    """A timestamp column as a comparable value (SQLite gives text)."""
    return value if value is None or isinstance(value, datetime) else str(value)


def history(tag: str, count: int) -> list[dict[str, Any]]:
    return [message(f"{tag} {i}") for i in range(count)]


async def test_snapshot_then_replace_suffix(db_url: str, key: bytes | None) -> None:
    async with SessionStore(db_url, create_tables=True, key=key, search=True) as store:
        session = store.session("s", user_id="u")
        old = history("old", 6)
        await session.add_items(old[:3])
        await session.add_items(old[3:])
        before = await rows(db_url, "s")

        snapshot = await session._get_compaction_snapshot(4)
        assert snapshot.items == old[2:] and not snapshot.complete
        assert (await session._get_compaction_snapshot(6)).complete

        assert await snapshot.replace_suffix(2, SUMMARY)
        assert await session.get_items() == old[:4] + SUMMARY
        after = await rows(db_url, "s")
        # The kept rows are untouched; the new ones are numbered after every old one and
        # keep the newest replaced row's time.
        assert after[:4] == before[:4]
        assert [seq for seq, _, _ in after[4:]] == [7, 8]
        assert {created for _, created, _ in after[4:]} == {before[5][1]}
        [info] = await store.list_sessions(user_id="u")
        assert info.item_count == 6
        # The index follows: the summary is found, the replaced items no longer are.
        assert await session.search("summary Mochi", limit=10, mode="keyword") == [SUMMARY[0]]
        found = await session.search("old 4 5", limit=10, mode="keyword")
        assert found and all(item in old[:4] for item in found)

        # The same snapshot again: its tail is gone, so nothing happens.
        assert not await snapshot.replace_suffix(0, [message("stale")])
        assert await session.get_items() == old[:4] + SUMMARY


async def test_a_long_tail_is_read_a_page_at_a_time_the_same(
    db_url: str, key: bytes | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot of a long tail (the SDK asks for the whole history) was read in one
    statement, whose rows an async driver made on the loop: 200,000 held it a second on
    PostgreSQL (and its records, four full garbage collections). Read a page at a time,
    in one snapshot (on PostgreSQL a page of arrays), it is the same."""
    from agents_sqlalchemy.repository import compaction, schema
    from agents_sqlalchemy.repository import items as items_module

    monkeypatch.setattr(compaction, "TAIL_PAGE", 3)  # and on PostgreSQL, pages of arrays:
    for module in (compaction, items_module, schema):
        monkeypatch.setattr(module, "ARRAY_ROWS", 3)
    async with SessionStore(db_url, create_tables=True, key=key, search=False) as store:
        session = store.session("s")
        items = history("item", 10)
        await session.add_items(items)
        await session.pop_item()  # a gap in the places
        await session.add_items(items[9:])
        for limit in (1, 2, 3, 4, 6, 9, 10, 11, 30):
            snapshot = await session._get_compaction_snapshot(limit)
            assert snapshot.items == items[-limit:], limit
            assert snapshot.complete == (limit >= 10), limit
        assert (await session.repair()).ok and await session.get_items() == items


@pytest.mark.dialects("sqlite", "postgresql", "mariadb", "pgbouncer")
@pytest.mark.parametrize("given", ["url", "engine"])
async def test_a_long_tail_read_in_pages_is_one_snapshot(
    db_url: str, given: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer's clear and new items between two pages of a long tail: on SQLite
    (whose reads begin no transaction) and on MariaDB reading committed, the later pages
    saw the new state, and the snapshot held a third of the old history, said complete.
    (An app's SQLite engine was then asked for REPEATABLE READ, which SQLite refuses.)"""
    from agents_sqlalchemy.repository import compaction, schema
    from agents_sqlalchemy.repository import items as items_module
    from agents_sqlalchemy.repository.prepared import Prepared

    monkeypatch.setattr(compaction, "TAIL_PAGE", 3)
    for module in (compaction, items_module, schema):
        monkeypatch.setattr(module, "ARRAY_ROWS", 3)
    read_committed = {"isolation_level": "READ COMMITTED"} if "mysql" in db_url else None
    pages: list[int] = []
    real_run = Prepared.run

    def run(self: Prepared, conn: Any, params: Any) -> list[Any]:
        found = real_run(self, conn, params)
        if reading and ("page" in params or "after" in params):  # a page of the tail
            pages.append(len(found))
            if len(pages) == 1:  # another writer, between the first page and the next
                writer = threading.Thread(target=asyncio.run, args=(rewrite(),))
                writer.start()
                writer.join()
        return found

    async def rewrite() -> None:
        await other.session("s").clear_session()
        await other.session("s").add_items(history("new", 2))

    reading = False
    monkeypatch.setattr(Prepared, "run", run)
    url, pooled = pgbouncer_mode(make_url(normalize_url(db_url)))
    options: dict[str, Any] = read_committed or {}
    if pooled:  # the app's engine made safe behind a transaction pooler, as the store's
        url, options = pgbouncer_options(url, options)
    engine = create_async_engine(url, **options)
    if given == "engine":
        store = SessionStore(engine, create_tables=True, search=False)
    else:
        store = SessionStore(db_url, create_tables=True, search=False, engine_kwargs=read_committed)
    other = SessionStore(db_url, search=False)
    try:
        old = history("old", 10)
        await store.session("s").add_items(old)
        reading = True
        snapshot = await store.session("s")._get_compaction_snapshot(50)
        reading = False
        assert len(pages) > 1  # read in pages, the writer between them
        assert (snapshot.items, snapshot.complete) == (old, True)
        assert await store.session("s").get_items() == history("new", 2)
    finally:
        await store.close()
        await other.close()
        await engine.dispose()


async def test_a_moved_tail_is_refused_and_nothing_changes(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with SessionStore(db_url, create_tables=True) as store, SessionStore(db_url) as other:
        session, elsewhere = store.session("s"), other.session("s")
        await session.add_items(history("old", 4))
        expected = await session.get_items()

        async def refused(change: Any) -> None:
            snapshot = await session._get_compaction_snapshot(10)
            await change()
            now = await session.get_items()
            assert not await snapshot.replace_suffix(0, SUMMARY)
            assert await session.get_items() == now

        await refused(lambda: elsewhere.add_items([message("appended meanwhile")]))
        expected.append(message("appended meanwhile"))
        await refused(elsewhere.pop_item)
        expected.pop()
        assert await session.get_items() == expected
        snapshot = await session._get_compaction_snapshot(10)
        assert not await snapshot.replace_suffix(4, SUMMARY)  # nothing from 4 on: no-op
        assert await session.get_items() == expected

        await store.session("short", ttl=60).add_items([message("soon gone")])
        snapshot = await store.session("short")._get_compaction_snapshot(10)
        travel(monkeypatch, timedelta(minutes=2))  # the item expires meanwhile
        assert not await snapshot.replace_suffix(0, SUMMARY)
        assert await store.session("short").get_items() == []


async def test_expiry_follows_the_replaced_rows(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with SessionStore(db_url, create_tables=True, ttl=3600) as store:
        session = store.session("s")
        await session.add_items([message("first")])
        travel(monkeypatch, timedelta(minutes=10))
        await session.add_items([message("second")])
        latest = (await rows(db_url, "s"))[-1][2]
        assert await (await session._get_compaction_snapshot(2)).replace_suffix(0, SUMMARY)
        assert {expires for _, _, expires in await rows(db_url, "s")} == {latest}

        # One replaced item that never expires: neither does the summary.
        forever = store.session("forever")
        await forever.add_items([message("brief")])
        async with SessionStore(db_url) as no_ttl:
            await no_ttl.session("forever").add_items([message("kept")])
        assert await forever._atomic_replace_items(SUMMARY)
        assert {expires for _, _, expires in await rows(db_url, "forever")} == {None}

        # Nothing to follow: the session's own ttl, from now.
        fresh = store.session("fresh", ttl=60)
        assert await fresh._atomic_replace_items(SUMMARY)
        [(_, created, expires), _] = await rows(db_url, "fresh")
        assert created != expires and await fresh.get_items() == SUMMARY


async def test_prune_prefix_deletes_the_leading_run_it_matches(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("s")
        items = [*history("stale", 3), message("keep"), message("stale but after"), message("x")]
        await session.add_items(items)
        seen: list[Any] = []

        def prune(item: Any) -> bool:
            seen.append(item)
            return str(item["content"]).startswith("stale")

        snapshot = await session._get_compaction_snapshot(1, prune_prefix=prune)
        assert await snapshot.replace_suffix(0, SUMMARY)
        assert await session.get_items() == items[3:5] + SUMMARY
        assert seen == items[:4]  # decoded in order, stopped at the first it keeps


async def test_whole_history_replacement(db_url: str, key: bytes | None) -> None:
    async with SessionStore(db_url, create_tables=True, key=key, search=True) as store:
        session = store.session("s", user_id="u")
        await session.add_items(history("old", 5))
        before = await rows(db_url, "s")
        assert await session._atomic_replace_items(SUMMARY)
        assert await session.get_items() == SUMMARY
        after = await rows(db_url, "s")
        assert [seq for seq, _, _ in after] == [6, 7]
        assert {created for _, created, _ in after} == {before[-1][1]}
        assert [info.item_count for info in await store.list_sessions(user_id="u")] == [2]
        assert await session.search("old 1", mode="keyword") == []
        assert await session.search("Mochi", mode="keyword") == [SUMMARY[0]]


async def test_bad_output_raises_before_anything_changes(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("s")
        await session.add_items(history("old", 3))
        snapshot = await session._get_compaction_snapshot(3)
        with pytest.raises(ItemError):
            await snapshot.replace_suffix(0, [message("ok"), {"bad": object()}])
        with pytest.raises(ItemError):
            await session._atomic_replace_items(["not an object"])  # type: ignore[list-item]
        assert await session.get_items() == history("old", 3)
        assert await snapshot.replace_suffix(0, SUMMARY)  # the snapshot is still current


async def test_replaced_items_keys_are_destroyed_on_disk(db_url: str) -> None:
    big = [message(f"big {i} " + os.urandom(12_000).hex()) for i in range(3)]
    async with SessionStore(db_url, create_tables=True, key=KEY) as store:
        keep, suffix, whole = store.session("keep"), store.session("suffix"), store.session("all")
        for session in (keep, suffix, whole):
            await session.add_items(big)
        kept = blobs_of(await sealed_rows(db_url, "keep"))
        replaced = blobs_of((await sealed_rows(db_url, "suffix"))[1:])
        replaced += blobs_of(await sealed_rows(db_url, "all"))
        assert await (await suffix._get_compaction_snapshot(2)).replace_suffix(0, SUMMARY)
        assert await whole._atomic_replace_items(SUMMARY)
        await store.flush()  # the WAL is checkpointed just after a removal, off its path
        stored = {bytes(b) for (b,) in await raw_rows(db_url, f"SELECT ciphertext FROM {ITEMS}")}
        assert not stored & set(replaced)
        if sqlite_path(db_url) is not None:
            assert found_on_disk(db_url, replaced) == [], "replaced bytes remain in file or WAL"
            assert found_on_disk(db_url, kept) == kept
        assert await suffix.get_items() == big[:1] + SUMMARY
        assert await whole.get_items() == SUMMARY


async def test_a_subclass_that_overrides_the_protocol_gets_no_hooks(sqlite_url: str) -> None:
    class Tagging(SQLAlchemySession):
        async def add_items(self, items: list[Any]) -> None:
            await super().add_items([{**item, "tag": 1} for item in items])

    session = Tagging("s", sqlite_url, create_tables=True)
    await session.add_items([message("hi")])
    assert await session._get_compaction_snapshot(5) is None
    assert not await session._atomic_replace_items(SUMMARY)
    assert await session.get_items() == [{**message("hi"), "tag": 1}]
    await session.store.close()


def run_result(total: int) -> Any:
    """What `store_run_usage` reads of a run: its context's usage (one request, `total`)."""
    from agents.run_context import RunContextWrapper
    from agents.usage import Usage

    used = Usage(requests=1, input_tokens=total, output_tokens=0, total_tokens=total)
    return type("Result", (), {"context_wrapper": RunContextWrapper(context=None, usage=used)})()


async def test_a_compaction_drops_the_usage_of_the_turns_it_rewrites(
    db_url: str, key: bytes | None
) -> None:
    """The usage of replaced turns stayed, under turn numbers that the next records, counted
    again over the compacted history, took over: a later turn overwrote an old turn's
    figures, and the totals matched nothing. It goes now, as with the SDK's
    `AdvancedSQLiteSession` (whose compaction clears the session); a repair keeps it."""
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        session = store.session("s")
        for turn, total in enumerate((1, 10, 100)):
            await session.add_items([message(f"q{turn}"), {"role": "assistant", "content": "a"}])
            await session.store_run_usage(run_result(total))
        assert [row["total_tokens"] for row in await session.get_turn_usage()] == [1, 10, 100]
        assert await session._atomic_replace_items(SUMMARY)  # the whole history: turn 1
        assert await session.get_turn_usage() == []
        await session.add_items([message("q3"), {"role": "assistant", "content": "a3"}])
        await session.store_run_usage(run_result(1000))
        rows = await session.get_turn_usage()
        assert [(row["user_turn_number"], row["total_tokens"]) for row in rows] == [(2, 1000)]

        snapshot = await session._get_compaction_snapshot(2)  # the latest turn alone
        assert await snapshot.replace_suffix(0, SUMMARY)
        assert await session.get_session_usage() is None
        await session.add_items([message("q4")])
        await session.store_run_usage(run_result(7))
        rows = await session.get_turn_usage()
        assert [(row["user_turn_number"], row["total_tokens"]) for row in rows] == [(3, 7)]
        assert (await session.get_session_usage() or {})["total_tokens"] == 7
