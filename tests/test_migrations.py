"""The shipped Alembic migrations, on SQLite and PostgreSQL, beside an app's own schema."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

import agents_sqlalchemy
from agents_sqlalchemy import (
    ConfigurationError,
    DatabaseError,
    SchemaError,
    SessionStore,
    TableNames,
)
from agents_sqlalchemy.app_env import LibraryTables
from agents_sqlalchemy.database.units import Database
from agents_sqlalchemy.migrations import api as migrate
from agents_sqlalchemy.migrations import config as scripts_config
from agents_sqlalchemy.models import build_models
from agents_sqlalchemy.tables import ROLES

from .support.app_alembic import alembic_cli, app_revision, make_app, objects, rows, table_names
from .support.items import message
from .support.servers import mariadb_admin
from .support.tables import raw_rows

# The shipped head, and the revision a newer release would add after it.
HEAD = scripts_config.head_revision()
NEXT = f"{int(HEAD) + 1:04d}"

ROOT = Path(__file__).resolve().parent.parent
HEAD = migrate.head_revision()


def custom_names(url: str, prefix: str = "chat_") -> TableNames:
    """Prefix, per-table overrides, and a schema where the database has schemas."""
    schema = "agents" if url.startswith("postgresql") else None
    return TableNames(prefix=prefix, items=f"{prefix}transcript", version="chat_rev", schema=schema)


async def drift(url: str, tables: TableNames) -> list[object]:
    """Alembic's own comparison of the database with the models, our tables only."""
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:

            def compare(sync_conn: object) -> list[object]:
                context = MigrationContext.configure(
                    sync_conn,  # type: ignore[arg-type]
                    opts={
                        "include_name": LibraryTables(tables).only_ours,
                        "include_schemas": tables.schema is not None,
                        "compare_type": True,
                        "compare_server_default": True,
                        "version_table": tables.version_table,
                        "version_table_schema": tables.schema,
                    },
                )
                return list(compare_metadata(context, build_models(tables).metadata))

            return await conn.run_sync(compare)
    finally:
        await engine.dispose()


def test_revision_ids_are_a_zero_padded_sequence() -> None:
    scripts = scripts_config.script_directory()
    revisions = [rev.revision for rev in scripts.walk_revisions("base", "heads")][::-1]
    assert revisions == [f"{n:04d}" for n in range(1, len(revisions) + 1)]
    assert scripts.get_heads() == [HEAD]


@pytest.mark.parametrize("kind", ["default", "custom"])
async def test_head_matches_the_models_without_drift(db_url: str, kind: str) -> None:
    tables = TableNames() if kind == "default" else custom_names(db_url)
    await agents_sqlalchemy.upgrade(db_url, tables=tables)
    assert await drift(db_url, tables) == []
    assert await migrate.current(db_url, tables=tables) == HEAD
    found = table_names(await objects(db_url))
    assert tables.version_table in found
    assert "alembic_version" not in found
    status = await migrate.check(db_url, tables=tables)
    assert (status.state, status.found) == ("current", (HEAD,))


async def structure(url: str, tables: TableNames) -> dict[str, object]:
    """Our tables as the database describes them: columns, keys, indexes and their options."""

    def describe(sync_conn: object) -> dict[str, object]:
        inspector = inspect(sync_conn)
        found: dict[str, object] = {}
        for role in ROLES:
            name, schema = tables.name(role), tables.schema
            if role == "version":
                continue
            found[name] = {
                "columns": {
                    column["name"]: (str(column["type"]), column["nullable"], column["default"])
                    for column in inspector.get_columns(name, schema=schema)
                },
                "pk": inspector.get_pk_constraint(name, schema=schema),
                "fks": sorted(map(repr, inspector.get_foreign_keys(name, schema=schema))),
                "unique": sorted(map(repr, inspector.get_unique_constraints(name, schema=schema))),
                "indexes": sorted(
                    repr({**index, "dialect_options": _plain(index.get("dialect_options", {}))})
                    for index in inspector.get_indexes(name, schema=schema)
                ),
            }
        return found

    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(describe)
    finally:
        await engine.dispose()


def _plain(options: dict[str, object]) -> dict[str, str]:
    """Reflected index options as text (SQLite gives its WHERE as a SQL construct)."""
    return {key: str(value) for key, value in options.items()}


