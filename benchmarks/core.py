"""The benchmark's vocabulary: settings, an open backend, samples, metrics and workloads."""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agents.items import TResponseInputItem

Item = TResponseInputItem


class BenchSession(Protocol):
    """What every benchmarked session offers (the SDK's ``Session`` protocol, minus extras)."""

    async def get_items(self, limit: int | None = None) -> list[Item]: ...

    async def add_items(self, items: list[Item]) -> None: ...

    async def pop_item(self) -> Item | None: ...

    async def clear_session(self) -> None: ...


@dataclass(frozen=True)
class Location:
    """Where a backend stores its data: a fresh SQLite file or a fresh PostgreSQL database."""

    database: str  # "sqlite", "postgres" or "mariadb"
    url: str  # SQLAlchemy async URL
    path: Path | None = None  # the SQLite file, if any
    key: bytes | None = None  # the key an encrypted backend opens it with (None: a new one)


async def _nothing() -> None:
    return None


@dataclass
class Handle:
    """An open backend: its sessions, and what some workloads need beyond them.

    ``settle`` waits for the work a call leaves behind (``store.flush()``: our store indexes
    new items for search, and scrubs removed keys out of an encrypted SQLite file's WAL, on
    a worker thread just after each write); workloads call it after their timed part,
    so that it never runs into another backend's turn, and time it where a figure says so.
    ``bulk`` gives a session to build big sessions through (ours: a store on the same
    database and key with search off, since indexing a million items is not what is timed).
    """

    location: Location
    session: Callable[[str], BenchSession]
    backend: str = ""  # its key in BACKENDS (the runner sets it)
    settle: Callable[[], Awaitable[None]] = _nothing
    bulk: Callable[[str], BenchSession] | None = None
    store: Any = None  # our SessionStore, for the workloads that are ours only
    key: bytes | None = None  # an encrypted backend's key, to open its data again elsewhere

    def reopen(self) -> Location:
        """Where this backend's data is, and how to open it again (from another process)."""
        return dataclasses.replace(self.location, key=self.key)

    def bulk_session(self, session_id: str) -> BenchSession:
        return (self.bulk or self.session)(session_id)


@dataclass(frozen=True)
class Settings:
    quick: bool
    rounds: int = 5  # every workload samples each backend this many times, round-robin
    short_rounds: int = 15  # the same for the short calls (reads, pops): more, shorter rounds
    turn_size: int = 4
    append_items: int = 1200  # per round, in turns
    read_items: int = 1200
    read_calls: int = 4  # per short round and kind
    tail: int = 20
    pop_items: int = 1000
    pops: int = 20  # per short round
    warmup: int = 3
    build_batch: int = 10_000  # items per add_items call when building a big session
    memory_items: int = 100_000
    flat_small: int = 1000
    flat_big: int = 1_000_000
    flat_calls: int = 10  # per round and session
    search_workload: bool = False  # --search: ours' search latency, a few minutes more
    search_items: int = 10_000
    search_batch: int = 2000
    search_sessions: int = 1000  # of one user
    search_session_items: int = 10
    search_other_sessions: int = 200  # of another user, in the same tables
    search_calls: int = 20  # per round and kind
    semantic_embedder: str = "minilm"
    semantic_items: int = 1000
    semantic_calls: int = 30

    @property
    def turns(self) -> int:
        return self.append_items // self.turn_size


@dataclass
class Report:
    """Correctness problems and other remarks collected while a backend runs."""

    notes: list[str] = field(default_factory=list)

    def check(self, ok: bool, message: str) -> None:
        if not ok:
            self.notes.append(f"CHECK FAILED: {message}")


class Unsupported(Exception):
    """Raised by a workload's prepare step when it does not apply to a backend (n/a)."""


# metric key -> raw measurements (items/s, ms, MiB, ...)
Samples = dict[str, list[float]]


class Figures(dict[str, float]):
    """One backend's figures, by metric (the median of its samples), and each metric's
    figure in every round it was sampled in (`rounds`): a ratio of two backends is formed
    round by round, both figures from the same round, then its median taken."""

    def __init__(self, values: dict[str, float], rounds: dict[str, list[float]]) -> None:
        super().__init__(values)
        self.rounds = rounds


# results[backend key][metric key] -> the figure (absent when not run or failed)
Results = dict[str, dict[str, float]]


@dataclass(frozen=True)
class Ratio:
    """A ratio of two backends' figures: the median of its per-round values, and their
    lowest and highest (the spread); `rounds` says how many there were."""

    median: float
    low: float
    high: float
    rounds: int

    def text(self) -> str:
        """e.g. ``1.12x (1.05-1.20)``; a ratio of one round has no spread."""
        if self.rounds < 2:
            return f"{self.median:.2f}x"
        return f"{self.median:.2f}x ({self.low:.2f}\u2013{self.high:.2f})"


def ratio(results: Results, a: str, b: str, metric: str) -> Ratio | None:
    """Backend `a`'s figure over backend `b`'s on `metric`, round by round where both were
    sampled in the same rounds, else (a figure measured once) of their figures."""
    x, y = results.get(a, {}), results.get(b, {})
    if not (x.get(metric, 0.0) > 0 and y.get(metric, 0.0) > 0):
        return None
    mine = getattr(x, "rounds", {}).get(metric, [])
    theirs = getattr(y, "rounds", {}).get(metric, [])
    paired = [p / q for p, q in zip(mine, theirs, strict=False) if p > 0 and q > 0]
    if len(mine) != len(theirs) or len(paired) < 2:
        value = x[metric] / y[metric]
        return Ratio(value, value, value, 1)
    return Ratio(statistics.median(paired), min(paired), max(paired), len(paired))


@dataclass
class Prepared:
    """A workload made ready on one backend: ``sample(round)`` measures one round."""

    sample: Callable[[int], Awaitable[Samples]]
    setup: Samples = field(default_factory=dict)  # figures measured while preparing
    close: Callable[[], Awaitable[None]] | None = None  # after the last round


def p95(values: list[float]) -> float:
    """The 95th percentile, by nearest rank."""
    ordered = sorted(values)
    return ordered[max(0, -(-len(ordered) * 95 // 100) - 1)]


@dataclass(frozen=True)
class Metric:
    key: str
    column: str  # short column title
    unit: str  # "ms", "items/s", "MiB", "x"
    higher_is_better: bool
    description: str  # one line under the table; may use {field} placeholders of Settings
    group: str = "hot"  # the table it is printed in
    comparable: bool = True  # False: no speed-up between backends (e.g. a ratio)
    # computed from the other figures of the same backend instead of measured
    derive: Callable[[dict[str, float]], float | None] | None = None
    aggregate: Callable[[list[float]], float] = statistics.median


@dataclass(frozen=True)
class Workload:
    key: str
    metrics: tuple[Metric, ...]
    prepare: Callable[[Handle, Settings, Report], Awaitable[Prepared]]
    rounds: int | None = None  # None: the settings' rounds (short_rounds if short)
    short: bool = False  # short calls: more, shorter rounds, so noise hits all alike
    backends: frozenset[str] | None = None  # None: every backend
    enabled: Callable[[Settings], bool] = lambda settings: True


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


async def build(session: BenchSession, batches: Iterable[list[Item]]) -> float:
    """Add the batches, one ``add_items`` call each; return the throughput in items/s."""
    count = 0
    started = time.perf_counter()
    for batch in batches:
        await session.add_items(batch)
        count += len(batch)
    return count / (time.perf_counter() - started)
