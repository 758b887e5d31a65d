"""Benchmark: this library against the OpenAI Agents SDK's own session backends.

One process, one run, one event loop: every workload is run against every backend on the
same machine, and the script prints each figure, the speed-up of ours against each SDK
backend and whether the project's performance targets are met.

Run it with ``make bench`` (which starts a throwaway PostgreSQL too), or from the
repository root with the package installed (``pip install -e '.[dev]'``)::

    python benchmarks/bench.py                 # SQLite, plus PostgreSQL if configured
    python benchmarks/bench.py --quick         # 10,000 instead of 100,000 items, 3 rounds
    python benchmarks/bench.py --only sqlite   # or: --only postgres
    python benchmarks/bench.py --backends sdk_sqlalchemy,sdk_sqlite   # a subset of backends
    python benchmarks/bench.py --sqlite-dir /dev/shm   # SQLite on tmpfs: CPU cost, no fsync
    python benchmarks/bench.py --strict        # exit 1 when a target is missed

PostgreSQL is benchmarked only when ``AGENTS_SQLALCHEMY_PG_URL`` is set to a server URL such
as ``postgresql+asyncpg://postgres@127.0.0.1:5432/postgres`` (``scripts/pg.sh start`` writes
one to ``.pgtmp/url``). The role needs CREATEDB: each backend gets a fresh database, dropped
at the end. On SQLite each backend gets a fresh file in a temporary directory; the cost of a
bare sqlite3 commit there is printed before and after, since on a real disk every commit
waits for an fsync and that dominates the append figures when the disk is slow.

Backends
    ours             ``agents_sqlalchemy.SessionStore`` (sqlite+aiosqlite / postgresql+asyncpg)
    ours_encrypted   the same with ``key=os.urandom(32)``: a data key per item, AES-256-GCM
    sdk_sqlalchemy   ``agents.extensions.memory.SQLAlchemySession`` on one shared engine
    sdk_encrypted    ``agents.extensions.memory.EncryptedSession`` over that SQLAlchemySession
    sdk_sqlite       ``agents.SQLiteSession`` (sync sqlite3 in worker threads; SQLite only)

A raw key keeps scrypt out of the encrypted figures; what opening a store with a passphrase
costs (one scrypt derivation per store) is measured once per database and printed apart.

Workloads (in this order, all backends of a database open at once, one database each)
    append      1,200 items in 4-item turns (300 ``add_items`` calls) -> items/s
    read_all    ``get_items()`` of a 1,200-item session -> ms per call
    limit20     ``get_items(limit=20)`` on a 1,000-item and a 100,000-item session (other
                sessions in the same tables) -> ms per call, and their ratio; the big
                session is built in 1,000-item batches, whose throughput is reported too
    pop         ``pop_item()`` on a 1,000-item session, 200 pops -> ms per call
    search      ours only, on a store of its own with ``search=True`` (the default hashing
                embedder) and the backend's key: ``session.search()`` in a 10,000-item
                session (built in 2,000-item batches, whose throughput is reported) and
                ``store.search(user_id=...)`` over 1,000 sessions of one user (10 items
                each; 200 sessions of another user beside them) -> p50 and p95 ms

Each workload is prepared on every backend, then sampled in rounds (5, or 3 with
``--quick``) that visit the backends in turn, rotating who goes first, so that a noisy
moment on the machine hits all of them alike; each figure is the median of all its samples
(5 appends; 50 reads of each kind; 200 pops; 100 searches of each kind), or for a metric
with its own ``aggregate`` (a p95) that instead. Results are checked (same items, same
order, the hit expected) and any mismatch or error is printed under the table.

To add a backend, write a factory ``(Location) -> async context manager yielding a
SessionFactory`` and append a ``Backend`` to ``BACKENDS``. To add a workload, write
``prepare(SessionFactory, Settings, Report) -> Prepared`` (set up sessions, then return a
``sample(round)`` coroutine giving raw figures per metric) and append a ``Workload`` with its
``Metric`` rows to ``WORKLOADS``; raise ``Unsupported`` from ``prepare`` where it does not
apply. Comparisons and targets are data too (``COMPARISONS``, ``TARGETS``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import importlib.metadata
import os
import platform
import secrets
import sqlite3
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from agents.items import TResponseInputItem

PG_URL_ENV = "AGENTS_SQLALCHEMY_PG_URL"


# --------------------------------------------------------------------------------------
# Items
# --------------------------------------------------------------------------------------

_PROSE = (
    "the forecast for tomorrow shows light rain in the morning clearing by noon with "
    "temperatures around sixteen degrees and a gentle breeze from the west while the "
    "evening stays dry so an umbrella is useful only before lunch please check again "
    "later because conditions near the coast can change quickly during the afternoon"
)
_WORDS = _PROSE.split()
_CITIES = ("Paris", "Berlin", "Lisbon", "Oslo", "Kyoto", "Lima", "Cairo", "Quito")


def _text(n: int, words: int) -> str:
    return " ".join(_WORDS[(n * 7 + i) % len(_WORDS)] for i in range(words))


def make_turn(n: int) -> list[TResponseInputItem]:
    """The 4 items of one realistic tool-using turn: user, function_call, output, assistant."""
    city = _CITIES[n % len(_CITIES)]
    call_id = f"call_{n:08d}{'x' * 16}"
    items: list[dict[str, Any]] = [
        {"role": "user", "content": f"Turn {n}: what is the weather in {city}? " + _text(n, 12)},
        {
            "type": "function_call",
            "id": f"fc_{n:08d}{'a' * 40}",
            "call_id": call_id,
            "name": "get_weather",
            "arguments": f'{{"city": "{city}", "units": "metric", "days": {1 + n % 5}}}',
            "status": "completed",
        },
        {
            "type": "function_call_output",
            "call_id": call_id,
            "output": (
                f'{{"city": "{city}", "temperature_c": {10 + n % 20}, "conditions": '
                f'"{_text(n + 3, 20)}", "wind_kmh": {n % 40}}}'
            ),
        },
        {
            "type": "message",
            "id": f"msg_{n:08d}{'b' * 40}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": _text(n + 5, 40), "annotations": []}],
        },
    ]
    return cast(list[TResponseInputItem], items)


@functools.cache
def make_items(count: int, start: int = 0) -> list[TResponseInputItem]:
    """``count`` items made of consecutive turns from turn ``start`` (cached: don't mutate)."""
    items: list[TResponseInputItem] = []
    turn = start
    while len(items) < count:
        items.extend(make_turn(turn))
        turn += 1
    return items[:count]


# --------------------------------------------------------------------------------------
# Backends
# --------------------------------------------------------------------------------------


class BenchSession(Protocol):
    """What every benchmarked session offers (the SDK's ``Session`` protocol, minus extras)."""

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]: ...

    async def add_items(self, items: list[TResponseInputItem]) -> None: ...

    async def pop_item(self) -> TResponseInputItem | None: ...

    async def clear_session(self) -> None: ...


