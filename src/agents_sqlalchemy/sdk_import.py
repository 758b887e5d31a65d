"""Adopting existing data: copy the SDK's own `SQLiteSession`/`SQLAlchemySession` tables.

The source is only read (a SQLite file is opened read-only). Each session is copied in one
transaction, in the SDK's own order, and a session already in the target is skipped, so an
interrupted or repeated import is safe to run again. Items are encoded by the target store's
codec: with a key, they are sealed exactly as `SessionStore(target, key=...)` seals them.

Example::

    report = await import_sdk("conversations.db", "postgresql://app@db/app")
    print(report.sessions, report.items)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

from sqlalchemy import (
    Column,
    DateTime,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    func,
    inspect,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from .codec import Codec, encode_item
from .crypto import Key
from .engines import EngineSource, normalize_url
from .errors import ConfigurationError
from .models import Models, build_models
from .repository import SessionKey
from .store import SessionStore, session_key
from .tables import TableNames

Order = Literal["auto", "id", "created_at"]
CHUNK = 500


@dataclass(frozen=True)
class ImportReport:
    """What an import did: sessions and items copied, sessions skipped, rows not readable.

    Example::

        report = await import_sdk("conversations.db", "agent.db")
        assert report.unreadable == 0, "some SDK rows were not JSON objects"
    """

    sessions: int = 0
    items: int = 0
    skipped_sessions: int = 0  # already in the target: an earlier import, or written since
    unreadable: int = 0  # rows that are not a JSON object (the SDK skips them as well)


async def import_sdk(
    source: str | Path | URL | AsyncEngine,
    target: str | Path | URL | AsyncEngine,
    *,
    tables: TableNames | None = None,
    sessions_table: str = "agent_sessions",
    messages_table: str = "agent_messages",
    order: Order = "auto",
    progress: Callable[[int, int], None] | None = None,
    key: Key | None = None,
) -> ImportReport:
    """Copy every SDK session of `source` into the library's tables in `target`.

    `order` is the SDK's reading order: `id` (`SQLiteSession`), `created_at` then id
    (`SQLAlchemySession`), or `auto` (told apart by the index each creates). `progress` is
    called with (rows done, rows in all) as sessions are copied. The target's schema must be
    at head (`agents-sqlalchemy db upgrade`). `key` is the target's key: an encrypted target
    refuses an import without it, and with it every item is sealed on the way in.

    Example::

        report = await import_sdk("conversations.db", "agent.db", messages_table="msgs")
    """
    names = tables or TableNames()
    src_sessions, src_messages = _source_tables(sessions_table, messages_table)
    source_engine, owned = _source_engine(source)
    destination = EngineSource(target, None)
    store = SessionStore(target, tables=names, key=key)
    try:
        # The store checks the schema and the key, and lends its codec: the one place items
        # are encoded (or sealed), so an import writes what the store would have written.
        codec = await store._ready()
        copier = _Copier(build_models(names), destination.dialect_name, codec)
        async with source_engine.connect() as src:
            if order == "auto":
                order = await src.run_sync(_detect_order, sessions_table, messages_table)
            groups = (await src.execute(_groups(src_sessions, src_messages))).all()
        total, done = sum(group.messages for group in groups), 0
        if progress:
            progress(0, total)
        for group in groups:
            session = session_key(group.session_id)
            async with source_engine.connect() as src:
                rows = (await src.execute(_rows(src_messages, session.session_id, order))).all()
            async with destination.get().begin() as conn:
                await copier.copy(conn, session, group, rows)
            done += group.messages
            if progress:
                progress(done, total)
        return copier.report()
    finally:
        await store.close()
        await destination.close()
        if owned:
            await source_engine.dispose()


def _source_tables(sessions_table: str, messages_table: str) -> tuple[Table, Table]:
    """The columns the SDK's two classes both create (names quoted by SQLAlchemy)."""
    metadata = MetaData()
    sessions = Table(
        sessions_table,
        metadata,
        Column("session_id", String),
        Column("created_at", DateTime),
        Column("updated_at", DateTime),
    )
    messages = Table(
        messages_table,
        metadata,
        Column("id", Integer),
        Column("session_id", String),
        Column("message_data", Text),
        Column("created_at", DateTime),
    )
    return sessions, messages


