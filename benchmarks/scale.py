"""The scale benchmark's measurements: a small and a big loaded database, side by side.

Each measurement returns ``Row``s: a figure on the small database, on the big one, and a
verdict where the issue sets a target. ``bench_scale.py`` runs them and prints the table.
"""

from __future__ import annotations

import functools
import random
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agents_sqlalchemy import SessionStore, TableNames
from agents_sqlalchemy.models import build_models

from .core import Report, p95, timed
from .items import make_turn
from .scale_load import (
    HEAVY_USER,
    Layout,
    expected_items,
    is_expired,
    session_name,
    user_name,
)

TARGET_RATIO = 1.5
TAIL = 20
PAGE = 20  # sessions per list_sessions page
FAR_PAGE = 100


@dataclass(frozen=True)
class Loaded:
    """One loaded database: its store (search off), its layout and its URL."""

    label: str  # "small" or "big"
    store: SessionStore
    layout: Layout
    url: str


@dataclass(frozen=True)
class Row:
    what: str
    unit: str
    small: float | None
    big: float | None
    target: str = ""
    met: bool | None = None  # None: no target


def pair(what: str, unit: str, figures: list[float]) -> Row:
    """A row of the small and the big database's figure, with no target."""
    small, big = figures
    return Row(what, unit, small, big)


def ratio_row(what: str, unit: str, small: float, big: float) -> Row:
    """A row whose target is the big figure within TARGET_RATIO of the small one."""
    return Row(what, unit, small, big, f"big <= {TARGET_RATIO}x small", big <= small * TARGET_RATIO)


def live_sessions(layout: Layout, count: int, seed: int) -> list[int]:
    """``count`` random sessions whose items are not expired (fixed by ``seed``)."""
    pick = random.Random(seed)
    chosen: list[int] = []
    while len(chosen) < count:
        n = pick.randrange(layout.sessions)
        if not is_expired(n) and n % 10 != 0:  # the heavy user's are kept for listing
            chosen.append(n)
    return chosen


async def rounds(
    dbs: list[Loaded], calls: Mapping[str, Callable[[int], Awaitable[object]]], n_rounds: int
) -> dict[str, list[float]]:
    """Sample each database's call in turn, rotating who goes first; ms by label."""
    samples: dict[str, list[float]] = {db.label: [] for db in dbs}
    per_round = 30
    for r in range(n_rounds):
        order = dbs[r % len(dbs) :] + dbs[: r % len(dbs)]
        for db in order:
            call = calls[db.label]
            for i in range(per_round):
                index = r * per_round + i
                samples[db.label].append(await timed(functools.partial(call, index)))
    return samples


async def tail_reads(dbs: list[Loaded], n_rounds: int, report: Report) -> list[Row]:
    """``get_items(limit=20)`` of random sessions never written to during the run."""
    chosen = {db.label: live_sessions(db.layout, n_rounds * 30, seed=1) for db in dbs}

    def reader(db: Loaded) -> Callable[[int], Awaitable[object]]:
        async def call(index: int) -> object:
            n = chosen[db.label][index]
            got = await db.store.session(session_name(n)).get_items(limit=TAIL)
            report.check(got == expected_items(n, db.layout)[-TAIL:], f"{db.label}: tail of {n}")
            return got

        return call

    for db in dbs:  # warm-up: the connection pool and the statement caches
        for index in range(5):
            await reader(db)(index)
    samples = await rounds(dbs, {db.label: reader(db) for db in dbs}, n_rounds)
    small, big = (statistics.median(samples[db.label]) for db in dbs)
    rows = [ratio_row(f"get_items(limit={TAIL}), median", "ms", small, big)]
    rows.append(pair(f"get_items(limit={TAIL}), p95", "ms", [p95(samples[db.label]) for db in dbs]))
    return rows


async def appends(dbs: list[Loaded], n_rounds: int, report: Report) -> list[Row]:
    """``add_items`` of a 4-item turn to random existing sessions (each once)."""
    chosen = {db.label: live_sessions(db.layout, n_rounds * 30 + 5, seed=2) for db in dbs}

    def writer(db: Loaded) -> Callable[[int], Awaitable[None]]:
        async def call(index: int) -> None:
            session = db.store.session(session_name(chosen[db.label][index]))
            await session.add_items(make_turn(index))

        return call

    for db in dbs:
        for index in range(5):
            await writer(db)(n_rounds * 30 + index)
    samples = await rounds(dbs, {db.label: writer(db) for db in dbs}, n_rounds)
    last = n_rounds * 30 - 1
    for db in dbs:
        n = chosen[db.label][last]
        got = await db.store.session(session_name(n)).get_items()
        report.check(got[-4:] == make_turn(last), f"{db.label}: the turn appended to {n}")
    small, big = (statistics.median(samples[db.label]) for db in dbs)
    rows = [ratio_row("add_items(4 items), median", "ms", small, big)]
    rows.append(pair("add_items(4 items), p95", "ms", [p95(samples[db.label]) for db in dbs]))
    return rows


