"""The SQL of adopting the SDK's own tables: reading them, and writing one session of ours.

`SdkSource` reads the tables of the SDK's `SQLiteSession`/`SQLAlchemySession` (a SQLite
file is opened read-only), and of its `AdvancedSQLiteSession` the main line, the branch
`main`, with what else it holds (its other branches, its usage per turn) counted;
`Imports.import_session` writes one whole session in one transaction, unless the target
already has it.

Example::

    source = SdkSource("conversations.db", "agent_sessions", "agent_messages")
    for group in await source.groups():
        rows = await source.rows(group.session_id, order="auto")
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
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
    case,
    func,
    inspect,
    select,
    update,
)
from sqlalchemy.engine import URL, Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from ..database.engines import normalize_url, pgbouncer_mode, pgbouncer_options
from ..database.units import database_errors
from ..errors import ConfigurationError
from ..turns import MAIN
from ..types import Beyond, NewItem, SessionKey
from .rows import insert_session_if_absent
from .schema import Schema

Order = Literal["auto", "id", "created_at"]
CHUNK = 500
#: The tables `AdvancedSQLiteSession` adds beside the SDK's two (their names are fixed).
STRUCTURE, TURN_USAGE = "message_structure", "turn_usage"


class SdkSource:
    """The SDK's two tables in a source database, read in the SDK's own order."""

    def __init__(
        self, source: str | Path | URL | AsyncEngine, sessions_table: str, messages_table: str
    ) -> None:
        metadata = MetaData()  # the columns the SDK's two classes both create
        self._sessions = Table(
            sessions_table,
            metadata,
            Column("session_id", String),
            Column("created_at", DateTime),
            Column("updated_at", DateTime),
        )
        self._messages = Table(
            messages_table,
            metadata,
            Column("id", Integer),
            Column("session_id", String),
            Column("message_data", Text),
            Column("created_at", DateTime),
        )
        self._structure = Table(
            STRUCTURE,
            metadata,
            Column("session_id", String),
            Column("message_id", Integer),
            Column("branch_id", String),
            Column("sequence_number", Integer),
        )
        self._usage = Table(TURN_USAGE, metadata, Column("session_id", String))
        self._advanced: bool | None = None  # whether `message_structure` is this pair's
        self._has_usage = False
        self._engine, self._owned = _source_engine(source)

    async def close(self) -> None:
        """Dispose the engine made here (an engine passed in stays open)."""
        if self._owned:
            await self._engine.dispose()

    async def order(self, given: Order = "auto") -> Order:
        """The SDK's reading order, once the source is checked to have the SDK's tables:
        `given`, or for "auto" the one the tables show: by `id` (`SQLiteSession`) or by
        `created_at` then id."""
        async with self._connect() as conn:
            return await conn.run_sync(self._detect_order, given)

    def _detect_order(self, conn: Connection, given: Order) -> Order:
        inspector = inspect(conn)
        for table in (self._sessions, self._messages):
            if not inspector.has_table(table.name):
                raise ConfigurationError(f"the source has no table {table.name!r}")
        if given != "auto":
            return given
        indexes = {index["name"] for index in inspector.get_indexes(self._messages.name)}
        return "id" if f"idx_{self._messages.name}_session_id" in indexes else "created_at"

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[AsyncConnection]:
        """A connection to the source; its failures (not a database, gone) `DatabaseError`."""
        outcome = "what was imported before stays"
        with database_errors(self._engine.url, "reading the SDK's tables failed", outcome=outcome):
            async with self._engine.connect() as conn:
                yield conn

    async def groups(self) -> Sequence[Any]:
        """One row per session with messages: session_id, messages, first and last time."""
        sessions, messages = self._sessions, self._messages
        joined = messages.outerjoin(sessions, sessions.c.session_id == messages.c.session_id)
        query = (
            select(
                messages.c.session_id,
                func.count().label("messages"),
                func.coalesce(sessions.c.created_at, func.min(messages.c.created_at)).label(
                    "first"
                ),
                func.coalesce(sessions.c.updated_at, func.max(messages.c.created_at)).label("last"),
            )
            .select_from(joined)
            .group_by(messages.c.session_id, sessions.c.created_at, sessions.c.updated_at)
            .order_by(messages.c.session_id)
        )
        async with self._connect() as conn:
            return (await conn.execute(query)).all()

    async def rows(self, session_id: str, order: Order) -> Sequence[Any]:
        """The session's messages (id, message_data, created_at) as the SDK reads them: in
        its order, or, for an `AdvancedSQLiteSession`'s session, its main line only."""
        messages, structure = self._messages, self._structure
        columns = [messages.c.id] if order == "id" else [messages.c.created_at, messages.c.id]
        query = (
            select(messages.c.id, messages.c.message_data, messages.c.created_at)
            .where(messages.c.session_id == session_id)
            .order_by(*columns)
        )
        main = (
            select(messages.c.id, messages.c.message_data, messages.c.created_at)
            .join(structure, structure.c.message_id == messages.c.id)
            .where(messages.c.session_id == session_id, structure.c.branch_id == MAIN)
            .order_by(structure.c.sequence_number)
        )
        async with self._connect() as conn:
            if await self._structured(conn, session_id):
                return (await conn.execute(main)).all()
            return (await conn.execute(query)).all()

    async def beyond(self, session_id: str) -> Beyond:
        """What the session holds beyond its main line (nothing, unless it was written by
        `AdvancedSQLiteSession`)."""
        structure, usage = self._structure, self._usage
        on_main = select(structure.c.message_id).where(
            structure.c.session_id == session_id, structure.c.branch_id == MAIN
        )
        own = case((structure.c.message_id.in_(on_main), 0), else_=1)
        branches = (
            select(structure.c.branch_id, func.count(), func.sum(own))
            .where(structure.c.session_id == session_id, structure.c.branch_id != MAIN)
            .group_by(structure.c.branch_id)
            .order_by(structure.c.branch_id)
        )
        turns = select(func.count()).where(usage.c.session_id == session_id)
        async with self._connect() as conn:
            if not await self._structured(conn, session_id):
                return Beyond()
            found = [
                (str(name), int(items), int(mine or 0))
                for name, items, mine in (await conn.execute(branches)).all()
            ]
            counted = (await conn.execute(turns)).scalar_one() if self._has_usage else 0
        return Beyond(tuple(found), int(counted))

    async def _structured(self, conn: AsyncConnection, session_id: str) -> bool:
        """Whether the session's order is `AdvancedSQLiteSession`'s structure table's."""
        if self._advanced is None:
            self._advanced, self._has_usage = await conn.run_sync(self._detect_structure)
        if not self._advanced:
            return False
        structure = self._structure
        held = select(structure.c.message_id).where(structure.c.session_id == session_id)
        return (await conn.execute(held.limit(1))).first() is not None

    def _detect_structure(self, conn: Connection) -> tuple[bool, bool]:
        """Whether `message_structure` stands here and refers to this messages table, and
        whether `turn_usage` stands beside it."""
        inspector = inspect(conn)
        if not inspector.has_table(STRUCTURE):
            return False, False
        referred = {fk["referred_table"] for fk in inspector.get_foreign_keys(STRUCTURE)}
        return self._messages.name in referred, inspector.has_table(TURN_USAGE)


