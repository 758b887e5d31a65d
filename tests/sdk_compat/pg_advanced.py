"""Our `AdvancedSQLiteSession` with each `db_path` mapped to a PostgreSQL schema.

The harness copies this file into its work directory, where the SDK's rewritten test module
imports it (as `agents_sqlalchemy_pg_advanced`) in place of the SDK's class. The SDK's tests
pass file paths and ":memory:": here a path names one schema of the database in
AGENTS_SQLALCHEMY_SDK_COMPAT_PG_URL (the same path gives the same schema, in any process),
and ":memory:" a fresh schema of the session's own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import uuid
from pathlib import Path

import agents_sqlalchemy
from agents_sqlalchemy.crypto import Key
from agents_sqlalchemy.search import Embedder
from agents_sqlalchemy.store import SessionStore
from agents_sqlalchemy.tables import TableNames

URL_ENV = "AGENTS_SQLALCHEMY_SDK_COMPAT_PG_URL"


class AdvancedSQLiteSession(agents_sqlalchemy.AdvancedSQLiteSession):
    """The drop-in on PostgreSQL: one schema per SQLite path the SDK's tests name."""

    @classmethod
    def _open_store(
        cls,
        db_path: str | Path,
        *,
        tables: TableNames,
        create_tables: bool,
        key: Key | None,
        embedder: Embedder | None,
    ) -> SessionStore:
        if str(db_path) == ":memory:":
            schema = f"m_{uuid.uuid4().hex[:16]}"
        else:
            digest = hashlib.sha256(str(Path(db_path).resolve()).encode()).hexdigest()
            schema = f"f_{digest[:16]}"
        tables = dataclasses.replace(tables, schema=schema)
        return SessionStore.shared(
            os.environ[URL_ENV],
            tables=tables,
            create_tables=create_tables,
            key=key,
            search=embedder is not None,
            embedder=embedder,
        )
