"""The items of one session's main line: append, read and clear (a pop is `Branches.pop_line`).

An append claims the batch's places and inserts its items in one transaction: in one
statement on PostgreSQL, in two elsewhere.

Example::

    items = Items(schema)
    await items.append(SessionKey.of("chat-1"), 1, lambda seq: [NewItem(payload="{}")], None)
    rows = await items.read(SessionKey.of("chat-1"), limit=None)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from functools import cached_property
from typing import Any

from sqlalchemy import bindparam, delete, exists, func, select, update
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection

from ..caches import add_bounded
from ..types import NewItem, SessionKey, StoredItem, owner_of
from .prepared import Prepared
from .schema import ARRAY_ROWS, SMALL, MorePages, Schema, built_rows, page_rows

#: Sessions whose next place a sealed store remembers, for one-statement appends.
PLACES_REMEMBERED = 10_000


class Items:
    """Items of one session, ordered by their sequence number."""

    def __init__(self, schema: Schema) -> None:
        self._schema = schema
        # Sealed: each session's `next_seq` and user as this store last left them, by hash.
        self._seen: dict[str, tuple[int, str | None]] = {}

    async def append(
        self,
        key: SessionKey,
        count: int,
        build: Callable[[int], Sequence[NewItem]],
        ttl: timedelta | None,
    ) -> tuple[int, int]:
        """Append `count` (> 0) items in one transaction, creating the session row on first
        write; return the session row's id and the number of the first item.

        `build(first_seq)` makes the rows once their numbers are known (sealing binds them),
        under `key.sealing` if it names one. On PostgreSQL the append is one statement that
        commits by itself: always for plaintext; sealed, when the session is as this store
        last left it.
        """
        db = self._schema.db
        if self._sealed_at_once is not None and key.hash in self._seen:
            placed = await db.write(
                lambda conn: self._append_sealed(conn, key, count, build, ttl),
                session_id=key.session_id,
                one_statement=True,
            )
            if placed is not None:
                return placed[0], placed[1] - count + 1
        session_pk, next_seq = await db.write(
            lambda conn: self.append_in(conn, key, count, build, ttl),
            session_id=key.session_id,
            small=count <= SMALL,
            one_statement=self._at_once is not None,
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
        nothing written, when the session holds that batch already, live (an expired one
        counts as gone, whether purged yet or not)."""
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
        session_pk = self._schema.claim(conn, key, 0, now).id  # the lock, no place taken
        held = select(items.c.id, self._schema.live(now)).where(
            items.c.session_pk == session_pk, items.c.batch_key == batch_key
        )
        found = conn.execute(held.limit(1)).first()
        if found is not None and found[1]:
            return None
        if found is not None:  # expired, not purged yet: its key is free again
            conn.execute(update(items).where(items.c.id == found[0]).values(batch_key=None))
        claimed = self._schema.claim(conn, key, count, now)
        first = claimed.next_seq - count + 1
        expires_at = now + ttl if ttl else None
        new = built_rows(conn, build, first, count)
        self._schema.insert_items(
            conn, session_pk, first, new, now, expires_at, checked=claimed.checked
        )
        named = update(items).where(items.c.session_pk == session_pk, items.c.seq == first)
        conn.execute(named.values(batch_key=batch_key))
        return session_pk, claimed.next_seq

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
        except MorePages:  # read again in one snapshot: the pages then agree
            return await self._schema.db.read(
                lambda conn: self._read(conn, key, limit, current_kek, consistent=True),
                snapshot=True,
            )

    def _read(
        self,
        conn: Connection,
        key: SessionKey,
        limit: int | None,
        current_kek: str | None,
        *,
        consistent: bool = False,
    ) -> tuple[SessionKey, Sequence[Any]]:
        params = {"session_hash": key.hash, "now": self._schema.now(), "current_kek": current_kek}
        # A sealed store's tail reads and pages end with the session's user (the owner).
        sealed = self._schema.sealed
        if limit is None and (page := self._schema.statements.read_page) is not None:
            rows: list[Any] = []
            while True:  # one statement, unless the session holds more than a page
                [arrays] = page.run(conn, params | {"after": rows[-1][0] if rows else -1})
                if arrays[0] is None:
                    break
                if sealed:
                    key = self._schema.with_owner(key, arrays[-1])
                rows += page_rows(arrays, sealed)
                if len(arrays[0]) < ARRAY_ROWS:
                    break
                if not consistent:
                    raise MorePages()
            return key, rows
        if limit is None:
            return self._schema.owned(conn, key), self._schema.statements.read_all.run(conn, params)
        rows = self._schema.statements.read_tail(limit).run(conn, params | {"limit": limit})
        if sealed and rows:
            width = len(StoredItem._fields)
            return self._schema.with_owner(key, rows[0][width]), [row[:width] for row in rows[::-1]]
        return key, rows[::-1]

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
        if self._at_once is not None:  # plaintext on PostgreSQL
            values = self._schema.claim_values(key, count, now) | {"expires_at": expires_at}
            values["payloads"] = [row.payload for row in build(0)]  # placed by the statement
            found = self._at_once.run(conn, values)
            if not found:
                raise self._schema.set_below_zero(key)
            [(session_pk, next_seq)] = found
            return session_pk, next_seq
        sealed_at_once = self._sealed_at_once is not None
        if sealed_at_once and (placed := self._append_sealed(conn, key, count, build, ttl)):
            return placed
        claimed = self._schema.claim(conn, key, count, now)
        first = claimed.next_seq - count + 1
        # Sealed items go in only under a live key of the session's owner (else it refuses).
        new = built_rows(conn, build, first, count)
        self._schema.insert_items(
            conn, claimed.id, first, new, now, expires_at, checked=claimed.checked
        )
        if sealed_at_once and claimed.checked is not None:
            self._remember(key, claimed.next_seq, claimed.user_id)
        return claimed.id, claimed.next_seq

    def _append_sealed(
        self,
        conn: Connection,
        key: SessionKey,
        count: int,
        build: Callable[[int], Sequence[NewItem]],
        ttl: timedelta | None,
    ) -> tuple[int, int] | None:
        """PostgreSQL, sealed: claim and insert in one statement, if the session is as this
        store last left it (its next place and its user unchanged) and the items' key is a
        live key of that user's; else None, and nothing written."""
        assert self._sealed_at_once is not None
        seen = self._seen.pop(key.hash, None)
        if seen is None:
            return None
        last, user_id = seen
        # Sealed where they will go: bound to their place.
        rows = built_rows(conn, build, last + 1, count)
        now = self._schema.now()
        values = {
            "session_hash": key.hash,
            "last": last,
            "user_id": user_id,
            "owner": owner_of(user_id, key.hash),
            "kek": rows[0].kek_id,
            "count": count,
            "now": now,
            "expires_at": now + ttl if ttl else None,
            "ciphertexts": [row.ciphertext for row in rows],
            "wrapped_keys": [row.wrapped_key for row in rows],
        }
        found = self._sealed_at_once.run(conn, values)
        if not found:
            return None
        [(session_pk, next_seq)] = found
        self._remember(key, next_seq, user_id)
        return session_pk, next_seq

    def _remember(self, key: SessionKey, next_seq: int, user_id: str | None) -> None:
        """Keep where the session's next items go, and its user, as this store left them."""
        add_bounded(self._seen, {key.hash: (next_seq, user_id)}, PLACES_REMEMBERED)

    @cached_property
    def _at_once(self) -> Prepared | None:
        """PostgreSQL, plaintext: an append in one statement (one round trip). The claim of
        `Schema.claim` is its first CTE; the items, numbered by their place in the array,
        go in after it."""
        if self._schema.db.dialect_name != "postgresql" or self._schema.sealed:
            return None
        claimed = self._schema.placing_upsert.cte("claimed")
        payloads = bindparam("payloads", type_=postgresql.ARRAY(self._schema.items.c.payload.type))
        return self._inserting(claimed, {"payload": payloads})

    @cached_property
    def _sealed_at_once(self) -> Prepared | None:
        """PostgreSQL, sealed: an append in one statement, which claims the places only where
        the session's row still holds `last` and `user_id` (and is no branch's companion)
        and `kek` is a live key of `owner`, whose row it locks against a rotation."""
        if self._schema.db.dialect_name != "postgresql" or not self._schema.sealed:
            return None
        sessions, items, keys = self._schema.sessions, self._schema.items, self._schema.owner_keys
        kek = bindparam("kek", type_=keys.c.key_id.type)
        live = select(keys.c.key_id).where(
            keys.c.key_id == kek,
            keys.c.owner == bindparam("owner", type_=keys.c.owner.type),
            keys.c.retired_at.is_(None),
        )
        count = bindparam("count", type_=sessions.c.next_seq.type)
        claimed = (
            update(sessions)
            .where(
                sessions.c.session_hash == bindparam("session_hash"),
                sessions.c.next_seq == bindparam("last", type_=sessions.c.next_seq.type),
                sessions.c.user_id.is_not_distinct_from(
                    bindparam("user_id", type_=sessions.c.user_id.type)
                ),
                sessions.c.parent_pk.is_(None),
                exists(live.with_for_update(read=True)),
            )
            .values(
                next_seq=sessions.c.next_seq + count,
                updated_at=bindparam("now", type_=sessions.c.updated_at.type),
            )
            .returning(sessions.c.id, sessions.c.next_seq)
            .cte("claimed")
        )
        arrays = {
            name: bindparam(f"{name}s", type_=postgresql.ARRAY(items.c[name].type))
            for name in ("ciphertext", "wrapped_key")
        }
        return self._inserting(claimed, arrays, {"kek_id": kek})

    def _inserting(
        self, claimed: Any, arrays: dict[str, Any], same: dict[str, Any] | None = None
    ) -> Prepared:
        """The statement that inserts after `claimed` (a CTE returning the session's `id`
        and its `next_seq` after the claim) one item per element of the `arrays` (by
        column), each with the values of `same`; it returns the claim."""
        items = self._schema.items
        unnested = func.unnest(*arrays.values())
        each = unnested.table_valued(*arrays, with_ordinality="place").render_derived()
        count = bindparam("count", type_=items.c.seq.type)
        values = {
            "session_pk": claimed.c.id,
            "seq": claimed.c.next_seq - count + each.c.place,
            "created_at": bindparam("now", type_=items.c.created_at.type),
            "expires_at": bindparam("expires_at", type_=items.c.expires_at.type),
            **{name: each.c[name] for name in arrays},
            **(same or {}),
        }
        rows = select(*values.values())
        inserted = items.insert().from_select(list(values), rows).cte("inserted")
        return Prepared(select(claimed.c.id, claimed.c.next_seq).add_cte(inserted))
