"""The items of one session's main line: append, read, pop and clear (the SDK protocol).

An append claims the batch's places and inserts its items in one transaction: in one
statement on PostgreSQL, in two elsewhere.

Example::

    items = Items(schema)
    await items.append(SessionKey.of("chat-1"), 1, lambda seq: [NewItem(payload="{}")], None)
    rows = await items.read(SessionKey.of("chat-1"), limit=None)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any, TypeVar

from sqlalchemy import bindparam, delete, exists, func, or_, select, update
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection

from ..errors import OwnerKeyError
from ..types import NewItem, SessionKey, StoredItem, owner_of
from .prepared import Prepared
from .schema import ARRAY_ROWS, SMALL, Schema

T = TypeVar("T")
# Sessions whose next place a store remembers, for one-statement sealed appends.
SESSIONS_REMEMBERED = 10_000


class _MorePages(Exception):
    """A full read found more than one page of items outside the session's lock."""


class Items:
    """Items of one session, ordered by their sequence number."""

    def __init__(self, schema: Schema) -> None:
        self._schema = schema
        # The `next_seq` this store last saw, by session hash (where sealed appends go).
        self._next_seqs: dict[str, int] = {}

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
        session_pk, next_seq = await self._schema.db.write(
            lambda conn: self.append_in(conn, key, count, build, ttl),
            session_id=key.session_id,
            small=count <= SMALL,
            # Plaintext on PostgreSQL: the claim and the rows in one statement, and no more.
            one_statement=self._one_statement is not None and not self._schema.sealed,
        )
        return session_pk, next_seq - count + 1

    async def append_once(
        self,
        key: SessionKey,
        count: int,
        build: Callable[[int], Sequence[NewItem]],
        ttl: timedelta | None,
        batch_key: str,
    ) -> tuple[int, int] | None:
        """`append`, of a batch named by `batch_key` (an idempotency key's hash): None, and
        nothing written, when the session holds that batch already."""
        placed = await self._schema.db.write(
            lambda conn: self._append_once(conn, key, count, build, ttl, batch_key),
            session_id=key.session_id,
            small=count <= SMALL,
        )
        return None if placed is None else (placed[0], placed[1] - count + 1)

    def _append_once(
        self,
        conn: Connection,
        key: SessionKey,
        count: int,
        build: Callable[[int], Sequence[NewItem]],
        ttl: timedelta | None,
        batch_key: str,
    ) -> tuple[int, int] | None:
        now, items = self._schema.now(), self._schema.items
        session_pk, _ = self._schema.claim(conn, key, 0, now)  # the lock, no place taken
        held = select(items.c.id).where(
            items.c.session_pk == session_pk, items.c.batch_key == batch_key
        )
        if conn.execute(held.limit(1)).first() is not None:
            return None
        session_pk, next_seq = self._schema.claim(conn, key, count, now)
        first = next_seq - count + 1
        expires_at = now + ttl if ttl else None
        self._schema.insert_items(conn, session_pk, first, build(first), now, expires_at)
        named = update(items).where(items.c.session_pk == session_pk, items.c.seq == first)
        conn.execute(named.values(batch_key=batch_key))
        return session_pk, next_seq

    async def read(
        self, key: SessionKey, limit: int | None, current_kek: str | None = None
    ) -> tuple[SessionKey, Sequence[Sequence[Any]]]:
        """Live items in order, as rows laid out like `StoredItem`; with a limit, the latest.
        With them, `key` with its owner (`Schema.owned`), read in the same transaction.

        Sealed rows carry their kek_id only where it is not `current_kek`."""
        small = limit is not None and limit <= SMALL
        try:
            return await self._schema.db.read(
                lambda conn: self._read(conn, key, limit, current_kek), small=small
            )
        except _MorePages:  # read again under the session's lock: the pages then agree
            return await self._schema.db.write(
                lambda conn: self._read(conn, key, limit, current_kek, locked=True),
                session_id=key.session_id,
            )

    def _read(
        self,
        conn: Connection,
        key: SessionKey,
        limit: int | None,
        current_kek: str | None,
        *,
        locked: bool = False,
    ) -> tuple[SessionKey, Sequence[Any]]:
        params = {"session_hash": key.hash, "now": self._schema.now(), "current_kek": current_kek}
        owned = self._schema.owned(conn, key)
        if limit is None and (page := self._schema.statements.read_page) is not None:
            if locked:
                conn.execute(self._share_lock, {"session_hash": key.hash})
            rows: list[Any] = []
            while True:  # one statement, unless the session holds more than a page
                [arrays] = page.run(conn, params | {"after": rows[-1][0] if rows else -1})
                if arrays[0] is None:
                    break
                rows += zip(*arrays, strict=True)
                if len(arrays[0]) < ARRAY_ROWS:
                    break
                if not locked:
                    raise _MorePages()
            return owned, rows
        if limit is None:
            return owned, self._schema.statements.read_all.run(conn, params)
        params["limit"] = limit
        return owned, self._schema.statements.read_tail.run(conn, params)[::-1]

    @cached_property
    def _share_lock(self) -> Any:
        """Holds the session's writers off while a read of many pages runs."""
        sessions = self._schema.sessions
        found = select(sessions.c.id).where(sessions.c.session_hash == bindparam("session_hash"))
        return found.with_for_update(read=True)

    async def pop(self, key: SessionKey, decode: Callable[[SessionKey, StoredItem], T]) -> T | None:
        """Remove the latest live item and return it decoded (`decode(key with its owner,
        row)`); a decode error keeps it stored."""
        return await self._schema.db.write(
            lambda conn: self._pop(conn, key, decode), session_id=key.session_id, small=True
        )

    def _pop(
        self, conn: Connection, key: SessionKey, decode: Callable[[SessionKey, StoredItem], T]
    ) -> T | None:
        now = self._schema.now()
        locked = self._schema.lock_owned(conn, key, now)
        if locked is None:
            return None
        session_pk, owned = locked
        stored = self._schema.take_last_live(conn, session_pk, now)
        # Decoded inside the transaction: a corrupt row raises and the delete rolls back.
        return None if stored is None else decode(owned, stored)

    async def clear(self, key: SessionKey) -> int:
        """Delete every item of the session (the session row stays); return how many."""
        return await self._schema.db.write(
            lambda conn: self._clear(conn, key), session_id=key.session_id
        )

    def _clear(self, conn: Connection, key: SessionKey) -> int:
        session_pk = self._schema.lock_existing(conn, key, self._schema.now())
        if session_pk is None:
            return 0
        items = self._schema.items
        result = conn.execute(delete(items).where(items.c.session_pk == session_pk))
        return int(result.rowcount)

    def append_in(
        self,
        conn: Connection,
        key: SessionKey,
        count: int,
        build: Callable[[int], Sequence[NewItem]],
        ttl: timedelta | None,
    ) -> tuple[int, int]:
        """Inside a transaction: append `count` items to the session's main line; its id and
        `next_seq` after (the Runner's append runs it too, beside its usage record)."""
        now = self._schema.now()
        expires_at = now + ttl if ttl else None
        if self._one_statement is not None:
            session_pk, next_seq, inserted = self._append_at_once(
                conn, key, count, build, now, expires_at
            )
            if inserted:
                return session_pk, next_seq
        else:
            session_pk, next_seq = self._schema.claim(conn, key, count, now)
        first = next_seq - count + 1
        self._schema.insert_items(conn, session_pk, first, build(first), now, expires_at)
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
        only under a live owner key of the session's owner (else the write is refused).
        """
        assert self._one_statement is not None
        first: int | None = None
        if not self._schema.sealed:
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
        values = self._schema.claim_values(key, count, now) | columns
        values |= {"expires_at": expires_at, "first": first}
        if self._schema.sealed:  # sealed items go in only under the keyring's active kek
            values["kek"] = rows[0].kek_id if rows else None
        [(session_pk, next_seq, inserted, user_id, key_owner)] = self._one_statement.run(
            conn, values
        )
        if self._schema.sealed and inserted and owner_of(user_id, key.hash) != key_owner:
            raise OwnerKeyError(  # the transaction rolls back; the caller looks again
                "the session's owner changed since this store looked: nothing was written"
            )
        if self._schema.sealed:
            if len(self._next_seqs) >= SESSIONS_REMEMBERED:
                self._next_seqs.clear()
            self._next_seqs[key.hash] = next_seq
        return session_pk, next_seq, inserted == count

    @cached_property
    def _one_statement(self) -> Prepared | None:
        """PostgreSQL: an append in one statement (one round trip). The claim of `Schema.claim`
        is its first CTE; the items, numbered by their place in the arrays, go in when the
        claimed place is `first` (or `first` is NULL); it returns the claim and how many
        items went in."""
        if self._schema.db.dialect_name != "postgresql":
            return None
        items = self._schema.items
        claimed = self._schema.claim_upsert.returning(self._schema.sessions.c.user_id)
        claimed = claimed.cte("claimed")
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
        keys = self._schema.owner_keys
        kek = bindparam("kek", type_=keys.c.key_id.type)
        if self._schema.sealed:  # only under a live owner key (else `insert_items` refuses)
            live = select(keys.c.key_id).where(keys.c.key_id == kek, keys.c.retired_at.is_(None))
            rows = rows.where(exists(live.with_for_update(read=True)))
        columns = ["session_pk", "seq", "created_at", "expires_at", *names]
        inserted = items.insert().from_select(columns, rows).returning(items.c.id).cte("inserted")
        went_in = select(func.count()).select_from(inserted).scalar_subquery()
        key_owner = select(keys.c.owner).where(keys.c.key_id == kek).scalar_subquery()
        return Prepared(
            select(claimed.c.id, claimed.c.next_seq, went_in, claimed.c.user_id, key_owner)
        )
