"""Named locks across processes, for what must run once at a time database-wide (a
migration, a keyring's first row): PostgreSQL's advisory locks.

Example::

    with engine.begin() as conn:
        advisory_lock(conn, "agents_sqlalchemy.keyring:chat_keyring")   # until the commit
"""

from __future__ import annotations

import hashlib

from sqlalchemy import text
from sqlalchemy.engine import Connection


def advisory_lock(conn: Connection, name: str) -> None:
    """Take PostgreSQL's transaction-scoped advisory lock named `name` (a 64-bit hash of it)."""
    digest = hashlib.blake2b(name.encode(), digest_size=8).digest()
    key = int.from_bytes(digest, "big", signed=True)
    conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
