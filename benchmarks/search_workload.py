"""Search latency (ours only): ``session.search`` in a big session, ``store.search`` per user.

Runs on a store of its own beside the backend's (same database and key, other tables),
with the default embedder; items are indexed before anything is timed (``flush``),
so the figures are of searching alone.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from .core import (
    Handle,
    Metric,
    Prepared,
    Report,
    Samples,
    Settings,
    Unsupported,
    Workload,
    build,
    p95,
    timed,
)
from .items import batches, make_items

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
async def search_store(h: Handle) -> AsyncIterator[Any]:
    """A store with search on beside the backend's own: same database and key, other tables."""
    from agents_sqlalchemy import SessionStore, TableNames

    if h.store is None:
        raise Unsupported("search is this library's own")
    tables = TableNames(prefix="bench_search_")
    store = SessionStore(h.location.url, tables=tables, create_tables=True, key=h.store.key)
    try:
        yield store
    finally:
        await store.close()


async def _fill(store: Any, s: Settings, report: Report) -> tuple[Any, float]:
    """The big session and the per-user sessions; returns the big one and its build rate."""
    session = store.session("search-big")
    start = 3_000_000
    started = time.perf_counter()
    await build(session, batches(s.search_items, s.search_batch, start))
    await store.flush()
    rate = s.search_items / (time.perf_counter() - started)
    for n in range(s.search_sessions + s.search_other_sessions):
        owner = "bench-user" if n < s.search_sessions else "bench-other"
        items = make_items(s.search_session_items, start=4_000_000 + 3 * n)
        await store.session(f"search-{n}", user_id=owner).add_items(items)
    await store.flush()
    # The user message of turn t is item 4 * (t - start) + 1 of the big session.
    turn = start + s.search_items // 4 // 3
    [hit] = await session.search_hits(f"turn {turn}", limit=1, mode="keyword")
    report.check(hit.seq == 4 * (turn - start) + 1, f"search: turn {turn} found as {hit.seq}")
    hits = await store.search("weather in Kyoto", user_id="bench-user", limit=20)
    report.check(
        len(hits) == 20 and all(int(h.session_id[7:]) < s.search_sessions for h in hits),
        "store.search: a hit of another user, or too few hits",
    )
    for query in SEARCH_QUERIES[: s.warmup]:
        await session.search(query)
        await store.search(query, user_id="bench-user")
    return session, rate


async def prepare_search(h: Handle, s: Settings, report: Report) -> Prepared:
    stack = AsyncExitStack()
    store = await stack.enter_async_context(search_store(h))
    try:
        session, rate = await _fill(store, s, report)
    except BaseException:
        await stack.aclose()
        raise

    user_session = store.session("search-0")

    async def sample(round_: int) -> Samples:
        in_session: list[float] = []
        across: list[float] = []
        in_session_written: list[float] = []
        across_written: list[float] = []
        for n in range(s.search_calls):
            query = SEARCH_QUERIES[(n + round_) % len(SEARCH_QUERIES)]
            in_session.append(await timed(functools.partial(session.search, query)))
            across.append(await timed(functools.partial(store.search, query, user_id="bench-user")))
            # A write in both scopes (not timed, indexed): the next searches read their
            # candidates again, as every search does right after a write in its scope.
            written = make_items(1, start=5_000_000 + 1000 * round_ + n)
            await session.add_items(written)
            await user_session.add_items(written)
            await store.flush()
            in_session_written.append(await timed(functools.partial(session.search, query)))
            across_written.append(
                await timed(functools.partial(store.search, query, user_id="bench-user"))
            )
        return {
            "search_p50": in_session,
            "search_p95": in_session,
            "store_search_p50": across,
            "store_search_p95": across,
            "search_written_p50": in_session_written,
            "store_search_written_p50": across_written,
        }

    return Prepared(sample, setup={"search_build": [rate]}, close=stack.aclose)


SEARCH_METRICS = (
    Metric(
        "search_p50",
        "session p50",
        "ms",
        False,
        "session.search() in a {search_items:,}-item session, median; unchanged since the "
        "session's last search (the store ranks the candidates it kept)",
        group="search",
    ),
    Metric(
        "search_p95",
        "session p95",
        "ms",
        False,
        "the same, 95th percentile",
        group="search",
        aggregate=p95,
    ),
    Metric(
        "store_search_p50",
        "store p50",
        "ms",
        False,
        "store.search(user_id=...) over {search_sessions:,} sessions of "
        "{search_session_items} items (and {search_other_sessions:,} of another user), median; "
        "unchanged since the user's last search",
        group="search",
    ),
    Metric(
        "store_search_p95",
        "store p95",
        "ms",
        False,
        "the same, 95th percentile",
        group="search",
        aggregate=p95,
    ),
    Metric(
        "search_written_p50",
        "session p50 after a write",
        "ms",
        False,
        "session.search() right after a write in the session (only its new items read), median",
        group="search",
    ),
    Metric(
        "store_search_written_p50",
        "store p50 after a write",
        "ms",
        False,
        "store.search(user_id=...) right after a write in one of the user's sessions, median",
        group="search",
    ),
    Metric(
        "search_build",
        "build+index",
        "items/s",
        True,
        "the big session: add_items() in {search_batch:,}-item batches, search on, "
        "indexing waited for",
        group="search",
    ),
)

SEARCH_WORKLOAD = Workload(
    "search",
    SEARCH_METRICS,
    prepare_search,
    backends=frozenset({"ours", "ours_encrypted"}),
    enabled=lambda settings: settings.search_workload,
)