async def _page_cursor(store: SessionStore, user_id: str | None, page: int) -> str | None:
    """The cursor of page ``page`` (from 1), walking the pages before it."""
    cursor = None
    for _ in range(page - 1):
        cursor = (await store.list_sessions(user_id=user_id, limit=PAGE, cursor=cursor)).next_cursor
    return cursor


def _listed_first(layout: Layout, user_id: str | None, page: int) -> str:
    """The session the page should start with: most recently active first."""
    newest = layout.sessions - 1
    if user_id is None:
        return session_name(newest - (page - 1) * PAGE)
    return session_name(newest - newest % 10 - (page - 1) * PAGE * 10)


async def listing(dbs: list[Loaded], report: Report, calls: int = 30) -> list[Row]:
    """``list_sessions`` first page and a far page (by cursor), overall and one user's."""
    rows: list[Row] = []
    for user_id, who in ((None, "all users"), (HEAVY_USER, "one user")):
        figures: dict[str, list[float]] = {}
        for db in dbs:
            owned = db.layout.sessions // 10 if user_id else db.layout.sessions
            far = max(1, min(FAR_PAGE, owned // PAGE))
            cursor = await _page_cursor(db.store, user_id, far)
            for page, at in ((1, None), (far, cursor)):
                got = await db.store.list_sessions(user_id=user_id, limit=PAGE, cursor=at)
                first = got[0].session_id if got else None
                expected = _listed_first(db.layout, user_id, page)
                report.check(first == expected, f"{db.label} {who} page {page}: {first}")
            samples: list[list[float]] = [[], []]
            for _ in range(calls):  # alternate, so noise hits both alike
                for i, at in enumerate((None, cursor)):
                    page_at = functools.partial(
                        db.store.list_sessions, user_id=user_id, limit=PAGE, cursor=at
                    )
                    samples[i].append(await timed(page_at))
            figures[db.label] = [statistics.median(s) for s in samples]
            figures[db.label].append(far)
        (s1, sf, s_far), (b1, bf, b_far) = (figures[db.label] for db in dbs)
        rows.append(Row(f"list_sessions {who}: page 1", "ms", s1, b1))
        label = f"list_sessions {who}: page {int(b_far)} (small: {int(s_far)})"
        rows.append(Row(label, "ms", sf, bf, f"<= {TARGET_RATIO}x page 1", bf <= b1 * TARGET_RATIO))
    return rows


async def purge(dbs: list[Loaded], report: Report) -> list[Row]:
    """``purge_expired`` of every expired item (5% of the items): items/s."""
    rates: list[float] = []
    for db in dbs:
        started = time.perf_counter()
        removed = await db.store.purge_expired()
        seconds = time.perf_counter() - started
        report.check(removed == db.layout.expired_items, f"{db.label}: purged {removed}")
        rates.append(removed / seconds)
    big = dbs[-1].layout.expired_items
    return [pair(f"purge_expired ({big:,} items on big)", "items/s", rates)]


async def erase_user(dbs: list[Loaded], report: Report) -> list[Row]:
    """``delete_user`` of one of the users with (up to) 1,000 sessions: ms."""
    figures: list[float] = []
    for db in dbs:
        owned = await db.store.list_sessions(user_id=user_name(0), limit=1)
        report.check(bool(owned), f"{db.label}: {user_name(0)} has sessions")
        started = time.perf_counter()
        removed = await db.store.delete_user(user_name(0))
        figures.append((time.perf_counter() - started) * 1000.0)
        sessions = min(1000, db.layout.sessions - db.layout.sessions // 10)
        report.check(removed.sessions == sessions, f"{db.label}: deleted {removed}")
        report.check(
            not await db.store.list_sessions(user_id=user_name(0), limit=1),
            f"{db.label}: {user_name(0)} still listed",
        )
    big = min(1000, dbs[-1].layout.sessions * 9 // 10)
    return [pair(f"delete_user ({big:,} sessions on big)", "ms", figures)]


SIZE_SQL = (
    "SELECT pg_relation_size($1::regclass), pg_indexes_size($1::regclass), "
    "pg_total_relation_size($1::regclass)"
)


async def sizes(dbs: list[Loaded]) -> list[Row]:
    """Table, index and total size of items and sessions, in MiB per million items."""
    import asyncpg  # type: ignore[import-untyped]

    from .scale_load import asyncpg_dsn

    models = build_models(TableNames())
    tables = (("items", models.items.fullname), ("sessions", models.sessions.fullname))
    figures: dict[str, list[Any]] = {}
    for db in dbs:
        conn = await asyncpg.connect(asyncpg_dsn(db.url))
        try:
            per_million = db.layout.items / 1e6
            for role, table in tables:
                heap, indexes, total = await conn.fetchrow(SIZE_SQL, table)
                for part, value in (("table", heap), ("indexes", indexes), ("total", total)):
                    figures.setdefault(f"{role} {part}", []).append(value / 2**20 / per_million)
        finally:
            await conn.close()
    # Only the big database's: the small one's tables are a few pages, mostly empty.
    return [
        Row(f"{what} per 1M items", "MiB", None, values[-1]) for what, values in figures.items()
    ]
