"""The floor: the same operations on the bare driver and ``json``, nothing else.

One table of items (a global sequence ``seq``, the session id, the item as compact JSON
text) with an index on ``(session_id, seq)``; no sessions table, no per-session numbering,
no lock beyond the database's own. What no library over the same driver can beat:

- append: one transaction inserting the turn (SQLite: ``BEGIN``, ``executemany``,
  ``COMMIT``; PostgreSQL: one ``INSERT ... SELECT unnest($2)``, one round trip);
- full read: ``SELECT payload ... ORDER BY seq`` and ``json.loads`` of each row;
- tail n: ``ORDER BY seq DESC LIMIT n``, reversed;
- pop: one ``DELETE ... WHERE seq = (SELECT the last seq) RETURNING payload`` statement,
  its own transaction.

On MariaDB: one ``asyncmy`` connection in autocommit, an append one multi-row ``INSERT``,
a pop one ``DELETE ... ORDER BY seq DESC LIMIT 1 RETURNING payload``.

On PostgreSQL the floor runs a second time through SQLAlchemy (``postgres_floor_sqlalchemy``):
the same statements, each on a connection of an ``AsyncEngine``'s pool in autocommit,
through ``exec_driver_sql``. The library is bound to SQLAlchemy, so that row is what any
call of it pays before doing anything of its own: the pool, the greenlet bridge and the
DB-API adapter.

On SQLite (WAL, ``synchronous=NORMAL``, like our store) each operation runs in a worker
thread through ``asyncio.to_thread``, as the SDK's ``SQLiteSession`` does and as any async
caller must (a blocking call on the event loop stalls every other task); our store also
makes one thread hop per operation, so the two differ by the library's own work only.
``databases.py`` prints what one hop costs on the machine. On PostgreSQL one ``asyncpg``
connection serves every session of the backend.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

from .core import BenchSession, Item

SessionFactory = Callable[[str], BenchSession]


def _dumps(item: Item) -> str:
    return json.dumps(item, ensure_ascii=False, separators=(",", ":"))


class SqliteFloor:
    """Bare ``sqlite3`` on one connection, each operation in a worker thread."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = NORMAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS items (seq INTEGER PRIMARY KEY, "
            "session_id TEXT NOT NULL, payload TEXT NOT NULL)"
        )
        self._conn.execute("CREATE INDEX IF NOT EXISTS items_session ON items (session_id, seq)")

    def add(self, session_id: str, items: list[Item]) -> None:
        rows = [(session_id, _dumps(item)) for item in items]
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                self._conn.executemany(
                    "INSERT INTO items (session_id, payload) VALUES (?, ?)", rows
                )
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def get(self, session_id: str, limit: int | None) -> list[Item]:
        with self._lock:
            if limit is None:
                rows = self._conn.execute(
                    "SELECT payload FROM items WHERE session_id = ? ORDER BY seq", (session_id,)
                ).fetchall()
            else:
                rows = self._conn.execute(
                    "SELECT payload FROM items WHERE session_id = ? ORDER BY seq DESC LIMIT ?",
                    (session_id, limit),
                ).fetchall()
                rows.reverse()
        return [json.loads(payload) for (payload,) in rows]

    def pop(self, session_id: str) -> Item | None:
        with self._lock:
            row = self._conn.execute(
                "DELETE FROM items WHERE seq = (SELECT seq FROM items WHERE session_id = ? "
                "ORDER BY seq DESC LIMIT 1) RETURNING payload",
                (session_id,),
            ).fetchone()
        return None if row is None else cast(Item, json.loads(row[0]))

    def clear(self, session_id: str) -> None:
        with self._lock:
            self._conn.execute("DELETE FROM items WHERE session_id = ?", (session_id,))

    def close(self) -> None:
        self._conn.close()


class SqliteFloorSession:
    def __init__(self, floor: SqliteFloor, session_id: str) -> None:
        self._floor, self._id = floor, session_id

    async def get_items(self, limit: int | None = None) -> list[Item]:
        return await asyncio.to_thread(self._floor.get, self._id, limit)

    async def add_items(self, items: list[Item]) -> None:
        await asyncio.to_thread(self._floor.add, self._id, items)

    async def pop_item(self) -> Item | None:
        return await asyncio.to_thread(self._floor.pop, self._id)

    async def clear_session(self) -> None:
        await asyncio.to_thread(self._floor.clear, self._id)


class PostgresFloorSession:
    """Bare ``asyncpg`` + ``json`` on one connection shared by the backend's sessions."""

    def __init__(self, conn: Any, session_id: str) -> None:
        self._conn, self._id = conn, session_id

    async def get_items(self, limit: int | None = None) -> list[Item]:
        if limit is None:
            rows = await self._conn.fetch(
                "SELECT payload FROM items WHERE session_id = $1 ORDER BY seq", self._id
            )
        else:
            rows = await self._conn.fetch(
                "SELECT payload FROM items WHERE session_id = $1 ORDER BY seq DESC LIMIT $2",
                self._id,
                limit,
            )
            rows.reverse()
        return [json.loads(row[0]) for row in rows]

    async def add_items(self, items: list[Item]) -> None:
        await self._conn.execute(
            "INSERT INTO items (session_id, payload) SELECT $1, p "
            "FROM unnest($2::text[]) WITH ORDINALITY AS t(p, n) ORDER BY n",
            self._id,
            [_dumps(item) for item in items],
        )

    async def pop_item(self) -> Item | None:
        payload = await self._conn.fetchval(
            "DELETE FROM items WHERE seq = (SELECT seq FROM items WHERE session_id = $1 "
            "ORDER BY seq DESC LIMIT 1) RETURNING payload",
            self._id,
        )
        return None if payload is None else cast(Item, json.loads(payload))

    async def clear_session(self) -> None:
        await self._conn.execute("DELETE FROM items WHERE session_id = $1", self._id)


