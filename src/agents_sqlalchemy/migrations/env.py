"""Alembic environment of agents_sqlalchemy's own migrations, shipped inside the package.

Table names, first found wins: the Python API (`Config.attributes`), `alembic -x prefix=chat_
-x schema=agents ...`, the options of the ini section Alembic runs with (e.g. an app's
`[agents_sqlalchemy]` section and `alembic -n agents_sqlalchemy upgrade head`), the defaults.
The database: the Python API's connection, `-x url=...`, or the section's `sqlalchemy.url`.
"""

from __future__ import annotations

import asyncio
from contextlib import nullcontext
from difflib import get_close_matches
from logging.config import fileConfig
from typing import Any

from alembic import context
from sqlalchemy.engine import URL, Connection
from sqlalchemy.pool import NullPool

from agents_sqlalchemy.app_env import LibraryTables
from agents_sqlalchemy.database.engines import EngineSource, normalize_url
from agents_sqlalchemy.errors import ConfigurationError
from agents_sqlalchemy.migrations.config import (
    CONNECTION_KEY,
    REVISION_OPTION,
    TABLES_KEY,
    drop_version_table_at_base,
    prepare_connection,
    release_connection,
    revision_options,
)
from agents_sqlalchemy.migrations.logs import quiet_mysql_notes
from agents_sqlalchemy.models import build_models
from agents_sqlalchemy.tables import OPTION_KEYS, TableNames

config = context.config
x_args = context.get_x_argument(as_dictionary=True)
if config.config_file_name is not None and CONNECTION_KEY not in config.attributes:
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def table_names() -> TableNames:
    given = config.attributes.get(TABLES_KEY)
    if isinstance(given, TableNames):
        return given
    # The section holds Alembic's own keys too: a key that is none of ours but near one is
    # a misspelling (`prefx`), refused as an -x option's is, rather than left unused.
    for key in config.get_section(config.config_ini_section, {}):
        if key not in OPTION_KEYS and (near := get_close_matches(key, OPTION_KEYS, 1, 0.8)):
            raise ConfigurationError(
                f"unknown option {key!r} in [{config.config_ini_section}]: {near[0]!r}?"
            )
    from_ini = {key: value for key in OPTION_KEYS if (value := config.get_main_option(key))}
    return TableNames.from_options({**from_ini, **x_args}, strict=True)


def database_url() -> URL:
    url = x_args.get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise ConfigurationError("no database: pass -x url=... or set sqlalchemy.url")
    return normalize_url(url)


tables = table_names()
options: dict[str, Any] = {
    "target_metadata": build_models(tables).metadata,
    "version_table": tables.version_table,
    "version_table_schema": tables.schema,
    "include_schemas": tables.schema is not None,
    "include_name": LibraryTables(tables).only_ours,
    "on_version_apply": drop_version_table_at_base(tables),
    REVISION_OPTION: revision_options(tables),
}


def run_migrations(connection: Connection) -> None:
    mysql = connection.dialect.name in ("mysql", "mariadb")
    with quiet_mysql_notes() if mysql else nullcontext():
        prepare_connection(connection, tables)
        try:
            context.configure(connection=connection, **options)
            with context.begin_transaction():
                context.run_migrations()
        finally:
            release_connection(connection, tables)


async def run_migrations_from_url(url: URL) -> None:
    source = EngineSource(url, {"poolclass": NullPool})
    try:
        async with source.get().begin() as connection:
            await connection.run_sync(run_migrations)
    finally:
        await source.close()


if context.is_offline_mode():
    url = database_url()
    context.configure(url=url, literal_binds=True, **options)
    with context.begin_transaction():
        if tables.schema and url.get_backend_name() == "postgresql":
            context.execute(f'CREATE SCHEMA IF NOT EXISTS "{tables.schema}"')
        elif tables.schema and url.get_backend_name() in ("mysql", "mariadb"):
            context.execute(f"CREATE DATABASE IF NOT EXISTS `{tables.schema}`")
        context.run_migrations()
elif isinstance(given := config.attributes.get(CONNECTION_KEY), Connection):
    run_migrations(given)
else:
    asyncio.run(run_migrations_from_url(database_url()))