SessionFactory = Callable[[str], BenchSession]


@dataclass(frozen=True)
class Location:
    """Where a backend stores its data: a fresh SQLite file or a fresh PostgreSQL database."""

    database: str  # key of DATABASES
    url: str  # SQLAlchemy async URL
    path: Path | None = None  # the SQLite file, if any


@dataclass(frozen=True)
class Backend:
    key: str
    label: str
    databases: frozenset[str]
    open: Callable[[Location], AbstractAsyncContextManager[SessionFactory]]


@asynccontextmanager
async def open_ours(location: Location) -> AsyncIterator[SessionFactory]:
    from agents_sqlalchemy import SessionStore

    store = SessionStore(location.url, create_tables=True)
    try:
        yield cast(SessionFactory, store.session)
    finally:
        await store.close()


@asynccontextmanager
async def open_ours_encrypted(location: Location) -> AsyncIterator[SessionFactory]:
    from agents_sqlalchemy import SessionStore

    store = SessionStore(location.url, create_tables=True, key=os.urandom(32))
    try:
        yield cast(SessionFactory, store.session)
    finally:
        await store.close()


@asynccontextmanager
async def open_sdk_sqlalchemy(location: Location) -> AsyncIterator[SessionFactory]:
    # One engine for all sessions, as an app would do; equivalent to ``from_url`` otherwise.
    from agents.extensions.memory import SQLAlchemySession
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(location.url)

    def factory(session_id: str) -> BenchSession:
        return SQLAlchemySession(session_id, engine=engine, create_tables=True)

    try:
        yield factory
    finally:
        await engine.dispose()


@asynccontextmanager
async def open_sdk_encrypted(location: Location) -> AsyncIterator[SessionFactory]:
    # Fernet under a key derived per session (HKDF), over the SDK's SQLAlchemySession.
    from agents.extensions.memory import EncryptedSession, SQLAlchemySession
    from cryptography.fernet import Fernet
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(location.url)
    master_key = Fernet.generate_key().decode()

    def factory(session_id: str) -> BenchSession:
        underlying = SQLAlchemySession(session_id, engine=engine, create_tables=True)
        return EncryptedSession(
            session_id=session_id,
            underlying_session=underlying,
            encryption_key=master_key,
            ttl=7 * 24 * 3600,  # nothing expires during the run
        )

    try:
        yield factory
    finally:
        await engine.dispose()


@asynccontextmanager
async def open_sdk_sqlite(location: Location) -> AsyncIterator[SessionFactory]:
    from agents import SQLiteSession

    if location.path is None:
        raise Unsupported("SQLiteSession needs a SQLite file")
    path = location.path
    opened: list[SQLiteSession] = []

    def factory(session_id: str) -> BenchSession:
        session = SQLiteSession(session_id, path)
        opened.append(session)
        return session

    try:
        yield factory
    finally:
        for session in opened:
            session.close()