class MariadbFloorSession:
    """Bare ``asyncmy`` + ``json`` on one connection (autocommit) shared by the sessions."""

    def __init__(self, conn: Any, session_id: str) -> None:
        self._conn, self._id = conn, session_id

    async def _rows(self, sql: str, *args: Any) -> list[Any]:
        async with self._conn.cursor() as cursor:
            await cursor.execute(sql, args)
            return list(await cursor.fetchall())

    async def get_items(self, limit: int | None = None) -> list[Item]:
        if limit is None:
            rows = await self._rows(
                "SELECT payload FROM items WHERE session_id = %s ORDER BY seq", self._id
            )
        else:
            rows = await self._rows(
                "SELECT payload FROM items WHERE session_id = %s ORDER BY seq DESC LIMIT %s",
                self._id,
                limit,
            )
            rows.reverse()
        return [json.loads(row[0]) for row in rows]

    async def add_items(self, items: list[Item]) -> None:
        values = ", ".join(["(%s, %s)"] * len(items))
        args = [value for item in items for value in (self._id, _dumps(item))]
        async with self._conn.cursor() as cursor:
            await cursor.execute(f"INSERT INTO items (session_id, payload) VALUES {values}", args)

    async def pop_item(self) -> Item | None:
        rows = await self._rows(
            "DELETE FROM items WHERE session_id = %s ORDER BY seq DESC LIMIT 1 RETURNING payload",
            self._id,
        )
        return cast(Item, json.loads(rows[0][0])) if rows else None

    async def clear_session(self) -> None:
        await self._rows("DELETE FROM items WHERE session_id = %s", self._id)


@asynccontextmanager
async def sqlite_floor(path: Path) -> AsyncIterator[SessionFactory]:
    floor = await asyncio.to_thread(SqliteFloor, path)

    def session(session_id: str) -> BenchSession:
        return SqliteFloorSession(floor, session_id)

    try:
        yield session
    finally:
        await asyncio.to_thread(floor.close)


class EngineConnection:
    """What ``PostgresFloorSession`` asks of an asyncpg connection, each call through
    SQLAlchemy's ``AsyncEngine``: a connection from its pool (autocommit), the statement
    by ``exec_driver_sql``, the rows as a list, the connection given back."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine

    async def fetch(self, sql: str, *args: Any) -> list[Any]:
        async with self._engine.connect() as conn:
            result = await conn.exec_driver_sql(sql, args)
            return list(result.all()) if result.returns_rows else []

    async def fetchval(self, sql: str, *args: Any) -> Any:
        rows = await self.fetch(sql, *args)
        return rows[0][0] if rows else None

    async def execute(self, sql: str, *args: Any) -> None:
        await self.fetch(sql, *args)


async def _postgres_sessions(conn: Any) -> SessionFactory:
    """The floor's table on ``conn`` (asyncpg's, or an ``EngineConnection``), and its sessions."""
    await conn.execute(
        "CREATE TABLE IF NOT EXISTS items (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
        "session_id text NOT NULL, payload text NOT NULL)"
    )
    await conn.execute("CREATE INDEX IF NOT EXISTS items_session ON items (session_id, seq)")

    def session(session_id: str) -> BenchSession:
        return PostgresFloorSession(conn, session_id)

    return session


@asynccontextmanager
async def postgres_floor(dsn: str) -> AsyncIterator[SessionFactory]:
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(dsn)
    try:
        yield await _postgres_sessions(conn)
    finally:
        await conn.close()


@asynccontextmanager
async def postgres_floor_sqlalchemy(url: str) -> AsyncIterator[SessionFactory]:
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url, isolation_level="AUTOCOMMIT")
    try:
        yield await _postgres_sessions(EngineConnection(engine))
    finally:
        await engine.dispose()


@asynccontextmanager
async def mariadb_floor(url: str) -> AsyncIterator[SessionFactory]:
    import asyncmy
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    conn = await asyncmy.connect(
        host=parsed.host,
        port=parsed.port or 3306,
        user=parsed.username,
        password=parsed.password,
        database=parsed.database,
        autocommit=True,
    )
    async with conn.cursor() as cursor:
        await cursor.execute(
            "CREATE TABLE IF NOT EXISTS items (seq BIGINT AUTO_INCREMENT PRIMARY KEY, "
            "session_id VARCHAR(255) NOT NULL, payload LONGTEXT NOT NULL, "
            "INDEX items_session (session_id, seq)) CHARACTER SET utf8mb4"
        )

    def session(session_id: str) -> BenchSession:
        return MariadbFloorSession(conn, session_id)

    try:
        yield session
    finally:
        conn.close()
