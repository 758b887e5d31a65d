"""The database servers the tests reach: their URLs from the environment, whether a missing
one fails or skips, and the admin connections that make and drop a test's own database.

`make test` starts a throwaway PostgreSQL, a PgBouncer in front of it and a MariaDB, and
exports their URLs as AGENTS_SQLALCHEMY_PG_URL, AGENTS_SQLALCHEMY_PGBOUNCER_URL and
AGENTS_SQLALCHEMY_MARIADB_URL; with AGENTS_SQLALCHEMY_REQUIRE_PG=1 (and _MARIADB, _PGBOUNCER),
as `make test` and CI set them, a missing server is a failure, never a skip.
"""

from __future__ import annotations

import os

import asyncmy
import asyncpg
import pytest
from sqlalchemy.engine import make_url

PG_URL = os.environ.get("AGENTS_SQLALCHEMY_PG_URL")
REQUIRE_PG = os.environ.get("AGENTS_SQLALCHEMY_REQUIRE_PG") == "1"
MARIADB_URL = os.environ.get("AGENTS_SQLALCHEMY_MARIADB_URL")
REQUIRE_MARIADB = os.environ.get("AGENTS_SQLALCHEMY_REQUIRE_MARIADB") == "1"
PGBOUNCER_URL = os.environ.get("AGENTS_SQLALCHEMY_PGBOUNCER_URL")
REQUIRE_PGBOUNCER = os.environ.get("AGENTS_SQLALCHEMY_REQUIRE_PGBOUNCER") == "1"


def need(url: str | None, required: bool, what: str, variable: str) -> str:
    """The server's URL; without one, a failure under `make test`, else a skip."""
    if url is None:
        if required:
            pytest.fail(f"{variable} is not set: run the tests with `make test`")
        pytest.skip(f"no {what}: run the tests with `make test`")
    return url


def _asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def pg_admin(statement: str) -> None:
    """Run `statement` on the PostgreSQL server (outside any test's database)."""
    assert PG_URL is not None
    conn = await asyncpg.connect(_asyncpg_dsn(PG_URL))
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def mariadb_admin(url: str, statement: str) -> None:
    """Run `statement` on the MariaDB server of `url` (outside any test's database)."""
    parsed = make_url(url)
    conn = await asyncmy.connect(
        host=parsed.host or "127.0.0.1",
        port=parsed.port or 3306,
        user=parsed.username or "root",
        password=parsed.password or "",
    )
    try:
        async with conn.cursor() as cursor:
            await cursor.execute(statement)
    finally:
        conn.close()