def _source_engine(source: str | Path | URL | AsyncEngine) -> tuple[AsyncEngine, bool]:
    """An engine on the source; a SQLite file is opened read-only, so it stays untouched."""
    if isinstance(source, AsyncEngine):
        return source, False
    url = normalize_url(source)
    path = url.database
    if (
        url.get_backend_name() == "sqlite"
        and path
        and path != ":memory:"
        and "uri" not in url.query
    ):
        if not Path(path).is_file():
            raise ConfigurationError(f"no SQLite database at {path!r}")
        url = url.set(
            database=f"file:{quote(path)}", query={**url.query, "mode": "ro", "uri": "true"}
        )
    return create_async_engine(url, poolclass=NullPool), True


def _detect_order(conn: Connection, sessions_table: str, messages_table: str) -> Order:
    inspector = inspect(conn)
    for table in (sessions_table, messages_table):
        if not inspector.has_table(table):
            raise ConfigurationError(f"the source has no table {table!r}")
    indexes = {index["name"] for index in inspector.get_indexes(messages_table)}
    return "id" if f"idx_{messages_table}_session_id" in indexes else "created_at"


def _groups(sessions: Table, messages: Table) -> Any:
    """One row per session with messages: its id, message count and timestamps."""
    joined = messages.outerjoin(sessions, sessions.c.session_id == messages.c.session_id)
    return (
        select(
            messages.c.session_id,
            func.count().label("messages"),
            func.coalesce(sessions.c.created_at, func.min(messages.c.created_at)).label("first"),
            func.coalesce(sessions.c.updated_at, func.max(messages.c.created_at)).label("last"),
        )
        .select_from(joined)
        .group_by(messages.c.session_id, sessions.c.created_at, sessions.c.updated_at)
        .order_by(messages.c.session_id)
    )


def _rows(messages: Table, session_id: str, order: Order) -> Any:
    columns = [messages.c.id] if order == "id" else [messages.c.created_at, messages.c.id]
    return (
        select(messages.c.message_data, messages.c.created_at)
        .where(messages.c.session_id == session_id)
        .order_by(*columns)
    )


def _utc(value: datetime | None, default: datetime) -> datetime:
    if value is None:
        return default
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value


class _Copier:
    """Writes one SDK session into the target, unless the target already has it."""

    def __init__(self, models: Models, dialect: str, codec: Codec) -> None:
        self._sessions, self._items = models.sessions, models.items
        self._item_keys = models.table(models.item_key)
        self._codec = codec
        self._insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
        self._counts = {"sessions": 0, "items": 0, "skipped_sessions": 0, "unreadable": 0}

    def report(self) -> ImportReport:
        return ImportReport(**self._counts)

    async def copy(
        self, conn: AsyncConnection, key: SessionKey, group: Any, rows: Sequence[Any]
    ) -> None:
        now = datetime.now(timezone.utc)
        first, last = _utc(group.first, now), _utc(group.last, now)
        claim = (
            self._insert(self._sessions)
            .values(
                session_id=key.session_id,
                session_hash=key.hash,
                next_seq=0,
                created_at=first,
                updated_at=max(first, last),
            )
            .on_conflict_do_nothing(index_elements=[self._sessions.c.session_hash])
            .returning(self._sessions.c.id)
        )
        session_pk = (await conn.execute(claim)).scalar_one_or_none()
        if session_pk is None:
            self._counts["skipped_sessions"] += 1
            return
        payloads: list[str] = []
        created: list[datetime] = []
        for row in rows:
            try:
                payloads.append(encode_item(json.loads(row.message_data)))
            except (TypeError, ValueError):
                self._counts["unreadable"] += 1
                continue
            created.append(_utc(row.created_at, first))
        stored = self._codec.rows(key, payloads, 1)
        items = [
            {
                "session_pk": session_pk,
                "seq": seq,
                "created_at": when,
                "payload": item.payload,
                "ciphertext": item.ciphertext,
            }
            for seq, (when, item) in enumerate(zip(created, stored, strict=True), 1)
        ]
        returning = self._items.insert().returning(self._items.c.id, sort_by_parameter_order=True)
        for start in range(0, len(items), CHUNK):
            chunk, values = stored[start : start + CHUNK], items[start : start + CHUNK]
            if not any(item.wrapped_key for item in chunk):  # plaintext: the items alone
                await conn.execute(self._items.insert(), values)
                continue
            ids = (await conn.execute(returning, values)).scalars().all()
            await conn.execute(
                self._item_keys.insert(),
                [
                    {"item_pk": pk, "kek_id": item.kek_id, "wrapped_key": item.wrapped_key}
                    for pk, item in zip(ids, chunk, strict=True)
                ],
            )
        sessions = self._sessions
        await conn.execute(
            update(sessions).where(sessions.c.id == session_pk).values(next_seq=len(items))
        )
        self._counts["sessions"] += 1
        self._counts["items"] += len(items)
