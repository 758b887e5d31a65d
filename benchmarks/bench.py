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
    sdk_sqlalchemy   ``agents.extensions.memory.SQLAlchemySession`` on one shared engine
    sdk_sqlite       ``agents.SQLiteSession`` (sync sqlite3 in worker threads; SQLite only)

Workloads (in this order, all backends of a database open at once, one database each)
    append      1,200 items in 4-item turns (300 ``add_items`` calls) -> items/s
    read_all    ``get_items()`` of a 1,200-item session -> ms per call
    limit20     ``get_items(limit=20)`` on a 1,000-item and a 100,000-item session (other
                sessions in the same tables) -> ms per call, and their ratio; the big
                session is built in 1,000-item batches, whose throughput is reported too
    pop         ``pop_item()`` on a 1,000-item session, 200 pops -> ms per call

Each workload is prepared on every backend, then sampled in rounds (5, or 3 with
``--quick``) that visit the backends in turn, rotating who goes first, so that a noisy
moment on the machine hits all of them alike; each figure is the median of all its samples
(5 appends; 50 reads of each kind; 200 pops). Results are checked (same items, same order)
and any mismatch or error is printed under the table.

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
        "sdk_sqlalchemy",
        "SDK SQLAlchemySession",
        frozenset({"sqlite", "postgres"}),
        open_sdk_sqlalchemy,
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


@dataclass(frozen=True)
class Metric:
    key: str
    label: str  # may use {field} placeholders from Settings
    unit: str
    higher_is_better: bool
    comparable: bool = True  # False: no cross-backend speed-up (e.g. for a ratio)
    # computed from the other medians of the same backend instead of measured
    derive: Callable[[dict[str, float]], float | None] | None = None


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
            for key, figures in taken.items():
                samples[key].update(figures)
            log(f"{database.label} / {workload.key}: {time.perf_counter() - started:.1f} s")

    results: Results = {}
    for key, measured in samples.items():
        medians = {metric: statistics.median(values) for metric, values in measured.items()}
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
        if verdict is None:
            print(f"  [ n/a ] {target.description}: figures missing")
            continue
        met, detail = verdict
        outcomes.append(met)
        print(f"  [{'  MET' if met else 'NOT MET'}] {target.description}: {detail}")
    return outcomes


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
