"""The library's Alembic migrations, run from Python: upgrade, downgrade, stamp, inspect.

The revisions live in `agents_sqlalchemy/migrations` (inside the wheel) and keep their own
version table (`TableNames.version_table`), never the app's `alembic_version`.

Example::

    from agents_sqlalchemy import TableNames, check, upgrade

    await upgrade("postgresql://app@db/app", tables=TableNames(prefix="chat_"))
    status = await check("postgresql://app@db/app", tables=TableNames(prefix="chat_"))
    status.at_head                     # True
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.operations import Operations
from alembic.runtime.migration import MigrationContext
from alembic.util.exc import CommandError
from sqlalchemy.engine import URL, Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ..aio import FairLock
from ..database.engines import MYSQL, EngineSource, normalize_url, sqlite_file
from ..database.units import Database, database_errors, leave_autocommit, sqlite_open_problem
from ..errors import ConfigurationError, DatabaseError, SchemaError
from ..tables import TableNames, table_names
from ..telemetry import Probe, Telemetry
from .config import (
    REVISION_OPTION,
    alembic_config,
    head_revision,
    mysql_migration_lock,
    prepare_connection,
    revision_options,
    script_directory,
)
from .logs import quiet_alembic
from .status import SchemaStatus, at_head, existing_view, schema_status

__all__ = [
    "SchemaStatus",
    "check",
    "checked_revision",
    "current",
    "downgrade",
    "ensure_schema",
    "head_revision",
    "schema_status",
    "stamp",
    "upgrade",
    "upgrade_sql",
    "upgrade_sync",
]

# Pauses between attempts of a store's first `create_tables` while another creator finishes.
CREATE_RETRY_DELAYS = (0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)


# -- running Alembic commands --------------------------------------------------------------------

# Alembic's words for a revision that none of the scripts has.
_UNKNOWN_REVISION = re.compile(r"Can't locate revision identified by '([^']*)'")
# A revision named outright ("head", "0002"), not relative to the database's ("+1", "head-1").
_NAMED_REVISION = re.compile(r"[A-Za-z0-9_]+")

# Alembic's `context` is one module-level proxy: one command at a time per process.
_COMMAND_LOCK = FairLock()


def migration_lock() -> AbstractAsyncContextManager[None]:
    """Hold the process-wide migrations lock from a coroutine (Alembic's context is global)."""
    return _COMMAND_LOCK


async def run_command(
    conn: AsyncConnection,
    tables: TableNames,
    action: Callable[[Config], None],
    *,
    refuse: Callable[[SchemaStatus], SchemaError | None] | None = None,
) -> SchemaStatus | None:
    """Run an `alembic.command` function on `conn`, inside its transaction.

    With `refuse`, the schema's status is read first (on MySQL and MariaDB under the
    migrators' lock) and the error it returns, if any, raised before anything runs; that
    status is returned.

    Example::

        async with engine.begin() as conn:
            await run_command(conn, TableNames(), lambda cfg: command.upgrade(cfg, "head"))
    """

    def run(sync: Connection) -> SchemaStatus | None:
        if refuse and sync.dialect.name not in MYSQL:  # (there: the lock below)
            prepare_connection(sync, tables)  # the migrators' lock, before the status
        with mysql_migration_lock(sync, tables) if refuse else nullcontext():
            found = schema_status(sync, tables) if refuse else None
            if refuse and found and (error := refuse(found)):
                raise error
            action(alembic_config(tables, connection=sync))
            return found

    async with migration_lock():
        try:
            return await conn.run_sync(run)
        except CommandError as exc:
            raise command_failure(exc) from exc


def command_failure(exc: CommandError) -> SchemaError | ConfigurationError:
    """Our error for Alembic's: a revision it cannot find is one of a newer release (or a
    typo), a `SchemaError` with the store's advice; anything else a `ConfigurationError`."""
    unknown = _UNKNOWN_REVISION.search(str(exc))
    if unknown is None:
        return ConfigurationError(f"migrations: {exc}")
    return SchemaError(
        f"this version of agents_sqlalchemy has no revision {unknown[1]!r} (its head is "
        f"{head_revision()}): a revision of a newer release needs that release, upgrade the "
        "package (pip install -U openai-agents-sqlalchemy); else check the revision's name",
        state="unknown",
    )


def upgrade_sync(connection: Connection, tables: TableNames, revision: str = "head") -> None:
    """`upgrade` through a synchronous connection the caller holds, from a worker thread.

    Example::

        with engine.begin() as connection:          # a sync Engine, in a worker thread
            upgrade_sync(connection, TableNames())
    """
    with _COMMAND_LOCK:
        upgrade_unlocked(connection, tables, revision)


def upgrade_unlocked(connection: Connection, tables: TableNames, revision: str = "head") -> None:
    """`upgrade_sync` for a caller that already holds `migration_lock()`."""
    try:
        command.upgrade(alembic_config(tables, connection=connection), revision)
    except CommandError as exc:
        raise command_failure(exc) from exc


async def ensure_schema(db: Database, tables: TableNames, *, create: bool) -> None:
    """Raise `SchemaError` unless the schema is at head; with `create`, migrate it there.

    What a store runs once before its first operation. `create` runs the migrations and
    stamps their version table (never `create_all`), so a later `upgrade` is a no-op.
    Creators racing in other tasks, threads or processes wait for each other (an advisory
    lock on PostgreSQL, the write lock on SQLite); a failed attempt is retried, with
    backoff, until the other one has finished.
    """

    def migrate(conn: Connection) -> SchemaStatus:
        with quiet_alembic():  # not into the app's logs
            return migrate_loudly(conn)

    def migrate_loudly(conn: Connection) -> SchemaStatus:
        if not create:
            return schema_status(conn, tables)
        with mysql_migration_lock(conn, tables):  # DDL there is not transactional
            status = schema_status(conn, tables)
            if status.state in ("missing", "behind"):
                upgrade_unlocked(conn, tables)
                status = schema_status(conn, tables)
        return status

    if not create and (absent := _no_file(db.url, tables)) is not None:
        raise absent.error(db.url)
    with db.telemetry.operation("ensure_schema", collection=tables.version_table) as operation:
        # Bounded as the check it stands for: making the tables has no statement_timeout.
        if await db.run(lambda conn: at_head(conn, tables), write=False, bounded=not create):
            return
        for delay in (*CREATE_RETRY_DELAYS, None):
            try:
                async with migration_lock():
                    if create:  # DDL has no statement_timeout: MySQL's would stop halfway
                        status = await db.write(migrate, bounded=False)
                    else:
                        status = await db.read(migrate)
                break
            except DatabaseError:
                if not create or delay is None or sqlite_open_problem(db.url):
                    raise
                operation.retried("creator")
                await asyncio.sleep(delay)
        if not status.at_head:  # in the operation: its span and metric record the error
            raise status.error(db.url)


def _no_file(url: str | Path | URL | AsyncEngine, tables: TableNames) -> SchemaStatus | None:
    """The status of a SQLite file that is not there (in a directory that is): none of the
    tables, known without opening it, which would make an empty file. None for any other
    database; a path that cannot be opened at all says why when it is tried."""
    path = sqlite_file(url.url if isinstance(url, AsyncEngine) else normalize_url(url))
    if path is None or not path.parent.is_dir() or path.exists():
        return None
    return SchemaStatus("missing", (), head_revision(), tables)


@asynccontextmanager
async def _connection(
    url_or_engine: str | Path | URL | AsyncEngine,
    *,
    write: bool,
    operation: str,
    tables: TableNames,
) -> AsyncIterator[tuple[AsyncConnection, URL]]:
    """A connection for a migration command (in one transaction if `write`), and the URL
    as given (messages name it: behind PgBouncer the engine's URL is rewritten)."""
    source = EngineSource(url_or_engine, None)
    probe = Probe(Telemetry(), source.url)
    version_table = tables.version_table
    outcome = "nothing was changed"
    if write and source.url.get_backend_name() in MYSQL:
        outcome = (
            "and what they did before stays (MySQL and MariaDB commit each DDL statement): "
            "check() or `agents-sqlalchemy db check` says where the schema stands"
        )
    try:
        with (
            probe.operation(operation, collection=version_table),
            database_errors(source.url, "migrations failed", outcome=outcome),
        ):
            async with source.get().connect() as conn:
                if not write:
                    yield conn, source.url
                    return
                await conn.run_sync(leave_autocommit)  # an app's engine: one transaction
                async with conn.begin():
                    yield conn, source.url
    finally:
        await source.close()


async def upgrade(
    url_or_engine: str | Path | URL | AsyncEngine,
    revision: str = "head",
    *,
    tables: TableNames | None = None,
) -> SchemaStatus:
    """Migrate the library's tables up to `revision`, in one transaction where the database
    can; return the schema's status it found, under its lock (what it upgraded from: of
    migrations racing from many processes, one upgrades, the others find it done).

    Example::

        before = await upgrade("postgresql://app@db/app", tables=TableNames(prefix="chat_"))
        before.found_text                 # "0001", or "none"
    """
    revision, names = checked_revision(revision), table_names(tables)
    connection = _connection(url_or_engine, write=True, operation="upgrade", tables=names)
    async with connection as (conn, url):
        found = await run_command(
            conn,
            names,
            lambda cfg: command.upgrade(cfg, revision),
            refuse=lambda status: _upgrade_refusal(status, url),
        )
    assert found is not None  # read, to refuse or not
    return found


def _upgrade_refusal(status: SchemaStatus, url: URL) -> SchemaError | None:
    """Why an upgrade must not start: the database is at a revision the scripts lack, or
    tables (or the view) at the names it would create are there without a revision, an
    application's, the SDK's or a failed migration's. It would fail on them, and MySQL and
    MariaDB would keep what it made before."""
    refused = ("untracked", "foreign", "incomplete", *_NOT_OURS)
    return status.error(url) if status.state in refused else None


async def downgrade(
    url_or_engine: str | Path | URL | AsyncEngine,
    revision: str,
    *,
    tables: TableNames | None = None,
) -> None:
    """Migrate down to `revision`; `"base"` removes every table of the library, and its data.

    Refused (`SchemaError`) where these tables do not exist: check the table names.

    Example::

        await downgrade("agent.db", "base")
    """
    revision, names = checked_revision(revision), table_names(tables)
    if (absent := _no_file(url_or_engine, names)) is not None:
        raise absent.refusal("downgrade", str(url_or_engine))
    connection = _connection(url_or_engine, write=True, operation="downgrade", tables=names)
    async with connection as (conn, url):
        await _refuse_without_tables(conn, url, names, "downgrade", "untracked")
        await run_command(conn, names, lambda cfg: command.downgrade(cfg, revision))


async def stamp(
    url_or_engine: str | Path | URL | AsyncEngine,
    revision: str = "head",
    *,
    tables: TableNames | None = None,
) -> None:
    """Record `revision` in the version table without running a migration (adopting
    tables); the messages view, which the models' `metadata.create_all` does not make, is
    made where it is missing.

    Refused (`SchemaError`, nothing changed) where these tables do not exist or are not
    this library's, where the revision's tables are not all there, and back from head on
    head's tables (every upgrade would then fail making a table that is there).

    Example::

        await stamp("agent.db", "head")
    """
    revision, names = checked_revision(revision), table_names(tables)
    if (absent := _no_file(url_or_engine, names)) is not None:
        raise absent.refusal("stamp", str(url_or_engine))
    connection = _connection(url_or_engine, write=True, operation="stamp", tables=names)
    async with connection as (conn, url):
        before = await _refuse_without_tables(conn, url, names, "stamp")
        await run_command(conn, names, lambda cfg: command.stamp(cfg, revision))
        # A revision whose tables are not all there (head on 0001's tables) is undone and
        # refused: it left a schema every command refused, stamp and upgrade too. (Undone
        # by a stamp back: MySQL and MariaDB have committed it.)
        # So is a stamp back from head on head's tables, tracked or not (an app's
        # `create_all`): every upgrade from there failed, making a table that is there.
        status = await conn.run_sync(schema_status, names)
        back_from_head = status.state == "behind" and not status.tables_seen
        if status.state == "incomplete" or back_from_head:
            back = list(before.found) or ["base"]
            await run_command(conn, names, lambda cfg: command.stamp(cfg, back, purge=True))
            where = url.render_as_string(hide_password=True)
            message = (
                f"refusing to stamp {revision}: its tables {', '.join(status.tables_seen)} "
                f"are not in {where}; nothing was changed (`upgrade` makes them)"
            )
            if back_from_head:
                undo = (
                    f"`downgrade` takes them back to {revision}"
                    if before.state == "current"
                    else f"stamp {before.expected}, the revision they are at"
                )
                message = (
                    f"refusing to stamp {revision}: the tables in {where} are those of "
                    f"{before.expected} (head), which an upgrade from {revision} would make "
                    f"again; nothing was changed ({undo})"
                )
            raise SchemaError(message, state=status.state)
        if status.found and not await conn.run_sync(existing_view, names):
            await conn.run_sync(_make_view, names)


def _make_view(connection: Connection, tables: TableNames) -> None:
    """Make the messages view of tables that lack it, as revision 0001 makes it (the
    models' `metadata.create_all` makes tables, no view: stamped, they had none)."""
    context = MigrationContext.configure(
        connection, opts={REVISION_OPTION: revision_options(tables)}
    )
    with Operations.context(context):
        script_directory().get_revision("0001").module.messages_view()


def checked_revision(revision: object) -> str:
    """`revision` if it can name one ("head", "base", "0002", "-1"...), checked before any
    connection opens (one named outright must be a shipped one: a failed command would
    leave a new, empty SQLite file behind)."""
    if isinstance(revision, str) and revision.strip():
        if _NAMED_REVISION.fullmatch(revision):
            try:
                script_directory().get_revisions(revision)
            except CommandError as exc:
                raise command_failure(exc) from exc
        return revision
    raise ConfigurationError(f"a revision is a name such as 'head', got {revision!r:.80}")


# Revisions the shipped scripts do not have: a newer release's, or no release's.
_NOT_OURS = ("ahead", "unknown")


async def _refuse_without_tables(
    conn: AsyncConnection, url: URL, tables: TableNames, action: str, *also: str
) -> SchemaStatus:
    """`SchemaError` when these tables are not there (or not ours): `action` would only
    leave a stray version table behind; or when their revision is not one of ours, or
    their version table is at head while tables are missing (another set's version table:
    a downgrade would drop that set's tables)."""
    status = await conn.run_sync(schema_status, tables)
    if status.state in ("missing", "foreign", *also):
        raise status.refusal(action, url)
    if status.state in ("incomplete", *_NOT_OURS):
        raise status.error(url)
    return status


async def upgrade_sql(
    url: str | Path | URL, revision: str = "head", *, tables: TableNames | None = None
) -> None:
    """Print the SQL of an upgrade to stdout instead of running it (Alembic's offline mode).

    Without a server to ask, the URL says which SQL: a `mysql://` URL gets MySQL's (whose
    collations MariaDB lacks), a `mariadb://` URL MariaDB's.

    Example::

        await upgrade_sql("postgresql://app@db/app", tables=TableNames(schema="agents"))
    """
    revision = checked_revision(revision)
    config = alembic_config(table_names(tables))
    rendered = normalize_url(url).render_as_string(hide_password=False)
    config.set_main_option("sqlalchemy.url", rendered.replace("%", "%%"))
    async with migration_lock():
        try:
            command.upgrade(config, revision, sql=True)
        except CommandError as exc:
            raise command_failure(exc) from exc


async def check(
    url_or_engine: str | Path | URL | AsyncEngine, *, tables: TableNames | None = None
) -> SchemaStatus:
    """Where the database stands: `status.at_head`, `status.found`, `status.describe()`.

    Example::

        status = await check("agent.db")
        print(status.describe())        # "at revision 0002 (head)"
    """
    names = table_names(tables)
    if (absent := _no_file(url_or_engine, names)) is not None:
        return absent  # not opened: that would make an empty file
    connection = _connection(url_or_engine, write=False, operation="check", tables=names)
    async with connection as (conn, _):
        return await conn.run_sync(schema_status, names)


async def current(
    url_or_engine: str | Path | URL | AsyncEngine, *, tables: TableNames | None = None
) -> str | None:
    """The revision the database is at, or None.

    Example::

        await current("agent.db")       # "0002"
    """
    status = await check(url_or_engine, tables=tables)
    return ", ".join(status.found) or None
