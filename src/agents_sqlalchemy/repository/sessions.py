"""Session management SQL: describe, list, update, delete and purge."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    and_,
    bindparam,
    delete,
    exists,
    func,
    literal,
    or_,
    select,
    tuple_,
    update,
)
from sqlalchemy import cast as sql_cast
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection
from sqlalchemy.sql import ClauseElement

from ..database.units import Unchanged
from ..errors import AgentsSQLAlchemyError, partly_done, plural
from ..models import UTCDateTime
from ..types import SessionKey, owner_of
from .rows import insert_session_if_absent
from .schema import IMPORTING, Schema, exactly

# Times a deletion batch starts again to lock first the owner keys it met unlocked; past
# them it deletes those keys after their sessions (a deadlock then is retried as any).
RELOCKS = 8


@dataclass(frozen=True)
class _Relock:
    """A deletion batch rolled back: these owners' keys are to be locked first."""

    owners: frozenset[str]


def deleted_note(sessions: int, items: int) -> str:
    """What a deletion did, as an error's note says it (`errors.partly_done`)."""
    return f"{plural(sessions, 'session')} ({plural(items, 'item')}) deleted"


class Sessions:
    """Rows of the sessions table: owner, metadata, state, activity; and bulk removal.

    Example::

        sessions = Sessions(schema)
        row = await sessions.describe(SessionKey.of("chat-1"))
        removed = await sessions.delete_sessions(sessions.sessions_where(user_id="alice"), 500)
    """

    def __init__(self, schema: Schema) -> None:
        self._schema = schema

    def _described(self, now: datetime) -> Any:
        sessions, items = self._schema.sessions, self._schema.items
        item_count = (
            select(func.count())
            .where(items.c.session_pk == sessions.c.id, self._schema.live(now))
            .scalar_subquery()
        )
        return select(
            sessions.c.id,
            sessions.c.session_id,
            sessions.c.user_id,
            sessions.c.metadata,
            sessions.c.created_at,
            sessions.c.updated_at,
            item_count.label("item_count"),
            sessions.c.archived_at,
        )

    async def describe(self, key: SessionKey) -> Any:
        """The session's row with its live item count, or None."""
        query = self._described(self._schema.now()).where(
            self._schema.sessions.c.session_hash == key.hash
        )
        return await self._schema.db.read(lambda conn: conn.execute(query).one_or_none())

    async def list_sessions(
        self,
        *,
        user_id: str | None,
        metadata: dict[str, Any] | None,
        updated_after: datetime | None,
        updated_before: datetime | None,
        after: tuple[datetime, int] | None,
        limit: int,
        archived: bool | None = False,
    ) -> list[Any]:
        """Rows like `describe`, most recently active first, after the keyset position.

        `archived`: False for the sessions not archived, True for the archived ones only,
        None for both. A session an import is writing (or left half written) is none of
        them.
        """
        sessions = self._schema.sessions
        archived_at = sessions.c.archived_at
        query = self._described(self._schema.now()).where(
            sessions.c.parent_pk.is_(None), or_(archived_at.is_(None), archived_at != IMPORTING)
        )
        if archived is not None:
            query = query.where(archived_at.is_not(None) if archived else archived_at.is_(None))
        if user_id is not None:
            query = query.where(self._schema.equals(sessions.c.user_id, user_id))
        for name, value in (metadata or {}).items():
            query = query.where(self._metadata_equals(name, value))
        if updated_after is not None:
            query = query.where(sessions.c.updated_at > updated_after)
        if updated_before is not None:
            query = query.where(sessions.c.updated_at < updated_before)
        if after is not None:
            at, pk = literal(after[0], UTCDateTime()), literal(after[1])
            if self._schema.mysql:  # a row comparison reads the index from its top there
                earlier = or_(sessions.c.updated_at < at, sessions.c.id < pk)
                query = query.where(sessions.c.updated_at <= at, earlier)
            else:
                query = query.where(tuple_(sessions.c.updated_at, sessions.c.id) < tuple_(at, pk))
        query = query.order_by(sessions.c.updated_at.desc(), sessions.c.id.desc()).limit(limit)
        return await self._schema.db.read(lambda conn: list(conn.execute(query)))

    def _metadata_equals(self, name: str, value: object) -> ColumnElement[bool]:
        """`metadata[name] == value` with JSON's types: 7 matches 7, never "7" or true.

        Values are checked by `validation.metadata_filter`. On SQLite the names are read
        with `json_each`, not a JSON path: a path cannot spell every name (a `"` ends it).
        """
        column = self._schema.sessions.c.metadata
        if self._schema.db.dialect_name == "postgresql":
            return sql_cast(column, JSONB).contains({name: value})
        if self._schema.mysql:  # a JSON path, its name quoted as a JSON string
            return _mysql_json_equals(column, "$." + json.dumps(name), value)
        each = func.json_each(column).table_valued("key", "type", "value")
        if isinstance(value, bool):
            match = each.c.type == ("true" if value else "false")
        else:
            kinds = ("text",) if isinstance(value, str) else ("integer", "real")
            match = and_(each.c.type.in_(kinds), each.c.value == value)
        return exists().select_from(each).where(each.c.key == name, match)

    async def read_session_columns(self, key: SessionKey, columns: tuple[str, ...]) -> Any:
        """Some columns of the session's row, or None if it has none."""
        sessions = self._schema.sessions
        query = select(*(sessions.c[name] for name in columns)).where(
            sessions.c.session_hash == key.hash
        )
        return await self._schema.db.read(lambda conn: conn.execute(query).one_or_none())

    async def update_session(
        self,
        key: SessionKey,
        change: Callable[[Any], dict[str, Any]],
        columns: tuple[str, ...],
    ) -> None:
        """Read `columns` of the session under its lock (creating its row), write `change(row)`;
        a change of nothing (`{}`, or the values the row holds already) rolls back, and with
        it the touch of the row (no activity) or its making. What is sealed under
        `key.sealing` is checked live and the owner's in the same transaction (`OwnerKeyError`
        if the owner was erased or changed meanwhile)."""
        await self._schema.db.write(
            lambda conn: self._update_session(conn, key, change, columns),
            session_id=key.session_id,
        )

    def _update_session(
        self,
        conn: Connection,
        key: SessionKey,
        change: Callable[[Any], dict[str, Any]],
        columns: tuple[str, ...],
    ) -> None:
        sessions = self._schema.sessions
        claimed = self._schema.claim(conn, key, 0, self._schema.now())
        chosen = select(*(sessions.c[name] for name in columns), *_stamps(sessions))
        row = conn.execute(chosen.where(sessions.c.id == claimed.id)).one()
        values = change(row)  # a sealed state's owner is checked there, on the row read
        if not values or (not _made(row) and _holds(row, values)):
            raise Unchanged()
        conn.execute(update(sessions).where(sessions.c.id == claimed.id).values(**values))

    async def give(
        self,
        key: SessionKey,
        user_id: str | None,
        rewrap: Callable[[str | None, list[tuple[str, bytes]]], list[tuple[str, bytes]]],
        rewrap_state: Callable[[str | None, bytes], bytes],
        sealing: str | None = None,
    ) -> str | None:
        """Give the session (and its branches' companion row) to `user_id`, creating its
        row if new; in the same transaction, a sealed store's item keys (every line's) and
        state are re-wrapped by `rewrap(old_user, [(kek_id, wrapped)])` and
        `rewrap_state(old_user, blob)`, under owner key `sealing`, which is checked live and
        the new owner's (`OwnerKeyError` if not: destroyed meanwhile, its owner erased).
        Returns the user it had; a session that had `user_id` already is left as it was
        (no activity)."""
        return await self._schema.db.write(
            lambda conn: self._give(conn, key, user_id, rewrap, rewrap_state, sealing),
            session_id=key.session_id,
        )

    def _give(
        self,
        conn: Connection,
        key: SessionKey,
        user_id: str | None,
        rewrap: Callable[[str | None, list[tuple[str, bytes]]], list[tuple[str, bytes]]],
        rewrap_state: Callable[[str | None, bytes], bytes],
        sealing: str | None,
    ) -> str | None:
        sessions, items = self._schema.sessions, self._schema.items
        owner = owner_of(user_id, key.hash)
        if sealing is not None and not self._schema.mysql:  # the key first, as a write's claim
            self._schema.hold_owner_key(conn, sealing, owner)
        session_pk = self._schema.claim(conn, key, 0, self._schema.now()).id
        if sealing is not None and self._schema.mysql:  # after the row, as there
            self._schema.hold_owner_key(conn, sealing, owner)
        row = conn.execute(
            select(sessions.c.user_id, sessions.c.sealed_state, *_stamps(sessions)).where(
                sessions.c.id == session_pk
            )
        ).one()
        if row.user_id == user_id and not _made(row):  # no activity
            raise Unchanged(user_id)
        owned = select(sessions.c.id).where(
            or_(sessions.c.id == session_pk, sessions.c.parent_pk == session_pk)
        )
        pks = [pk for (pk,) in conn.execute(owned)]
        if self._schema.sealed:
            found = conn.execute(
                select(items.c.id, items.c.kek_id, items.c.wrapped_key).where(
                    items.c.session_pk.in_(pks), items.c.wrapped_key.is_not(None)
                )
            ).all()
            moved = rewrap(row.user_id, [(r.kek_id, bytes(r.wrapped_key)) for r in found])
            if found:
                conn.execute(
                    update(items)
                    .where(items.c.id == bindparam("pk"))
                    .values(kek_id=bindparam("k"), wrapped_key=bindparam("w")),
                    [
                        {"pk": r.id, "k": kek_id, "w": wrapped}
                        for r, (kek_id, wrapped) in zip(found, moved, strict=True)
                    ],
                )
            if row.sealed_state is not None:
                state = rewrap_state(row.user_id, bytes(row.sealed_state))
                conn.execute(
                    update(sessions).where(sessions.c.id == session_pk).values(sealed_state=state)
                )
        conn.execute(update(sessions).where(sessions.c.id.in_(pks)).values(user_id=user_id))
        old: str | None = row.user_id
        return old

    def sessions_where(
        self,
        *,
        session_hash: str | None = None,
        user_id: str | None = None,
        inactive_for: timedelta | None = None,
    ) -> ColumnElement[bool]:
        """A condition on the sessions table, for `delete_sessions` (none: every session).

        Companion rows (the items of a session's branches) go with their session.
        """
        sessions = self._schema.sessions
        conditions: list[ColumnElement[bool]] = [sessions.c.parent_pk.is_(None)]
        if session_hash is not None:
            conditions.append(sessions.c.session_hash == session_hash)
        if user_id is not None:
            conditions.append(self._schema.equals(sessions.c.user_id, user_id))
        if inactive_for is not None:
            conditions.append(sessions.c.updated_at < self._schema.now() - inactive_for)
        return and_(*conditions)

    async def keys_of_others(self, where: ColumnElement[bool], owner: str) -> list[str]:
        """The owner keys that wrap items of the sessions `where` (their branches' too) but
        that the owner keys table gives to another owner than `owner`: rows altered outside
        the library (an erasure of `owner` would leave such a key alive)."""
        sessions, items, keys = self._schema.sessions, self._schema.items, self._schema.owner_keys
        chosen = select(sessions.c.id).where(where).correlate(None)
        holders = select(sessions.c.id).where(
            or_(sessions.c.id.in_(chosen), sessions.c.parent_pk.in_(chosen))
        )
        named = select(items.c.kek_id).where(items.c.session_pk.in_(holders)).distinct()
        query = select(keys.c.key_id).where(keys.c.key_id.in_(named), keys.c.owner != owner)
        return await self._schema.db.read(lambda conn: list(conn.execute(query).scalars()))

    async def own_owners(self, where: ColumnElement[bool]) -> list[str]:
        """The owners of the sessions `where` that have no user: each is its own owner."""
        sessions = self._schema.sessions
        query = select(sessions.c.session_hash).where(where, sessions.c.user_id.is_(None))
        hashes = await self._schema.db.read(lambda conn: list(conn.execute(query).scalars()))
        return [owner_of(None, session_hash) for session_hash in hashes]

    async def create_session(self, key: SessionKey, archived_at: datetime | None = None) -> bool:
        """Insert a new session row (owner and metadata from `key`); False if the id exists."""
        now = self._schema.now()
        values = {
            "session_id": key.session_id,
            "session_hash": key.hash,
            "user_id": key.user_id,
            "metadata": key.metadata,
            "next_seq": 0,
            "created_at": now,
            "updated_at": now,
            "archived_at": archived_at,
        }
        made = await self._schema.db.write(
            lambda conn: insert_session_if_absent(conn, self._schema.sessions, values),
            session_id=key.session_id,
        )
        return made is not None

    async def archive_if(self, key: SessionKey, was: datetime, *, archive: bool) -> bool:
        """Archive the session now (or restore it) if its `archived_at` is still `was`;
        whether it was."""
        sessions = self._schema.sessions
        change = (
            update(sessions)
            .where(sessions.c.session_hash == key.hash, sessions.c.archived_at == was)
            .values(archived_at=self._schema.now() if archive else None)
        )
        changed = await self._schema.db.write(
            lambda conn: conn.execute(change).rowcount, session_id=key.session_id
        )
        return bool(changed)

    async def archive_sessions(
        self,
        where: ColumnElement[bool],
        *,
        archive: bool,
        batch: int,
        session_id: str | None = None,
    ) -> int:
        """Archive (or restore) the sessions matching `where`, in batches; return how many.

        Only sessions not in that state yet are counted; their activity time is kept.
        `session_id`: the one session `where` names, which a busy lock's error names.
        """
        sessions = self._schema.sessions
        archived_at = sessions.c.archived_at
        # A session an import is writing is neither: its mark stays until the import ends.
        restorable = and_(archived_at.is_not(None), archived_at != IMPORTING)
        pending = and_(where, archived_at.is_(None) if archive else restorable)

        def one_batch(conn: Connection) -> int:
            # Locked as read, as `_delete_batch` does: a short batch is the last.
            chosen = select(sessions.c.id).where(pending).limit(batch).with_for_update()
            pks = list(conn.execute(chosen).scalars())
            if pks:
                stamp = self._schema.now() if archive else None
                conn.execute(
                    update(sessions).where(sessions.c.id.in_(pks)).values(archived_at=stamp)
                )
            return len(pks)

        total = 0
        while True:
            try:
                count = await self._schema.db.write(one_batch, session_id=session_id)
            except AgentsSQLAlchemyError as exc:
                if total:
                    partly_done(
                        exc, f"{plural(total, 'session')} {'' if archive else 'un'}archived"
                    )
                raise
            total += count
            if count < batch:
                return total

    async def delete_sessions(
        self,
        where: ColumnElement[bool],
        batch: int,
        owners: Collection[str] | None = (),
        session_id: str | None = None,
    ) -> tuple[int, int, list[Any]]:
        """Delete the sessions matching `where`, with their items, in batches.

        Returns (sessions, items) deleted, and the owner key rows deleted with them: each
        batch's sessions without a user were their own owners, and with the last batch go
        the keys of `owners` (None: of every owner). A key goes in the transaction that
        deletes its owner's last session, so a writer still holding it is refused from then
        on (and starts the session anew under a new key). Each batch is one transaction that
        first locks its sessions, so a concurrent writer waits and then starts a fresh
        session. `session_id`: the one session `where` names, which a busy lock's error names.
        """
        total_sessions = total_items = 0
        dropped: list[Any] = []
        also: frozenset[str] = frozenset()  # owners whose keys the batch locks first too
        starts = 0
        while True:
            try:
                hashes = await self._next_hashes(where, batch)
                done = await self._schema.db.write(
                    functools.partial(
                        self._delete_batch,
                        where=where,
                        batch=batch,
                        owners=owners,
                        hashes=hashes,
                        also=also,
                        relock=starts < RELOCKS,
                    ),
                    session_id=session_id,
                )
            except AgentsSQLAlchemyError as exc:
                if total_sessions:
                    partly_done(exc, deleted_note(total_sessions, total_items))
                raise
            if isinstance(done, _Relock):  # rolled back: start it again, those keys first
                also, starts = also | done.owners, starts + 1
                continue
            also, starts = frozenset(), 0
            deleted_sessions, deleted_items, keys = done
            total_sessions += deleted_sessions
            total_items += deleted_items
            dropped += keys
            if deleted_sessions < batch:
                return total_sessions, total_items, dropped

    def _delete_batch(
        self,
        conn: Connection,
        where: ColumnElement[bool],
        batch: int,
        owners: Collection[str] | None,
        hashes: list[str] | None,
        also: frozenset[str],
        relock: bool,
    ) -> tuple[int, int, list[Any]]:
        """One batch of `delete_sessions`: (sessions, items, owner key rows) deleted.

        On PostgreSQL, a batch that meets a key it would delete but did not lock first
        (see `_unlocked`) rolls back, if `relock`, raising `Unchanged(_Relock)`:
        `delete_sessions` starts it again with those owners' keys in `also`."""
        sessions, items = self._schema.sessions, self._schema.items
        locked = None  # the owner keys locked first (PostgreSQL); None: not looked for
        if self._schema.sealed and self._schema.db.dialect_name == "postgresql":
            locked = self._lock_keys_first(conn, where, batch, owners, also)
        if hashes:  # MySQL and MariaDB: through `session_hash` first, as a write's upsert
            self._lock_by_hash(conn, hashes)
        # Locked as they are read: a session deleted meanwhile is passed over for the next,
        # so a short batch is the last. (An UPDATE of a LIMIT subquery came back short on
        # PostgreSQL when one was, and the deletion stopped early.)
        chosen = select(sessions.c.id).where(where).limit(batch).with_for_update()
        pks = list(conn.execute(chosen).scalars())
        last = len(pks) < batch
        if not pks:
            return 0, 0, self._drop_keys(conn, owners, locked) if self._schema.sealed else []
        without_user = select(sessions.c.session_hash).where(
            sessions.c.id.in_(pks), sessions.c.user_id.is_(None)
        )
        ownerless = [owner_of(None, h) for h in conn.execute(without_user).scalars()]
        doomed = [*ownerless, *(owners if last and owners else ())]
        if locked is not None and relock and (unlocked := self._unlocked(conn, doomed, locked)):
            raise Unchanged(_Relock(unlocked))
        companions = select(sessions.c.id).where(sessions.c.parent_pk.in_(pks))
        # One list of keys: an OR of two (or of a subquery) kept PostgreSQL off the items'
        # (session_pk, seq) index, a sequential scan of every item per batch.
        holders = [*pks, *conn.execute(companions).scalars()]
        removed = conn.execute(delete(items).where(items.c.session_pk.in_(holders)))
        conn.execute(delete(sessions).where(sessions.c.id.in_(pks)))
        if not self._schema.sealed:
            return len(pks), int(removed.rowcount), []
        # With `relock`, checked above: every key of these owners was locked first, and one
        # made since is a write's, for a session this batch did not see (and leaves). Past
        # `RELOCKS` tries, every key of theirs goes, as before the check.
        dropped = self._drop_keys(conn, ownerless, locked if relock else None)
        if last:
            dropped += self._drop_keys(conn, owners, locked)
        return len(pks), int(removed.rowcount), dropped

    async def _next_hashes(self, where: ColumnElement[bool], batch: int) -> list[str] | None:
        """MySQL and MariaDB: the hashes of the next batch's sessions, read before its
        transaction (whose first plain read fixes its snapshot: it must come after its
        locks); None elsewhere."""
        if not self._schema.mysql:
            return None
        found = select(self._schema.sessions.c.session_hash).where(where).limit(batch)
        return await self._schema.db.read(lambda conn: list(conn.execute(found).scalars()))

    def _lock_by_hash(self, conn: Connection, hashes: list[str]) -> None:
        """MySQL and MariaDB: lock these sessions' rows through their `session_hash`, as a
        write's upsert locks them: the unique index's entry, then the row. Locked through
        another index (`user_id`'s), the row came first, and a write waiting for it held
        the entry the deletion then needed: a deadlock, whose victim was the write."""
        sessions = self._schema.sessions
        by_hash = select(sessions.c.id).where(sessions.c.session_hash.in_(hashes))
        conn.execute(by_hash.with_for_update()).all()

    def _lock_keys_first(
        self,
        conn: Connection,
        where: ColumnElement[bool],
        batch: int,
        owners: Collection[str] | None,
        also: Collection[str],
    ) -> list[str]:
        """PostgreSQL: lock the owner keys a batch may delete before its sessions, in the
        order a sealed write locks them (`Schema.claim`); their ids. A deletion that locked
        sessions first met a write holding the key's share lock and waiting for its
        session, a deadlock. The keys of sessions without a user are those of the batch as
        read now, and of the owners `also` (those a first try of the batch met unlocked)."""
        sessions, keys = self._schema.sessions, self._schema.owner_keys
        ownerless = select(sessions.c.session_hash).where(where, sessions.c.user_id.is_(None))
        found = [owner_of(None, h) for h in conn.execute(ownerless.limit(batch)).scalars()]
        chosen = select(keys.c.key_id).order_by(keys.c.key_id).with_for_update()
        if owners is not None:
            if not (owners or found or also):
                return []
            chosen = chosen.where(keys.c.owner.in_(sorted({*owners, *found, *also})))
        return list(conn.execute(chosen).scalars())

    def _unlocked(self, conn: Connection, owners: list[str], locked: list[str]) -> frozenset[str]:
        """PostgreSQL: which of `owners` have a key that `_lock_keys_first` did not lock.

        A session without a user committed between that lock and the batch's own, or a
        key made for one meanwhile: its key, deleted after the session's row was locked,
        waited for a write that held the key's share lock and waited for that row (a
        deadlock). Those keys are locked first when the batch starts again."""
        if not owners:
            return frozenset()
        keys, held = self._schema.owner_keys, set(locked)
        rows = conn.execute(select(keys.c.key_id, keys.c.owner).where(keys.c.owner.in_(owners)))
        return frozenset(owner for key_id, owner in rows if key_id not in held)

    def _drop_keys(
        self, conn: Connection, owners: Collection[str] | None, among: list[str] | None = None
    ) -> list[Any]:
        """Retire the owner key rows of `owners` (None: every one), whose last session goes:
        no write seals under them from now on; return them, for the key store to destroy
        and their rows to go after (`Owners.destroyed`; a key store that fails meanwhile
        leaves them retired, and nothing replaces them: `Owners.finish_erasures`). With
        `among`, only those keys: a key made after they were locked is another write's,
        whose session this deletion did not see and leaves (its key gone would leave that
        session's items unreadable)."""
        keys = self._schema.owner_keys
        if owners is not None and not owners:
            return []
        chosen = select(keys) if owners is None else select(keys).where(keys.c.owner.in_(owners))
        if among is not None:
            chosen = chosen.where(keys.c.key_id.in_(among))
        rows = list(conn.execute(chosen))
        if rows:
            gone = [row.key_id for row in rows]
            retired = update(keys).where(keys.c.key_id.in_(gone), keys.c.retired_at.is_(None))
            conn.execute(retired.values(retired_at=self._schema.now()))
        return rows

    async def purge_expired(self, batch: int) -> int:
        """Delete expired items in batches; return how many."""
        total = 0
        while True:
            try:
                removed = await self._schema.db.write(lambda conn: self._purge_batch(conn, batch))
            except AgentsSQLAlchemyError as exc:
                if total:
                    partly_done(exc, f"{plural(total, 'expired item')} deleted")
                raise
            total += removed
            if removed < batch:
                return total

    def _purge_batch(self, conn: Connection, batch: int) -> int:
        items = self._schema.items
        expired = select(items.c.id).where(items.c.expires_at <= self._schema.now()).limit(batch)
        if self._schema.mysql:  # no LIMIT in an IN subquery, nor a subquery on the deleted table
            pks = list(conn.execute(expired).scalars())
            return int(conn.execute(delete(items).where(items.c.id.in_(pks))).rowcount)
        chosen = expired.scalar_subquery()
        return int(conn.execute(delete(items).where(items.c.id.in_(chosen))).rowcount)


