"""Compaction's SQL: read a session's tail, then replace it (or the whole history) at once.

A replacement is one transaction under the session's write lock (the `next_seq` bump):
it re-reads the tail it replaces and changes nothing if that tail moved. The new rows take
fresh sequence numbers after every number handed out so far (a number is never reused, and
sealed rows are bound to theirs); they keep the newest replaced row's `created_at`, and
expire when the last replaced row would have (never, if one of them never expires), unless
each new row names the replaced row whose times it keeps (a repair's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from itertools import groupby
from typing import Any

from sqlalchemy import bindparam, delete, select
from sqlalchemy.engine import Connection

from ..turns import MAIN
from ..types import SEQ, NewItem, SessionKey, StoredItem, Tail
from .lines import branched, count_again, uncount
from .prepared import prepared
from .schema import ARRAY_ROWS, MAX_SEQ, Claimed, Schema, built_rows, page_rows

#: Rows of a prefix examined per statement while pruning it.
PRUNE_BATCH = 500
#: Rows of a tail read per statement (on PostgreSQL, `ARRAY_ROWS` a page of arrays):
#: between two, an async driver's loop runs its other tasks (200,000 rows at once held it
#: a second on PostgreSQL); a SQLite file's read runs in a worker thread whole.
TAIL_PAGE = 2000

Build = Callable[[int], Sequence[NewItem]]


class TailChanged(Exception):
    """Raised inside a replacement to roll it back: the tail moved since it was read, or
    the session branched."""


class Compaction:
    """A session's tail as compaction reads it, and its atomic replacement.

    Example::

        compaction = Compaction(schema)
        tail = await compaction.tail(key, 20)
        done = await compaction.replace_tail(key, [row[SEQ] for row in tail.stored], 1, build)
    """

    def __init__(self, schema: Schema) -> None:
        self._schema = schema

    async def tail(self, key: SessionKey, limit: int) -> Tail:
        """The latest `limit` live items in order; `complete` when no older one is live.
        Read in pages (`TAIL_PAGE`), in one snapshot."""
        return await self._schema.db.read(
            lambda conn: self._tail(conn, key, limit), snapshot=limit >= TAIL_PAGE
        )

    def _tail(self, conn: Connection, key: SessionKey, limit: int) -> Tail:
        if limit >= TAIL_PAGE and self._schema.statements.read_page is not None:
            return self._tail_in_arrays(conn, key, limit)
        stored: list[tuple[Any, ...]] = []
        wanted = limit + 1  # one more row says whether anything older exists
        params = {"session_hash": key.hash, "now": self._schema.now(), "last": MAX_SEQ}
        while True:
            page = min(TAIL_PAGE, wanted - len(stored))
            rows = self._newest.run(conn, params | {"page": page})  # the driver's tuples
            stored += rows
            if len(rows) < page or len(stored) == wanted:
                return Tail(stored[:limit][::-1], len(stored) <= limit)
            params["last"] = rows[-1][SEQ] - 1

    @prepared
    def _newest(self) -> Any:
        """A session's newest `page` live items at places up to `last`, newest first."""
        schema, items = self._schema, self._schema.items
        live = schema.live(bindparam("now", type_=items.c.expires_at.type))
        session_pk = (
            select(schema.sessions.c.id)
            .where(schema.sessions.c.session_hash == bindparam("session_hash"))
            .scalar_subquery()
        )
        last = bindparam("last", type_=items.c.seq.type)
        return schema.newest(
            schema.item_columns(with_id=False).where(live), session_pk, bindparam("page"), last
        )

    def _tail_in_arrays(self, conn: Connection, key: SessionKey, limit: int) -> Tail:
        """PostgreSQL: a long tail as `get_items` reads a whole session, a page of arrays at
        a time (`Statements.read_page`), after the place of the newest row left out. Its
        rows as records held the loop, and brought the garbage collector's full collections
        (four of 0.2 s for 200,000)."""
        items, now = self._schema.items, self._schema.now()  # one `now`: the same items live
        live_places = select(items.c.seq).where(
            items.c.session_pk == self._schema.session_pk(key).scalar_subquery(),
            self._schema.live(now),
        )
        older = live_places.order_by(items.c.seq.desc()).offset(limit).limit(1)
        before = conn.execute(older).scalar()
        page = self._schema.statements.read_page
        assert page is not None
        params = {"session_hash": key.hash, "now": now, "current_kek": None}
        stored: list[tuple[Any, ...]] = []
        after = -1 if before is None else before
        while True:
            [arrays] = page.run(conn, params | {"after": after})
            if arrays[0] is None:
                break
            stored += page_rows(arrays, self._schema.sealed)
            if len(arrays[0]) < ARRAY_ROWS:
                break
            after = stored[-1][SEQ]
        return Tail(stored, before is None)

    async def replace_tail(
        self,
        key: SessionKey,
        expected: Sequence[int],
        count: int,
        build: Build,
        prune: Callable[[StoredItem], bool] | None = None,
        origins: Sequence[int] | None = None,
        users: Sequence[int] = (),
    ) -> bool:
        """Replace the items numbered `expected` (the session's latest live ones) by `count`
        new rows, in one transaction; False, and nothing changed, if the tail moved.

        `prune(stored)`, if given, also deletes the contiguous run of live items before the
        replaced ones, oldest first, for which it is true. `origins[i]`: the replaced row
        (an index into `expected`) whose times new row `i` keeps (a repair's, whose
        replaced user messages, at places `users`, come back in the new rows).
        """
        try:
            await self._schema.db.write(
                lambda conn: self._replace_tail(
                    conn, key, list(expected), count, build, prune, origins, users
                ),
                session_id=key.session_id,
            )
        except TailChanged:
            return False
        return True

    def _replace_tail(
        self,
        conn: Connection,
        key: SessionKey,
        expected: list[int],
        count: int,
        build: Build,
        prune: Callable[[StoredItem], bool] | None,
        origins: Sequence[int] | None,
        users: Sequence[int],
    ) -> None:
        items, now = self._schema.items, self._schema.now()
        claimed = self._schema.claim(conn, key, count, now)  # the lock first, then every read
        if conn.execute(branched(self._schema, claimed.id)).scalar():
            raise TailChanged  # branched since it was read: its items may be a branch's too
        tail = conn.execute(
            select(items.c.id, items.c.seq, items.c.created_at, items.c.expires_at)
            .where(items.c.session_pk == claimed.id, self._schema.live(now))
            .order_by(items.c.seq.desc())
            .limit(len(expected))
        ).all()[::-1]
        if not expected or [row.seq for row in tail] != expected:
            raise TailChanged
        if prune is not None:
            self._prune_prefix(conn, claimed.id, tail[0].seq, prune, now)
        conn.execute(delete(items).where(items.c.id.in_([row.id for row in tail])))
        if origins is None:  # a compaction, not a repair (which keeps every turn in place)
            self._drop_usage(conn, claimed.id)
        else:
            uncount(conn, self._schema, claimed.id, users)
        self._insert(conn, claimed, count, build, tail, now, None, origins)

    async def replace_all(
        self, key: SessionKey, count: int, build: Build, ttl: timedelta | None
    ) -> bool:
        """Replace every item of the session by `count` new rows, in one transaction; False,
        and nothing changed, if the session has branches (their items may be main's too).

        With no live item to follow, the new rows are made now and expire after `ttl`.
        """
        try:
            await self._schema.db.write(
                lambda conn: self._replace_all(conn, key, count, build, ttl),
                session_id=key.session_id,
            )
        except TailChanged:
            return False
        return True

    def _replace_all(
        self, conn: Connection, key: SessionKey, count: int, build: Build, ttl: timedelta | None
    ) -> None:
        items, now = self._schema.items, self._schema.now()
        claimed = self._schema.claim(conn, key, count, now)
        if conn.execute(branched(self._schema, claimed.id)).scalar():
            raise TailChanged
        live = conn.execute(
            select(items.c.created_at, items.c.expires_at).where(
                items.c.session_pk == claimed.id, self._schema.live(now)
            )
        ).all()
        conn.execute(delete(items).where(items.c.session_pk == claimed.id))
        self._drop_usage(conn, claimed.id)
        self._insert(conn, claimed, count, build, live, now, ttl)

    def _drop_usage(self, conn: Connection, session_pk: int) -> None:
        """A compaction rewrites the main line's turns: the usage recorded per turn goes,
        and the turns are counted again from its new items (left in place, a later turn's
        record would take an old turn's number). So does the SDK's `AdvancedSQLiteSession`,
        whose compaction clears the session."""
        usage, lines = self._schema.turn_usage, self._schema.branches
        main = select(lines.c.id).where(lines.c.session_pk == session_pk, lines.c.name == MAIN)
        conn.execute(delete(usage).where(usage.c.branch_pk == main.scalar_subquery()))
        conn.execute(count_again(self._schema, session_pk))

    def _prune_prefix(
        self,
        conn: Connection,
        session_pk: int,
        before_seq: int,
        prune: Callable[[StoredItem], bool],
        now: datetime,
    ) -> None:
        """Delete the oldest live items before `before_seq` while `prune` says so."""
        items = self._schema.items
        after = -1
        while True:
            rows = conn.execute(
                self._schema.item_columns()
                .where(
                    items.c.session_pk == session_pk,
                    items.c.seq > after,
                    items.c.seq < before_seq,
                    self._schema.live(now),
                )
                .order_by(items.c.seq)
                .limit(PRUNE_BATCH)
            ).all()
            doomed = []
            for row in rows:
                if not prune(self._schema.stored(row)):
                    break
                doomed.append(row[0])
            if doomed:
                conn.execute(delete(items).where(items.c.id.in_(doomed)))
            if len(doomed) < PRUNE_BATCH:
                return
            after = rows[-1][1]

    def _insert(
        self,
        conn: Connection,
        claimed: Claimed,
        count: int,
        build: Build,
        replaced: Sequence[Any],
        now: datetime,
        ttl: timedelta | None,
        origins: Sequence[int] | None = None,
    ) -> None:
        """Insert `count` rows at the numbers just claimed, timed after the `replaced` rows
        (each as its origin in `replaced`, with `origins`)."""
        if not count:
            return
        if origins is not None:
            times = [(replaced[i].created_at, replaced[i].expires_at) for i in origins]
        elif replaced:
            expiries = [row.expires_at for row in replaced]
            last = None if None in expiries else max(expiries)
            times = [(max(row.created_at for row in replaced), last)] * count
        else:
            times = [(now, now + ttl if ttl else None)] * count
        first = claimed.next_seq - count + 1
        rows, start = built_rows(conn, build, first, count), 0
        for (created_at, expires_at), run in groupby(times):  # rows made at once, together
            size = len(list(run))
            part = rows[start : start + size]
            self._schema.insert_items(
                conn,
                claimed.id,
                first + start,
                part,
                created_at,
                expires_at,
                checked=claimed.checked,
            )
            start += size
