"""What the migrations' env.py needs: their `Config`, table names, lock and version-table hook.

Example::

    config = alembic_config(TableNames(prefix="chat_"))
    ScriptDirectory.from_config(config).get_current_head()     # "0001"
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from alembic.config import Config
from alembic.runtime.migration import MigrationContext, MigrationInfo
from alembic.script import ScriptDirectory
from sqlalchemy import MetaData, Table, text
from sqlalchemy.engine import Connection

from ..database.locks import advisory_lock
from ..errors import ConfigurationError
from ..tables import ROLES, VIEWS, TableNames

# Where Alembic finds the scripts: a path for our own calls, a resource name for an app's ini.
SCRIPT_DIR = Path(__file__).resolve().parent
SCRIPT_LOCATION = "agents_sqlalchemy:migrations"
# `Config.attributes` keys read by env.py.
CONNECTION_KEY = "connection"
TABLES_KEY = "agents_sqlalchemy.tables"
# The `context.configure()` option through which each revision reads the table names.
REVISION_OPTION = "agents_sqlalchemy_tables"


def revision_options(tables: TableNames) -> dict[str, str | None]:
    """What the revisions read from their context: the schema and a name per table role
    (and per view)."""
    return {"schema": tables.schema, **{role: tables.name(role) for role in (*ROLES, *VIEWS)}}


def alembic_config(
    tables: TableNames | None = None, *, connection: Connection | None = None
) -> Config:
    """An Alembic `Config` for the shipped scripts, for `alembic.command` functions.

    Example::

        async with engine.begin() as conn:
            await conn.run_sync(
                lambda sync: command.history(alembic_config(connection=sync))
            )
    """
    config = Config()
    config.set_main_option("script_location", str(SCRIPT_DIR))
    config.attributes[TABLES_KEY] = tables or TableNames()
    if connection is not None:
        config.attributes[CONNECTION_KEY] = connection
    return config


@cache
def script_directory() -> ScriptDirectory:
    """The shipped revisions."""
    return ScriptDirectory.from_config(alembic_config())


def head_revision() -> str:
    """The revision this version of the library expects."""
    head = script_directory().get_current_head()
    assert head is not None, "the shipped migrations have no revision"
    return head


# -- around the revisions -------------------------------------------------------


# How long a MySQL or MariaDB migrator waits for another one's lock, in seconds.
MYSQL_LOCK_WAIT = 300


def prepare_connection(connection: Connection, tables: TableNames) -> None:
    """Serialise migrators, then create the schema if it is missing.

    PostgreSQL: a transaction-scoped advisory lock (and one per new schema). SQLite:
    `BEGIN IMMEDIATE`, the database's write lock, so a second migrator waits (busy timeout)
    and then finds the work done.
    MySQL and MariaDB (whose DDL commits as it goes): a named lock held by the connection
    until `release_connection`.
    """
    dialect = connection.dialect.name
    if dialect == "postgresql":
        advisory_lock(connection, _lock_name(tables))
        if tables.schema:
            _create_pg_schema(connection, tables.schema)
    elif dialect == "sqlite":
        driver = connection.connection.driver_connection
        if not getattr(driver, "in_transaction", True):
            connection.exec_driver_sql("BEGIN IMMEDIATE")
    elif dialect in ("mysql", "mariadb"):
        _take_mysql_lock(connection, tables)
        if tables.schema:
            connection.execute(text(f"CREATE DATABASE IF NOT EXISTS `{tables.schema}`"))


def _create_pg_schema(connection: Connection, schema: str) -> None:
    """Create `schema` unless it exists. Migrators of other table sets into the same new
    schema take the schema's own lock first: two `CREATE SCHEMA IF NOT EXISTS` at once
    fail on the catalog's unique index. Taken after the set's lock, held until the commit."""
    found = text("SELECT 1 FROM pg_namespace WHERE nspname = :schema")
    if connection.execute(found, {"schema": schema}).first() is None:
        advisory_lock(connection, f"agents_sqlalchemy:schema:{schema}")
        connection.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))


@contextmanager
def mysql_migration_lock(connection: Connection, tables: TableNames) -> Iterator[None]:
    """Hold the migrators' named lock on MySQL and MariaDB (nothing elsewhere), so that a
    migrator reads the schema's state only once no other one is halfway through its DDL.

    The lock is re-entrant: the migrations' own `prepare_connection` takes it again.
    """
    if connection.dialect.name not in ("mysql", "mariadb"):
        yield
        return
    _take_mysql_lock(connection, tables)
    try:
        yield
    finally:
        release_connection(connection, tables)


def release_connection(connection: Connection, tables: TableNames) -> None:
    """Release what `prepare_connection` took beyond the transaction (MySQL's named lock).

    The version row is committed first: the DDL before it has committed itself already, and
    the next migrator must not find the tables without their revision.
    """
    if connection.dialect.name in ("mysql", "mariadb"):
        connection.exec_driver_sql("COMMIT")
        connection.execute(
            text("SELECT RELEASE_LOCK(:name)"), {"name": _mysql_lock_name(connection, tables)}
        )


def _take_mysql_lock(connection: Connection, tables: TableNames) -> None:
    taken = connection.execute(
        text("SELECT GET_LOCK(:name, :wait)"),
        {"name": _mysql_lock_name(connection, tables), "wait": MYSQL_LOCK_WAIT},
    ).scalar()
    if taken != 1:
        raise ConfigurationError("migrations: another migrator held the lock for too long")


def _lock_name(tables: TableNames) -> str:
    return f"agents_sqlalchemy:{tables.schema or ''}.{tables.version_table}"


def _mysql_lock_name(connection: Connection, tables: TableNames) -> str:
    """The lock's name hashed into MySQL's 64 characters. A named lock is the server's, not
    a database's: the name holds the database (the URL's, without a schema), so that the
    migrators of two databases do not wait for each other."""
    database = tables.schema or connection.engine.url.database or ""
    name = f"agents_sqlalchemy:{database}.{tables.version_table}"
    return f"agents_sqlalchemy:{hashlib.blake2b(name.encode(), digest_size=16).hexdigest()}"


def drop_version_table_at_base(tables: TableNames) -> Callable[..., None]:
    """An `on_version_apply` hook: a downgrade that leaves no revision drops our version table.

    Alembic keeps an empty version table at base; ours goes too, so that `downgrade base`
    leaves nothing of the library behind.
    """

    def hook(*, ctx: MigrationContext, step: MigrationInfo, heads: set[str], run_args: Any) -> None:
        if not step.is_upgrade and not heads:
            version = Table(tables.version_table, MetaData(), schema=tables.schema)
            ctx.impl.drop_table(version)

    return hook