def _mysql_json_equals(column: ColumnElement[Any], path: str, value: object) -> ColumnElement[bool]:
    """`column[path] == value` on MySQL and MariaDB, JSON type included; text compares
    byte for byte, whatever the connection's collation."""
    extracted = func.json_extract(column, path)
    json_type = func.json_type(extracted)
    if isinstance(value, bool):
        unquoted = func.json_unquote(extracted)
        return and_(json_type == "BOOLEAN", unquoted == ("true" if value else "false"))
    if isinstance(value, str):
        unquoted = func.json_unquote(extracted)
        exact = exactly(unquoted, literal(value).collate("utf8mb4_bin"), mysql=True)
        return and_(json_type == "STRING", exact)
    integers, fractions = ("INTEGER", "UNSIGNED INTEGER"), ("DOUBLE", "DECIMAL")
    if not isinstance(value, float) or not value.is_integer():
        return and_(json_type.in_(integers + fractions), extracted == value)
    # A JSON integer compared with a float is compared as a double: 2**53 + 1 matched
    # 2.0**53. One within 64 bits (signed or not) is compared with the integer it is; past
    # them, MariaDB calls 1e+20 an integer too, and only a double can compare.
    whole = int(value) if -(2**63) <= value < 2**64 else value
    return or_(
        and_(json_type.in_(fractions), extracted == value),
        and_(json_type.in_(integers), extracted == whole),
    )


def _stamps(sessions: Any) -> tuple[Any, Any]:
    """A session row's `created_at` and `updated_at`, for `_made`."""
    return sessions.c.created_at, sessions.c.updated_at


def _made(row: Any) -> bool:
    """Whether this transaction's claim made the session's row (stamped once: a claim of a
    row that was there moves `updated_at` on)."""
    return bool(row.created_at == row.updated_at)


def _holds(row: Any, values: dict[str, Any]) -> bool:
    """Whether `row` holds each of `values` already, as JSON tells values apart (1, 1.0 and
    true are three; Python's `==` took them for one, and the change was lost); an SQL
    expression never does."""
    fields = row._mapping
    return all(
        name in fields
        and not isinstance(value, ClauseElement)
        and _as_json(fields[name]) == _as_json(value)
        for name, value in values.items()
    )


def _as_json(value: Any) -> str:
    """`value` as canonical JSON text (other values by their repr, told apart by type)."""
    return json.dumps(value, sort_keys=True, default=lambda other: f"{type(other)}{other!r}")