@pytest.mark.parametrize("kind", ["default", "custom"])
async def test_head_is_what_create_all_makes_of_the_models(db_url: str, kind: str) -> None:
    """Stricter than compare_metadata: index predicates, defaults, key options too."""
    tables = TableNames() if kind == "default" else custom_names(db_url)
    await agents_sqlalchemy.upgrade(db_url, tables=tables)
    migrated = await structure(db_url, tables)
    await agents_sqlalchemy.downgrade(db_url, "base", tables=tables)
    engine = create_async_engine(db_url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(build_models(tables).metadata.create_all)
    finally:
        await engine.dispose()
    assert migrated == await structure(db_url, tables)
    if not db_url.startswith("mysql"):  # MySQL and MariaDB have no partial indexes
        assert "expires_at IS NOT NULL" in repr(migrated[tables.items_table])


async def test_create_tables_migrates_to_head_and_a_later_upgrade_is_a_no_op(db_url: str) -> None:
    tables = custom_names(db_url)
    async with SessionStore(db_url, tables=tables, create_tables=True) as store:
        await store.session("dev").add_items([message("from development")])
    assert await migrate.current(db_url, tables=tables) == HEAD
    assert await drift(db_url, tables) == []
    before = await objects(db_url)
    await agents_sqlalchemy.upgrade(db_url, tables=tables)
    assert await objects(db_url) == before
    async with SessionStore(db_url, tables=tables) as store:
        assert await store.session("dev").get_items() == [message("from development")]


@pytest.mark.slow
async def test_a_schema_at_head_is_checked_in_one_statement(db_url: str) -> None:
    """What a store opened per request pays each time: on a schema at head, one statement
    checks it (the version row, with a row-less select of each table), no read of the
    catalog through the inspector or Alembic. Anything else is told apart as before (the
    tests of a schema the library cannot use, below)."""
    async with SessionStore(db_url, create_tables=True) as store:
        await store.session("s").add_items([message("one")])
    engine = create_async_engine(db_url)
    db = Database(engine)
    try:
        async with engine.connect() as conn:  # the dialect's first-connect queries: before
            await conn.execute(text("SELECT 1"))
        executed: list[str] = []
        for sync in [engine.sync_engine, *([db._sync.engine] if db._sync is not None else [])]:
            event.listen(sync, "before_cursor_execute", lambda *args: executed.append(args[2]))
        await migrate.ensure_schema(db, TableNames(), create=False)
    finally:
        await db.close()
        await engine.dispose()
    assert len(executed) == 1 and "version_num" in executed[0], executed
    catalog = re.compile(r"sqlite_master|pg_catalog|information_schema|show |pragma", re.I)
    assert not catalog.search(executed[0])


def test_app_tables_rows_and_alembic_history_are_left_alone(db_url: str, tmp_path: Path) -> None:
    app = make_app(tmp_path, db_url)
    app_revision(app, "app1")
    assert alembic_cli(tmp_path / "alembic.ini", "upgrade", "head").returncode == 0
    asyncio.run(_insert_users(db_url))
    app_only = asyncio.run(objects(db_url))
    app_rows = _app_rows(db_url)
    assert app_rows[1] == [("app1",)]

    for tables in (TableNames(), custom_names(db_url)):
        asyncio.run(agents_sqlalchemy.upgrade(db_url, tables=tables))
        assert _app_rows(db_url) == app_rows
        assert app_only < asyncio.run(objects(db_url))
    for tables in (TableNames(), custom_names(db_url)):
        asyncio.run(agents_sqlalchemy.downgrade(db_url, "base", tables=tables))
        assert _app_rows(db_url) == app_rows
    # Everything of ours is gone (version tables included), everything else is as it was.
    remaining = asyncio.run(objects(db_url))
    assert remaining - app_only <= {("agents", "", "schema")}
    assert remaining >= app_only


async def _insert_users(url: str) -> None:
    engine = create_async_engine(url)
    async with engine.begin() as conn:
        await conn.execute(text("INSERT INTO app_users (id, name) VALUES (1, 'alice'), (2, 'bob')"))
    await engine.dispose()


def _app_rows(url: str) -> list[list[tuple[object, ...]]]:
    return [
        rows(url, "SELECT id, name FROM app_users ORDER BY id"),
        rows(url, "SELECT version_num FROM alembic_version"),
    ]


@pytest.mark.slow
def test_app_autogenerate_produces_no_operation_on_our_tables(db_url: str, tmp_path: Path) -> None:
    app = make_app(tmp_path, db_url)
    app_revision(app, "app1")
    assert alembic_cli(tmp_path / "alembic.ini", "upgrade", "head").returncode == 0
    asyncio.run(agents_sqlalchemy.upgrade(db_url))
    asyncio.run(agents_sqlalchemy.upgrade(db_url, tables=TableNames(prefix="chat_")))

    script = app_revision(app, "app2")
    body = script[script.index("def upgrade") :]
    assert "op." not in body, body
    assert alembic_cli(tmp_path / "alembic.ini", "upgrade", "head").returncode == 0
    # Without the helper the app's autogenerate would drop our tables: the test can fail.
    unfiltered = app_revision(app, "app3", "filters=off")
    assert "op.drop_table('agents_sqlalchemy_items')" in unfiltered
    assert "op.drop_table('chat_version')" in unfiltered


@pytest.mark.slow
def test_table_names_from_the_api_x_arguments_and_an_app_ini_section(
    db_url: str, tmp_path: Path
) -> None:
    schema = "agents" if db_url.startswith("postgresql") else ""
    section = (
        "\n[agents_sqlalchemy]\n"
        "script_location = agents_sqlalchemy:migrations\n"
        f"sqlalchemy.url = {db_url}\n"
        "prefix = ini_\n"
        "items_table = ini_log\n" + (f"schema = {schema}\n" if schema else "")
    )
    make_app(tmp_path, db_url, section=section)
    ini = tmp_path / "alembic.ini"

    api = TableNames(prefix="api_", sessions="api_conversations")
    asyncio.run(agents_sqlalchemy.upgrade(db_url, tables=api))
    from_ini = alembic_cli(ini, "-n", "agents_sqlalchemy", "upgrade", "head")
    assert from_ini.returncode == 0, from_ini.stderr
    x_args = ["-x", "prefix=x_", "-x", "search_index_table=x_words", "-x", "items_table=x_log"]
    from_x = alembic_cli(ini, "-n", "agents_sqlalchemy", *x_args, "upgrade", "head")
    assert from_x.returncode == 0, from_x.stderr

    ini_names = TableNames(prefix="ini_", items="ini_log", schema=schema or None)
    x_names = TableNames(prefix="x_", items="x_log", search_index="x_words", schema=schema or None)
    for tables in (api, ini_names, x_names):
        assert asyncio.run(migrate.current(db_url, tables=tables)) == HEAD
        assert asyncio.run(drift(db_url, tables)) == []
    found = table_names(asyncio.run(objects(db_url)))
    assert {"api_conversations", "api_items", "ini_log", "ini_sessions", "x_words"} <= found
    current = alembic_cli(ini, "-n", "agents_sqlalchemy", "-x", "prefix=x_", "current")
    assert HEAD in current.stdout
    bad = alembic_cli(ini, "-n", "agents_sqlalchemy", "-x", "prefx=typo", "current")
    assert bad.returncode != 0 and "prefx" in bad.stderr
    # Misspelt in a section, it made the default tables (no prefix) without a word.
    ini.write_text(
        ini.read_text() + section.replace("[agents_sqlalchemy]", "[typo]") + "prefx = t_\n"
    )
    misspelt = alembic_cli(ini, "-n", "typo", "upgrade", "head")
    assert (
        misspelt.returncode != 0
        and "unknown option 'prefx' in [typo]: 'prefix'?" in misspelt.stderr
    )


@pytest.mark.slow
def test_upgrades_racing_from_processes_all_succeed(db_url: str) -> None:
    code = (
        "import asyncio, sys\n"
        "from agents_sqlalchemy import SessionStore\n"
        "async def main():\n"
        "    async with SessionStore(sys.argv[1], create_tables=True) as store:\n"
        "        await store.session(sys.argv[2]).add_items([{'role': 'user', 'content': 'x'}])\n"
        "asyncio.run(main())\n"
    )
    upgraders = [
        subprocess.Popen(
            [sys.executable, "-m", "agents_sqlalchemy.cli", "db", "upgrade", "--url", db_url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    creators = [
        subprocess.Popen([sys.executable, "-c", code, db_url, f"s{i}"], stderr=subprocess.PIPE)
        for i in range(3)
    ]
    said = []
    for process in [*upgraders, *creators]:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        said.append(out or "")
    assert asyncio.run(migrate.current(db_url)) == HEAD
    # One migrated (a command, or a store): the others found it done, and say so.
    assert sum("upgraded from none" in line for line in said) <= 1, said
    assert rows(db_url, "SELECT count(*) FROM agents_sqlalchemy_items") == [(3,)]


def test_a_migration_committing_while_the_status_is_read_is_seen_done(tmp_path: Path) -> None:
    """The status reads the tables, then the version row, then (none being there) whether
    the view is: a migrator committing just before that last read showed its view alone,
    read as "untracked", and a store racing `db upgrade` refused to open. The migration
    here commits from another connection as the view is looked for."""
    url, tables = f"sqlite:///{tmp_path / 'race.db'}", TableNames()
    reader, migrator = create_engine(url), create_engine(url)
    migrated = False

    @event.listens_for(reader, "before_cursor_execute")
    def commit_a_migration(*args: object) -> None:
        nonlocal migrated
        statement = str(args[2])
        if not migrated and "view" in statement.lower() and "sqlite_master" in statement:
            migrated = True
            with migrator.begin() as other:
                migrate.upgrade_sync(other, tables)

    try:
        with reader.connect() as connection:
            status = migrate.schema_status(connection, tables)
    finally:
        reader.dispose()
        migrator.dispose()
    assert migrated and status.state == "current", status


def test_upgrade_through_a_synchronous_connection(tmp_path: Path) -> None:
    """The pysqlite path a worker thread would take: same scripts, same lock, same result."""
    engine = create_engine(f"sqlite:///{tmp_path / 'sync.db'}")
    try:
        with engine.begin() as connection:
            migrate.upgrade_sync(connection, TableNames(prefix="sync_"))
        with engine.connect() as connection:
            status = migrate.schema_status(connection, TableNames(prefix="sync_"))
    finally:
        engine.dispose()
    assert status.at_head


# -- a schema the library cannot use says what was found, what is expected, what to run -------


async def schema_error(url: str, tables: TableNames, *, create: bool = False) -> str:
    async with SessionStore(url, tables=tables, create_tables=create) as store:
        with pytest.raises(SchemaError) as raised:
            await store.session("s").get_items()
    return str(raised.value)


@pytest.fixture
def newer_scripts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The shipped scripts plus a revision after their head, as a newer release would ship
    them."""
    scripts = tmp_path / "newer"
    shutil.copytree(
        scripts_config.SCRIPT_DIR, scripts, ignore=shutil.ignore_patterns("__pycache__")
    )
    first = (scripts / "versions" / "0001_initial.py").read_text()
    second = re.sub(r'revision: str = "0001"', f'revision: str = "{NEXT}"', first)
    second = second.replace(
        "down_revision: str | Sequence[str] | None = None", f'down_revision = "{HEAD}"'
    )
    second = second[: second.index("def upgrade")]
    second += (
        "def upgrade() -> None:\n"
        "    op.add_column(name('sessions'), sa.Column('tag', sa.Text()), schema=schema())\n\n\n"
        "def downgrade() -> None:\n"
        "    op.drop_column(name('sessions'), 'tag', schema=schema())\n"
    )
    (scripts / "versions" / f"{NEXT}_tag.py").write_text(second)
    monkeypatch.setattr(scripts_config, "SCRIPT_DIR", scripts)
    scripts_config.script_directory.cache_clear()
    yield
    scripts_config.script_directory.cache_clear()


async def test_missing_schema_names_none_head_and_the_command(db_url: str) -> None:
    tables = custom_names(db_url)
    message_ = await schema_error(db_url, tables)
    assert f"revision found: none, expected: {HEAD}" in message_
    assert "agents-sqlalchemy db upgrade --url" in message_
    assert "--prefix chat_" in message_
    assert "--items-table chat_transcript --version-table chat_rev" in message_
    if tables.schema:
        assert "--schema agents" in message_


async def test_a_schema_behind_is_reported_then_upgraded_by_create_tables(
    db_url: str, newer_scripts: None
) -> None:
    tables = custom_names(db_url)
    await agents_sqlalchemy.upgrade(db_url, HEAD, tables=tables)
    assert f"at revision {HEAD}, expected {NEXT}: run `agents-sqlalchemy db upgrade" in (
        await schema_error(db_url, tables)
    )
    async with SessionStore(db_url, tables=tables, create_tables=True) as store:
        await store.session("s").add_items([message("after the upgrade")])
    assert await migrate.current(db_url, tables=tables) == NEXT


async def test_a_schema_ahead_is_reported_and_left_alone(db_url: str) -> None:
    tables = custom_names(db_url)
    await agents_sqlalchemy.upgrade(db_url, tables=tables)
    await _set_version(db_url, tables, NEXT)
    for create in (False, True):
        error = await schema_error(db_url, tables, create=create)
        assert f"at revision {NEXT}, newer than this version of agents_sqlalchemy" in error
        assert f"expects ({HEAD})" in error and "pip install -U openai-agents-sqlalchemy" in error
    assert await migrate.current(db_url, tables=tables) == NEXT


async def test_an_unknown_revision_is_reported_and_left_alone(db_url: str) -> None:
    await agents_sqlalchemy.upgrade(db_url)
    await _set_version(db_url, TableNames(), "cafebabe")
    for create in (False, True):
        error = await schema_error(db_url, TableNames(), create=create)
        assert "holds revision cafebabe, which is not one of agents_sqlalchemy's" in error
        assert f"expected {HEAD}" in error
    assert await migrate.current(db_url) == "cafebabe"


async def test_untracked_tables_are_reported_with_the_stamp_command(db_url: str) -> None:
    await agents_sqlalchemy.upgrade(db_url)
    await _set_version(db_url, TableNames(), None)
    error = await schema_error(db_url, TableNames(), create=True)
    assert f"holds no revision (expected {HEAD})" in error
    assert "agents-sqlalchemy db stamp --url" in error
    await migrate.stamp(db_url, tables=TableNames())
    assert (await migrate.check(db_url)).at_head


async def test_a_version_table_of_other_tables_is_reported(db_url: str) -> None:
    await agents_sqlalchemy.upgrade(db_url)
    error = await schema_error(db_url, TableNames(sessions="s2", items="m2"), create=True)
    assert f"is at revision {HEAD} (expected {HEAD}) but tables s2, m2 are missing" in error


async def test_another_sets_version_table_at_head_is_refused_by_every_command(
    db_url: str,
) -> None:
    """Tables named to use set a's version table (missing, so "incomplete"): upgrade said
    there was nothing to do, stamp moved a's revision, and downgrade ran a's scripts."""
    ours, other = TableNames(prefix="a_"), TableNames(prefix="b_", version="a_version")
    async with SessionStore(db_url, create_tables=True, tables=ours) as store:
        await store.session("s").add_items([{"role": "user", "content": "a's"}])
    for command in (
        migrate.upgrade(db_url, tables=other),
        migrate.stamp(db_url, "0001", tables=other),
        migrate.downgrade(db_url, "base", tables=other),
    ):
        with pytest.raises(agents_sqlalchemy.SchemaError, match=r"b_sessions.* are missing"):
            await command
    assert (await migrate.check(db_url, tables=ours)).at_head
    async with SessionStore(db_url, tables=ours) as store:
        assert await store.session("s").get_items() == [{"role": "user", "content": "a's"}]


async def test_sqlite_table_names_differing_only_in_case_are_the_same_tables(
    tmp_path: Path,
) -> None:
    """SQLite compares table names without case: Alembic found `Chat_version` for the
    prefix `chat_` while the status looked for `chat_sessions` case by case (at head, with
    every table "missing"), and a downgrade then ran on tables it said were not there."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'cased.db'}"
    async with SessionStore(url, create_tables=True, tables=TableNames(prefix="Chat_")) as store:
        await store.session("s").add_items([{"role": "user", "content": "kept"}])
    status = await migrate.check(url, tables=TableNames(prefix="chat_"))
    assert status.state == "current", status.describe()
    async with SessionStore(url, tables=TableNames(prefix="chat_")) as store:
        assert await store.session("s").get_items() == [{"role": "user", "content": "kept"}]


async def test_a_dropped_table_is_reported_and_nothing_recreates_it_unasked(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        await store.session("s").add_items([{"role": "user", "content": "kept"}])
    engine = create_async_engine(db_url)
    async with engine.begin() as conn:
        await conn.execute(text("DROP TABLE agents_sqlalchemy_search_index"))
    await engine.dispose()
    error = await schema_error(db_url, TableNames(), create=True)
    assert "but tables agents_sqlalchemy_search_index are missing" in error
    assert "restore them from a backup" in error
    engine = create_async_engine(db_url)
    async with engine.connect() as conn:  # create_tables=True recreated nothing, lost nothing
        assert not await conn.run_sync(
            lambda sync: inspect(sync).has_table("agents_sqlalchemy_search_index")
        )
        count = await conn.execute(text("SELECT count(*) FROM agents_sqlalchemy_items"))
        assert count.scalar_one() == 1
    await engine.dispose()


async def _set_version(url: str, tables: TableNames, revision: str | None) -> None:
    table = f"{tables.schema}.{tables.version_table}" if tables.schema else tables.version_table
    engine = create_async_engine(url)
    async with engine.begin() as conn:
        await conn.execute(text(f"DELETE FROM {table}"))
        if revision:
            await conn.execute(text(f"INSERT INTO {table} VALUES (:r)"), {"r": revision})
    await engine.dispose()


async def test_mariadb_migrations_do_not_log_that_primary_key_names_are_ignored(
    mariadb_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """MariaDB names every primary key PRIMARY and warns of each name it ignores; asyncmy
    logged that line for every table a first `create_tables` made (nine in all). The
    migrations drop that one line; the driver's other warnings still reach the logs."""
    caplog.set_level(logging.WARNING, logger="asyncmy")
    tables = custom_names(mariadb_url, "quiet_")
    async with SessionStore(mariadb_url, tables=tables, create_tables=True) as store:
        await store.session("s").add_items([message("hello")])
    await agents_sqlalchemy.downgrade(mariadb_url, "base", tables=tables)
    await agents_sqlalchemy.upgrade(mariadb_url, tables=tables)
    assert not [r for r in caplog.records if r.name == "asyncmy"]
    db = Database(mariadb_url)
    try:
        create = "CREATE TABLE quiet_other (id INT, CONSTRAINT pk_other PRIMARY KEY (id))"
        await db.write(lambda conn: conn.exec_driver_sql(create))
        await db.write(lambda conn: conn.exec_driver_sql("DROP TABLE quiet_other"))
    finally:
        await db.close()
    said = [r.getMessage() for r in caplog.records if r.name == "asyncmy"]
    assert said == ["Name 'pk_other' ignored for PRIMARY key."]


# -- downgrades that would lose what cannot be had back are refused --------------------------


async def test_a_downgrade_below_owner_keys_is_refused_while_keys_are_kept(db_url: str) -> None:
    """Owner keys wrap every sealed item's key since 0002: a downgrade to 0001 dropped them,
    and every sealed item stayed unreadable even after upgrading again. It is refused, with
    nothing changed, while keys are kept; a downgrade to base (dropping the items) runs."""
    tables, key = custom_names(db_url), "a passphrase for owner keys"
    async with SessionStore(db_url, tables=tables, create_tables=True, key=key) as store:
        await store.session("a", user_id="alice").add_items([message("sealed for alice")])
        await store.session("b").add_items([message("sealed for b")])
    before = await objects(db_url)
    for target in ("0001", "-1"):
        with pytest.raises(SchemaError) as refused:
            await agents_sqlalchemy.downgrade(db_url, target, tables=tables)
        assert f"{tables.name('owner_keys')} holds 2 owner key(s)" in str(refused.value)
        assert "Nothing was changed" in str(refused.value)
        assert "users export" in str(refused.value)
    assert await objects(db_url) == before
    assert await migrate.current(db_url, tables=tables) == HEAD
    async with SessionStore(db_url, tables=tables, key=key) as store:
        assert await store.session("a").get_items() == [message("sealed for alice")]
        assert await store.session("b").get_items() == [message("sealed for b")]
        await store.erase_user("alice")
        await store.delete_session("b")
    await agents_sqlalchemy.downgrade(db_url, "0001", tables=tables)  # no key left to lose
    assert await migrate.current(db_url, tables=tables) == "0001"
    await agents_sqlalchemy.upgrade(db_url, tables=tables)
    async with SessionStore(db_url, tables=tables, key=key) as store:
        await store.session("a").add_items([message("again")])
    await agents_sqlalchemy.downgrade(db_url, "base", tables=tables)
    assert await migrate.current(db_url, tables=tables) is None


# -- an upgrade over tables at our names is refused before its first statement ---------------


async def _execute(url: str, *statements: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            for statement in statements:
                await conn.execute(text(statement))
    finally:
        await engine.dispose()


APP_BRANCHES = "CREATE TABLE app_branches (id INTEGER PRIMARY KEY, app_data VARCHAR(20))"
SDK_TABLES = (
    "CREATE TABLE agent_sessions (session_id VARCHAR(255) PRIMARY KEY, "
    "created_at TIMESTAMP NULL, updated_at TIMESTAMP NULL)",
    "CREATE TABLE agent_messages (id INTEGER PRIMARY KEY, session_id VARCHAR(255), "
    "message_data TEXT, created_at TIMESTAMP NULL)",
)


@pytest.mark.parametrize(
    ("setup", "tables", "said"),
    [
        ((APP_BRANCHES,), TableNames(prefix="app_"), "tables app_branches exist in"),
        (
            ("CREATE VIEW app_messages_view AS SELECT 1 AS x",),
            TableNames(prefix="app_"),
            "app_messages_view exist",
        ),
        (SDK_TABLES, TableNames(sessions="agent_sessions", items="agent_messages"), "import-sdk"),
    ],
    ids=["app-table", "app-view", "sdk-tables"],
)
async def test_an_upgrade_over_tables_at_our_names_is_refused_changing_nothing(
    db_url: str, setup: tuple[str, ...], tables: TableNames, said: str
) -> None:
    """On MariaDB (DDL not transactional) such an upgrade made the tables before the one that
    was there, then failed saying nothing was changed: half a schema, "untracked", that a
    store advised to stamp. The upgrade now reads the state first and refuses."""
    await _execute(db_url, *setup)
    before = await objects(db_url)
    for attempt in ("upgrade", "create_tables"):
        with pytest.raises(SchemaError) as refused:
            if attempt == "upgrade":
                await agents_sqlalchemy.upgrade(db_url, tables=tables)
            else:
                async with SessionStore(db_url, tables=tables, create_tables=True) as store:
                    await store.session("s").get_items()
        message_ = str(refused.value)
        assert said in message_ and "stamp" not in message_, message_
        assert await objects(db_url) == before
    assert (await migrate.check(db_url, tables=tables)).state in ("untracked", "foreign")


async def test_a_whole_untracked_set_is_still_refused_with_the_stamp_advice(db_url: str) -> None:
    await agents_sqlalchemy.upgrade(db_url)
    await _set_version(db_url, TableNames(), None)
    with pytest.raises(SchemaError, match="agents-sqlalchemy db stamp"):
        await agents_sqlalchemy.upgrade(db_url)
    await migrate.stamp(db_url)
    assert (await migrate.check(db_url)).at_head


async def test_a_mariadb_upgrade_failing_halfway_does_not_say_nothing_changed(
    mariadb_url: str,
) -> None:
    """MariaDB commits each DDL statement: a user who may create tables but not views
    fails at 0001's view, its tables made. The error says so, and where to look."""
    database = make_url(mariadb_url).database
    user = f"noview_{uuid.uuid4().hex[:8]}"
    await mariadb_admin(mariadb_url, f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'")
    try:
        await mariadb_admin(
            mariadb_url,
            f"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER, REFERENCES "
            f"ON `{database}`.* TO '{user}'@'%'",
        )
        limited = make_url(mariadb_url).set(username=user, password="pw")
        with pytest.raises(DatabaseError) as failed:
            await agents_sqlalchemy.upgrade(limited.render_as_string(hide_password=False))
    finally:
        await mariadb_admin(mariadb_url, f"DROP USER '{user}'@'%'")
    assert "nothing was changed" not in str(failed.value)
    assert "what they did before stays" in str(failed.value)
    assert (await migrate.check(mariadb_url)).state == "untracked"


@pytest.mark.parametrize("stopped", ["after the table", "after the index"])
async def test_a_mariadb_upgrade_stopped_halfway_goes_on_when_run_again(
    mariadb_url: str, stopped: str
) -> None:
    """MariaDB commits each DDL statement: an upgrade to 0002 killed after it made the owner
    keys table, its version still 0001, failed ever after ("Table ... already exists")."""
    tables = TableNames(prefix="half_")
    await agents_sqlalchemy.upgrade(mariadb_url, "0001", tables=tables)
    database = make_url(mariadb_url).database
    owner_keys = f"`{database}`.{tables.name('owner_keys')}"
    await mariadb_admin(
        mariadb_url,
        f"CREATE TABLE {owner_keys} (key_id VARCHAR(64) NOT NULL PRIMARY KEY, "
        "owner VARCHAR(64) NOT NULL, kept BLOB, kek_id VARCHAR(64), replaces VARCHAR(64), "
        "created_at DATETIME(6) NOT NULL, retired_at DATETIME(6)) "
        "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
    )
    if stopped == "after the index":
        index = f"ix_{tables.name('owner_keys')}_owner"
        await mariadb_admin(mariadb_url, f"CREATE INDEX {index} ON {owner_keys} (owner)")
    assert (await migrate.check(mariadb_url, tables=tables)).state == "behind"
    await agents_sqlalchemy.upgrade(mariadb_url, tables=tables)
    assert (await migrate.check(mariadb_url, tables=tables)).state == "current"
    assert await drift(mariadb_url, tables) == []  # the index, and names that do not pad
    async with SessionStore(mariadb_url, tables=tables, key=os.urandom(32)) as store:
        session = store.session("s", user_id="alice")
        await session.add_items([message("turn 1")])
        for name in ("b", "b "):
            await session.switch_to_branch("main")
            await session.create_branch_from_turn(1, name)
            await session.add_items([message(f"on {name!r}")])
        assert {b["branch_id"] for b in await session.list_branches()} >= {"b", "b "}
    await agents_sqlalchemy.downgrade(mariadb_url, "base", tables=tables)


# -- revisions the shipped scripts do not have ------------------------------------------------


async def test_a_revision_the_scripts_lack_gets_the_stores_advice(db_url: str) -> None:
    """Alembic's bare "Can't locate revision identified by '0003'" came out as a
    ConfigurationError, whether the target or the database's revision was unknown."""
    tables = TableNames(prefix="rev_")
    await agents_sqlalchemy.upgrade(db_url, tables=tables)
    for target in (NEXT, "abcd"):
        for run in (agents_sqlalchemy.upgrade, agents_sqlalchemy.downgrade, migrate.stamp):
            with pytest.raises(SchemaError, match=r"pip install -U openai-agents-sqlalchemy"):
                await run(db_url, target, tables=tables)
    assert await migrate.current(db_url, tables=tables) == HEAD
    await _set_version(db_url, tables, NEXT)  # migrated by a newer release
    calls = [
        agents_sqlalchemy.upgrade(db_url, tables=tables),
        agents_sqlalchemy.downgrade(db_url, "-1", tables=tables),
        agents_sqlalchemy.downgrade(db_url, "base", tables=tables),
        migrate.stamp(db_url, "head", tables=tables),
    ]
    for call in calls:
        with pytest.raises(SchemaError) as refused:
            await call
        assert f"at revision {NEXT}, newer than this version" in str(refused.value)
        assert "pip install -U openai-agents-sqlalchemy" in str(refused.value)
    assert await migrate.current(db_url, tables=tables) == NEXT


@pytest.mark.dialects("postgresql", "mariadb")
async def test_a_schema_that_does_not_exist_yet_reads_as_missing_and_is_created(
    db_url: str,
) -> None:
    """On MariaDB (a schema is a database) check() and create_tables=True failed with
    "Unknown database" where the migrations would have created it, as on PostgreSQL."""
    schema = f"new_{uuid.uuid4().hex[:12]}"
    tables = TableNames(prefix="fresh_", schema=schema)
    try:
        status = await migrate.check(db_url, tables=tables)
        assert (status.state, status.found) == ("missing", ())
        async with SessionStore(db_url, tables=tables, create_tables=True) as store:
            await store.session("s").add_items([message("in a new schema")])
        assert (await migrate.check(db_url, tables=tables)).at_head
        async with SessionStore(db_url, tables=tables) as store:
            assert await store.session("s").get_items() == [message("in a new schema")]
    finally:
        if db_url.startswith("mysql"):
            await mariadb_admin(db_url, f"DROP DATABASE IF EXISTS `{schema}`")


async def test_mariadb_migrations_into_a_schema_do_not_log_that_it_exists(
    mariadb_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Each migration runs CREATE DATABASE IF NOT EXISTS for the schema; asyncmy logged
    "Can't create database '...'; database exists" for it on every upgrade and downgrade."""
    caplog.set_level(logging.WARNING, logger="asyncmy")
    schema = f"quiet_{uuid.uuid4().hex[:12]}"
    tables = TableNames(prefix="quiet_", schema=schema)
    try:
        async with SessionStore(mariadb_url, tables=tables, create_tables=True) as store:
            await store.session("s").add_items([message("hello")])
        await agents_sqlalchemy.downgrade(mariadb_url, "base", tables=tables)
        await agents_sqlalchemy.upgrade(mariadb_url, tables=tables)
        await agents_sqlalchemy.upgrade(mariadb_url, tables=tables)
    finally:
        await mariadb_admin(mariadb_url, f"DROP DATABASE IF EXISTS `{schema}`")
    assert [r.getMessage() for r in caplog.records if r.name == "asyncmy"] == []


RACER = (
    "import asyncio, sys, time\n"
    "from agents_sqlalchemy import TableNames, upgrade\n"
    "url, prefix, schema, start = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])\n"
    "time.sleep(max(0.0, start - time.time()))\n"
    "asyncio.run(upgrade(url, tables=TableNames(prefix=prefix, schema=schema)))\n"
)


@pytest.mark.slow
@pytest.mark.dialects("postgresql")
def test_upgrades_of_other_table_sets_into_one_new_schema_all_succeed(db_url: str) -> None:
    """Each table set has its own lock: two of them running CREATE SCHEMA IF NOT EXISTS at
    once failed on pg_namespace's unique index ("duplicate key value")."""
    for round_ in range(3):
        schema, start = f"race_{round_}", time.time() + 3
        racers = [
            subprocess.Popen(
                [sys.executable, "-c", RACER, db_url, f"p{i}_", schema, str(start)],
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(4)
        ]
        for racer in racers:
            _, err = racer.communicate(timeout=120)
            assert racer.returncode == 0, err
        for i in range(4):
            tables = TableNames(prefix=f"p{i}_", schema=schema)
            assert asyncio.run(migrate.check(db_url, tables=tables)).at_head


@pytest.mark.dialects("sqlite", "postgresql")
async def test_an_upgrade_through_an_autocommit_engine_is_one_transaction(db_url: str) -> None:
    """Through an app's engine made in AUTOCOMMIT each statement committed alone (and the
    migrators' transaction-scoped lock was released at once): a failure halfway, here an
    index name an app's table already uses, left the tables made before it."""
    tables = TableNames(prefix="ac_")
    await _execute(
        db_url,
        "CREATE TABLE app_log (id INTEGER PRIMARY KEY, at INTEGER)",
        f"CREATE INDEX ix_{tables.sessions_table}_updated_at_id ON app_log (at, id)",
    )
    before = await objects(db_url)
    engine = create_async_engine(db_url, isolation_level="AUTOCOMMIT")
    try:
        with pytest.raises(DatabaseError, match="nothing was changed"):
            await agents_sqlalchemy.upgrade(engine, tables=tables)
        assert await objects(db_url) == before
        assert (await migrate.check(engine, tables=tables)).state == "missing"
        async with engine.connect() as conn:  # the app's engine is as it was
            assert conn.dialect.detect_autocommit_setting(
                (await conn.get_raw_connection()).dbapi_connection
            )
    finally:
        await engine.dispose()


def test_offline_sql_for_a_mariadb_url_runs_on_mariadb_and_mysql_urls_say_so(
    mariadb_url: str,
) -> None:
    """Offline, nothing tells MariaDB from MySQL but the URL: `mysql://` got MySQL's
    utf8mb4_0900_bin, which MariaDB refuses, and nothing said to give `mariadb://`."""
    from click.testing import CliRunner

    from agents_sqlalchemy.cli import app

    url = make_url(mariadb_url)
    for scheme in ("mysql", "mariadb"):
        offline = url.set(drivername=scheme).render_as_string(hide_password=False)
        result = CliRunner().invoke(app, ["db", "upgrade", "--sql", "--url", offline])
        assert result.exit_code == 0, result.output
        assert ("give a mariadb:// URL" in result.stderr) == (scheme == "mysql")
    assert "mariadb://" in CliRunner().invoke(app, ["db", "upgrade", "--help"]).output
    statements = [s.strip() for s in result.stdout.split(";\n") if s.strip()]
    assert any("utf8mb4_nopad_bin" in statement for statement in statements)

    async def run_them() -> None:
        engine = create_async_engine(mariadb_url)
        try:
            async with engine.connect() as conn:
                for statement in statements:
                    await conn.exec_driver_sql(statement)
                await conn.commit()
        finally:
            await engine.dispose()

    asyncio.run(run_them())
    assert asyncio.run(migrate.check(mariadb_url)).at_head


def test_the_docs_state_the_limit_on_table_names_the_code_enforces() -> None:
    """README and the docs' index said "any table names"; TableNames takes plain
    identifiers of at most MAX_NAME_LENGTH characters."""
    limit = agents_sqlalchemy.tables.MAX_NAME_LENGTH
    TableNames(prefix="p_", sessions="s" * limit)
    for bad in ("s" * (limit + 1), "1st", "my-sessions"):
        with pytest.raises(agents_sqlalchemy.ConfigurationError):
            TableNames(sessions=bad)
    for page in ("README.md", "docs/index.md", "docs/guide/migrations.md"):
        text_ = (ROOT / page).read_text()
        assert "any table names" not in text_, page
        assert f"at most {limit} characters" in text_, page


async def test_the_api_makes_no_file_where_a_sqlite_database_is_not(tmp_path: Path) -> None:
    """`check`, `current`, `stamp` and `downgrade` on a path with no database each left a
    new, empty SQLite file there; only `upgrade` makes one, with the tables."""
    path = tmp_path / "nowhere.db"
    status = await migrate.check(path)
    assert (status.state, status.found) == ("missing", ())
    assert await migrate.current(path) is None
    for refused in (migrate.stamp(path), migrate.downgrade(path, "base")):
        with pytest.raises(SchemaError, match="holds no tables of agents_sqlalchemy"):
            await refused
    assert not path.exists()
    await agents_sqlalchemy.upgrade(path)
    assert (await migrate.check(path)).at_head


@pytest.mark.dialects("mariadb")
async def test_mariadb_branch_names_differing_by_trailing_spaces_and_downgrades(
    db_url: str,
) -> None:
    """Branches "b" and "b " of one session: a downgrade to base failed on the collation
    it changed back first (a duplicate key, though the table goes right after), and one
    to 0001 raised the server's error; now base runs and 0001 is refused, changing nothing."""
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("s")
        await session.add_items([message("one")])
        for name in ("b", "b "):
            await session.switch_to_branch("main")
            await session.create_branch_from_turn(1, name)
            await session.add_items([message(f"on {name!r}")])
    with pytest.raises(SchemaError, match="differ only by trailing spaces"):
        await migrate.downgrade(db_url, "0001")
    assert (await migrate.check(db_url)).at_head
    # The refusal's advice works: a deleted branch keeps its name, so deleting one of the
    # two is not enough (it advised so), and deleting the session is.
    async with SessionStore(db_url) as store:
        session = store.session("s")
        await session.switch_to_branch("main")
        await session.delete_branch("b ")
        with pytest.raises(SchemaError, match="a deleted branch keeps its name"):
            await migrate.downgrade(db_url, "0001")
        await store.delete_session("s")
    await migrate.downgrade(db_url, "0001")
    assert (await migrate.check(db_url)).found == ("0001",)
    await migrate.downgrade(db_url, "base")
    assert (await migrate.check(db_url)).state == "missing"


async def test_a_refusal_behind_pgbouncer_names_the_url_as_given(pgbouncer_url: str) -> None:
    """The command a refusal advised named the engine's rewritten URL, without
    `pgbouncer=true`, and failed as advised."""
    await migrate.upgrade(pgbouncer_url)
    await _set_version(pgbouncer_url.split("?")[0], TableNames(), None)
    with pytest.raises(SchemaError, match=r"db stamp --url '[^']*pgbouncer=true'") as caught:
        await migrate.upgrade(pgbouncer_url)
    assert "prepared_statement_cache_size" not in str(caught.value)


@pytest.mark.dialects("mariadb")
async def test_mariadb_prefixes_differing_only_in_case_are_refused_before_any_change(
    db_url: str,
) -> None:
    """Table names there tell case apart, InnoDB's foreign key names do not: a second set
    whose prefix differed in case only failed at its first foreign key (errno 121), leaving
    its version table behind, and failed so again at each try."""
    await migrate.upgrade(db_url, tables=TableNames(prefix="cased_"))
    twin = TableNames(prefix="Cased_")
    with pytest.raises(SchemaError, match="differ from this library's names only in case"):
        await migrate.upgrade(db_url, tables=twin)
    with pytest.raises(SchemaError, match="only in case"):
        async with SessionStore(db_url, create_tables=True, tables=twin) as store:
            await store.session("s").get_items()
    engine = create_async_engine(db_url)
    async with engine.connect() as conn:
        names = await conn.run_sync(lambda sync: inspect(sync).get_table_names())
    await engine.dispose()
    assert not [name for name in names if name.startswith("Cased_")]
    assert (await migrate.check(db_url, tables=TableNames(prefix="cased_"))).at_head


async def test_a_stamp_whose_tables_are_not_there_is_refused(db_url: str) -> None:
    """`db stamp head` on the tables of 0001 was taken: the owner keys table was missing
    from then on, and every command (upgrade, stamp 0001, downgrade) refused the schema,
    leaving an edit of the version table by hand as the only way out."""
    await migrate.upgrade(db_url, "0001")
    with pytest.raises(SchemaError, match=r"refusing to stamp head: its tables .*owner_keys"):
        await migrate.stamp(db_url, "head")
    assert (await migrate.check(db_url)).found == ("0001",)
    await migrate.upgrade(db_url)
    assert (await migrate.check(db_url)).at_head


async def test_a_schema_on_sqlite_that_names_no_attached_database_is_a_configuration_error(
    tmp_path: Path,
) -> None:
    """It failed on a missing `newschema.sqlite_master`, a `DatabaseError` of the
    migrations, and the store's the same."""
    names = TableNames(prefix="ns_", schema="newschema")
    with pytest.raises(ConfigurationError, match="no database of that name is attached"):
        await migrate.upgrade(tmp_path / "a.db", tables=names)
    with pytest.raises(ConfigurationError, match="Leave the schema unset on SQLite"):
        async with SessionStore(tmp_path / "b.db", create_tables=True, tables=names) as store:
            await store.session("s").get_items()


async def test_a_stamp_back_from_head_on_head_tables_is_refused(db_url: str) -> None:
    """`db stamp 0001` on a schema at head was taken: every upgrade then failed making the
    owner keys table, which was there, while a store said to run an upgrade."""
    await migrate.upgrade(db_url)
    with pytest.raises(SchemaError, match=r"refusing to stamp 0001: .* those of 0002 \(head\)"):
        await migrate.stamp(db_url, "0001")
    assert (await migrate.check(db_url)).at_head
    await migrate.downgrade(db_url, "0001")
    await migrate.stamp(db_url, "0001")  # on 0001's tables, a stamp of what is there
    await migrate.upgrade(db_url)
    assert (await migrate.check(db_url)).at_head


async def test_migrators_of_two_mariadb_databases_do_not_wait_for_each_other(
    mariadb_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MySQL's named locks are the server's: a migrator of one database held the lock of
    every database's tables of the same names, and another database's upgrade waited for
    it (up to 300 s), then failed."""
    monkeypatch.setattr(scripts_config, "MYSQL_LOCK_WAIT", 1)
    name = f"t_{uuid.uuid4().hex[:16]}"
    await mariadb_admin(mariadb_url, f"CREATE DATABASE {name}")
    other = create_async_engine(make_url(mariadb_url).set(database=name))
    try:
        async with other.connect() as conn:  # a migrator of the other database, under way
            await conn.run_sync(scripts_config._take_mysql_lock, TableNames())
            await migrate.upgrade(mariadb_url)
        assert (await migrate.check(mariadb_url)).at_head
    finally:
        await other.dispose()
        await mariadb_admin(mariadb_url, f"DROP DATABASE {name}")


async def test_a_stamp_back_on_untracked_head_tables_is_refused(db_url: str) -> None:
    """Head's tables made by an app's `create_all` (no version row) took `stamp 0001`:
    every upgrade then failed making the owner keys table, which was there. Stamped head,
    they had no messages view (create_all makes none), and nothing said so."""
    engine = create_async_engine(db_url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(build_models(TableNames()).metadata.create_all)
    finally:
        await engine.dispose()
    with pytest.raises(SchemaError, match=r"those of 0002 \(head\).*stamp 0002"):
        await migrate.stamp(db_url, "0001")
    assert (await migrate.check(db_url)).state == "untracked"
    await migrate.stamp(db_url, "head")
    assert (await migrate.check(db_url)).at_head
    async with SessionStore(db_url) as store:
        await store.session("s").add_items([message("seen in the view")])
    view = "SELECT session_id, message_data FROM agents_sqlalchemy_messages_view"
    assert [row[0] for row in await raw_rows(db_url, view)] == ["s"]
