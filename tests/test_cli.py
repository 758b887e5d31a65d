"""The `agents-sqlalchemy` command line: db commands, import-sdk, and the installed wheel."""

from __future__ import annotations

import asyncio
import hashlib
import os
import sqlite3
import subprocess
import sys
import zipfile
from datetime import datetime, timedelta
from pathlib import Path

import click
import pytest
from agents import SQLiteSession
from agents.extensions.memory import SQLAlchemySession as SDKSQLAlchemySession
from click.testing import CliRunner, Result
from sqlalchemy import Column, DateTime, Integer, MetaData, String, Table, select, update
from sqlalchemy.ext.asyncio import create_async_engine

from agents_sqlalchemy import SessionStore, TableNames, import_sdk
from agents_sqlalchemy.cli import app
from agents_sqlalchemy.migrations import api as migrate

from .support.app_alembic import objects, rows, table_names
from .support.items import ALL, message
from .support.sdk_tables import make_sdk_tables, sdk_needs_tables_made

ROOT = Path(__file__).resolve().parent.parent
HEAD = migrate.head_revision()


def cli(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(app, list(args), env=env, catch_exceptions=False)


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [path]
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += _commands(command, (*path, name))
        else:
            found.append((*path, name))
    return found


def test_every_command_has_help() -> None:
    commands = _commands(app)
    assert {("db", "upgrade"), ("db", "downgrade"), ("db", "current"), ("db", "check")} <= set(
        commands
    )
    assert ("import-sdk",) in commands
    for path in commands:
        result = cli(*path, "--help")
        assert result.exit_code == 0, (path, result.output)
        assert "Usage: " in result.output and "Show this message and exit." in result.output


@pytest.mark.slow
def test_commands_that_make_no_session_start_without_the_sdk(tmp_path: Path) -> None:
    """Importing the Agents SDK takes seconds: no command needs it, reading a transcript
    (which makes a session) included."""
    path = tmp_path / "a.db"

    async def fill() -> None:
        async with SessionStore(path, create_tables=True) as store:
            await store.session("s1", user_id="alice").add_items([message("the disk was full")])

    asyncio.run(fill())
    # Each argument is one command line (split on spaces), run in turn in one interpreter.
    script = """
import sys
from agents_sqlalchemy.cli import app
for command in sys.argv[1:]:
    try:
        app(command.split(), standalone_mode=False)
    except SystemExit:
        pass
    print("SDK imported" if "agents" in sys.modules else "SDK not imported")
"""

    def run(*commands: str) -> list[str]:
        lines = [command.format(url=path) for command in commands]
        done = subprocess.run(
            [sys.executable, "-c", script, *lines], capture_output=True, text=True, check=True
        )
        return done.stdout.splitlines()

    out = run(
        "db current --url {url}",
        "sessions list --url {url}",
        "search disk --url {url}",
        "reindex --url {url}",
        "--help",
    )
    assert out.count("SDK not imported") == 5 and "SDK imported" not in out, out
    assert "s1       alice" in "\n".join(out) and "   user: the disk was full" in out, out
    out = run("sessions show s1 --url {url}")
    assert out[-1] == "SDK not imported" and "[1] user: the disk was full" in out, out


def test_db_commands_with_table_options(db_url: str) -> None:
    schema = ["--schema", "agents"] if db_url.startswith("postgresql") else []
    options = ["--url", db_url, "--prefix", "ops_", "--items-table", "ops_log", *schema]
    tables = TableNames(prefix="ops_", items="ops_log", schema="agents" if schema else None)

    assert cli("db", "check", *options).exit_code == 1
    current = cli("db", "current", *options)
    if db_url.startswith("sqlite"):  # a mistyped path was said to be an empty database
        assert current.exit_code == 1 and "no SQLite database at" in current.output
        assert not Path(db_url.removeprefix("sqlite+aiosqlite:///")).exists()
        assert cli("db", "upgrade", *options, "0001").exit_code == 0
        current = cli("db", "current", *options)
        assert "at revision 0001" in current.output and current.exit_code == 0
    else:
        assert "no tables and no revision" in current.output

    upgraded = cli("db", "upgrade", *options)
    assert upgraded.exit_code == 0 and f" to {HEAD} (head)" in upgraded.output
    again = cli("db", "upgrade", *options)
    assert "nothing to do" in again.output
    assert f"at revision {HEAD} (head)" in cli("db", "current", *options).output
    assert cli("db", "check", *options).exit_code == 0
    assert {"ops_log", "ops_sessions", "ops_version"} <= table_names(asyncio.run(objects(db_url)))
    # The default tables are another set: not there.
    assert cli("db", "check", "--url", db_url).exit_code == 1

    refused = cli("db", "downgrade", "base", *options)  # no terminal: the prompt aborts
    assert refused.exit_code == 1 and asyncio.run(migrate.current(db_url, tables=tables)) == HEAD
    downgraded = cli("db", "downgrade", "base", "--yes", *options)
    assert downgraded.exit_code == 0 and f"downgraded from {HEAD} to none" in downgraded.output
    checked = cli("db", "check", *options)
    assert checked.exit_code == 1 and "agents-sqlalchemy db upgrade" in checked.output
    assert "ops_log" not in table_names(asyncio.run(objects(db_url)))


def test_db_options_from_the_environment_and_bad_options(sqlite_url: str) -> None:
    env = {"AGENTS_SQLALCHEMY_URL": sqlite_url, "AGENTS_SQLALCHEMY_PREFIX": "env_"}
    assert cli("db", "upgrade", env=env).exit_code == 0
    assert asyncio.run(migrate.current(sqlite_url, tables=TableNames(prefix="env_"))) == HEAD
    bad = cli("db", "upgrade", "--url", sqlite_url, "--items-table", "x; DROP TABLE y")
    assert bad.exit_code == 2 and "not a safe SQL identifier" in bad.output
    missing = cli("db", "upgrade")
    assert missing.exit_code == 2 and "--url" in missing.output
    unknown = cli("db", "upgrade", "nope", "--url", sqlite_url)
    assert unknown.exit_code == 1 and "nope" in unknown.output


def test_no_color_turns_colours_off(sqlite_url: str) -> None:
    """Asked for colours (a terminal), a table's header is bold, unless NO_COLOR is set."""
    asyncio.run(_one_session(sqlite_url))
    args = ["sessions", "list", "--url", sqlite_url]
    coloured = CliRunner().invoke(app, args, color=True)
    plain = CliRunner().invoke(app, args, color=True, env={"NO_COLOR": "1"})
    assert "\x1b[" in coloured.output and "SESSION" in plain.output
    assert "\x1b[" not in plain.output


async def _one_session(url: str) -> None:
    async with SessionStore(url, create_tables=True) as store:
        await store.session("s").add_items([{"role": "user", "content": "hi"}])


def test_upgrade_sql_prints_the_ddl_for_the_chosen_names() -> None:
    result = cli(
        "db", "upgrade", "--sql", "--url", "postgresql://app@db/app", "--prefix", "chat_",
        "--schema", "agents",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert 'CREATE SCHEMA IF NOT EXISTS "agents"' in result.output
    assert "CREATE TABLE agents.chat_sessions" in result.output
    assert "CREATE TABLE agents.chat_version" in result.output
    assert "alembic_version" not in result.output


# -- import-sdk ----------------------------------------------------------------------------------


def digest(path: Path) -> tuple[str, list[tuple[object, ...]]]:
    """The bytes of a SQLite database file, and its rows as SQLite reads them."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        found = conn.execute("SELECT * FROM agent_messages ORDER BY id").fetchall()
        found += conn.execute("SELECT * FROM agent_sessions ORDER BY session_id").fetchall()
    conn.close()
    return hashlib.sha256(path.read_bytes()).hexdigest(), found


async def sqlite_session_source(path: Path) -> dict[str, list[object]]:
    """Three conversations written by the SDK's own SQLiteSession, plus one unreadable row."""
    expected: dict[str, list[object]] = {}
    for name, items in {"alice": ALL, "bob": [message(str(i)) for i in range(120)]}.items():
        session = SQLiteSession(name, path)
        await session.add_items(items)
        expected[name] = await session.get_items()
        session.close()
    session = SQLiteSession("carol", path)
    await session.add_items([message("1"), message("2"), message("3")])
    await session.pop_item()  # ids need not be contiguous
    await session.add_items([message("4")])
    session.close()
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO agent_messages (session_id, message_data) VALUES ('carol', 'not json')"
        )
    conn.close()
    expected["carol"] = [message("1"), message("2"), message("4")]
    return expected


async def read_all(url: str, names: list[str], tables: TableNames | None = None) -> object:
    async with SessionStore(url, tables=tables) as store:
        return {name: await store.session(name).get_items() for name in names}


def test_import_sdk_from_a_sqlite_session_file(db_url: str, tmp_path: Path) -> None:
    source = tmp_path / "sdk" / "conversations.db"
    source.parent.mkdir()
    expected = asyncio.run(sqlite_session_source(source))
    before = digest(source)
    tables = TableNames(prefix="chat_")
    assert cli("db", "upgrade", "--url", db_url, "--prefix", "chat_").exit_code == 0

    first = cli("import-sdk", "--from", str(source), "--url", db_url, "--prefix", "chat_")
    assert first.exit_code == 0, first.output
    assert "Importing items" in first.output  # the progress bar's label (no terminal here)
    items = sum(len(found) for found in expected.values())
    assert f"Imported 3 sessions ({items} items); skipped 0 already present" in first.output
    assert "Left out 1 row that did not hold valid JSON" in first.output
    assert asyncio.run(read_all(db_url, list(expected), tables)) == expected

    second = cli("import-sdk", "--from", str(source), "--url", db_url, "--prefix", "chat_")
    assert "Imported 0 sessions (0 items); skipped 3 already present" in second.output
    assert asyncio.run(read_all(db_url, list(expected), tables)) == expected
    assert digest(source) == before  # opened read-only: not a byte of the file changed
    assert {p.name for p in source.parent.iterdir()} <= {
        "conversations.db",
        "conversations.db-wal",  # SQLite's own shared-memory files of a WAL database
        "conversations.db-shm",
    }


def test_import_sdk_into_a_schema_not_at_head_says_what_to_run(
    sqlite_url: str, tmp_path: Path
) -> None:
    source = tmp_path / "conversations.db"
    asyncio.run(sqlite_session_source(source))
    result = cli("import-sdk", "--from", str(source), "--url", sqlite_url)
    assert result.exit_code == 1 and "--create" in result.output
    asyncio.run(migrate.upgrade(sqlite_url, tables=TableNames(prefix="other_")))
    result = cli("import-sdk", "--from", str(source), "--url", sqlite_url)
    assert result.exit_code == 1 and "agents-sqlalchemy db upgrade" in result.output
    assert "--create" in result.output and "create_tables" not in result.output
    missing = cli("import-sdk", "--from", str(tmp_path / "nope.db"), "--url", sqlite_url)
    assert missing.exit_code == 1 and "no SQLite database" in missing.output


async def sqlalchemy_session_source(url: str) -> dict[str, list[object]]:
    """Conversations written by the SDK's SQLAlchemySession, one reordered by created_at."""
    expected: dict[str, list[object]] = {}
    mysql = sdk_needs_tables_made(url)
    if mysql:
        await make_sdk_tables(url, "sdk_s", "sdk_m")
    for name in ("s1", "s2"):
        session = SDKSQLAlchemySession.from_url(
            name, url=url, create_tables=not mysql, sessions_table="sdk_s", messages_table="sdk_m"
        )
        await session.add_items([message(f"{name}-{i}") for i in range(5)])
        await session.add_items(ALL)
        if name == "s2":  # the SDK reads by created_at: make it disagree with id order
            messages = Table(
                "sdk_m",
                MetaData(),
                Column("id", Integer),
                Column("session_id", String),
                Column("created_at", DateTime),
            )
            base = datetime(2024, 1, 1)
            async with session.engine.begin() as conn:
                ids = await conn.execute(select(messages.c.id).where(messages.c.session_id == name))
                for n, (row_id,) in enumerate(ids.all()):
                    when = base - timedelta(seconds=n)
                    await conn.execute(
                        update(messages).where(messages.c.id == row_id).values(created_at=when)
                    )
        expected[name] = await session.get_items()
        await session.engine.dispose()
    assert expected["s2"][0] == ALL[-1]  # the reordering took
    return expected


async def test_import_sdk_from_sqlalchemy_session_tables_in_the_same_database(
    db_url: str,
) -> None:
    expected = await sqlalchemy_session_source(db_url)
    source_rows = await _source_rows(db_url)
    await migrate.upgrade(db_url)
    reports: list[tuple[int, int]] = []
    kwargs = {"sessions_table": "sdk_s", "messages_table": "sdk_m"}

    report = await import_sdk(db_url, db_url, progress=lambda *p: reports.append(p), **kwargs)
    count = 2 * (5 + len(ALL))
    assert (report.sessions, report.items, report.skipped_sessions) == (2, count, 0)
    assert reports[0] == (0, count) and reports[-1] == (count, count)
    assert [done for done, _ in reports] == sorted(done for done, _ in reports)
    assert await read_all(db_url, ["s1", "s2"]) == expected

    again = await import_sdk(db_url, db_url, **kwargs)
    assert (again.sessions, again.items, again.skipped_sessions) == (0, 0, 2)
    assert await read_all(db_url, ["s1", "s2"]) == expected
    assert await _source_rows(db_url) == source_rows


async def _source_rows(url: str) -> object:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return [
                (await conn.exec_driver_sql(f"SELECT * FROM {table} ORDER BY 1, 2")).all()
                for table in ("sdk_s", "sdk_m")
            ]
    finally:
        await engine.dispose()


# -- the wheel -----------------------------------------------------------------------------------


@pytest.mark.wheel
@pytest.mark.slow
def test_the_wheel_runs_its_migrations_from_an_empty_directory(tmp_path: Path, pg_url: str) -> None:
    """Build the wheel, install it (and its dependencies) in a fresh venv, migrate both DBs."""
    dist, venv, empty = tmp_path / "dist", tmp_path / "venv", tmp_path / "empty"
    empty.mkdir()
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)])
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(n for n in names if n.endswith("entry_points.txt"))
        assert (
            "agents-sqlalchemy = agents_sqlalchemy.cli:main" in archive.read(entry_points).decode()
        )
    for shipped in ("env.py", "script.py.mako", "versions/0001_initial.py"):
        assert f"agents_sqlalchemy/migrations/{shipped}" in names
    for shipped in ("templates/base.html", "templates/session.html", "static/style.css"):
        assert f"agents_sqlalchemy/ui/{shipped}" in names  # the session browser's assets
    run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    run([str(python), "-m", "pip", "install", "-q", f"{wheel}[postgres]"])

    script = venv / "bin" / "agents-sqlalchemy"
    where = run([str(python), "-c", "import agents_sqlalchemy; print(agents_sqlalchemy.__file__)"])
    assert where.startswith(str(venv)), where
    sqlite_file = empty / "agent.db"
    for url in (str(sqlite_file), pg_url):
        run([str(script), "db", "upgrade", "--url", url, "--prefix", "wheel_"], cwd=empty)
        run([str(script), "db", "check", "--url", url, "--prefix", "wheel_"], cwd=empty)
        assert asyncio.run(migrate.current(url, tables=TableNames(prefix="wheel_"))) == HEAD
    assert sorted(p.name for p in empty.iterdir()) == ["agent.db"]  # nothing else written
    assert rows(f"sqlite+aiosqlite:///{sqlite_file}", "SELECT * FROM wheel_version") == [(HEAD,)]


def run(command: list[str], cwd: Path | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    return done.stdout.strip()


def test_an_upgrade_to_a_revision_no_script_has_leaves_no_file(tmp_path: Path) -> None:
    """`db upgrade 9999` on a path with no database said the revision is unknown and left a
    new, empty SQLite file there, which later commands took for a database without tables."""
    path = tmp_path / "x.db"
    for revision in ("9999", "0003"):
        done = cli("db", "upgrade", revision, "--url", str(path))
        assert done.exit_code == 1 and f"no revision {revision!r}" in done.output, done.output
        assert not path.exists()
    assert cli("db", "upgrade", "0001", "--url", str(path)).exit_code == 0
    assert "upgraded from 0001 to" in cli("db", "upgrade", "+1", "--url", str(path)).output
