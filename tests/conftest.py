"""Fixtures: every test that takes `db_url` runs on a real SQLite file, a real PostgreSQL and
a real MariaDB; a test marked `pgbouncer` runs once more through PgBouncer.

The servers' URLs come from the environment (see `support.servers`). Whatever needs a
server carries the `servers` marker, set here: the `db_url` params other than SQLite, and
every test that asks for `pg_url`, `mariadb_url` or `pgbouncer_url`. So
`-m "not servers"` runs the SQLite part alone (`make test-fast`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from agents import Agent, set_tracing_disabled
from agents.testing import ScriptedModel
from sqlalchemy.engine import make_url

from .support.servers import (
    MARIADB_URL,
    PG_URL,
    PGBOUNCER_URL,
    REQUIRE_MARIADB,
    REQUIRE_PG,
    REQUIRE_PGBOUNCER,
    mariadb_admin,
    need,
    pg_admin,
)

set_tracing_disabled(True)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test."""
    url = need(PG_URL, REQUIRE_PG, "PostgreSQL", "AGENTS_SQLALCHEMY_PG_URL")
    name = f"t_{uuid.uuid4().hex[:16]}"
    asyncio.run(pg_admin(f"CREATE DATABASE {name}"))
    yield make_url(url).set(database=name).render_as_string(hide_password=False)
    asyncio.run(pg_admin(f"DROP DATABASE {name} WITH (FORCE)"))


@pytest.fixture
def pgbouncer_url() -> Iterator[str]:
    """A fresh PostgreSQL database for one test, reached through PgBouncer (transaction
    pooling) with the library's `pgbouncer=true` URL setting."""
    bouncer = need(PGBOUNCER_URL, REQUIRE_PGBOUNCER, "PgBouncer", "AGENTS_SQLALCHEMY_PGBOUNCER_URL")
    need(PG_URL, REQUIRE_PG, "PostgreSQL", "AGENTS_SQLALCHEMY_PG_URL")
    name = f"t_{uuid.uuid4().hex[:16]}"
    asyncio.run(pg_admin(f"CREATE DATABASE {name}"))
    url = make_url(bouncer).set(database=name).update_query_dict({"pgbouncer": "true"})
    yield url.render_as_string(hide_password=False)
    asyncio.run(pg_admin(f"DROP DATABASE {name} WITH (FORCE)"))


@pytest.fixture
def mariadb_url() -> Iterator[str]:
    """A fresh, empty MariaDB database for one test."""
    url = need(MARIADB_URL, REQUIRE_MARIADB, "MariaDB", "AGENTS_SQLALCHEMY_MARIADB_URL")
    name = f"t_{uuid.uuid4().hex[:16]}"
    asyncio.run(mariadb_admin(url, f"CREATE DATABASE {name}"))
    yield make_url(url).set(database=name).render_as_string(hide_password=False)
    asyncio.run(mariadb_admin(url, f"DROP DATABASE {name}"))


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh SQLite file."""
    return f"sqlite+aiosqlite:///{tmp_path / 'agent.db'}"


#: The fixture behind each `db_url` param; all but SQLite need a server.
DIALECT_FIXTURES = {
    "sqlite": "sqlite_url",
    "postgresql": "pg_url",
    "mariadb": "mariadb_url",
    "pgbouncer": "pgbouncer_url",
}
#: The dialects a test's `db_url` takes unless a `dialects` marker names others.
DIALECTS = ("sqlite", "postgresql", "mariadb")
SERVER_FIXTURES = {"pg_url", "mariadb_url", "pgbouncer_url"}


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`db_url` takes SQLite, PostgreSQL and MariaDB (or those of the `dialects` marker), and
    PgBouncer too under the `pgbouncer` marker."""
    if "db_url" not in metafunc.fixturenames:
        return
    chosen = metafunc.definition.get_closest_marker("dialects")
    names = list(chosen.args if chosen else DIALECTS)
    if metafunc.definition.get_closest_marker("pgbouncer") and "pgbouncer" not in names:
        names.append("pgbouncer")
    unknown = set(names) - set(DIALECT_FIXTURES)
    assert not unknown, f"{metafunc.definition.nodeid}: no such dialect {sorted(unknown)}"
    metafunc.parametrize(
        "db_url",
        [
            pytest.param(name, marks=() if name == "sqlite" else pytest.mark.servers)
            for name in names
        ],
        indirect=True,
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that asks for a server's database needs that server."""
    for item in items:
        if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.servers)


@pytest.fixture
def db_url(request: pytest.FixtureRequest) -> str:
    """A fresh database of each kind (see `pytest_generate_tests`)."""
    return str(request.getfixturevalue(DIALECT_FIXTURES[request.param]))


@pytest.fixture
def agent() -> Agent:
    """An agent whose model is scripted: no network, real Runner."""
    return Agent(name="assistant", model=ScriptedModel())
