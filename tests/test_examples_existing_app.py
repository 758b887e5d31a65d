"""examples/existing_app: an app's own Alembic adds the chat tables, then removes only them."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import MetaData, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from agents_sqlalchemy import SessionStore, TableNames
from agents_sqlalchemy.tables import ROLES

# The example's databases: its env.py compares every schema, which on MySQL and MariaDB
# means every database of the server, the server's own included.
pytestmark = [pytest.mark.dialects("sqlite", "postgresql"), pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "existing_app"
Names = set[tuple[str | None, str]]


# The names of the example's section, and with one table renamed there (its env.py read
# the prefix and schema only: the app's autogenerate wanted to drop the renamed table).
SECTIONS = {"prefix": {}, "renamed": {"items_table": "chat_log"}}


@pytest.fixture(params=list(SECTIONS))
def section(request: pytest.FixtureRequest) -> dict[str, str]:
    return SECTIONS[request.param]


@pytest.fixture
def app_dir(db_url: str, tmp_path: Path, section: dict[str, str]) -> Path:
    """A copy of the example, with the section's extra names; on SQLite without the
    `schema` line (SQLite has no schemas)."""
    target = tmp_path / "existing_app"
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns("__pycache__"))
    ini = target / "alembic.ini"
    extra = "".join(f"{key} = {value}\n" for key, value in section.items())
    ini.write_text(ini.read_text().replace("\nprefix = chat_\n", f"\nprefix = chat_\n{extra}"))
    if db_url.startswith("sqlite"):
        assert "\nschema = agents\n" in ini.read_text()
        ini.write_text(ini.read_text().replace("\nschema = agents\n", "\n"))
    return target


def alembic(app: Path, url: str, *args: str, chat: bool = False) -> str:
    """The `alembic` command line of the app (`chat`: with `-n agents_sqlalchemy`)."""
    section = ["-n", "agents_sqlalchemy"] if chat else []
    command = ["-c", str(app / "alembic.ini"), *section, "-x", f"url={url}", *args]
    done = subprocess.run(
        [sys.executable, "-m", "alembic", *command],
        cwd=app.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def on_connection(url: str, work: Any) -> Any:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            return await conn.run_sync(work)
    finally:
        await engine.dispose()


def tables(url: str) -> Names:
    """Every table of the default schema (None) and of `agents`."""

    def names(conn: Any) -> Names:
        found = inspect(conn)
        default = found.default_schema_name
        schemas = {default} | ({"agents"} & set(found.get_schema_names()))
        return {(None if s == default else s, t) for s in schemas for t in found.get_table_names(s)}

    return asyncio.run(on_connection(url, names))


def app_rows(url: str) -> list[Any]:
    """The app's data and its own Alembic revision."""

    def read(conn: Any) -> list[Any]:
        tickets = "SELECT c.email, t.subject, t.chat_session_id FROM customers c JOIN tickets t"
        return [
            *conn.execute(text(f"{tickets} ON t.customer_id = c.id")),
            *conn.execute(text("SELECT version_num FROM alembic_version")),
        ]

    return list(map(tuple, asyncio.run(on_connection(url, read))))


def app_metadata(app: Path) -> MetaData:
    spec = importlib.util.spec_from_file_location("existing_app_models", app / "models.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # SQLAlchemy resolves the annotations through it
    spec.loader.exec_module(module)
    return module.Base.metadata  # type: ignore[no-any-return]


def dropped_without_filters(url: str, metadata: MetaData) -> Names:
    """What the app's autogenerate would drop if its env.py had no LibraryTables filters."""

    def compare(conn: Any) -> Names:
        context = MigrationContext.configure(conn, opts={"include_schemas": True})
        diffs = compare_metadata(context, metadata)
        return {(d[1].schema, d[1].name) for d in diffs if d[0] == "remove_table"}

    return asyncio.run(on_connection(url, compare))


async def chat_turn(url: str, names: TableNames) -> list[Any]:
    """The app's runtime opens the store with the same names (and finds them at head)."""
    async with SessionStore(url, tables=names) as store:
        session = store.session("ticket-1", user_id="customer-1")
        await session.add_items([{"role": "user", "content": "my parcel is late"}])
        return await session.get_items()


def test_the_app_adds_then_removes_only_the_chat_tables(
    db_url: str, app_dir: Path, section: dict[str, str]
) -> None:
    schema = None if db_url.startswith("sqlite") else "agents"
    names = TableNames.from_options({"prefix": "chat_", **section})
    names = dataclasses.replace(names, schema=schema)
    ours = {(schema, names.name(role)) for role in ROLES}
    alembic(app_dir, db_url, "upgrade", "head")
    asyncio.run(on_connection(db_url, add_app_data))
    app_only, data = tables(db_url), app_rows(db_url)
    assert {(None, "customers"), (None, "tickets"), (None, "alembic_version")} <= app_only

    alembic(app_dir, db_url, "upgrade", "head", chat=True)
    assert tables(db_url) == app_only | ours
    turn = asyncio.run(chat_turn(db_url, names))
    assert turn == [{"role": "user", "content": "my parcel is late"}]

    # The app's autogenerate finds nothing to do; without the filters it would drop ours.
    assert "No new upgrade operations detected" in alembic(app_dir, db_url, "check")
    assert dropped_without_filters(db_url, app_metadata(app_dir)) == ours

    alembic(app_dir, db_url, "downgrade", "base", chat=True)
    assert tables(db_url) == app_only
    assert app_rows(db_url) == data
    assert "No new upgrade operations detected" in alembic(app_dir, db_url, "check")


def add_app_data(conn: Any) -> None:
    conn.execute(text("INSERT INTO customers (id, email, name) VALUES (1, 'a@example.com', 'A')"))
    conn.execute(
        text("INSERT INTO tickets (customer_id, subject, chat_session_id) VALUES (1, :s, :c)"),
        {"s": "late parcel", "c": "ticket-1"},
    )


def test_a_plain_postgresql_url_works(pg_url: str, tmp_path: Path) -> None:
    """`postgresql://...`, which the library takes, works for the app's Alembic too."""
    target = tmp_path / "existing_app"
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns("__pycache__"))
    plain = make_url(pg_url).set(drivername="postgresql").render_as_string(hide_password=False)
    alembic(target, plain, "upgrade", "head")
    alembic(target, plain, "upgrade", "head", chat=True)
    assert "No new upgrade operations detected" in alembic(target, plain, "check")
    assert {(None, "customers"), ("agents", "chat_items")} <= tables(pg_url)
