"""Fixtures: every test that takes `db_url` runs on a real SQLite file, a real PostgreSQL and
a real MariaDB.

`make test` starts a throwaway PostgreSQL, a PgBouncer in front of it and a MariaDB, and
exports their URLs as AGENTS_SQLALCHEMY_PG_URL, AGENTS_SQLALCHEMY_PGBOUNCER_URL and
AGENTS_SQLALCHEMY_MARIADB_URL; with AGENTS_SQLALCHEMY_REQUIRE_PG=1 (and _MARIADB, _PGBOUNCER),
as `make test` and CI set them, a missing server is a failure, never a skip.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncmy
import asyncpg
import pytest
from agents import Agent, set_tracing_disabled
from agents.testing import ScriptedModel
from sqlalchemy.engine import make_url

set_tracing_disabled(True)

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


async def _admin(statement: str) -> None:
    assert PG_URL is not None
    conn = await asyncpg.connect(_asyncpg_dsn(PG_URL))
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test."""
    url = need(PG_URL, REQUIRE_PG, "PostgreSQL", "AGENTS_SQLALCHEMY_PG_URL")
    name = f"t_{uuid.uuid4().hex[:16]}"
    asyncio.run(_admin(f"CREATE DATABASE {name}"))
    yield make_url(url).set(database=name).render_as_string(hide_password=False)
    asyncio.run(_admin(f"DROP DATABASE {name} WITH (FORCE)"))


@pytest.fixture
def pgbouncer_url() -> Iterator[str]:
    """A fresh PostgreSQL database for one test, reached through PgBouncer (transaction
    pooling) with the library's `pgbouncer=true` URL setting."""
    bouncer = need(PGBOUNCER_URL, REQUIRE_PGBOUNCER, "PgBouncer", "AGENTS_SQLALCHEMY_PGBOUNCER_URL")
    need(PG_URL, REQUIRE_PG, "PostgreSQL", "AGENTS_SQLALCHEMY_PG_URL")
    name = f"t_{uuid.uuid4().hex[:16]}"
    asyncio.run(_admin(f"CREATE DATABASE {name}"))
    url = make_url(bouncer).set(database=name).update_query_dict({"pgbouncer": "true"})
    yield url.render_as_string(hide_password=False)
    asyncio.run(_admin(f"DROP DATABASE {name} WITH (FORCE)"))


async def _mariadb_admin(url: str, statement: str) -> None:
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


@pytest.fixture
def mariadb_url() -> Iterator[str]:
    """A fresh, empty MariaDB database for one test."""
    url = need(MARIADB_URL, REQUIRE_MARIADB, "MariaDB", "AGENTS_SQLALCHEMY_MARIADB_URL")
    name = f"t_{uuid.uuid4().hex[:16]}"
    asyncio.run(_mariadb_admin(url, f"CREATE DATABASE {name}"))
    yield make_url(url).set(database=name).render_as_string(hide_password=False)
    asyncio.run(_mariadb_admin(url, f"DROP DATABASE {name}"))


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh SQLite file."""
    return f"sqlite+aiosqlite:///{tmp_path / 'agent.db'}"


DIALECT_FIXTURES = {"sqlite": "sqlite_url", "postgresql": "pg_url", "mariadb": "mariadb_url"}


@pytest.fixture(params=list(DIALECT_FIXTURES))
def db_url(request: pytest.FixtureRequest) -> str:
    """A fresh database of each kind."""
    return str(request.getfixturevalue(DIALECT_FIXTURES[request.param]))


@pytest.fixture
def agent() -> Agent:
    """An agent whose model is scripted: no network, real Runner."""
    return Agent(name="assistant", model=ScriptedModel())
