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
from datetime import datetime, timezone
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, delete, inspect, or_, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from .engines import EngineSource
from .errors import AgentsSQLAlchemyError, ConfigurationError, DatabaseError, SchemaError
from .models import Models

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
    def of(
        cls, session_id: str, user_id: str | None = None, metadata: dict[str, Any] | None = None
    ) -> SessionKey:
        digest = hashlib.sha256(session_id.encode("utf-8")).hexdigest()
        return cls(session_id, digest, user_id, metadata)


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

    # -- operations --------------------------------------------------------------------------

    async def append(
        self, key: SessionKey, payloads: list[str], expires_at: datetime | None
    ) -> None:
        """Append a batch in one transaction, creating the session row on first write."""
        if not payloads:
            return
        await settle(self._append(key, payloads, expires_at))

    async def _append(
        self, key: SessionKey, payloads: list[str], expires_at: datetime | None
    ) -> None:
        sessions, count, now = self._sessions, len(payloads), utcnow()
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
        async with self._connect(write=True) as conn:
            claimed = (await conn.execute(claim)).one()
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
