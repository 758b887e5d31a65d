"""Single measurements, each on a fresh database of its own: one line of output each.

Those that feed a target also return figures, as ``{backend key: {metric: value}}``
merged into the run's results.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import os
import sqlite3
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from .core import Results, Settings, timed
from .databases import Database
from .items import make_items

ROOT = Path(__file__).resolve().parent.parent
READER_HOLD_SECONDS = 5.0
# Sustained appends: how long each store is written to, and the app's own work per turn.
SUSTAINED_SECONDS = 8.0
APP_WORK_SECONDS = 0.0003
MIB = 1024 * 1024


async def store_open_cost(database: Database) -> str:
    """What the first call of a store costs with a raw key and with a passphrase (scrypt)."""
    from agents_sqlalchemy import SessionStore

    keys: dict[str, str | bytes] = {"raw": os.urandom(32), "passphrase": "correct horse battery"}
    figures: dict[str, float] = {}
    for label, key in keys.items():
        async with database.fresh(f"open_{label}") as location:
            async with SessionStore(location.url, create_tables=True, key=key) as store:
                await store.session("s").add_items(make_items(4))  # creates the keyring
            opened = SessionStore(location.url, key=key)
            try:
                figures[label] = await timed(opened.session("s").get_items)
            finally:
                await opened.close()
    return (
        f"opening an encrypted store (its first call: schema check, keyring, 4 items read): "
        f"raw key {figures['raw']:.1f} ms, passphrase {figures['passphrase']:.1f} ms "
        "(one scrypt derivation per store)"
    )


async def listing_cost(database: Database, sizes: tuple[int, ...] = (100, 100_000)) -> str:
    """What a page of ``list_sessions`` costs over few and over many sessions (keyset paging).

    The session rows are bulk-inserted through the library's own table (the store's API
    would take a transaction per session), then analysed on PostgreSQL; half belong to one
    user. Figures: median of 30
    calls of the first page, of the second (through its cursor), and of one user's first.
    """
    from datetime import datetime, timedelta, timezone

    from agents_sqlalchemy import SessionStore, TableNames
    from agents_sqlalchemy.models import build_models

    sessions = build_models(TableNames()).sessions
    figures: dict[int, list[float]] = {}
    for size in sizes:
        async with (
            database.fresh(f"listing_{size}") as location,
            SessionStore(location.url, create_tables=True, search=False) as store,
        ):
            await store.session("warm-up").add_items(make_items(1))
            start = datetime(2026, 1, 1, tzinfo=timezone.utc)
            rows = [
                {
                    "session_id": f"s{n}",
                    "session_hash": f"{n:064x}",
                    "user_id": "alice" if n % 2 else f"user-{n}",
                    "metadata": {"n": n},
                    "next_seq": 0,
                    "created_at": start + timedelta(seconds=n),
                    "updated_at": start + timedelta(seconds=n),
                }
                for n in range(size)
            ]
            async with store.engine.begin() as conn:
                for chunk in range(0, size, 10_000):
                    await conn.execute(sessions.insert(), rows[chunk : chunk + 10_000])
            if database.key == "postgres":  # what autovacuum does a minute after such a load:
                # with no statistics the planner takes the sessions for one row, and sorts
                # them all (19 ms for a page of 100,000, against 0.8 ms once analysed)
                async with store.engine.connect() as conn:
                    await conn.exec_driver_sql(f"ANALYZE {sessions.fullname}")
                    await conn.commit()
            cursor = (await store.list_sessions(limit=50)).next_cursor
            calls = [
                functools.partial(store.list_sessions, limit=50),
                functools.partial(store.list_sessions, limit=50, cursor=cursor),
                functools.partial(store.list_sessions, user_id="alice", limit=50),
            ]
            figures[size] = [
                statistics.median([await timed(call) for _ in range(30)]) for call in calls
            ]
    small, big = (figures[size] for size in sizes)
    return (
        f"list_sessions(limit=50) over {sizes[0]:,} / {sizes[1]:,} sessions: first page "
        f"{small[0]:.2f} / {big[0]:.2f} ms ({big[0] / small[0]:.2f}x), second page "
        f"{small[1]:.2f} / {big[1]:.2f} ms ({big[1] / small[1]:.2f}x), one user's page "
        f"{small[2]:.2f} / {big[2]:.2f} ms ({big[2] / small[2]:.2f}x)"
    )


def _hold_snapshot(path: Path) -> sqlite3.Connection:
    """A plain sqlite3 reader in the middle of a read transaction (it pins a WAL snapshot)."""
    reader = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return reader


async def pop_behind_reader(database: Database) -> tuple[Results, str]:
    """Encrypted ``pop_item`` while another connection keeps a read transaction open.

    Deleting an item destroys its key, and on SQLite the key's bytes are then scrubbed
    from the WAL too, which needs a checkpoint that a reader's snapshot holds back; the
    caller must not wait for it. The reader is held for up to READER_HOLD_SECONDS: a pop
    still waiting then has blocked on it.
    """
    from agents_sqlalchemy import SessionStore

    async with database.fresh("reader") as location:
        assert location.path is not None
        async with SessionStore(location.url, create_tables=True, key=os.urandom(32)) as store:
            session = store.session("reader")
            items = make_items(100)
            await session.add_items(items)
            await store.flush()
            normal = statistics.median([await timed(session.pop_item) for _ in range(9)])
            reader = await asyncio.to_thread(_hold_snapshot, location.path)
            started = time.perf_counter()
            popping = asyncio.ensure_future(session.pop_item())
            try:
                await asyncio.wait({popping}, timeout=READER_HOLD_SECONDS)
            finally:
                await asyncio.to_thread(reader.execute, "COMMIT")
                await asyncio.to_thread(reader.close)
            popped = await popping
            behind = (time.perf_counter() - started) * 1000.0
    right = popped == items[-10]
    line = (
        f"encrypted pop_item() behind a long reader: {behind:,.1f} ms "
        f"(without the reader: {normal:.2f} ms; the reader was held up to "
        f"{READER_HOLD_SECONDS:g} s){'' if right else '; CHECK FAILED: wrong item popped'}"
    )
    return {"ours_encrypted": {"reader_pop": behind}}, line


async def sealed_memory_held(database: Database, s: Settings) -> tuple[Results, str]:
    """What an encrypted store holds between calls after reading a session of big items
    (48 KiB each, a tool's output) twice: the Python objects still allocated once the
    reads are done (tracemalloc, every thread), against what the session weighs. Its caches
    are bounded in bytes (`codec.PLAINTEXT_BYTES`, `codec.WHOLE_READ_BYTES`): counted in
    items only, they kept each item three or four times."""
    import tracemalloc

    from agents_sqlalchemy import SessionStore, codec

    count, size = (600 if s.quick else 3000), 48 * 1024
    items: list[Any] = [{"role": "user", "content": f"{n} " + "x" * size} for n in range(count)]
    weight = sum(len(json.dumps(item)) for item in items) / MIB
    held: list[float] = []
    key = os.urandom(32)
    async with database.fresh("held") as location:
        async with SessionStore(location.url, create_tables=True, key=key, search=False) as store:
            session = store.session("big")
            for start in range(0, count, 200):
                await session.add_items(items[start : start + 200])
        del items
        async with SessionStore(location.url, key=key, search=False) as store:
            session = store.session("big")
            await session.get_items(limit=1)
            gc.collect()
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                for _ in range(2):
                    read = await session.get_items()
                    right = len(read) == count
                    del read
                    await asyncio.sleep(0)  # the read's last step lets go of what it returned
                    gc.collect()
                    held.append((tracemalloc.get_traced_memory()[0] - before) / MIB)
            finally:
                tracemalloc.stop()
    budgets = (codec.PLAINTEXT_BYTES + codec.WHOLE_READ_BYTES) / MIB
    line = (
        f"encrypted store, memory held after reading a session of {count:,} items of 48 KiB "
        f"({weight:,.0f} MiB of JSON): {held[0]:,.1f} MiB of Python objects after one read, "
        f"{held[1]:,.1f} MiB after two (its caches' budgets: {budgets:,.0f} MiB in all)"
        f"{'' if right else '; CHECK FAILED: wrong items read'}"
    )
    return {"ours_encrypted": {"held_after_reads": max(held)}}, line


async def append_statement_cost(database: Database, s: Settings) -> str:
    """PostgreSQL: where an append's time goes, in alternating rounds of 4-item turns: the
    floor's statement, the library's own append statement run bare (prepared on one
    ``asyncpg`` connection, as the floor), and the library's append (search off). The
    first ratio is what the statement costs the server (it claims the places in the
    session's row too); the rest is the library's Python: the pool, the greenlet bridge,
    the adapter, and its own work.
    """
    import asyncpg  # type: ignore[import-untyped]

    from agents_sqlalchemy import SessionStore
    from agents_sqlalchemy.types import SessionKey

    from .backends import asyncpg_dsn
    from .floor import _postgres_sessions

    turns, rounds = (100, 5) if s.quick else (300, 7)
    items = make_items(4)
    async with database.fresh("append_cost") as location:
        conn = await asyncpg.connect(asyncpg_dsn(location.url))
        store = SessionStore(location.url, create_tables=True, search=False)
        try:
            floor_session = await _postgres_sessions(conn)
            session = store.session("ours")
            await session.add_items(items)
            # The statement the store just ran, as its repository compiled it.
            schema = store._services.conversation._items._schema
            statement = store._services.conversation._items._at_once
            assert statement is not None  # plaintext, on PostgreSQL
            compiled = statement._by_dialect["postgresql", "asyncpg"]
            payloads = [json.dumps(item, separators=(",", ":")) for item in items]
            bare_session = SessionKey.of("bare")

            async def bare() -> None:
                values = schema.claim_values(bare_session, len(payloads), schema.now())
                values |= {"expires_at": None, "payloads": payloads}
                await conn.fetch(compiled.sql, *statement._parameters(compiled, values))

            floor = floor_session("floor")
            calls: dict[str, Callable[[], Awaitable[object]]] = {
                "floor": lambda: floor.add_items(items),
                "bare": bare,
                "ours": lambda: session.add_items(items),
            }
            figures: dict[str, list[float]] = {name: [] for name in calls}
            for number in range(rounds):
                for name in list(calls)[number % 3 :] + list(calls)[: number % 3]:
                    started = time.perf_counter()
                    for _ in range(turns):
                        await calls[name]()
                    figures[name].append((time.perf_counter() - started) * 1000.0 / turns)
        finally:
            await store.close()
            await conn.close()
    ms = {name: statistics.median(values) for name, values in figures.items()}

    def ratio(a: str, b: str) -> str:
        each = [x / y for x, y in zip(figures[a], figures[b], strict=True)]
        return f"{statistics.median(each):.2f}x ({min(each):.2f}\u2013{max(each):.2f})"

    return (
        f"where a PostgreSQL append goes (4-item turns, search off, {rounds} alternating "
        f"rounds): floor {ms['floor']:.3f} ms; the library's append statement on the bare "
        f"driver {ms['bare']:.3f} ms ({ratio('bare', 'floor')} the floor: the server's "
        f"work); the library {ms['ours']:.3f} ms ({ratio('ours', 'bare')} its statement "
        f"bare: the pool, the greenlet bridge, the adapter and its own Python)"
    )


async def sustained_appends(database: Database, s: Settings) -> str:
    """An app that writes turns without pause (0.3 ms of its own work between them), first
    with search off, then with the defaults: the turns written a second, counted to the end
    of the indexing (`store.flush()`), the appends' latency, and the full garbage
    collections meanwhile.

    The writes never pause, so the indexing runs beside them (after at most
    ``GATHER_LIMIT`` gathering pauses). A full collection walks every object of the
    process (the SDK's modules alone hold over 200,000) and stops every thread while it
    runs: what the indexing leaves to collect shows as the longest appends.
    """
    seconds = SUSTAINED_SECONDS / (4 if s.quick else 1)
    parts, rates = [], []
    for search in (False, True):
        latencies, full, elapsed = await _write_without_pause(database, search, seconds)
        latencies.sort()
        p99 = latencies[int(0.99 * (len(latencies) - 1))]
        collections = ", ".join(f"{ms:.0f}" for ms in full) or "none"
        rates.append(len(latencies) / elapsed)
        parts.append(
            f"{'defaults' if search else 'search=False'}: {len(latencies):,} turns, "
            f"{rates[-1]:,.0f} a second to the end of the indexing, p50 "
            f"{statistics.median(latencies):.2f} ms, p99 {p99:.2f} ms, longest "
            f"{latencies[-1]:.1f} ms; full collections (ms): {collections}"
        )
    return (
        f"sustained appends for {seconds:g} s each (ours): "
        + "; ".join(parts)
        + f"; turns a second, defaults / search=False: {rates[1] / rates[0]:.2f}x"
    )


async def _write_without_pause(
    database: Database, search: bool, seconds: float
) -> tuple[list[float], list[float], float]:
    """The ms of each append, and of each full collection while they ran; and the seconds
    from the first append to the end of the indexing."""
    from agents_sqlalchemy import SessionStore

    turns = [make_items(4, start=n) for n in range(500)]
    latencies: list[float] = []
    full: list[float] = []
    started = [0.0]

    def watch(phase: str, info: dict[str, int]) -> None:
        if info["generation"] == 2 and phase == "start":
            started[0] = time.perf_counter()
        elif info["generation"] == 2:
            full.append((time.perf_counter() - started[0]) * 1000.0)

    async with (
        database.fresh(f"sustained_{search}") as location,
        SessionStore(location.url, create_tables=True, search=search) as store,
    ):
        session = store.session("sustained")
        await session.add_items(turns[0])
        gc.callbacks.append(watch)
        try:
            began = time.perf_counter()
            ends = began + seconds
            while time.perf_counter() < ends:
                add = functools.partial(session.add_items, turns[len(latencies) % len(turns)])
                latencies.append(await timed(add))
                work_ends = time.perf_counter() + APP_WORK_SECONDS
                while time.perf_counter() < work_ends:
                    pass
            await store.flush()
            elapsed = time.perf_counter() - began
        finally:
            gc.callbacks.remove(watch)
    return latencies, full, elapsed


async def _child(mode: str, url: str, name: str, number: int) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "benchmarks.semantic",
        mode,
        url,
        name,
        str(number),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await process.communicate()
    lines = out.decode().strip().splitlines()
    if process.returncode != 0 or not lines:
        raise RuntimeError(f"benchmarks.semantic {mode} exited with {process.returncode}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


async def semantic_search(database: Database, s: Settings) -> tuple[Results, str]:
    """Issue 10: a first search with a cold semantic model, then later searches (p50)."""
    name = s.semantic_embedder
    async with database.fresh("semantic") as location:
        built = await _child("build", location.url, name, s.semantic_items)
        if "skipped" in built:
            note = f"semantic search ({name}): skipped: {built['skipped']}"
            return {"semantic": {"semantic_first_skipped": 1.0, "semantic_p50_skipped": 1.0}}, note
        found = await _child("search", location.url, name, s.semantic_calls)
    figures = {"semantic_first": found["first_ms"], "semantic_p50": found["p50_ms"]}
    line = (
        f"semantic search ({built['model']}, {s.semantic_items:,} items indexed at "
        f"{built['index_rate']:,.0f} items/s): a new process imports the library in "
        f"{found['import_ms']:,.0f} ms, then its first search (new store, cold model) takes "
        f"{found['first_ms']:,.0f} ms; later searches p50 {found['p50_ms']:.1f} ms, p95 "
        f"{found['p95_ms']:.1f} ms"
        + ("" if found["first_hits"] else "; CHECK FAILED: the first search found nothing")
    )
    return {"semantic": figures}, line
