"""The workloads: what is timed on every backend, and the metrics each one yields.

Each workload is prepared on every backend (sessions built, checked, warmed up), then
sampled in rounds that visit the backends in turn, rotating who goes first, so that a noisy
moment on the machine hits all of them alike. A figure is the median of its samples unless
its metric says otherwise. Results are checked (same items, same order) and a mismatch is
printed under the tables.

To add one: write ``prepare(Handle, Settings, Report) -> Prepared`` (raise ``Unsupported``
where it does not apply) and append a ``Workload`` with its ``Metric`` rows to ``WORKLOADS``.
"""

from __future__ import annotations

import time

from .core import (
    BenchSession,
    Handle,
    Item,
    Metric,
    Prepared,
    Report,
    Samples,
    Settings,
    Workload,
    build,
    same_items,
    timed,
)
from .items import batches, item_at, make_items
from .memory import measure_elsewhere
from .search_workload import SEARCH_WORKLOAD


async def prepare_append(h: Handle, s: Settings, report: Report) -> Prepared:
    turns = [make_items(s.turn_size, start=t) for t in range(s.turns)]

    async def sample(round_: int) -> Samples:
        session = h.session(f"append-{round_}")
        started = time.perf_counter()
        for turn in turns:
            await session.add_items(turn)
        written = time.perf_counter()
        await h.settle()  # ours: wait until the items are indexed
        settled = time.perf_counter()
        if round_ == 0:
            diff = same_items(await session.get_items(), make_items(s.append_items))
            report.check(diff is None, f"append: get_items() after appending: {diff}")
        return {
            "append_turn": [(written - started) * 1000.0 / len(turns)],
            "append_rate": [s.append_items / (settled - started)],
        }

    return Prepared(sample)


async def _filled(h: Handle, session_id: str, items: list[Item]) -> BenchSession:
    session = h.session(session_id)
    await build(session, (items[o : o + 1000] for o in range(0, len(items), 1000)))
    await h.settle()
    return session


async def prepare_read(h: Handle, s: Settings, report: Report) -> Prepared:
    items = make_items(s.read_items, start=1_000_000)
    session = await _filled(h, "read", items)
    diff = same_items(await session.get_items(), items)
    report.check(diff is None, f"read: get_items(): {diff}")
    for _ in range(s.warmup):
        await session.get_items()

    async def sample(round_: int) -> Samples:
        return {"read_all": [await timed(session.get_items) for _ in range(s.read_calls)]}

    return Prepared(sample)


async def prepare_tail(h: Handle, s: Settings, report: Report) -> Prepared:
    # A workload of its own: a call right after a full read (of this backend, or of the
    # one before it on a shared server) can pay for work that read left behind.
    items = make_items(s.read_items, start=1_500_000)
    session = await _filled(h, "tail", items)
    diff = same_items(await session.get_items(limit=s.tail), items[-s.tail :])
    report.check(diff is None, f"tail: get_items(limit={s.tail}): {diff}")

    async def tail() -> object:
        return await session.get_items(limit=s.tail)

    for _ in range(s.warmup):
        await tail()

    async def sample(round_: int) -> Samples:
        return {"tail": [await timed(tail) for _ in range(s.read_calls)]}

    return Prepared(sample)


async def prepare_pop(h: Handle, s: Settings, report: Report) -> Prepared:
    session = h.session("pop")
    items = make_items(s.pop_items, start=2_000_000)
    await build(session, [items])
    await h.settle()
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
        await h.settle()
        diff = same_items(got, expected[popped : popped + s.pops])
        report.check(diff is None, f"pop: popped items (newest first), round {round_}: {diff}")
        popped += s.pops
        if round_ == s.short_rounds - 1:
            left = len(await session.get_items())
            report.check(
                left == s.pop_items - popped,
                f"pop: {left} items left after popping, expected {s.pop_items - popped}",
            )
        return {"pop": durations}

    return Prepared(sample)


async def prepare_memory(h: Handle, s: Settings, report: Report) -> Prepared:
    start = 5_000_000
    rate = await build(h.bulk_session("memory"), batches(s.memory_items, s.build_batch, start))
    await h.settle()

    async def sample(round_: int) -> Samples:
        found = await measure_elsewhere(h.backend, h.reopen(), "memory", s.memory_items, start)
        report.check(found["check"] is None, f"memory: the big session read: {found['check']}")
        figures: Samples = {"memory_read": [found["read_ms"]]}
        figures["memory_traced"] = [found["traced_mib"]]
        if found["rss_mib"] is not None:
            figures["memory_rss"] = [found["rss_mib"]]
        return figures

    return Prepared(sample, setup={"build_rate": [rate]})


