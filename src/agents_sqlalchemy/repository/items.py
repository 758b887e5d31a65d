"""The SDK protocol's SQL: append, read, pop and clear the items of one session."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TypeVar

from sqlalchemy import delete
from sqlalchemy.engine import Connection

from ..types import NewItem, SessionKey, StoredItem
from .base import RepositoryBase

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
            await self._db.write(lambda conn: self._append(conn, key, count, build, ttl))

    def _append(
        self,
        conn: Connection,
        key: SessionKey,
        count: int,
        build: Callable[[int], Sequence[NewItem]],
        ttl: timedelta | None,
    ) -> None:
        now = self._now()
        claimed = self._claim(conn, key, count, now)
        first = claimed.next_seq - count + 1
        new = build(first)
        rows = [
            {
                "session_pk": claimed.id,
                "seq": first + offset,
                "created_at": now,
                "expires_at": now + ttl if ttl else None,
                "payload": item.payload,
                "ciphertext": item.ciphertext,
            }
            for offset, item in enumerate(new)
        ]
        if not any(item.wrapped_key or item.terms or item.vector for item in new):
            conn.execute(self._items.insert(), rows)
            return
        if not any(item.terms or item.vector for item in new):  # sealed, not indexed
            conn.execute(self._items.insert(), rows)
            self._add_keys_by_seq(conn, claimed.id, first, new)
            return
        inserted = conn.execute(
            self._items.insert().returning(self._items.c.id, sort_by_parameter_order=True), rows
        )
        self._add_side_rows(conn, claimed.id, list(zip(inserted.scalars(), new, strict=True)))

    async def read(self, key: SessionKey, limit: int | None) -> list[StoredItem]:
        """Live items in order; with a limit, the latest `limit` of them."""
        return await self._db.read(lambda conn: self._read(conn, key, limit))

    def _read(self, conn: Connection, key: SessionKey, limit: int | None) -> list[StoredItem]:
        items = self._items
        query = self._item_columns().where(
            items.c.session_pk == self._session_pk(key).scalar_subquery(), self._live(self._now())
        )
        if limit is None:
            rows = conn.execute(query.order_by(items.c.seq)).all()
        else:
            rows = conn.execute(query.order_by(items.c.seq.desc()).limit(limit)).all()[::-1]
        return [self._stored(row) for row in rows]

    async def pop(self, key: SessionKey, decode: Callable[[StoredItem], T]) -> T | None:
        """Remove the latest live item and return it decoded; a decode error keeps it stored."""
        return await self._db.write(lambda conn: self._pop(conn, key, decode))

    def _pop(
        self, conn: Connection, key: SessionKey, decode: Callable[[StoredItem], T]
    ) -> T | None:
        items, now = self._items, self._now()
        session_pk = self._lock_existing(conn, key, now)
        if session_pk is None:
            return None
        tail = (
            self._item_columns()
            .where(items.c.session_pk == session_pk, self._live(now))
            .order_by(items.c.seq.desc())
            .limit(1)
        )
        row = conn.execute(tail).one_or_none()
        if row is None:
            return None
        conn.execute(delete(items).where(items.c.id == row.id))
        # Decoded inside the transaction: a corrupt row raises and the delete rolls back.
        return decode(self._stored(row))

    async def clear(self, key: SessionKey) -> int:
        """Delete every item of the session (the session row stays); return how many."""
        return await self._db.write(lambda conn: self._clear(conn, key))

    def _clear(self, conn: Connection, key: SessionKey) -> int:
        session_pk = self._lock_existing(conn, key, self._now())
        if session_pk is None:
            return 0
        result = conn.execute(delete(self._items).where(self._items.c.session_pk == session_pk))
        return int(result.rowcount)
