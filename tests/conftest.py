"""Fixtures: every test that takes `db_url` runs on a real SQLite file and a real PostgreSQL.

`make test` starts a throwaway PostgreSQL and exports its URL as AGENTS_SQLALCHEMY_PG_URL;
with AGENTS_SQLALCHEMY_REQUIRE_PG=1 (as `make test` and CI set it) a missing server is a
failure, never a skip.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from agents import Agent, set_tracing_disabled
from agents.testing import ScriptedModel
from sqlalchemy.engine import make_url

set_tracing_disabled(True)

PG_URL = os.environ.get("AGENTS_SQLALCHEMY_PG_URL")
REQUIRE_PG = os.environ.get("AGENTS_SQLALCHEMY_REQUIRE_PG") == "1"


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
    if PG_URL is None:
        if REQUIRE_PG:
            pytest.fail("AGENTS_SQLALCHEMY_PG_URL is not set: run the tests with `make test`")
        pytest.skip("no PostgreSQL: run the tests with `make test`")
    name = f"t_{uuid.uuid4().hex[:16]}"
    asyncio.run(_admin(f"CREATE DATABASE {name}"))
    yield make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    asyncio.run(_admin(f"DROP DATABASE {name} WITH (FORCE)"))


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh SQLite file."""
    return f"sqlite+aiosqlite:///{tmp_path / 'agent.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest) -> str:
    """A fresh database of each kind."""
    fixture = "sqlite_url" if request.param == "sqlite" else "pg_url"
    return str(request.getfixturevalue(fixture))


@pytest.fixture
def agent() -> Agent:
    """An agent whose model is scripted: no network, real Runner."""
    return Agent(name="assistant", model=ScriptedModel())
