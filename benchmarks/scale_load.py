"""The scale benchmark's fast import: sessions and items written by PostgreSQL itself.

Loading ten million items through ``add_items`` would take hours; this writes, with one
server-side ``INSERT ... SELECT generate_series(...)`` per chunk of sessions, exactly the
rows the library writes for plaintext items with search off:

- a session row as ``_claim`` makes it: the SDK id, its SHA-256 (hex), the owner, metadata
  as the JSON text SQLAlchemy writes, ``next_seq`` = its item count, created/updated times;
- its items numbered 1..k, with ``created_at``, ``expires_at`` (NULL, or in the past for the
  expired sessions) and ``payload``: the text of ``codec.encode_item`` of a benchmark item.
  The payloads come from a pool of ``POOL`` items encoded in Python by the library's codec
  and copied into a scratch table; item ``seq`` of session ``n`` is pool item
  ``(n * k + seq - 1) % POOL`` (``expected_items`` says which).

Then ``VACUUM (ANALYZE)``: the statistics and visibility map autovacuum would leave.
``check_loaded`` reads sessions back through the library. The layout of owners:

- every 10th session (``n % 10 == 0``) belongs to one heavy user, ``HEAVY_USER``;
- the others to users of ``USER_SESSIONS`` sessions each, ``user_name(0)``, ``user_name(1)``...
- every session with ``n % 20 == 5`` has all its items expired (5% of the items).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from agents_sqlalchemy import SessionStore, TableNames
from agents_sqlalchemy.codec import encode_item
from agents_sqlalchemy.models import build_models

from .core import Item
from .items import item_at

POOL = 4000  # distinct payloads (1,000 turns of 4 items)
HEAVY_USER = "heavy"
USER_SESSIONS = 1000
CHUNK_ITEMS = 500_000  # items per INSERT statement
SCRATCH = "scale_load_pool"


@dataclass(frozen=True)
class Layout:
    """How many sessions and items, and when the loaded sessions were last active."""

    sessions: int
    items: int
    # Session n was created and last active at start + n seconds; items expire a day later.
    start: datetime = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(days=60)

    @property
    def per_session(self) -> int:
        return self.items // self.sessions

    @property
    def expired_items(self) -> int:
        return sum(1 for n in range(5, self.sessions, 20)) * self.per_session

    def check(self) -> None:
        if self.sessions < 20 or self.items % self.sessions:
            raise ValueError("--items must be a multiple of --sessions, and --sessions >= 20")


def session_name(n: int) -> str:
    return f"scale-{n}"


def user_name(index: int) -> str:
    return f"user-{index:06d}"


def owner(n: int) -> str:
    """The user of session ``n`` (what the SQL below computes)."""
    if n % 10 == 0:
        return HEAVY_USER
    return user_name((n - n // 10 - 1) // USER_SESSIONS)


def is_expired(n: int) -> bool:
    return n % 20 == 5


def expected_items(n: int, layout: Layout) -> list[Item]:
    """The items the library should read back from session ``n`` (none when expired)."""
    if is_expired(n):
        return []
    k = layout.per_session
    return [item_at((n * k + i) % POOL) for i in range(k)]


def _names() -> dict[str, str]:
    models = build_models(TableNames())
    return {"sessions": models.sessions.fullname, "items": models.items.fullname}


def _chunk_sql(names: dict[str, str]) -> str:
    # $1, $2: the chunk's first and last n; $3: items per session; $4: the start time.
    return f"""
WITH made AS (
    INSERT INTO {names["sessions"]}
        (session_id, session_hash, user_id, metadata, next_seq, created_at, updated_at)
    SELECT 'scale-' || n,
           encode(sha256(convert_to('scale-' || n, 'UTF8')), 'hex'),
           CASE WHEN n % 10 = 0 THEN '{HEAVY_USER}'
                ELSE 'user-' || lpad(((n - n / 10 - 1) / {USER_SESSIONS})::text, 6, '0') END,
           ('{{"n": ' || n || '}}')::json,
           $3,
           $4::timestamptz + n * interval '1 second',
           $4::timestamptz + n * interval '1 second'
    FROM generate_series($1::bigint, $2::bigint) AS n
    RETURNING id, (metadata ->> 'n')::bigint AS n, created_at
)
INSERT INTO {names["items"]} (session_pk, seq, created_at, expires_at, payload)
SELECT made.id, g.seq, made.created_at + g.seq * interval '1 millisecond',
       CASE WHEN made.n % 20 = 5 THEN made.created_at + interval '1 day' END,
       pool.payload
FROM made CROSS JOIN generate_series(1, $3::bigint) AS g(seq)
JOIN {SCRATCH} AS pool ON pool.k = (made.n * $3 + g.seq - 1) % {POOL}
ORDER BY made.id, g.seq
"""


def asyncpg_dsn(url: str) -> str:
    """A SQLAlchemy PostgreSQL URL as a DSN asyncpg takes."""
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def load(url: str, layout: Layout, log: Any = print) -> float:
    """Write the layout's sessions and items into the (empty) tables at ``url``; return seconds.

    The tables must exist (a store's first call, or the migrations, make them).
    """
    import asyncpg  # type: ignore[import-untyped]

    layout.check()
    names, k = _names(), layout.per_session
    started = time.perf_counter()
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        await conn.execute(f"CREATE UNLOGGED TABLE {SCRATCH} (k integer PRIMARY KEY, payload text)")
        pool = [(i, encode_item(item_at(i))) for i in range(POOL)]
        await conn.copy_records_to_table(SCRATCH, records=pool)
        chunk = max(1, CHUNK_ITEMS // k)
        sql = _chunk_sql(names)
        for first in range(0, layout.sessions, chunk):
            last = min(layout.sessions, first + chunk) - 1
            await conn.execute(sql, first, last, k, layout.start)
            done = (last + 1) * k
            rate = done / (time.perf_counter() - started)
            log(f"  loaded {last + 1:,} sessions, {done:,} items ({rate:,.0f} items/s)")
        await conn.execute(f"DROP TABLE {SCRATCH}")
        for table in names.values():
            await conn.execute(f"VACUUM (ANALYZE) {table}")
    finally:
        await conn.close()
    return time.perf_counter() - started


def sample(layout: Layout, count: int = 12) -> list[int]:
    """Sessions to check: the first and last, an expired one, a heavy user's, spread ones."""
    picks = {0, 5, layout.sessions - 1, layout.sessions // 2}
    step = max(1, layout.sessions // count)
    picks.update(range(1, layout.sessions, step))
    return sorted(picks)


async def check_loaded(store: SessionStore, layout: Layout) -> list[str]:
    """Read sampled sessions back through the library; return the differences found."""
    problems: list[str] = []
    for n in sample(layout):
        name, expected = session_name(n), expected_items(n, layout)
        got = await store.session(name).get_items()
        if got != expected:
            problems.append(f"{name}: {len(got)} items read, {len(expected)} expected")
        tail = await store.session(name).get_items(limit=3)
        if tail != expected[-3:]:
            problems.append(f"{name}: get_items(limit=3) differs")
        info = await store.session_info(name)
        if info is None or info.user_id != owner(n) or info.item_count != len(expected):
            problems.append(f"{name}: described as {info}")
        elif info.metadata != {"n": n} or info.updated_at != layout.start + timedelta(seconds=n):
            problems.append(f"{name}: metadata or times differ: {info}")
    return problems
