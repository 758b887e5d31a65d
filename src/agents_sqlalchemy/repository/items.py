"""The SDK protocol's SQL: append, read, pop and clear the items of one session."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

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
        expires_at = now + ttl if ttl else None
        rows = [
            {
                "session_pk": claimed.id,
                "seq": first + offset,
                "created_at": now,
                "expires_at": expires_at,
                "payload": item.payload,
                "ciphertext": item.ciphertext,
            }
            for offset, item in enumerate(new)
        ]
        if not any(item.terms or item.vector or item.model_id for item in new):
            conn.execute(self._statements.insert_items, rows)
            if new[0].wrapped_key is not None:  # sealed: the keys, found by their place
                self._add_keys_by_seq(conn, claimed.id, first, new)
            return
        inserted = conn.execute(self._statements.insert_items_returning, rows)
        self._add_side_rows(conn, claimed.id, list(zip(inserted.scalars(), new, strict=True)))

    async def read(self, key: SessionKey, limit: int | None) -> Sequence[Sequence[Any]]:
        """Live items in order, as rows laid out like `StoredItem`; with a limit, the latest."""
        return await self._db.read(lambda conn: self._read(conn, key, limit))

    def _read(self, conn: Connection, key: SessionKey, limit: int | None) -> Sequence[Any]:
        params = {"session_hash": key.hash, "now": self._now()}
        if limit is None:
            return conn.execute(self._statements.read_all, params).all()
        params["limit"] = limit
        return conn.execute(self._statements.read_tail, params).all()[::-1]

    async def pop(self, key: SessionKey, decode: Callable[[StoredItem], T]) -> T | None:
        """Remove the latest live item and return it decoded; a decode error keeps it stored."""
        return await self._db.write(lambda conn: self._pop(conn, key, decode))

    def _pop(
        self, conn: Connection, key: SessionKey, decode: Callable[[StoredItem], T]
    ) -> T | None:
        now = self._now()
        session_pk = self._lock_existing(conn, key, now)
        if session_pk is None:
            return None
        statements = self._statements
        row = conn.execute(statements.last_live, {"session_pk": session_pk, "now": now}).first()
        if row is None:
            return None
        conn.execute(statements.delete_item, {"item_pk": row[0]})
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