def _source_engine(source: str | Path | URL | AsyncEngine) -> tuple[AsyncEngine, bool]:
    """An engine on the source; a SQLite file is opened read-only, so it stays untouched;
    behind a transaction pooler (`?pgbouncer=true`), with no statement cache."""
    if isinstance(source, AsyncEngine):
        return source, False
    url, pooled = pgbouncer_mode(normalize_url(source))
    options: dict[str, Any] = {"poolclass": NullPool}
    if pooled:
        url, options = pgbouncer_options(url, options)
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
    return create_async_engine(url, **options), True


#: `sdk_history` counts the SDK's rows up to this many.
COUNT_CAP = 10_000


class Imports:
    """Writes a session copied from elsewhere, whole, in one transaction; and tells whether
    the SDK's own tables hold history that ours do not.

    Example::

        imports = Imports(schema)
        if await imports.sdk_history("agent_messages"):
            await imports.import_session(key, (first, last), [(when, new_item), ...])
    """

    def __init__(self, schema: Schema) -> None:
        self._schema = schema

    async def sdk_history(self, messages_table: str) -> int:
        """Rows (at most `COUNT_CAP`) in the SDK's `messages_table` beside ours, or 0 when
        it does not exist or when our tables already hold a session."""
        return await self._schema.db.read(lambda conn: self._sdk_history(conn, messages_table))

    def _sdk_history(self, conn: Connection, messages_table: str) -> int:
        if conn.execute(select(self._schema.sessions.c.id).limit(1)).first() is not None:
            return 0
        if not inspect(conn).has_table(messages_table):
            return 0
        messages = Table(messages_table, MetaData(), Column("message_data", Text))
        capped = select(messages.c.message_data).limit(COUNT_CAP).subquery()
        return int(conn.execute(select(func.count()).select_from(capped)).scalar_one())

    async def sdk_tables_hold_rows(self, messages_table: str) -> bool:
        """Whether the SDK's `messages_table` exists beside ours and holds a row."""

        def look(conn: Connection) -> bool:
            if not inspect(conn).has_table(messages_table):
                return False
            messages = Table(messages_table, MetaData(), Column("message_data", Text))
            return conn.execute(select(messages.c.message_data).limit(1)).first() is not None

        return await self._schema.db.read(look)

    async def sdk_session_ids(self, messages_table: str) -> list[str]:
        """The distinct session ids (at most `COUNT_CAP`) of the SDK's `messages_table`
        beside ours; [] when it does not exist."""
        return await self._schema.db.read(lambda conn: self._sdk_session_ids(conn, messages_table))

    def _sdk_session_ids(self, conn: Connection, messages_table: str) -> list[str]:
        if not inspect(conn).has_table(messages_table):
            return []
        messages = Table(messages_table, MetaData(), Column("session_id", Text))
        found = select(messages.c.session_id).distinct().limit(COUNT_CAP)
        return [str(session_id) for session_id in conn.execute(found).scalars()]

    async def known_hashes(self, hashes: Sequence[str]) -> set[str]:
        """Which of these session hashes have a session row here."""
        column = self._schema.sessions.c.session_hash

        def work(conn: Connection) -> set[str]:
            known: set[str] = set()
            for start in range(0, len(hashes), 500):
                chunk = list(hashes[start : start + 500])
                known.update(conn.execute(select(column).where(column.in_(chunk))).scalars())
            return known

        return await self._schema.db.read(work)

    async def import_session(
        self,
        key: SessionKey,
        created: tuple[datetime, datetime],
        items: Sequence[tuple[datetime, NewItem]],
        ttl: timedelta | None = None,
    ) -> bool:
        """Write a new session with these items (and their times), which expire `ttl` from
        now (None: never); False if it exists."""
        return await self._schema.db.write(
            lambda conn: self._import(conn, key, created, items, ttl), session_id=key.session_id
        )

    def _import(
        self,
        conn: Connection,
        key: SessionKey,
        created: tuple[datetime, datetime],
        items: Sequence[tuple[datetime, NewItem]],
        ttl: timedelta | None,
    ) -> bool:
        sessions = self._schema.sessions
        expires_at = None if ttl is None else self._schema.now() + ttl
        first, last = created
        values = {
            "session_id": key.session_id,
            "session_hash": key.hash,
            "next_seq": 0,
            "created_at": first,
            "updated_at": max(first, last),
        }
        session_pk = insert_session_if_absent(conn, sessions, values)
        if session_pk is None:
            return False
        rows = [
            {
                "session_pk": session_pk,
                "seq": seq,
                "created_at": when,
                "expires_at": expires_at,
                "payload": item.payload,
                "ciphertext": item.ciphertext,
                "kek_id": item.kek_id,
                "wrapped_key": item.wrapped_key,
            }
            for seq, (when, item) in enumerate(items, 1)
        ]
        for start in range(0, len(rows), CHUNK):
            conn.execute(self._schema.items.insert(), rows[start : start + CHUNK])
        conn.execute(update(sessions).where(sessions.c.id == session_pk).values(next_seq=len(rows)))
        return True
