"""Where a database's schema stands against the shipped migrations, and what to say about it.

Example::

    async with engine.connect() as conn:
        status = await conn.run_sync(schema_status, TableNames())
    status.describe()              # "at revision 0001 (head)"
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import inspect
from sqlalchemy.engine import URL, Connection

from .errors import SchemaError
from .migrations.config import head_revision, script_directory
from .tables import ROLES, TableNames

# Shipped revision ids are zero-padded sequence numbers, so "ahead" can be told from "unknown".
_REVISION_ID = re.compile(r"\d{4}")

State = Literal["current", "missing", "behind", "ahead", "unknown", "untracked", "incomplete"]


@dataclass(frozen=True)
class SchemaStatus:
    """Where a database's schema stands against the shipped migrations.

    `state` is one of: `current` (at head), `missing` (nothing of ours), `behind` (an older
    revision), `ahead` (a newer library's revision), `unknown` (a revision that is not ours),
    `untracked` (our tables without a version row), `incomplete` (at head, but tables are
    missing: the version table belongs to another set of tables).

    Example::

        status = await check("agent.db")
        if not status.at_head:
            raise status.error("agent.db")
    """

    state: State
    found: tuple[str, ...]
    expected: str
    tables: TableNames
    tables_seen: tuple[str, ...] = ()  # untracked: ours that exist; incomplete: those missing

    @property
    def at_head(self) -> bool:
        return self.state == "current"

    @property
    def found_text(self) -> str:
        return ", ".join(self.found) or "none"

    def describe(self) -> str:
        """One line for people, e.g. "at revision 0001 (head)"."""
        if self.state == "current":
            return f"at revision {self.expected} (head)"
        if self.state == "missing":
            return f"no tables and no revision (head is {self.expected})"
        if self.state == "untracked":
            return (
                f"tables {', '.join(self.tables_seen)} exist but {self.tables.version_table} "
                f"holds no revision (head is {self.expected})"
            )
        if self.state == "incomplete":
            return f"at revision {self.expected} (head), but {', '.join(self.tables_seen)} missing"
        return f"at revision {self.found_text}, {self.state} (head is {self.expected})"

    def error(self, url: str | URL) -> SchemaError:
        """The `SchemaError` to raise when the schema is not at head: what, and what to run."""
        where = url.render_as_string(hide_password=True) if isinstance(url, URL) else url
        run = command_line("upgrade", where, self.tables)
        found, expected = self.found_text, self.expected
        if self.state == "missing":
            detail = (
                f"the tables of agents_sqlalchemy are not in {where} (revision found: none, "
                f"expected: {expected}): pass create_tables=True in development, or run `{run}`"
            )
        elif self.state == "behind":
            detail = f"the schema in {where} is at revision {found}, expected {expected}: "
            detail += f"run `{run}`"
        elif self.state == "ahead":
            detail = (
                f"the schema in {where} is at revision {found}, newer than this version of "
                f"agents_sqlalchemy expects ({expected}): upgrade the package "
                "(pip install -U openai-agents-sqlalchemy), or run "
                f"`{command_line('downgrade', where, self.tables, expected)}` with the newer one"
            )
        elif self.state == "unknown":
            detail = (
                f"the version table {self.tables.version_table} in {where} holds revision "
                f"{found}, which is not one of agents_sqlalchemy's (expected {expected}): "
                "check the table options (prefix, schema, version table)"
            )
        elif self.state == "incomplete":
            detail = (
                f"the version table {self.tables.version_table} in {where} is at revision "
                f"{found} (expected {expected}) but tables {', '.join(self.tables_seen)} are "
                "missing: that version table belongs to another set of tables; give these "
                "tables their own prefix or version table (TableNames(version=...))"
            )
        else:
            detail = (
                f"tables {', '.join(self.tables_seen)} exist in {where} but the version table "
                f"{self.tables.version_table} holds no revision (expected {expected}): if "
                f"they were made by this version, run `{command_line('stamp', where, self.tables)}`"
            )
        return SchemaError(detail)


def command_line(action: str, url: str, tables: TableNames, revision: str = "") -> str:
    """The `agents-sqlalchemy db ...` command for `action` on these tables."""
    options = [
        f"--{key.replace('_', '-')}-table {value}" if key in ROLES else f"--{key} {value}"
        for key, value in tables.overrides().items()
    ]
    words = ["agents-sqlalchemy db", action, revision, f"--url '{url}'", *options]
    return " ".join(word for word in words if word)


def schema_status(connection: Connection, tables: TableNames) -> SchemaStatus:
    """Read the version table (Alembic's `MigrationContext`) and classify it; for `run_sync`."""
    # Tables first, version row second: a migrator committing in between is then seen as done.
    ours = [tables.name(role) for role in ROLES if role != "version"]
    existing = _existing(connection, tables, ours)
    context = MigrationContext.configure(
        connection,
        opts={"version_table": tables.version_table, "version_table_schema": tables.schema},
    )
    found = tuple(sorted(context.get_current_heads()))
    if found and len(existing) < len(ours):  # read again: a migrator may have just committed
        existing = _existing(connection, tables, ours)
    absent = tuple(name for name in ours if name not in existing)
    expected = head_revision()
    state: State
    if not found:
        state = "untracked" if existing else "missing"
    elif found == (expected,):
        state = "incomplete" if absent else "current"
    elif all(_is_known(script_directory(), rev) for rev in found):
        state = "behind"
    elif all(_REVISION_ID.fullmatch(rev) for rev in found) and max(found) > expected:
        state = "ahead"
    else:
        state = "unknown"
    return SchemaStatus(state, found, expected, tables, absent if found else existing)


def _existing(connection: Connection, tables: TableNames, ours: list[str]) -> tuple[str, ...]:
    present = set(inspect(connection).get_table_names(schema=tables.schema))
    return tuple(name for name in ours if name in present)


def _is_known(scripts: ScriptDirectory, revision: str) -> bool:
    try:
        return scripts.get_revision(revision) is not None
    except CommandError:
        return False
