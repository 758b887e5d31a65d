"""An application with its own model and its own Alembic environment, for the migration tests.

`make_app(tmp_path, url)` lays out what `alembic init -t async` gives an app, with an
env.py that uses the documented `LibraryTables` helper, and a `[agents_sqlalchemy]` ini
section through which the app runs the library's migrations with `alembic -n`.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

APP_MODELS = """
from sqlalchemy import String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class User(Base):
    __tablename__ = "app_users"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(50))
"""

APP_ENV = """
import asyncio
import sys
from pathlib import Path

from alembic import context
from sqlalchemy.ext.asyncio import create_async_engine

from agents_sqlalchemy import TableNames
from agents_sqlalchemy.app_env import LibraryTables

sys.path.insert(0, str(Path(__file__).parent))
from app_models import Base  # noqa: E402

config = context.config
ours = LibraryTables(TableNames(), TableNames(prefix="chat_"), TableNames(prefix="ini_"))
filters = {"include_name": ours.include_name, "include_object": ours.include_object}
if context.get_x_argument(as_dictionary=True).get("filters") == "off":
    filters = {}


def run(connection):
    context.configure(connection=connection, target_metadata=Base.metadata, **filters)
    with context.begin_transaction():
        context.run_migrations()


async def main():
    engine = create_async_engine(config.get_main_option("sqlalchemy.url"))
    async with engine.connect() as connection:
        await connection.run_sync(run)
        await connection.commit()
    await engine.dispose()


asyncio.run(main())
"""


def make_app(root: Path, url: str, *, section: str = "") -> Config:
    """An app in `root`: `alembic.ini` (plus `section`), `migrations/` with env.py and a model."""
    ini = root / "alembic.ini"
    config = Config(str(ini))
    command.init(config, str(root / "migrations"), template="async")
    (root / "migrations" / "env.py").write_text(APP_ENV)
    (root / "migrations" / "app_models.py").write_text(APP_MODELS)
    default = "sqlalchemy.url = driver://user:pass@localhost/dbname"
    assert default in ini.read_text()
    ini.write_text(ini.read_text().replace(default, f"sqlalchemy.url = {url}") + section)
    return Config(str(ini))


def app_revision(config: Config, rev_id: str, *x: str) -> str:
    """`alembic revision --autogenerate` in the app (`x`: its -x arguments); the script's text."""
    config.cmd_opts = argparse.Namespace(x=list(x))
    script = command.revision(config, message="app change", autogenerate=True, rev_id=rev_id)
    assert script is not None and not isinstance(script, list)
    return Path(script.path).read_text()


def alembic_cli(ini: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real `alembic` command line, in another process, from the app's directory."""
    return subprocess.run(
        [sys.executable, "-m", "alembic", "-c", str(ini), *args],
        cwd=ini.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )


async def _rows(url: str, sql: str) -> list[tuple[object, ...]]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return [tuple(row) for row in await conn.execute(text(sql))]
    finally:
        await engine.dispose()


def rows(url: str, sql: str) -> list[tuple[object, ...]]:
    """`SELECT` rows, from synchronous code."""
    return asyncio.run(_rows(url, sql))


def table_names(found: set[tuple[object, ...]]) -> set[object]:
    """The names of the tables among `objects()` (any schema)."""
    return {row[1] for row in found if row[0] == "table" or (len(row) == 3 and row[2] == "r")}


async def objects(url: str) -> set[tuple[object, ...]]:
    """Every schema object of the database: tables, indexes, sequences, schemas."""
    if url.startswith("sqlite"):
        found = await _rows(url, "SELECT type, name, tbl_name, sql FROM sqlite_master")
        return {row for row in found if not str(row[1]).startswith("sqlite_")}
    if url.startswith(("mysql", "mariadb")):  # the URL's database (MySQL's schema) only
        found = await _rows(
            url,
            "SELECT table_schema, table_name, 'r' FROM information_schema.tables "
            "WHERE table_schema = DATABASE() "
            "UNION SELECT DISTINCT table_schema, CONCAT(table_name, '.', index_name), 'i' "
            "FROM information_schema.statistics WHERE table_schema = DATABASE()",
        )
        return set(found)
    found = await _rows(
        url,
        "SELECT n.nspname, c.relname, c.relkind::text FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') "
        "AND n.nspname NOT LIKE 'pg_toast%' "
        "UNION SELECT nspname, '', 'schema' FROM pg_namespace "
        "WHERE nspname NOT LIKE 'pg_%' AND nspname <> 'information_schema'",
    )
    return set(found)