BACKENDS: list[Backend] = [
    Backend("ours", "ours", frozenset({"sqlite", "postgres"}), open_ours),
    Backend(
        "ours_encrypted",
        "ours encrypted",
        frozenset({"sqlite", "postgres"}),
        open_ours_encrypted,
    ),
    Backend(
        "sdk_sqlalchemy",
        "SDK SQLAlchemySession",
        frozenset({"sqlite", "postgres"}),
        open_sdk_sqlalchemy,
    ),
    Backend(
        "sdk_encrypted",
        "SDK EncryptedSession",
        frozenset({"sqlite", "postgres"}),
        open_sdk_encrypted,
    ),
    Backend("sdk_sqlite", "SDK SQLiteSession", frozenset({"sqlite"}), open_sdk_sqlite),
]


# --------------------------------------------------------------------------------------
# Databases
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Database:
    key: str
    label: str
    # (backend key) -> async context manager yielding a fresh, empty Location
    fresh: Callable[[str], AbstractAsyncContextManager[Location]]
    describe: Callable[[], Awaitable[str]]
    # a one-line measurement of the storage itself, printed before and after the run
    probe: Callable[[], Awaitable[str]] | None = None


def sqlite_database(directory: Path) -> Database:
    @asynccontextmanager
    async def fresh(backend_key: str) -> AsyncIterator[Location]:
        path = directory / f"{backend_key}.db"
        yield Location("sqlite", f"sqlite+aiosqlite:///{path}", path)

    async def describe() -> str:
        return f"SQLite {sqlite3.sqlite_version}, a fresh file per backend in {directory}"

    def commit_cost() -> float:
        """Median ms of a one-row sqlite3 commit in WAL mode (synchronous=FULL, the default)."""
        path = directory / "probe.db"
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("CREATE TABLE IF NOT EXISTS probe (x TEXT)")
            durations = []
            for _ in range(50):
                started = time.perf_counter()
                conn.execute("BEGIN")
                conn.execute("INSERT INTO probe VALUES (?)", ("x" * 500,))
                conn.execute("COMMIT")
                durations.append(time.perf_counter() - started)
        finally:
            conn.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return statistics.median(durations) * 1000.0

    async def probe() -> str:
        cost = await asyncio.to_thread(commit_cost)
        return f"a bare sqlite3 commit (WAL, synchronous=FULL) takes {cost:.3f} ms here"

    return Database("sqlite", "SQLite", fresh, describe, probe)


def postgres_database(server_url: str) -> Database:
    from sqlalchemy.engine import make_url

    url = make_url(server_url)
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+asyncpg")
    admin_dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)

    async def admin(sql: str) -> Any:
        import asyncpg  # type: ignore[import-untyped]

        conn = await asyncpg.connect(admin_dsn)
        try:
            return await conn.fetchval(sql)
        finally:
            await conn.close()

    @asynccontextmanager
    async def fresh(backend_key: str) -> AsyncIterator[Location]:
        name = f"bench_{backend_key}_{os.getpid()}_{secrets.token_hex(3)}"
        await admin(f'CREATE DATABASE "{name}"')
        try:
            db_url = url.set(database=name).render_as_string(hide_password=False)
            yield Location("postgres", db_url)
        finally:
            await admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    async def describe() -> str:
        version = await admin("SHOW server_version")
        fsync = await admin("SHOW fsync")
        commit = await admin("SHOW synchronous_commit")
        where = url.set(database=None).render_as_string(hide_password=True)
        return (
            f"PostgreSQL {version} at {where} (fsync={fsync}, synchronous_commit={commit}), "
            "a fresh database per backend"
        )

    return Database("postgres", "PostgreSQL", fresh, describe)


# --------------------------------------------------------------------------------------
# Workloads
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    quick: bool
    rounds: int = 5  # every workload samples each backend this many times, round-robin
    append_items: int = 1200
    turn_size: int = 4
    read_all_items: int = 1200
    read_all_calls: int = 10  # per round
    small_items: int = 1000
    big_items: int = 100_000
    batch_size: int = 1000
    limit: int = 20
    limit_calls: int = 10  # per round and session
    pop_items: int = 1000
    pops: int = 40  # per round
    warmup: int = 3
    search_items: int = 10_000
    search_batch: int = 2000
    search_sessions: int = 1000  # of one user
    search_session_items: int = 10
    search_other_sessions: int = 200  # of another user, in the same tables
    search_calls: int = 20  # per round and kind

    @classmethod
    def make(cls, quick: bool) -> Settings:
        return cls(quick=True, rounds=3, big_items=10_000) if quick else cls(quick=False)


