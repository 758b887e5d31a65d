"""Appending items to a session's main line: in one statement on PostgreSQL, in two elsewhere.

Both the SDK protocol's append (`ItemOps`) and the Runner's, which records the run's token
usage in the same transaction (`UsageOps`), run `_append`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from functools import cached_property

from sqlalchemy import bindparam, exists, func, or_, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection

from ..types import NewItem, SessionKey
from .base import RepositoryBase
from .prepared import Prepared

# Sessions whose next place a store remembers, for one-statement sealed appends.
SESSIONS_REMEMBERED = 10_000


class AppendOps(RepositoryBase):
    """The claim of a batch's places and the insert of its items, in one transaction."""

    def _append(
        self,
        conn: Connection,
        key: SessionKey,
        count: int,
        build: Callable[[int], Sequence[NewItem]],
        ttl: timedelta | None,
    ) -> tuple[int, int]:
        """Append `count` items to the session's main line; its id and `next_seq` after."""
        now = self._now()
        expires_at = now + ttl if ttl else None
        if self._one_statement is not None:
            session_pk, next_seq, inserted = self._append_at_once(
                conn, key, count, build, now, expires_at
            )
            if inserted:
                return session_pk, next_seq
        else:
            session_pk, next_seq = self._claim(conn, key, count, now)
        first = next_seq - count + 1
        self._insert_items(conn, session_pk, first, build(first), now, expires_at)
        return session_pk, next_seq

    def _append_at_once(
        self,
        conn: Connection,
        key: SessionKey,
        count: int,
        build: Callable[[int], Sequence[NewItem]],
        now: datetime,
        expires_at: datetime | None,
    ) -> tuple[int, int, bool]:
        """PostgreSQL: claim and insert in one statement; the session's id, its `next_seq`,
        and whether the items went in.

        Plaintext items go in at once. Sealed ones are bound to their place, so they are
        sealed at the place this store last saw free, and go in only if it still is (else
        the caller seals them again at the place claimed, in the same transaction), and
        only under the keyring's active kek (else the caller's insert refuses the write).
        """
        assert self._one_statement is not None
        first: int | None = None
        if not self._sealed:
            rows = build(0)  # plaintext rows do not depend on their place
        elif (last := self._next_seqs.get(key.hash)) is not None:
            first = last + 1
            rows = build(first)
        else:
            rows = []  # a session this store has not written yet: claim only
        columns = {
            f"{column}s": [getattr(row, column) for row in rows]
            for column in ("payload", "ciphertext", "wrapped_key", "kek_id")
        }
        values = self._claim_values(key, count, now) | columns
        values |= {"expires_at": expires_at, "first": first}
        if self._sealed:  # sealed items go in only under the keyring's active kek
            values["kek"] = rows[0].kek_id if rows else None
        [(session_pk, next_seq, inserted)] = self._one_statement.run(conn, values)
        if self._sealed:
            if len(self._next_seqs) >= SESSIONS_REMEMBERED:
                self._next_seqs.clear()
            self._next_seqs[key.hash] = next_seq
        return session_pk, next_seq, inserted == count

    @cached_property
    def _next_seqs(self) -> dict[str, int]:
        """The `next_seq` this store last saw, by session hash (where sealed appends go)."""
        return {}

    @cached_property
    def _one_statement(self) -> Prepared | None:
        """PostgreSQL: an append in one statement (one round trip). The claim of `_claim` is
        its first CTE; the items, numbered by their place in the arrays, go in when the
        claimed place is `first` (or `first` is NULL); it returns the claim and how many
        items went in."""
        if self._db.dialect_name != "postgresql":
            return None
        items = self._items
        claimed = self._claim_upsert.cte("claimed")
        names = ("payload", "ciphertext", "wrapped_key", "kek_id")
        arrays = [
            bindparam(f"{name}s", type_=postgresql.ARRAY(items.c[name].type)) for name in names
        ]
        given = func.unnest(*arrays).table_valued(*names, with_ordinality="place").render_derived()
        count = bindparam("count", type_=items.c.seq.type)
        first = bindparam("first", type_=items.c.seq.type)
        rows = select(
            claimed.c.id,
            claimed.c.next_seq - count + given.c.place,
            bindparam("now", type_=items.c.created_at.type),
            bindparam("expires_at", type_=items.c.expires_at.type),
            *(given.c[name] for name in names),
        ).where(or_(first.is_(None), claimed.c.next_seq - count + 1 == first))
        if self._sealed:  # else the caller's `_insert_items` refuses the retired kek
            keyring = self._models.table(self._models.keyring)
            active = select(keyring.c.kek_id).where(
                keyring.c.kek_id == bindparam("kek"), keyring.c.retired_at.is_(None)
            )
            rows = rows.where(exists(active.with_for_update(read=True)))
        columns = ["session_pk", "seq", "created_at", "expires_at", *names]
        inserted = items.insert().from_select(columns, rows).returning(items.c.id).cte("inserted")
        went_in = select(func.count()).select_from(inserted).scalar_subquery()
        return Prepared(select(claimed.c.id, claimed.c.next_seq, went_in))
