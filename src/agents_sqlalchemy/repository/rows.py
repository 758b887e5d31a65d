"""Inserts whose form depends on the database: a row unless its key is taken (MySQL has
neither ON CONFLICT nor RETURNING).

Example::

    pk = insert_session_if_absent(conn, models.sessions, {"session_hash": ..., ...})
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from ..models import MYSQL


def insert_session_if_absent(conn: Connection, sessions: Table, values: dict[str, Any]) -> Any:
    """Insert a session row unless one has its `session_hash`; return the new id, or None."""
    if conn.dialect.name in MYSQL:  # locks the key (or its gap) until the transaction ends
        taken = select(sessions.c.id).where(sessions.c.session_hash == values["session_hash"])
        if conn.execute(taken.with_for_update()).first() is not None:
            return None
        inserted = conn.execute(sessions.insert().values(**values)).inserted_primary_key
        return inserted[0] if inserted else None
    upsert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    claim = (
        upsert(sessions)
        .values(**values)
        .on_conflict_do_nothing(index_elements=[sessions.c.session_hash])
        .returning(sessions.c.id)
    )
    return conn.execute(claim).scalar_one_or_none()