@dataclass
class Report:
    """Correctness problems and other remarks collected while a backend runs."""

    notes: list[str] = field(default_factory=list)

    def check(self, ok: bool, message: str) -> None:
        if not ok:
            self.notes.append(f"CHECK FAILED: {message}")


class Unsupported(Exception):
    """Raised by a workload's prepare step when it does not apply to a backend (n/a)."""


# metric key -> raw measurements (items/s, ms, ...); medians are taken over all of them
Samples = dict[str, list[float]]


@dataclass
class Prepared:
    """A workload made ready on one backend: ``sample(round)`` measures one round."""

    sample: Callable[[int], Awaitable[Samples]]
    setup: Samples = field(default_factory=dict)  # figures measured while preparing
    close: Callable[[], Awaitable[None]] | None = None  # after the last round


@dataclass(frozen=True)
class Metric:
    key: str
    label: str  # may use {field} placeholders from Settings
    unit: str
    higher_is_better: bool
    comparable: bool = True  # False: no cross-backend speed-up (e.g. for a ratio)
    # computed from the other medians of the same backend instead of measured
    derive: Callable[[dict[str, float]], float | None] | None = None
    # how the samples make the figure (the median unless said otherwise)
    aggregate: Callable[[list[float]], float] = statistics.median


def p95(values: list[float]) -> float:
    """The 95th percentile, by nearest rank."""
    ordered = sorted(values)
    return ordered[max(0, -(-len(ordered) * 95 // 100) - 1)]


@dataclass(frozen=True)
class Workload:
    key: str
    metrics: tuple[Metric, ...]
    prepare: Callable[[SessionFactory, Settings, Report], Awaitable[Prepared]]


async def timed(call: Callable[[], Awaitable[object]]) -> float:
    """Milliseconds one awaited call takes."""
    started = time.perf_counter()
    await call()
    return (time.perf_counter() - started) * 1000.0


def same_items(got: Sequence[object], expected: Sequence[object]) -> str | None:
    """None when equal, else a short description of the first difference."""
    if len(got) != len(expected):
        return f"{len(got)} items, expected {len(expected)}"
    for index, (a, b) in enumerate(zip(got, expected, strict=True)):
        if a != b:
            return f"item {index} differs: got {str(a)[:120]!r}, expected {str(b)[:120]!r}"
    return None


async def build(session: BenchSession, items: list[TResponseInputItem], batch: int) -> float:
    """Add ``items`` in ``batch``-sized calls; return the throughput in items/s."""
    started = time.perf_counter()
    for offset in range(0, len(items), batch):
        await session.add_items(items[offset : offset + batch])
    return len(items) / (time.perf_counter() - started)


async def prepare_append(factory: SessionFactory, s: Settings, report: Report) -> Prepared:
    turns = [make_items(s.turn_size, start=t) for t in range(s.append_items // s.turn_size)]

    async def sample(round_: int) -> Samples:
        session = factory(f"append-{round_}")
        started = time.perf_counter()
        for turn in turns:
            await session.add_items(turn)
        rate = s.append_items / (time.perf_counter() - started)
        if round_ == 0:
            expected = [item for turn in turns for item in turn]
            diff = same_items(await session.get_items(), expected)
            report.check(diff is None, f"append: get_items() after appending: {diff}")
        return {"append": [rate]}

    return Prepared(sample)


async def prepare_read_all(factory: SessionFactory, s: Settings, report: Report) -> Prepared:
    session = factory("read-all")
    items = make_items(s.read_all_items)
    await build(session, items, s.batch_size)
    diff = same_items(await session.get_items(), items)
    report.check(diff is None, f"read_all: get_items(): {diff}")
    for _ in range(s.warmup):
        await session.get_items()

    async def sample(round_: int) -> Samples:
        return {"read_all": [await timed(session.get_items) for _ in range(s.read_all_calls)]}

    return Prepared(sample)


async def prepare_limit(factory: SessionFactory, s: Settings, report: Report) -> Prepared:
    small = factory("limit-small")
    small_items = make_items(s.small_items)
    await build(small, small_items, s.batch_size)
    big = factory("limit-big")
    big_items = make_items(s.big_items, start=1_000_000)
    bulk_rate = await build(big, big_items, s.batch_size)
    for name, session, items in (("small", small, small_items), ("big", big, big_items)):
        diff = same_items(await session.get_items(limit=s.limit), items[-s.limit :])
        report.check(diff is None, f"limit ({name}): get_items(limit={s.limit}): {diff}")
        for _ in range(s.warmup):
            await session.get_items(limit=s.limit)

    async def read_small() -> object:
        return await small.get_items(limit=s.limit)

    async def read_big() -> object:
        return await big.get_items(limit=s.limit)

    async def sample(round_: int) -> Samples:
        # Alternate the two reads so that both see the same conditions.
        samples: Samples = {"limit_small": [], "limit_big": []}
        for _ in range(s.limit_calls):
            samples["limit_small"].append(await timed(read_small))
            samples["limit_big"].append(await timed(read_big))
        return samples

    return Prepared(sample, setup={"bulk_append": [bulk_rate]})


async def prepare_pop(factory: SessionFactory, s: Settings, report: Report) -> Prepared:
    session = factory("pop")
    items = make_items(s.pop_items, start=2_000_000)
    await build(session, items, s.batch_size)
    expected = items[::-1]
    popped = 0

    async def sample(round_: int) -> Samples:
        nonlocal popped
        durations: list[float] = []
        got: list[object] = []
        for _ in range(s.pops):
            started = time.perf_counter()
            got.append(await session.pop_item())
            durations.append((time.perf_counter() - started) * 1000.0)
        diff = same_items(got, expected[popped : popped + s.pops])
        report.check(diff is None, f"pop: popped items (newest first), round {round_}: {diff}")
        popped += s.pops
        if round_ == s.rounds - 1:
            left = len(await session.get_items())
            report.check(
                left == s.pop_items - popped,
                f"pop: {left} items left after popping, expected {s.pop_items - popped}",
            )
        return {"pop": durations}

    return Prepared(sample)


# Questions about the weather turns of ``make_turn``: words, cities, the tool, paraphrases.
SEARCH_QUERIES = (
    "weather in Kyoto",
    "umbrella before lunch",
    "what is the temperature in Oslo",
    "get_weather Lisbon metric",
    "breeze from the west near the coast",
    "will it rain tomorrow morning",
    "conditions in Cairo this afternoon",
    "wind speed Quito",
    "sunny and dry evening",
    "forecast for Berlin in three days",
)


@asynccontextmanager
async def search_store(factory: SessionFactory) -> AsyncIterator[Any]:
    """A store with search on beside the backend's own: same database and key, other tables."""
    from agents_sqlalchemy import SessionStore, TableNames

    store = getattr(factory, "__self__", None)
    if not isinstance(store, SessionStore):
        raise Unsupported("search is this library's own")
    url = store.engine.url.render_as_string(hide_password=False)
    tables = TableNames(prefix="bench_search_")
    searching = SessionStore(url, tables=tables, create_tables=True, key=store.key, search=True)
    try:
        yield searching
    finally:
        await searching.close()


async def prepare_search(factory: SessionFactory, s: Settings, report: Report) -> Prepared:
    stack = AsyncExitStack()
    store = await stack.enter_async_context(search_store(factory))
    try:
        session = store.session("search-big")
        start = 3_000_000
        build_rate = await build(session, make_items(s.search_items, start=start), s.search_batch)
        user, other = "bench-user", "bench-other"
        for n in range(s.search_sessions + s.search_other_sessions):
            owner = user if n < s.search_sessions else other
            items = make_items(s.search_session_items, start=4_000_000 + 3 * n)
            await store.session(f"search-{n}", user_id=owner).add_items(items)
        # The user message of turn t is item 4 * (t - start) + 1 of the big session.
        turn = start + s.search_items // 4 // 3
        [hit] = await session.search(f"turn {turn}", limit=1, mode="keyword")
        report.check(hit.seq == 4 * (turn - start) + 1, f"search: turn {turn} found as {hit.seq}")
        hits = await store.search("weather in Kyoto", user_id=user, limit=20)
        report.check(
            len(hits) == 20 and all(int(h.session_id[7:]) < s.search_sessions for h in hits),
            "store.search: a hit of another user, or too few hits",
        )
        for query in SEARCH_QUERIES[: s.warmup]:
            await session.search(query)
            await store.search(query, user_id=user)
    except BaseException:
        await stack.aclose()
        raise

    async def sample(round_: int) -> Samples:
        in_session: list[float] = []
        across: list[float] = []
        for n in range(s.search_calls):
            query = SEARCH_QUERIES[(n + round_) % len(SEARCH_QUERIES)]
            in_session.append(await timed(functools.partial(session.search, query)))
            across.append(await timed(functools.partial(store.search, query, user_id=user)))
        return {
            "search_p50": in_session,
            "search_p95": in_session,
            "store_search_p50": across,
            "store_search_p95": across,
        }

    return Prepared(sample, setup={"search_build": [build_rate]}, close=stack.aclose)


def _limit_ratio(figures: dict[str, float]) -> float | None:
    big, small = figures.get("limit_big"), figures.get("limit_small")
    return None if big is None or not small else big / small


WORKLOADS: list[Workload] = [
    Workload(
        "append",
        (
            Metric(
                "append", "append {append_items:,} items in {turn_size}-item turns", "items/s", True
            ),
        ),
        prepare_append,
    ),
    Workload(
        "read_all",
        (Metric("read_all", "get_items() of {read_all_items:,} items", "ms", False),),
        prepare_read_all,
    ),
    Workload(
        "limit20",
        (
            Metric("limit_small", "get_items(limit={limit}) on {small_items:,} items", "ms", False),
            Metric("limit_big", "get_items(limit={limit}) on {big_items:,} items", "ms", False),
            Metric(
                "limit_ratio",
                "  ratio {big_items:,} / {small_items:,} (lower is better)",
                "x",
                False,
                comparable=False,
                derive=_limit_ratio,
            ),
            Metric("bulk_append", "append in {batch_size:,}-item batches (build)", "items/s", True),
        ),
        prepare_limit,
    ),
    Workload(
        "pop",
        (Metric("pop", "pop_item() from {pop_items:,} items", "ms/call", False),),
        prepare_pop,
    ),
    Workload(
        "search",
        (
            Metric("search_p50", "session.search() in {search_items:,} items, p50", "ms", False),
            Metric(
                "search_p95",
                "session.search() in {search_items:,} items, p95",
                "ms",
                False,
                aggregate=p95,
            ),
            Metric(
                "store_search_p50",
                "store.search(user_id) over {search_sessions:,} sessions, p50",
                "ms",
                False,
            ),
            Metric(
                "store_search_p95",
                "store.search(user_id) over {search_sessions:,} sessions, p95",
                "ms",
                False,
                aggregate=p95,
            ),
            Metric(
                "search_build",
                "append with search=True in {search_batch:,}-item batches",
                "items/s",
                True,
            ),
        ),
        prepare_search,
    ),
]


# --------------------------------------------------------------------------------------
# Comparisons and targets
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    label: str
    ours: str  # backend key
    other: str  # backend key


COMPARISONS: list[Comparison] = [
    Comparison("ours vs SDK SQLAlchemySession", "ours", "sdk_sqlalchemy"),
    Comparison("ours vs SDK SQLiteSession", "ours", "sdk_sqlite"),
    Comparison("ours encrypted vs ours", "ours_encrypted", "ours"),
    Comparison("ours encrypted vs SDK EncryptedSession", "ours_encrypted", "sdk_encrypted"),
]

# results[backend key][metric key] -> value (absent when not run or failed)
Results = dict[str, dict[str, float]]


@dataclass(frozen=True)
class Target:
    databases: frozenset[str]
    description: str
    # -> (met, detail), or None when the figures needed are missing
    check: Callable[[Results, Settings], tuple[bool, str] | None]


def speedup(results: Results, metric: Metric, ours: str, other: str) -> float | None:
    """How many times faster ``ours`` is than ``other`` on ``metric`` (>1: ours faster)."""
    a = results.get(ours, {}).get(metric.key)
    b = results.get(other, {}).get(metric.key)
    if a is None or b is None or a <= 0 or b <= 0:
        return None
    return a / b if metric.higher_is_better else b / a


def _append_target(results: Results, s: Settings) -> tuple[bool, str] | None:
    ours = results.get("ours", {}).get("append")
    sdk = results.get("sdk_sqlalchemy", {}).get("append")
    if ours is None or sdk is None:
        return None
    factor = ours / sdk
    return factor >= 3.0, f"{ours:,.0f} vs {sdk:,.0f} items/s = {factor:.2f}x (need >= 3x)"


def _limit_target(results: Results, s: Settings) -> tuple[bool, str] | None:
    ratio = results.get("ours", {}).get("limit_ratio")
    if ratio is None:
        return None
    figures = results["ours"]
    return ratio <= 1.5, (
        f"{figures['limit_big']:.3f} ms on {s.big_items:,} vs {figures['limit_small']:.3f} ms "
        f"on {s.small_items:,} = {ratio:.2f}x (need <= 1.5x)"
    )


def _encrypted_append_cost(results: Results, s: Settings) -> tuple[bool, str] | None:
    plain = results.get("ours", {}).get("append")
    sealed = results.get("ours_encrypted", {}).get("append")
    if plain is None or sealed is None:
        return None
    slower = plain / sealed
    return slower <= 1.5, (
        f"{sealed:,.0f} vs {plain:,.0f} items/s: {slower:.2f}x slower (need <= 1.5x)"
    )


def _encrypted_append_target(results: Results, s: Settings) -> tuple[bool, str] | None:
    ours = results.get("ours_encrypted", {}).get("append")
    sdk = results.get("sdk_encrypted", {}).get("append")
    if ours is None or sdk is None:
        return None
    factor = ours / sdk
    return factor >= 3.0, f"{ours:,.0f} vs {sdk:,.0f} items/s = {factor:.2f}x (need >= 3x)"


def _encrypted_read_target(results: Results, s: Settings) -> tuple[bool, str] | None:
    ours = results.get("ours_encrypted", {}).get("read_all")
    sdk = results.get("sdk_encrypted", {}).get("read_all")
    if ours is None or sdk is None:
        return None
    share = ours / sdk
    return share <= 0.5, (
        f"{ours:.2f} vs {sdk:.2f} ms = {share:.2f} of the SDK's time (need <= 0.5)"
    )


def _search_target(results: Results, s: Settings) -> tuple[bool, str] | None:
    figures = results.get("ours_encrypted", {})
    p50, p95_ = figures.get("search_p50"), figures.get("search_p95")
    if p50 is None or p95_ is None:
        return None
    return p50 < 50.0, f"p50 {p50:.1f} ms, p95 {p95_:.1f} ms (need p50 < 50 ms)"


TARGETS: list[Target] = [
    Target(
        frozenset({"sqlite"}),
        "ours append throughput >= 3x SDK SQLAlchemySession",
        _append_target,
    ),
    Target(
        frozenset({"sqlite", "postgres"}),
        "ours get_items(limit=20) on the big session within 1.5x of the 1,000-item one",
        _limit_target,
    ),
    Target(
        frozenset({"sqlite"}),
        "ours encrypted append within 1.5x of ours plaintext",
        _encrypted_append_cost,
    ),
    Target(
        frozenset({"sqlite"}),
        "ours encrypted append throughput >= 3x SDK EncryptedSession",
        _encrypted_append_target,
    ),
    Target(
        frozenset({"sqlite"}),
        "ours encrypted get_items() of {read_all_items:,} items in <= half SDK EncryptedSession's",
        _encrypted_read_target,
    ),
    Target(
        frozenset({"sqlite"}),
        "ours encrypted session.search() in a {search_items:,}-item session: p50 < 50 ms",
        _search_target,
    ),
]


# --------------------------------------------------------------------------------------
# Running and printing
# --------------------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"  .. {message}", file=sys.stderr, flush=True)


def note_error(report: Report, what: str, exc: BaseException) -> None:
    report.notes.append(f"ERROR in {what}: {exc!r}")
    traceback.print_exc(file=sys.stderr)


async def run_database(
    database: Database, backends: list[Backend], settings: Settings
) -> tuple[Results, dict[str, Report]]:
    """Open every backend at once, then run each workload on all of them round-robin."""
    reports = {backend.key: Report() for backend in backends}
    samples: dict[str, Samples] = {backend.key: {} for backend in backends}
    async with AsyncExitStack() as stack:
        factories: dict[str, SessionFactory] = {}
        for backend in backends:
            try:
                location = await stack.enter_async_context(database.fresh(backend.key))
                factories[backend.key] = await stack.enter_async_context(backend.open(location))
            except Exception as exc:
                note_error(reports[backend.key], "opening the backend", exc)

        for workload in WORKLOADS:
            gc.collect()
            started = time.perf_counter()
            prepared: dict[str, Prepared] = {}
            for key, factory in factories.items():
                try:
                    prepared[key] = await workload.prepare(factory, settings, reports[key])
                except Unsupported as exc:
                    reports[key].notes.append(f"{workload.key}: n/a ({exc})")
                except Exception as exc:
                    note_error(reports[key], f"{workload.key} (prepare)", exc)
            taken: dict[str, Samples] = {key: dict(p.setup) for key, p in prepared.items()}
            to_close = {key: p.close for key, p in prepared.items() if p.close is not None}
            for round_ in range(settings.rounds):
                keys = list(prepared)
                shift = round_ % len(keys) if keys else 0
                for key in keys[shift:] + keys[:shift]:  # rotate who goes first
                    try:
                        for metric, values in (await prepared[key].sample(round_)).items():
                            taken[key].setdefault(metric, []).extend(values)
                    except Exception as exc:
                        note_error(reports[key], f"{workload.key} (round {round_})", exc)
                        del prepared[key], taken[key]  # no partial figures
            for key, close in to_close.items():
                try:
                    await close()
                except Exception as exc:
                    note_error(reports[key], f"{workload.key} (close)", exc)
            for key, figures in taken.items():
                samples[key].update(figures)
            log(f"{database.label} / {workload.key}: {time.perf_counter() - started:.1f} s")

    results: Results = {}
    for key, measured in samples.items():
        aggregates = {m.key: m.aggregate for w in WORKLOADS for m in w.metrics}
        medians = {
            metric: aggregates.get(metric, statistics.median)(values)
            for metric, values in measured.items()
        }
        for workload in WORKLOADS:
            for m in workload.metrics:
                value = m.derive(medians) if m.derive is not None else None
                if value is not None:
                    medians[m.key] = value
        results[key] = medians
    return results, reports


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "items/s":
        return f"{value:,.0f}"
    if unit == "x":
        return f"{value:.2f}x"
    if value >= 100:
        return f"{value:,.1f}"
    return f"{value:.3f}"


def render_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True)]
        return " | ".join([first, *rest])

    rule = "-+-".join("-" * width for width in widths)
    return "\n".join([line(header), rule, *(line(row) for row in rows)])


def print_results(
    database: Database,
    backends: list[Backend],
    results: Results,
    reports: dict[str, Report],
    settings: Settings,
) -> list[bool]:
    keys = {backend.key for backend in backends}
    comparisons = [c for c in COMPARISONS if c.ours in keys and c.other in keys]
    header = ["workload", "unit", *(b.label for b in backends), *(c.label for c in comparisons)]
    rows: list[list[str]] = []
    for workload in WORKLOADS:
        for metric in workload.metrics:
            row = [metric.label.format(**vars(settings)), metric.unit]
            row += [fmt(results.get(b.key, {}).get(metric.key), metric.unit) for b in backends]
            for comparison in comparisons:
                factor = (
                    speedup(results, metric, comparison.ours, comparison.other)
                    if metric.comparable
                    else None
                )
                row.append(fmt(factor, "x"))
            rows.append(row)
    print(render_table(header, rows))
    print("(ratio columns: speed-up factor, >1 means ours is faster)")

    for backend in backends:
        for note in reports[backend.key].notes:
            print(f"NOTE {backend.label}: {note}")

    outcomes: list[bool] = []
    print(f"Targets ({database.label}):")
    for target in TARGETS:
        if database.key not in target.databases:
            continue
        verdict = target.check(results, settings)
        description = target.description.format(**vars(settings))
        if verdict is None:
            print(f"  [ n/a ] {description}: figures missing")
            continue
        met, detail = verdict
        outcomes.append(met)
        print(f"  [{'  MET' if met else 'NOT MET'}] {description}: {detail}")
    return outcomes


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
        "(one scrypt derivation per store, N=2**17, r=8)"
    )


async def listing_cost(database: Database, sizes: tuple[int, ...] = (100, 100_000)) -> str:
    """What a page of `list_sessions` costs over few and over many sessions (keyset paging).

    The session rows are bulk-inserted through the library's own table (the store's API
    would take a transaction per session); half belong to one user. Figures: median of 30
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
            SessionStore(location.url, create_tables=True) as store,
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


def load_average() -> str:
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return "load average unknown"
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min)"


def version_of(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


async def main_async(args: argparse.Namespace) -> int:
    settings = Settings.make(args.quick)
    wanted = {key.strip() for key in args.backends.split(",")} if args.backends else None
    if wanted is not None:
        unknown = wanted - {backend.key for backend in BACKENDS}
        if unknown:
            print(f"unknown backend(s): {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2

    print("agents-sqlalchemy benchmark" + (" (--quick)" if settings.quick else ""))
    print(
        f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs; "
        + ", ".join(
            f"{name} {version_of(name)}"
            for name in (
                "openai-agents-sqlalchemy",
                "openai-agents",
                "SQLAlchemy",
                "aiosqlite",
                "asyncpg",
            )
        )
    )

    print(f"Before the run: {load_average()} (other work on the machine skews the figures)")
    started = time.perf_counter()
    outcomes: list[bool] = []
    with tempfile.TemporaryDirectory(prefix="agents-sqlalchemy-bench-", dir=args.sqlite_dir) as tmp:
        databases: list[Database] = []
        if args.only in (None, "sqlite"):
            databases.append(sqlite_database(Path(tmp)))
        if args.only in (None, "postgres"):
            pg_url = os.environ.get(PG_URL_ENV)
            if pg_url:
                databases.append(postgres_database(pg_url))
            elif args.only == "postgres":
                print(f"--only postgres needs {PG_URL_ENV}", file=sys.stderr)
                return 2
            else:
                print(f"\nPostgreSQL: skipped ({PG_URL_ENV} is not set)")

        for database in databases:
            backends = [
                b
                for b in BACKENDS
                if database.key in b.databases and (wanted is None or b.key in wanted)
            ]
            print(f"\n=== {database.label}: {await database.describe()} ===")
            if database.probe is not None:
                print(f"before: {await database.probe()}")
            results, reports = await run_database(database, backends, settings)
            if database.probe is not None:
                print(f"after:  {await database.probe()}")
            outcomes += print_results(database, backends, results, reports, settings)
            if any(backend.key == "ours_encrypted" for backend in backends):
                print(await store_open_cost(database))
                print(await listing_cost(database))

    print(f"\nTotal time: {time.perf_counter() - started:.1f} s; {load_average()}")
    if args.strict and not all(outcomes):
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="smaller sessions, fewer repeats")
    parser.add_argument("--only", choices=("sqlite", "postgres"), help="one database only")
    parser.add_argument(
        "--backends",
        help="comma-separated backend keys to run (default: all): "
        + ", ".join(backend.key for backend in BACKENDS),
    )
    parser.add_argument(
        "--sqlite-dir",
        help="where the SQLite files go (default: the system temp dir); commits there are "
        "fsync-bound on a real disk, a tmpfs such as /dev/shm shows the CPU cost alone",
    )
    parser.add_argument(
        "--strict", action="store_true", help="exit with status 1 when a target is not met"
    )
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
