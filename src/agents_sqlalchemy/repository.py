"""Every SQL statement of the library: one transaction per operation, dialects handled here.

Writers to one session are serialised by bumping that session's `next_seq` first thing in
their transaction: the row lock on PostgreSQL, the database write lock on SQLite. The new
numbers give the batch its place, so no timestamp ever decides the order.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar, cast

from sqlalchemy import (
    ColumnElement,
    and_,
    delete,
    func,
    inspect,
    literal,
    or_,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from .engines import EngineSource
from .errors import AgentsSQLAlchemyError, ConfigurationError, DatabaseError, SchemaError
from .models import Models, UTCDateTime

T = TypeVar("T")
SUPPORTED_DIALECTS = ("sqlite", "postgresql")
CREATE_RETRY_DELAYS = (0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class SessionKey:
    """How the repository finds a session: the SDK id and its SHA-256, plus first-write values."""

    session_id: str
    hash: str
    user_id: str | None = None
    metadata: dict[str, Any] | None = None

    @classmethod
    def of(cls, session_id: str, **first_write: Any) -> SessionKey:
        digest = hashlib.sha256(session_id.encode("utf-8")).hexdigest()
        return cls(session_id, digest, **first_write)


async def settle(operation: Awaitable[T]) -> T:
    """Await a write to its end even if the caller is cancelled, then re-raise the cancellation.

    The caller then knows the write either committed or rolled back, never "maybe".
    """
    task = asyncio.ensure_future(operation)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    if cancelled is not None:
        task.exception()  # retrieved: the cancellation is what the caller sees
        raise cancelled
    return task.result()


class Repository:
    """SQL for the sessions and items tables of one `Models`.

    Example::

        repo = Repository(EngineSource("agent.db", None), build_models(TableNames()))
        await repo.ensure_schema(create=True)
        await repo.append(SessionKey.of("chat-1"), ['{"role":"user","content":"hi"}'], None)
    """

    def __init__(self, source: EngineSource, models: Models) -> None:
        if source.dialect_name not in SUPPORTED_DIALECTS:
            raise ConfigurationError(
                f"unsupported database {source.dialect_name!r}: use SQLite or PostgreSQL"
            )
        self._source = source
        self._models = models
        self._sessions = models.sessions
        self._items = models.items
        self._upsert = postgresql.insert if source.dialect_name == "postgresql" else sqlite.insert

    # -- connections -------------------------------------------------------------------------

    @asynccontextmanager
    async def _connect(self, *, write: bool) -> AsyncIterator[AsyncConnection]:
        """A connection in one transaction (committed on success for writes), errors translated."""
        engine = self._source.get()
        try:
            async with engine.begin() if write else engine.connect() as conn:
                yield conn
        except AgentsSQLAlchemyError:
            raise
        except DBAPIError as exc:
            raise DatabaseError(
                f"{self._source.dialect_name} error, nothing was changed: {exc.orig}"
            ) from exc
        except (OSError, asyncio.TimeoutError) as exc:
            raise DatabaseError(f"cannot reach the database {self._source.url!r}: {exc}") from exc

    # -- schema ------------------------------------------------------------------------------

    async def ensure_schema(self, *, create: bool) -> None:
        """Check that the tables exist, creating them when `create` is true.

        Creators racing in other tasks, threads or processes are waited for: a failed
        creation is retried, with backoff, until the other side has finished.
        """
        for delay in (*CREATE_RETRY_DELAYS, None):
            try:
                missing = await self._create_missing(create)
                break
            except DatabaseError:
                if not create or delay is None:
                    raise
                await asyncio.sleep(delay)
        if missing:
            raise SchemaError(
                f"tables {', '.join(missing)} not found in {self._source.url!r}: pass "
                "create_tables=True in development, or run the migrations "
                "(agents-sqlalchemy db upgrade --url ...)"
            )

    async def _create_missing(self, create: bool) -> list[str]:
        """Create the missing tables if `create`; return those still missing."""
        schema = self._models.names.schema
        async with self._connect(write=create) as conn:
            missing = await conn.run_sync(self._missing_tables)
            if not (missing and create):
                return missing
            if schema and conn.dialect.name == "postgresql":
                await conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
            await conn.run_sync(self._models.metadata.create_all)
            return []

    def _missing_tables(self, conn: Any) -> list[str]:
        inspector = inspect(conn)
        schema = self._models.names.schema
        return [
            table.name
            for table in self._models.metadata.sorted_tables
            if not inspector.has_table(table.name, schema=schema)
        ]

    # -- statements --------------------------------------------------------------------------

    def _session_pk(self, key: SessionKey) -> Any:
        return select(self._sessions.c.id).where(self._sessions.c.session_hash == key.hash)

    def _live(self, now: datetime) -> ColumnElement[bool]:
        expires_at = self._items.c.expires_at
        return or_(expires_at.is_(None), expires_at > now)

    async def _lock_existing(self, conn: AsyncConnection, key: SessionKey, now: datetime) -> Any:
        """Take the session's write lock; return its primary key, or None if it has no row."""
        sessions = self._sessions
        result = await conn.execute(
            update(sessions)
            .where(sessions.c.session_hash == key.hash)
            .values(updated_at=now)
            .returning(sessions.c.id)
        )
        return result.scalar_one_or_none()

    async def _claim(
        self, conn: AsyncConnection, key: SessionKey, count: int, now: datetime
    ) -> Any:
        """Take the session's write lock and `count` sequence numbers, creating its row if new.

        Returns the row's `id` and `next_seq` (the last number now taken).
        """
        sessions = self._sessions
        claim = (
            self._upsert(sessions)
            .values(
                session_id=key.session_id,
                session_hash=key.hash,
                user_id=key.user_id,
                metadata=key.metadata,
                next_seq=count,
                created_at=now,
                updated_at=now,
            )
            .on_conflict_do_update(
                index_elements=[sessions.c.session_hash],
                set_={"next_seq": sessions.c.next_seq + count, "updated_at": now},
            )
            .returning(sessions.c.id, sessions.c.next_seq)
        )
        return (await conn.execute(claim)).one()

    # -- operations --------------------------------------------------------------------------

    async def append(self, key: SessionKey, payloads: list[str], ttl: timedelta | None) -> None:
        """Append a batch in one transaction, creating the session row on first write."""
        if not payloads:
            return
        await settle(self._append(key, payloads, ttl))

    async def _append(self, key: SessionKey, payloads: list[str], ttl: timedelta | None) -> None:
        count, now = len(payloads), utcnow()
        expires_at = now + ttl if ttl else None
        async with self._connect(write=True) as conn:
            claimed = await self._claim(conn, key, count, now)
            first = claimed.next_seq - count + 1
            await conn.execute(
                self._items.insert(),
                [
                    {
                        "session_pk": claimed.id,
                        "seq": first + offset,
                        "created_at": now,
                        "expires_at": expires_at,
                        "payload": payload,
                    }
                    for offset, payload in enumerate(payloads)
                ],
            )

    async def read(self, key: SessionKey, limit: int | None) -> list[tuple[int, str]]:
        """`(seq, payload)` of live items in order; with a limit, the latest `limit` of them."""
        items = self._items
        query = select(items.c.seq, items.c.payload).where(
            items.c.session_pk == self._session_pk(key).scalar_subquery(), self._live(utcnow())
        )
        if limit is None:
            query = query.order_by(items.c.seq)
        else:
            query = query.order_by(items.c.seq.desc()).limit(limit)
        async with self._connect(write=False) as conn:
            rows = [(row.seq, row.payload) for row in await conn.execute(query)]
        return rows if limit is None else rows[::-1]

    async def pop(self, key: SessionKey, decode: Callable[[int, str], T]) -> T | None:
        """Remove the latest live item and return it decoded; a decode error keeps it stored."""
        return await settle(self._pop(key, decode))

    async def _pop(self, key: SessionKey, decode: Callable[[int, str], T]) -> T | None:
        items, now = self._items, utcnow()
        async with self._connect(write=True) as conn:
            session_pk = await self._lock_existing(conn, key, now)
            if session_pk is None:
                return None
            tail = (
                select(items.c.id)
                .where(items.c.session_pk == session_pk, self._live(now))
                .order_by(items.c.seq.desc())
                .limit(1)
                .scalar_subquery()
            )
            row = (
                await conn.execute(
                    delete(items).where(items.c.id == tail).returning(items.c.seq, items.c.payload)
                )
            ).one_or_none()
            # Decoding inside the transaction: a corrupt row raises and the delete rolls back.
            return None if row is None else decode(row.seq, row.payload)

    async def clear(self, key: SessionKey) -> int:
        """Delete every item of the session (the session row stays); return how many."""
        return await settle(self._clear(key))

    async def _clear(self, key: SessionKey) -> int:
        async with self._connect(write=True) as conn:
            session_pk = await self._lock_existing(conn, key, utcnow())
            if session_pk is None:
                return 0
            result = await conn.execute(
                delete(self._items).where(self._items.c.session_pk == session_pk)
            )
            return int(result.rowcount)

    # -- sessions ----------------------------------------------------------------------------

    def _item_count(self, now: datetime) -> Any:
        items = self._items
        return (
            select(func.count())
            .where(items.c.session_pk == self._sessions.c.id, self._live(now))
            .scalar_subquery()
        )

    def _described(self, now: datetime) -> Any:
        sessions = self._sessions
        return select(
            sessions.c.id,
            sessions.c.session_id,
            sessions.c.user_id,
            sessions.c.metadata,
            sessions.c.created_at,
            sessions.c.updated_at,
            self._item_count(now).label("item_count"),
        )

    async def describe(self, key: SessionKey) -> Any:
        """The session's row with its live item count, or None."""
        query = self._described(utcnow()).where(self._sessions.c.session_hash == key.hash)
        async with self._connect(write=False) as conn:
            return (await conn.execute(query)).one_or_none()

    async def list_sessions(
        self,
        *,
        user_id: str | None,
        metadata: dict[str, Any] | None,
        updated_after: datetime | None,
        updated_before: datetime | None,
        after: tuple[datetime, int] | None,
        limit: int,
    ) -> list[Any]:
        """Rows like `describe`, most recently active first, after the keyset position."""
        sessions = self._sessions
        query = self._described(utcnow())
        if user_id is not None:
            query = query.where(sessions.c.user_id == user_id)
        for name, value in (metadata or {}).items():
            query = query.where(_json_field_equals(sessions.c.metadata[name], value))
        if updated_after is not None:
            query = query.where(sessions.c.updated_at > updated_after)
        if updated_before is not None:
            query = query.where(sessions.c.updated_at < updated_before)
        if after is not None:
            query = query.where(
                tuple_(sessions.c.updated_at, sessions.c.id)
                < tuple_(literal(after[0], UTCDateTime()), literal(after[1]))
            )
        query = query.order_by(sessions.c.updated_at.desc(), sessions.c.id.desc()).limit(limit)
        async with self._connect(write=False) as conn:
            return list(await conn.execute(query))

    async def update_session(
        self,
        key: SessionKey,
        change: Callable[[Any], dict[str, Any]],
        columns: tuple[str, ...],
    ) -> None:
        """Read `columns` of the session under its lock (creating its row), write `change(row)`."""
        await settle(self._update_session(key, change, columns))

    async def _update_session(
        self, key: SessionKey, change: Callable[[Any], dict[str, Any]], columns: tuple[str, ...]
    ) -> None:
        sessions, now = self._sessions, utcnow()
        async with self._connect(write=True) as conn:
            session_pk = (await self._claim(conn, key, 0, now)).id
            chosen = select(*(sessions.c[name] for name in columns))
            row = (
                (await conn.execute(chosen.where(sessions.c.id == session_pk))).one()
                if columns
                else None
            )
            values = change(row)
            if values:
                await conn.execute(
                    update(sessions).where(sessions.c.id == session_pk).values(**values)
                )

    async def read_session_columns(self, key: SessionKey, columns: tuple[str, ...]) -> Any:
        """Some columns of the session's row, or None if it has none."""
        sessions = self._sessions
        query = select(*(sessions.c[name] for name in columns)).where(
            sessions.c.session_hash == key.hash
        )
        async with self._connect(write=False) as conn:
            return (await conn.execute(query)).one_or_none()

    async def delete_sessions(self, where: ColumnElement[bool], batch: int) -> tuple[int, int]:
        """Delete the sessions matching `where`, with their items, in batches.

        Returns (sessions, items) deleted. Each batch is one transaction that first locks its
        sessions, so a concurrent writer waits and then starts a fresh session.
        """
        total_sessions = total_items = 0
        while True:
            deleted_sessions, deleted_items = await settle(self._delete_batch(where, batch))
            total_sessions += deleted_sessions
            total_items += deleted_items
            if deleted_sessions < batch:
                return total_sessions, total_items

    async def _delete_batch(self, where: ColumnElement[bool], batch: int) -> tuple[int, int]:
        sessions, items = self._sessions, self._items
        async with self._connect(write=True) as conn:
            chosen = select(sessions.c.id).where(where).limit(batch).scalar_subquery()
            locked = await conn.execute(
                update(sessions)
                .where(sessions.c.id.in_(chosen))
                .values(next_seq=sessions.c.next_seq)
                .returning(sessions.c.id)
            )
            pks = list(locked.scalars())
            if not pks:
                return 0, 0
            removed = await conn.execute(delete(items).where(items.c.session_pk.in_(pks)))
            await conn.execute(delete(sessions).where(sessions.c.id.in_(pks)))
            return len(pks), int(removed.rowcount)

    def sessions_where(
        self,
        *,
        session_hash: str | None = None,
        user_id: str | None = None,
        inactive_for: timedelta | None = None,
    ) -> ColumnElement[bool]:
        """A condition on the sessions table, for `delete_sessions`."""
        sessions = self._sessions
        conditions = []
        if session_hash is not None:
            conditions.append(sessions.c.session_hash == session_hash)
        if user_id is not None:
            conditions.append(sessions.c.user_id == user_id)
        if inactive_for is not None:
            conditions.append(sessions.c.updated_at < utcnow() - inactive_for)
        return and_(*conditions)

    async def purge_expired(self, batch: int) -> int:
        """Delete expired items in batches; return how many."""
        total = 0
        while True:
            removed = await settle(self._purge_batch(batch))
            total += removed
            if removed < batch:
                return total

    async def _purge_batch(self, batch: int) -> int:
        items = self._items
        expired = (
            select(items.c.id).where(items.c.expires_at <= utcnow()).limit(batch).scalar_subquery()
        )
        async with self._connect(write=True) as conn:
            result = await conn.execute(delete(items).where(items.c.id.in_(expired)))
            return int(result.rowcount)


def _json_field_equals(field: Any, value: object) -> ColumnElement[bool]:
    """`metadata[name] == value` for a scalar JSON value, on every dialect."""
    if isinstance(value, bool):
        return cast(ColumnElement[bool], field.as_boolean() == value)
    if isinstance(value, int):
        return cast(ColumnElement[bool], field.as_integer() == value)
    if isinstance(value, float):
        return cast(ColumnElement[bool], field.as_float() == value)
    if isinstance(value, str):
        return cast(ColumnElement[bool], field.as_string() == value)
    raise ConfigurationError(
        f"metadata filters compare strings, numbers and booleans, not {type(value).__name__}"
    )
