"""The schema check every store runs once: at the migrations' head, or migrated there."""

from __future__ import annotations

import asyncio

from sqlalchemy.engine import Connection

from ..errors import DatabaseError
from ..migrate import migration_lock, upgrade_unlocked
from ..schema_status import SchemaStatus, schema_status
from .base import RepositoryBase

CREATE_RETRY_DELAYS = (0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)


class SchemaOps(RepositoryBase):
    """Checks the schema revision; with `create`, runs the shipped migrations up to head."""

    async def ensure_schema(self, *, create: bool) -> None:
        """Raise `SchemaError` unless the schema is at head; with `create`, migrate it there.

        `create` runs the migrations and stamps their version table (never `create_all`), so
        a later `upgrade` is a no-op. Creators racing in other tasks, threads or processes
        wait for each other (an advisory lock on PostgreSQL, the write lock on SQLite); a
        failed attempt is retried, with backoff, until the other one has finished.
        """
        for delay in (*CREATE_RETRY_DELAYS, None):
            try:
                async with migration_lock():
                    status = await self._db.run(
                        lambda conn: self._migrate(conn, create), write=create
                    )
                break
            except DatabaseError:
                if not create or delay is None:
                    raise
                await asyncio.sleep(delay)
        if not status.at_head:
            raise status.error(self._db.url)

    def _migrate(self, conn: Connection, create: bool) -> SchemaStatus:
        status = schema_status(conn, self._models.names)
        if create and status.state in ("missing", "behind"):
            upgrade_unlocked(conn, self._models.names)
            status = schema_status(conn, self._models.names)
        return status
