"""The SDK protocol's SQL: append, read, pop and clear the items of one session."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from sqlalchemy import delete
from sqlalchemy.engine import Connection

from ..types import NewItem, SessionKey, StoredItem
from .appends import AppendOps
from .base import SMALL

T = TypeVar("T")


class ItemOps(AppendOps):
    """Items of one session, ordered by their sequence number."""

    async def append(
        self,
        key: SessionKey,
        count: int,
        build: Callable[[int], Sequence[NewItem]],
        ttl: timedelta | None,
    ) -> tuple[int, int]:
        """Append `count` (> 0) items in one transaction, creating the session row on first
        write; return the session row's id and the number of the first item.

        `build(first_seq)` makes the rows once their numbers are known (sealing binds them).
        """
        session_pk, next_seq = await self._db.write(
            lambda conn: self._append(conn, key, count, build, ttl),
            session_id=key.session_id,
            small=count <= SMALL,
        )
        return session_pk, next_seq - count + 1

    async def read(
        self, key: SessionKey, limit: int | None, current_kek: str | None = None
    ) -> Sequence[Sequence[Any]]:
        """Live items in order, as rows laid out like `StoredItem`; with a limit, the latest.

        Sealed rows carry their kek_id only where it is not `current_kek`."""
        small = limit is not None and limit <= SMALL
        return await self._db.read(
            lambda conn: self._read(conn, key, limit, current_kek), small=small
        )

    def _read(
        self, conn: Connection, key: SessionKey, limit: int | None, current_kek: str | None
    ) -> Sequence[Any]:
        params = {"session_hash": key.hash, "now": self._now(), "current_kek": current_kek}
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
