"""The databases: a fresh SQLite file, or a fresh PostgreSQL or MariaDB database, per
backend.

PostgreSQL is benchmarked only when ``AGENTS_SQLALCHEMY_PG_URL`` names a server (``make
bench`` starts one), MariaDB when ``AGENTS_SQLALCHEMY_MARIADB_URL`` does; their role needs
to create databases: each backend gets its own, dropped at the end.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sqlite3
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .core import Location

PG_URL_ENV = "AGENTS_SQLALCHEMY_PG_URL"
# A second PostgreSQL server, with fsync on (the benchmark runs on it too when it is set).
PG_FSYNC_URL_ENV = "AGENTS_SQLALCHEMY_PG_FSYNC_URL"
MARIADB_URL_ENV = "AGENTS_SQLALCHEMY_MARIADB_URL"


@dataclass(frozen=True)
class Database:
    key: str  # "sqlite", "postgres" or "mariadb"
    label: str
    # (name) -> async context manager yielding a fresh, empty Location
    fresh: Callable[[str], AbstractAsyncContextManager[Location]]
    describe: Callable[[], Awaitable[str]]
    # a one-line measurement of the machine, printed before and after the run
    probe: Callable[[], Awaitable[str]] | None = None


def _commit_cost(path: Path, synchronous: str) -> float:
    """Median ms of a one-row sqlite3 commit in WAL mode with this ``synchronous``."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("CREATE TABLE IF NOT EXISTS probe (x TEXT)")
        durations = []
        for _ in range(50):
            started = time.perf_counter()
            conn.execute("BEGIN")
            conn.execute("INSERT INTO probe VALUES (?)", ("x" * 500,))
            conn.execute("COMMIT")
            durations.append(time.perf_counter() - started)
    finally:
        conn.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return statistics.median(durations) * 1000.0


async def thread_hop_cost() -> float:
    """Median ms of ``await asyncio.to_thread(f)`` for a function that does nothing."""
    durations = []
    for _ in range(200):
        started = time.perf_counter()
        await asyncio.to_thread(int)
        durations.append(time.perf_counter() - started)
    return statistics.median(durations) * 1000.0


def sqlite_database(directory: Path) -> Database:
    @asynccontextmanager
    async def fresh(name: str) -> AsyncIterator[Location]:
        path = directory / f"{name}.db"
        yield Location("sqlite", f"sqlite+aiosqlite:///{path}", path)

    async def describe() -> str:
        return (
            f"SQLite {sqlite3.sqlite_version}, WAL, synchronous=NORMAL, "
            f"a fresh file per backend in {directory}"
        )

    async def probe() -> str:
        full = await asyncio.to_thread(_commit_cost, directory / "probe.db", "FULL")
        normal = await asyncio.to_thread(_commit_cost, directory / "probe.db", "NORMAL")
        hop = await thread_hop_cost()
        return (
            f"a bare sqlite3 commit takes {normal:.3f} ms (synchronous=NORMAL), "
            f"{full:.3f} ms (FULL); one asyncio.to_thread hop {hop:.3f} ms"
        )

    return Database("sqlite", "SQLite", fresh, describe, probe)


def _throwaway(
    admin: Callable[[str], Awaitable[Any]], url: Any, kind: str, quoted: str, force: str = ""
) -> Callable[[str], AbstractAsyncContextManager[Location]]:
    """A server's fresh databases: one made per backend by `admin`, dropped at its end."""

    @asynccontextmanager
    async def fresh(name: str) -> AsyncIterator[Location]:
        database = quoted.format(f"bench_{name}_{os.getpid()}_{secrets.token_hex(3)}")
        await admin(f"CREATE DATABASE {database}")
        try:
            location = url.set(database=database.strip('"`'))
            yield Location(kind, location.render_as_string(hide_password=False))
        finally:
            await admin(f"DROP DATABASE IF EXISTS {database}{force}")

    return fresh


def postgres_database(server_url: str, label: str = "PostgreSQL") -> Database:
    from sqlalchemy.engine import make_url

    url = make_url(server_url)
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+asyncpg")
    admin_dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)

    async def admin(sql: str) -> Any:
        import asyncpg  # type: ignore[import-untyped]

        conn = await asyncpg.connect(admin_dsn)
        try:
            return await conn.fetchval(sql)
        finally:
            await conn.close()

    fresh = _throwaway(admin, url, "postgres", '"{}"', " WITH (FORCE)")

    async def describe() -> str:
        version = await admin("SHOW server_version")
        fsync = await admin("SHOW fsync")
        commit = await admin("SHOW synchronous_commit")
        where = url.set(database=None).render_as_string(hide_password=True)
        return (
            f"PostgreSQL {version} at {where} (fsync={fsync}, synchronous_commit={commit}), "
            "a fresh database per backend"
        )

    async def probe() -> str:
        import asyncpg

        conn = await asyncpg.connect(admin_dsn)
        try:
            durations = []
            for _ in range(200):
                started = time.perf_counter()
                await conn.fetchval("SELECT 1")
                durations.append(time.perf_counter() - started)
        finally:
            await conn.close()
        return (
            f"one asyncpg round trip (SELECT 1) takes {statistics.median(durations) * 1000:.3f} ms"
        )

    return Database("postgres", label, fresh, describe, probe)


def mariadb_database(server_url: str) -> Database:
    from sqlalchemy.engine import make_url

    url = make_url(server_url)
    if url.drivername in ("mysql", "mariadb"):
        url = url.set(drivername="mysql+asyncmy")

    async def admin(sql: str) -> Any:
        import asyncmy

        conn = await asyncmy.connect(
            host=url.host, port=url.port or 3306, user=url.username, password=url.password
        )
        try:
            async with conn.cursor() as cursor:
                await cursor.execute(sql)
                row = await cursor.fetchone()
                return None if row is None else row[-1]
        finally:
            conn.close()

    fresh = _throwaway(admin, url, "mariadb", "`{}`")

    async def describe() -> str:
        version = await admin("SELECT VERSION()")
        flush = await admin("SHOW VARIABLES LIKE 'innodb_flush_log_at_trx_commit'")
        where = url.set(database=None).render_as_string(hide_password=True)
        return (
            f"MariaDB {version} at {where} (innodb_flush_log_at_trx_commit={flush}), "
            "a fresh database per backend"
        )

    async def probe() -> str:
        durations = []
        for _ in range(20):
            started = time.perf_counter()
            await admin("SELECT 1")
            durations.append(time.perf_counter() - started)
        return (
            f"one asyncmy connect and SELECT 1 takes {statistics.median(durations) * 1000:.3f} ms"
        )

    return Database("mariadb", "MariaDB", fresh, describe, probe)
