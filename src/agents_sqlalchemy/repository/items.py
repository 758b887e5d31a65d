"""The SDK protocol's SQL: append, read, pop and clear the items of one session."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from functools import cached_property
from typing import Any, TypeVar

from sqlalchemy import bindparam, delete, func, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection

from ..types import NewItem, SessionKey, StoredItem
from .base import SMALL, RepositoryBase
from .prepared import Prepared

T = TypeVar("T")


class ItemOps(RepositoryBase):
    """Items of one session, ordered by their sequence number."""

    async def append(
        self,
        key: SessionKey,
        count: int,
        build: Callable[[int], Sequence[NewItem]],
        ttl: timedelta | None,
    ) -> None:
        """Append `count` items in one transaction, creating the session row on first write.

        `build(first_seq)` makes the rows once their numbers are known (sealing binds them).
        """
        if count:
            await self._db.write(
                lambda conn: self._append(conn, key, count, build, ttl),
                session_id=key.session_id,
                small=count <= SMALL,
            )

    def _append(
        self,
        conn: Connection,
        key: SessionKey,
        count: int,
        build: Callable[[int], Sequence[NewItem]],
        ttl: timedelta | None,
    ) -> None:
        now = self._now()
        expires_at = now + ttl if ttl else None
        if self._claim_and_insert is not None:  # plaintext rows do not depend on their place
            payloads = [item.payload for item in build(0)]
            values = self._claim_values(key, count, now)
            self._claim_and_insert.run(
                conn, values | {"payloads": payloads, "expires_at": expires_at}
            )
            return
        session_pk, next_seq = self._claim(conn, key, count, now)
        first = next_seq - count + 1
        self._insert_items(conn, session_pk, first, build(first), now, expires_at)

    @cached_property
    def _claim_and_insert(self) -> Prepared | None:
        """PostgreSQL, plaintext: an append in one statement (one round trip), the claim of
        `_claim` as its CTE, the items numbered by their place in the `payloads` array."""
        if self._sealed or self._db.dialect_name != "postgresql":
            return None
        items = self._items
        claimed = self._claim_upsert.cte("claimed")
        payloads = (
            func.unnest(bindparam("payloads", type_=postgresql.ARRAY(items.c.payload.type)))
            .table_valued("payload", with_ordinality="place")
            .render_derived()
        )
        rows = select(
            claimed.c.id,
            claimed.c.next_seq - bindparam("count", type_=items.c.seq.type) + payloads.c.place,
            bindparam("now", type_=items.c.created_at.type),
            bindparam("expires_at", type_=items.c.expires_at.type),
            payloads.c.payload,
        ).select_from(claimed, payloads)
        columns = ["session_pk", "seq", "created_at", "expires_at", "payload"]
        return Prepared(items.insert().from_select(columns, rows))

    async def read(self, key: SessionKey, limit: int | None) -> Sequence[Sequence[Any]]:
        """Live items in order, as rows laid out like `StoredItem`; with a limit, the latest."""
        small = limit is not None and limit <= SMALL
        return await self._db.read(lambda conn: self._read(conn, key, limit), small=small)

    def _read(self, conn: Connection, key: SessionKey, limit: int | None) -> Sequence[Any]:
        params = {"session_hash": key.hash, "now": self._now()}
        if limit is None:
            return self._statements.read_all.run(conn, params)
        params["limit"] = limit
        return self._statements.read_tail.run(conn, params)[::-1]

    async def pop(self, key: SessionKey, decode: Callable[[StoredItem], T]) -> T | None:
        """Remove the latest live item and return it decoded; a decode error keeps it stored."""
        return await self._db.write(
            lambda conn: self._pop(conn, key, decode), session_id=key.session_id, small=True
        )

    def _pop(
        self, conn: Connection, key: SessionKey, decode: Callable[[StoredItem], T]
    ) -> T | None:
        now = self._now()
        session_pk = self._lock_existing(conn, key, now)
        if session_pk is None:
            return None
        stored = self._take_last_live(conn, session_pk, now)
        # Decoded inside the transaction: a corrupt row raises and the delete rolls back.
        return None if stored is None else decode(stored)

    async def clear(self, key: SessionKey) -> int:
        """Delete every item of the session (the session row stays); return how many."""
        return await self._db.write(lambda conn: self._clear(conn, key), session_id=key.session_id)

    def _clear(self, conn: Connection, key: SessionKey) -> int:
        session_pk = self._lock_existing(conn, key, self._now())
        if session_pk is None:
            return 0
        result = conn.execute(delete(self._items).where(self._items.c.session_pk == session_pk))
        return int(result.rowcount)
