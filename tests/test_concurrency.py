"""Many writers at once: processes, tasks, event loops and threads, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import subprocess
from datetime import timedelta
from typing import Any

import pytest
from agents import Agent, Runner
from agents.testing import ScriptedModel, assistant_message
from sqlalchemy import event, text
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import create_async_engine

from agents_sqlalchemy import Removed, SessionStore
from agents_sqlalchemy.errors import CorruptItemError
from agents_sqlalchemy.search import item_text, term_counts
from agents_sqlalchemy.search.postings import term_id, unpack_terms
from agents_sqlalchemy.types import SessionKey

from .support.clock import travel
from .support.items import message
from .support.locks import holding_the_lock
from .support.processes import finish, spawn
from .support.tables import ITEMS, SESSIONS, execute, raw_rows
from .support.threads import on_threads


@pytest.mark.slow
@pytest.mark.pgbouncer
async def test_eight_processes_never_lose_or_interleave_a_batch(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        await store.session("busy").get_items()
    writers = [spawn("write", db_url, "busy", str(w), "50") for w in range(8)]
    for process in writers:
        finish(process)
    async with SessionStore(db_url) as store:
        items = await store.session("busy").get_items()
    assert len(items) == 1200
    tags = [json.loads(item["content"]) for item in items]
    for start in range(0, 1200, 3):
        batch = tags[start : start + 3]
        assert [i for _, _, i in batch] == [0, 1, 2], f"batch split at {start}: {batch}"
        assert len({(w, b) for w, b, _ in batch}) == 1, f"batch interleaved at {start}"
    # Each writer's batches keep their own order.
    for writer in range(8):
        assert [b for w, b, i in tags if w == writer and i == 0] == list(range(50))


@pytest.mark.slow
async def test_a_purge_never_deletes_what_another_process_wrote_after_it_chose(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite: a write unit's first SELECT ran outside its transaction (Python's sqlite3
    begins one only before an INSERT, UPDATE or DELETE), so purge_inactive chose an idle
    session, another process appended to it (and was told it was stored), and the purge
    then deleted the session with the new items."""
    async with SessionStore(sqlite_url, create_tables=True, search=False) as store:
        await store.session("s1").add_items([message("old")])
    await execute(sqlite_url, f"UPDATE {SESSIONS} SET updated_at = '2000-01-01 00:00:00'")
    writer: list[subprocess.Popen[str]] = []

    def another_process_writes(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if not writer and statement.startswith("SELECT") and "updated_at <" in statement:
            writer.append(spawn("write", sqlite_url, "s1", "7", "1"))
            with contextlib.suppress(subprocess.TimeoutExpired):  # done, or waiting
                writer[0].wait(timeout=8)

    event.listen(Engine, "after_cursor_execute", another_process_writes)
    try:
        async with SessionStore(sqlite_url, search=False) as store:
            removed = await store.purge_inactive(timedelta(days=1))
            finish(writer[0])
            items = await store.session("s1").get_items()
    finally:
        event.remove(Engine, "after_cursor_execute", another_process_writes)
    assert removed == Removed(sessions=1, items=1)
    assert [json.loads(item["content"]) for item in items] == [[7, 0, i] for i in range(3)]


@pytest.mark.slow
@pytest.mark.pgbouncer
async def test_concurrent_pops_return_each_item_once(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("pops")
        await session.add_items([message(str(i)) for i in range(120)])
    poppers = [spawn("pop", db_url, "pops", "20") for _ in range(3)]
    async with SessionStore(db_url) as first, SessionStore(db_url) as second:
        sessions = [first.session("pops"), second.session("pops")] * 10
        popped_here = await asyncio.gather(*(s.pop_item() for s in sessions for _ in range(3)))
    popped_there = [
        json.loads(line) for process in poppers for line in finish(process).splitlines()
    ]
    popped = [item["content"] for item in [*popped_here, *popped_there] if item is not None]
    assert sorted(popped, key=int) == [str(i) for i in range(120)]


async def test_a_pop_overtaken_by_a_write_pops_what_the_write_left_last(db_url: str) -> None:
    """Another client appends while a pop is under way: the pop waits for it and takes the
    new last item (PostgreSQL's pop reads without the lock, then finds its read stale)."""
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("overtaken")
        await session.add_items([message("1"), message("2")])
        hash_ = SessionKey.of("overtaken").hash
        async for conn in holding_the_lock(db_url, "overtaken"):
            await conn.execute(
                text(f"UPDATE {SESSIONS} SET next_seq = next_seq + 1 WHERE session_hash = :h"),
                {"h": hash_},
            )
            await conn.execute(
                text(
                    f"INSERT INTO {ITEMS} (session_pk, seq, created_at, payload) "
                    f"SELECT s.id, s.next_seq, i.created_at, :payload FROM {SESSIONS} s "
                    f"JOIN {ITEMS} i ON i.session_pk = s.id WHERE s.session_hash = :h "
                    "AND i.seq = 1"
                ),
                {"h": hash_, "payload": json.dumps(message("late"))},
            )
            pop = asyncio.ensure_future(session.pop_item())
            await asyncio.sleep(0.3)  # the pop has read, or waits for the lock
            assert not pop.done()
            await conn.commit()
        assert await pop == message("late")
        assert await session.get_items() == [message("1"), message("2")]


async def test_a_pop_whose_item_another_client_removed_takes_the_one_before(
    pg_url: str,
) -> None:
    """An expired item's purge removes rows without the session's lock: a pop that read
    such an item before it went reads again, and never returns what it did not remove."""
    async with SessionStore(pg_url, create_tables=True) as store:
        session = store.session("purged")
        await session.add_items([message("1"), message("2"), message("3")])
        engine = create_async_engine(pg_url)
        try:
            async with engine.connect() as conn:
                await conn.begin()
                await conn.execute(text(f"DELETE FROM {ITEMS} WHERE seq = 3"))
                pop = asyncio.ensure_future(session.pop_item())
                await asyncio.sleep(0.3)  # the pop read item 3, and waits for its row
                assert not pop.done()
                await conn.commit()
        finally:
            await engine.dispose()
        assert await pop == message("2")
        assert await session.get_items() == [message("1")]


async def test_a_pop_starts_from_what_the_last_pop_left_only_while_it_stands(
    pg_url: str,
) -> None:
    """PostgreSQL: a pop remembers the session as it left it, and the next pop removes the
    item it then saw in one statement, but only if nothing changed meanwhile: another
    client's append, an item altered or added outside the library, or one that expired
    makes that statement remove nothing, and the pop goes on from the session as it is."""
    async with SessionStore(pg_url, create_tables=True) as store:
        session = store.session("left")
        await session.add_items([message(str(i)) for i in range(1, 6)])
        assert await session.pop_item() == message("5")  # leaves "4" as the next one
        async with SessionStore(pg_url) as other:
            await other.session("left").add_items([message("other")])
        assert await session.pop_item() == message("other")
        assert await session.pop_item() == message("4")  # leaves "3"
        # A row added outside the library, the session's row untouched: still the newest.
        await execute(
            pg_url,
            f"INSERT INTO {ITEMS} (session_pk, seq, created_at, payload) SELECT session_pk, "
            f"100, created_at, :payload FROM {ITEMS} WHERE seq = 3",
            {"payload": json.dumps(message("outside"))},
        )
        assert await session.pop_item() == message("outside")
        assert await session.pop_item() == message("3")  # leaves "2"
        # The row the pop would take next, altered outside the library: loud, and kept.
        await execute(pg_url, f"UPDATE {ITEMS} SET payload = 'not json' WHERE seq = 2")
        with pytest.raises(CorruptItemError, match="#2"):
            await session.pop_item()
        assert await raw_rows(pg_url, f"SELECT seq FROM {ITEMS} ORDER BY seq") == [(1,), (2,)]


async def test_a_pop_never_returns_what_expired_since_the_last_pop(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with SessionStore(pg_url, create_tables=True) as store:
        await store.session("expiring").add_items([message("kept")])
        brief = store.session("expiring", ttl=60)
        await brief.add_items([message("brief 1"), message("brief 2")])
        assert await brief.pop_item() == message("brief 2")  # leaves "brief 1"
        # The store's clock moved past the TTL, not a sleep past a short one: on a loaded
        # machine, "brief 2" expired before its own pop (a TTL of half a second).
        travel(monkeypatch, timedelta(seconds=61))
        assert await brief.pop_item() == message("kept")


@pytest.mark.pgbouncer
async def test_first_write_to_a_new_session_from_many_tasks(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        sessions = [store.session("brand-new") for _ in range(25)]
        await asyncio.gather(*(s.add_items([message(str(i))]) for i, s in enumerate(sessions)))
        items = await store.session("brand-new").get_items()
    assert sorted(int(item["content"]) for item in items) == list(range(25))


@pytest.mark.pgbouncer
async def test_first_use_creates_tables_once_under_concurrency(db_url: str) -> None:
    stores = [SessionStore(db_url, create_tables=True) for _ in range(5)]
    try:
        await asyncio.gather(
            *(store.session(f"s{i}").add_items([message("x")]) for i, store in enumerate(stores))
        )
        assert [
            len(await store.session(f"s{i}").get_items()) for i, store in enumerate(stores)
        ] == [1] * 5
    finally:
        for store in stores:
            await store.close()


@pytest.mark.pgbouncer
def test_one_store_from_asyncio_run_three_times(db_url: str) -> None:
    store = SessionStore(db_url, create_tables=True)
    session = store.session("loops")
    for i in range(3):
        asyncio.run(session.add_items([message(str(i))]))
    assert [item["content"] for item in asyncio.run(session.get_items())] == ["0", "1", "2"]
    asyncio.run(store.close())


@pytest.mark.pgbouncer
def test_one_store_from_run_sync_in_three_threads(db_url: str) -> None:
    store = SessionStore(db_url, create_tables=True)
    asyncio.run(store.session("warm-up").get_items())  # the store has already served a loop
    outputs: list[str] = []

    def worker(index: int) -> None:
        agent = Agent(name="a", model=ScriptedModel([[assistant_message(f"reply {index}")]]))
        result = Runner.run_sync(agent, f"hi {index}", session=store.session("threads"))
        outputs.append(result.final_output)

    on_threads(worker, 3)
    assert sorted(outputs) == ["reply 0", "reply 1", "reply 2"]
    items = asyncio.run(store.session("threads").get_items())
    assert len(items) == 6
    asyncio.run(store.close())


def test_an_encrypted_store_makes_owner_keys_from_several_event_loops_at_once(db_url: str) -> None:
    """An encrypted store made its owner keys under an `asyncio.Lock`, which belongs to one
    event loop: from threads each running its own loop, writes for new users raised
    RuntimeError ("bound to a different event loop"), and a thread could wait forever."""
    store = SessionStore(db_url, create_tables=True, key=os.urandom(32))
    asyncio.run(store.session("warm-up").get_items())

    def worker(index: int) -> None:
        async def write() -> None:
            for n in range(6):
                session = store.session(f"t{index}-{n}", user_id=f"user-{n}")
                await session.add_items([message(f"{index}-{n}")])

        asyncio.run(write())

    on_threads(worker, 4)

    async def check() -> None:
        for index in range(4):
            for n in range(6):
                items = await store.session(f"t{index}-{n}").get_items()
                assert items == [message(f"{index}-{n}")]
        await store.close()

    asyncio.run(check())
    owners = asyncio.run(raw_rows(db_url, "SELECT owner FROM agents_sqlalchemy_owner_keys"))
    assert len(owners) == len(set(owners)) == 6  # one key per user


WORDS = ["disk", "full", "deploy", "rollback", "paris", "lunch", "error", "cat", "dog", "beta"]


async def _churn(store: SessionStore, seed: int, session_ids: list[str]) -> None:
    """Random appends, pops, clears, deletes and searches of a few shared sessions."""
    rnd = random.Random(seed)
    for n in range(120):
        session_id = rnd.choice(session_ids)
        session, op = store.session(session_id), rnd.random()
        if op < 0.5:
            words = [" ".join(rnd.choices(WORDS, k=3)) for _ in range(rnd.randint(1, 3))]
            await session.add_items([message(f"{text} {seed}-{n}") for text in words])
        elif op < 0.65:
            await session.pop_item()
        elif op < 0.7:
            await session.clear_session()
        elif op < 0.8:
            await store.delete_session(session_id)
        else:
            await session.search(rnd.choice(WORDS), limit=3)
        if rnd.random() < 0.3:
            await asyncio.sleep(rnd.random() * 0.01)


@pytest.mark.slow
@pytest.mark.parametrize("encrypted", [False, True], ids=["plaintext", "encrypted"])
def test_stores_on_three_threads_churning_sessions_leave_every_item_indexed_as_itself(
    db_url: str, encrypted: bool
) -> None:
    """Stores on three threads (each with three tasks) append to, pop, clear, delete and
    search the same sessions at once, each indexing on its own worker. Afterwards every
    live item has one index row, holding its own terms, and every sealed vector opens: an
    index row written for an item that was removed meanwhile never lands on another."""
    key = os.urandom(32) if encrypted else None
    session_ids = ["a", "b", "c"]

    async def churn(index: int) -> None:
        async with SessionStore(db_url, create_tables=True, key=key) as store:
            tasks = (_churn(store, index * 10 + t, session_ids) for t in range(3))
            await asyncio.gather(*tasks)

    on_threads(lambda index: asyncio.run(churn(index)), 3)

    async def check() -> None:
        async with SessionStore(db_url, key=key) as store:
            for session_id in session_ids:  # opens every vector of the session's items
                await store.session(session_id).search_hits("disk", mode="vector", limit=1000)
        items = await raw_rows(db_url, "SELECT id, payload FROM agents_sqlalchemy_items")
        index = await raw_rows(db_url, "SELECT item_pk, terms FROM agents_sqlalchemy_search_index")
        assert sorted(pk for pk, _ in index) == sorted(pk for pk, _ in items)
        if not encrypted:
            terms = {pk: unpack_terms(blob) for pk, blob in index}
            for pk, payload in items:
                own = term_counts(item_text(json.loads(str(payload))))
                assert terms[pk] == {term_id(t): c for t, c in own.items()}, payload

    asyncio.run(check())