async def prepare_flat(h: Handle, s: Settings, report: Report) -> Prepared:
    small, big = h.bulk_session("flat-small"), h.bulk_session("flat-big")
    await build(small, batches(s.flat_small, s.build_batch, 6_000_000))
    rate = await build(big, batches(s.flat_big, s.build_batch, 7_000_000))
    small, big = h.session("flat-small"), h.session("flat-big")
    for name, session, count, start in (
        ("small", small, s.flat_small, 6_000_000),
        ("big", big, s.flat_big, 7_000_000),
    ):
        expected = [item_at(i, start) for i in range(count - s.tail, count)]
        diff = same_items(await session.get_items(limit=s.tail), expected)
        report.check(diff is None, f"flat ({name}): get_items(limit={s.tail}): {diff}")
        for _ in range(s.warmup):
            await session.get_items(limit=s.tail)

    async def read_small() -> object:
        return await small.get_items(limit=s.tail)

    async def read_big() -> object:
        return await big.get_items(limit=s.tail)

    async def sample(round_: int) -> Samples:
        samples: Samples = {"flat_small": [], "flat_big": []}
        for _ in range(s.flat_calls):  # alternate, so that both see the same conditions
            samples["flat_small"].append(await timed(read_small))
            samples["flat_big"].append(await timed(read_big))
        return samples

    return Prepared(sample, setup={"flat_build": [rate]})


def _flat_ratio(figures: dict[str, float]) -> float | None:
    big, small = figures.get("flat_big"), figures.get("flat_small")
    return None if big is None or not small else big / small


HOT = (
    Metric(
        "append_turn",
        "append/turn",
        "ms",
        False,
        "add_items() of one {turn_size}-item turn ({append_items:,} items a round, the "
        "round's mean): the caller's time; ours indexes just after, on a worker thread",
    ),
    Metric("read_all", "full read", "ms", False, "get_items() of a {read_items:,}-item session"),
    Metric(
        "tail",
        "tail {tail}",
        "ms",
        False,
        "get_items(limit={tail}) of another {read_items:,}-item session",
    ),
    Metric("pop", "pop", "ms", False, "pop_item() from a {pop_items:,}-item session"),
    Metric(
        "append_rate",
        "append+index",
        "items/s",
        True,
        "{append_items:,} items in {turn_size}-item turns, then store.flush() (ours): "
        "throughput with the search indexing included",
    ),
)
BIG = (
    Metric(
        "build_rate",
        "build",
        "items/s",
        True,
        "a {memory_items:,}-item session built by add_items() in {build_batch:,}-item "
        "batches (ours: through a store with search off)",
        group="big",
    ),
    Metric(
        "memory_read",
        "read {memory_items:,}",
        "ms",
        False,
        "get_items() of that session: one call, in a fresh process per backend (opened on "
        "the same database, warmed up)",
        group="big",
    ),
    Metric(
        "memory_traced",
        "tracemalloc",
        "MiB",
        False,
        "peak of Python allocations during a second such call (tracemalloc, every thread)",
        group="big",
    ),
    Metric(
        "memory_rss",
        "RSS peak",
        "MiB",
        False,
        "how far the process's peak RSS rose above its RSS before the first call",
        group="big",
    ),
)
FLAT = (
    Metric(
        "flat_small",
        "tail {tail} of {flat_small:,}",
        "ms",
        False,
        "get_items(limit={tail}) on a {flat_small:,}-item session (ours only)",
        group="flat",
    ),
    Metric(
        "flat_big",
        "tail {tail} of {flat_big:,}",
        "ms",
        False,
        "get_items(limit={tail}) on a {flat_big:,}-item session in the same tables",
        group="flat",
    ),
    Metric(
        "flat_ratio",
        "ratio",
        "x",
        False,
        "the big session's time / the small one's (flat: about 1)",
        group="flat",
        comparable=False,
        derive=_flat_ratio,
    ),
    Metric(
        "flat_build",
        "build",
        "items/s",
        True,
        "building the {flat_big:,}-item session: add_items() in {build_batch:,}-item batches "
        "through a store with search off",
        group="flat",
    ),
)

WORKLOADS: list[Workload] = [
    Workload("append", (HOT[0], HOT[4]), prepare_append),
    Workload("read", HOT[1:2], prepare_read, short=True),
    Workload("tail", HOT[2:3], prepare_tail, short=True),
    Workload("pop", HOT[3:4], prepare_pop, short=True),
    Workload("memory", BIG, prepare_memory, rounds=1),
    Workload("flat", FLAT, prepare_flat, backends=frozenset({"ours"})),
    SEARCH_WORKLOAD,
]
METRICS: list[Metric] = [*HOT, *BIG, *FLAT, *SEARCH_WORKLOAD.metrics]
