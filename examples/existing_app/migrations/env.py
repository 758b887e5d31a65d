"""The app's Alembic environment (as `alembic init -t async` makes it), sharing its database
with agents_sqlalchemy's tables: its autogenerate neither drops nor re-creates them.

The database: `alembic -x url=...`, else `sqlalchemy.url` in alembic.ini; a plain URL
(`postgresql://...`) gets the async driver the app installed with agents_sqlalchemy.
"""

from __future__ import annotations

import asyncio
from logging.config import fileConfig
from typing import Any

from alembic import context
from models import Base  # the app's models (alembic.ini: prepend_sys_path)
from sqlalchemy import pool
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import create_async_engine

from agents_sqlalchemy import LibraryTables, TableNames

config = context.config
if config.config_file_name is not None:
    fileConfig(config.config_file_name)
url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
    "sqlalchemy.url"
)
# The async driver for a URL that names none (as agents_sqlalchemy takes them).
ASYNC_DRIVERS = {
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
    "sqlite": "sqlite+aiosqlite",
    "mysql": "mysql+asyncmy",
    "mariadb": "mariadb+asyncmy",
}
parsed = make_url(str(url))
url = parsed.set(drivername=ASYNC_DRIVERS.get(parsed.drivername, parsed.drivername))

# The chat tables' names, from the [agents_sqlalchemy] section that migrates them.
ours = LibraryTables(TableNames.from_options(config.get_section("agents_sqlalchemy", {})))
options: dict[str, Any] = {
    "target_metadata": Base.metadata,
    "include_schemas": True,  # compare every schema, the chat tables' too...
    "include_name": ours.include_name,  # ...but leave the chat tables out
    "include_object": ours.include_object,
}


def run_migrations(connection: Connection) -> None:
    context.configure(connection=connection, **options)
    with context.begin_transaction():
        context.run_migrations()


async def run_online() -> None:
    engine = create_async_engine(url, poolclass=pool.NullPool)
    async with engine.connect() as connection:
        await connection.run_sync(run_migrations)
    await engine.dispose()


if context.is_offline_mode():
    context.configure(url=url, literal_binds=True, **options)
    with context.begin_transaction():
        context.run_migrations()
else:
    asyncio.run(run_online())
