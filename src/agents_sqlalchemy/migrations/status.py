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
from sqlalchemy import column, false, inspect, null, select, table, union_all
from sqlalchemy.engine import URL, Connection
from sqlalchemy.exc import DBAPIError

from ..database.failures import failure_kind
from ..errors import ConfigurationError, SchemaError
from ..tables import ROLES, TableNames
from .config import head_revision, script_directory

# Shipped revision ids are zero-padded sequence numbers, so "ahead" can be told from "unknown".
_REVISION_ID = re.compile(r"\d{4}")
# The columns of the Agents SDK's own sessions table (its messages table has `message_data`).
SDK_SESSIONS_COLUMNS = {"session_id", "created_at", "updated_at"}

State = Literal[
    "current", "missing", "behind", "ahead", "unknown", "untracked", "incomplete", "foreign"
]


@dataclass(frozen=True)
class SchemaStatus:
    """Where a database's schema stands against the shipped migrations.

    `state` is one of: `current` (at head), `missing` (nothing of ours), `behind` (an older
    revision), `ahead` (a newer library's revision), `unknown` (a revision that is not ours),
    `untracked` (tables, or a view, at our names without a version row: ours, or a partial
    set that is someone else's or a failed migration's), `incomplete` (at head, but tables are
    missing: the version table belongs to another set of tables, or tables were dropped),
    `foreign` (tables with our names that are not ours, such as the Agents SDK's own).

    Example::

        status = await check("agent.db")
        if not status.at_head:
            raise status.error("agent.db")
    """

    state: State
    found: tuple[str, ...]
    expected: str
    tables: TableNames
    tables_seen: tuple[str, ...] = ()  # untracked, foreign: those that exist; incomplete: missing
    #: Version tables of this library under other names (a forgotten prefix), when missing.
    others: tuple[str, ...] = ()
    #: foreign: the tables have the layout of the Agents SDK's own `SQLAlchemySession`.
    sdk_layout: bool = False

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
        if self.state == "foreign":
            owner = "the Agents SDK's" if self.sdk_layout else "not this library's"
            return f"tables {', '.join(self.tables_seen)} are {owner} (head is {self.expected})"
        if self.state == "incomplete":
            return f"at revision {self.expected} (head), but {', '.join(self.tables_seen)} missing"
        return f"at revision {self.found_text}, {self.state} (head is {self.expected})"

    def error(self, url: str | URL) -> SchemaError:
        """The `SchemaError` to raise when the schema is not at head: what, and what to run.

        Its message gives Python advice, its `cli_message` command-line advice.
        """
        where = url.render_as_string(hide_password=True) if isinstance(url, URL) else url
        return SchemaError(
            self._detail(where, cli=False),
            cli_message=self._detail(where, cli=True),
            state=self.state,
        )

    def refusal(self, action: str, url: str | URL) -> SchemaError:
        """Why `action` ("stamp", "downgrade") will not run on these tables."""
        where = url.render_as_string(hide_password=True) if isinstance(url, URL) else url
        if self.state == "foreign":
            return self.error(url)
        names = ", ".join(f"{k}={v!r}" for k, v in self.tables.overrides().items())
        text = (
            f"refusing to {action}: {where} holds no tables of agents_sqlalchemy named by "
            f"TableNames({names}) ({self.describe()})"
        )
        if self.others:
            return SchemaError(f"{text}; {self._others_hint(cli=False)}", state=self.state)
        return SchemaError(f"{text}, and no other tables of this library", state=self.state)

    def _others_hint(self, *, cli: bool) -> str:
        prefixes = [name.removesuffix("version") for name in self.others]
        spelled = [f"--prefix {p}" if cli else f"TableNames(prefix={p!r})" for p in prefixes]
        return (
            f"this library's version table is under another name ({', '.join(self.others)}): "
            f"forgot {' or '.join(spelled)}?"
        )

    def _detail(self, where: str, *, cli: bool) -> str:
        run = self.tables.command_line("upgrade", where)
        found, expected = self.found_text, self.expected
        if self.state == "missing" and in_memory(where):
            return (
                f"the tables of agents_sqlalchemy are not in the in-memory database {where}: "
                "pass create_tables=True (no command reaches a database that lives in this "
                "process only)"
            )
        if self.state == "missing":
            detail = (
                f"the tables of agents_sqlalchemy are not in {where} (revision found: none, "
                f"expected: {expected}): "
            )
            detail += (
                f"run `{run}`"
                if cli
                else (f"pass create_tables=True in development, or run `{run}`")
            )
            return f"{detail}; {self._others_hint(cli=cli)}" if self.others else detail
        if self.state == "behind":
            return f"the schema in {where} is at revision {found}, expected {expected}: run `{run}`"
        if self.state == "ahead":
            return (
                f"the schema in {where} is at revision {found}, newer than this version of "
                f"agents_sqlalchemy expects ({expected}): upgrade the package "
                "(pip install -U openai-agents-sqlalchemy), or run "
                f"`{self.tables.command_line('downgrade', where, expected)}` with the newer one"
            )
        if self.state == "unknown":
            return (
                f"the version table {self.tables.version_table} in {where} holds revision "
                f"{found}, which is not one of agents_sqlalchemy's (expected {expected}): "
                "check the table options (prefix, schema, version table)"
            )
        if self.state == "incomplete":
            fix = "--version-table NAME" if cli else "TableNames(version=...)"
            return (
                f"the version table {self.tables.version_table} in {where} is at revision "
                f"{found} (expected {expected}) but tables {', '.join(self.tables_seen)} are "
                "missing: either that version table belongs to another set of tables (give "
                f"these tables their own prefix or version table: {fix}), or tables of this "
                "set were dropped (restore them from a backup)"
            )
        if self.state == "foreign":
            return self._foreign(where)
        seen, absent = ", ".join(self.tables_seen), ", ".join(self.absent)
        if absent:
            fix = "other table options" if cli else "other TableNames(...)"
            return (
                f"tables {seen} exist in {where} but not {absent}, and the version table "
                f"{self.tables.version_table} holds no revision (expected {expected}): they "
                "are not a whole set of this library's tables (an application's, or left by "
                "a migration that failed halfway), and the migrations would fail on them: "
                f"give this library's tables other names (another prefix, or {fix}), or drop "
                "them if they are a failed migration's and hold nothing to keep"
            )
        return (
            f"tables {seen} exist in {where} but the version table "
            f"{self.tables.version_table} holds no revision (expected {expected}): if "
            f"they were made by this version, run `{self.tables.command_line('stamp', where)}`"
        )

    @property
    def absent(self) -> tuple[str, ...]:
        """untracked: the tables of a whole set at head that are not there."""
        if self.state != "untracked":
            return ()
        return tuple(name for name in _ours(self.tables) if name not in self.tables_seen)

    def _foreign(self, where: str) -> str:
        seen = ", ".join(self.tables_seen)
        if not set(self.tables_seen) & set(_ours(self.tables)):
            return (
                f"tables {seen} in {where} differ from this library's names only in case, "
                "which MySQL and MariaDB do not tell apart in the names of constraints: "
                "give this library's tables other names (another prefix)"
            )
        if not self.sdk_layout:
            return (
                f"tables {seen} in {where} are not agents_sqlalchemy's: give this library's "
                "tables other names (another prefix, or other table options)"
            )
        sessions, messages = self.tables.sessions_table, self.tables.items_table
        if messages not in self.tables_seen:
            messages = "MESSAGES_TABLE"  # the SDK's messages table is not at our items name
        return (
            f"tables {seen} in {where} are the Agents SDK's own (its SQLAlchemySession's), "
            "not this library's, which cannot share their names: open the sessions without "
            "sessions_table/messages_table (or with other names) and copy the SDK's history "
            f"once, with `agents-sqlalchemy import-sdk --from '{where}' --source-sessions-table "
            f"{sessions} --source-messages-table {messages} --url '{where}' --create` or "
            f"`await agents_sqlalchemy.import_sdk('{where}', '{where}', "
            f"sessions_table={sessions!r}, messages_table={messages!r}, create_tables=True)`"
        )


def in_memory(where: str) -> bool:
    """Whether a URL (as shown) names an in-memory SQLite database.

    >>> in_memory("sqlite+aiosqlite:///%3Amemory%3A"), in_memory("sqlite+aiosqlite:///a.db")
    (True, False)
    """
    if not where.startswith("sqlite"):
        return False
    marks = (":memory:", "%3Amemory%3A", "mode=memory")
    return any(mark in where for mark in marks) or where.split("?")[0].endswith("://")


def schema_status(connection: Connection, tables: TableNames) -> SchemaStatus:
    """Read the version table (Alembic's `MigrationContext`) and classify it; for `run_sync`."""
    _refuse_unattached(connection, tables)
    if _no_such_database(connection, tables):  # the migrations will create it
        return SchemaStatus("missing", (), head_revision(), tables)
    # Tables first, version row second: a migrator committing in between is then seen as done.
    ours = _ours(tables)
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
    if not found:
        if not existing and (view := existing_view(connection, tables)):
            # Read after the tables and the version row: a migrator that committed between
            # them shows its view alone. Tables there now are its work: read it all again.
            if _existing(connection, tables, ours):
                return schema_status(connection, tables)
            return SchemaStatus("untracked", found, expected, tables, view)
        if not existing and (twins := _case_twins(connection, tables, ours)):
            return SchemaStatus("foreign", found, expected, tables, twins)
        if not existing:
            others = _other_version_tables(connection, tables)
            return SchemaStatus("missing", found, expected, tables, (), others)
        foreign, sdk_layout = _foreign(connection, tables, existing)
        if foreign:
            return SchemaStatus("foreign", found, expected, tables, foreign, (), sdk_layout)
        return SchemaStatus("untracked", found, expected, tables, existing)
    state: State
    if found == (expected,):
        state = "incomplete" if absent else "current"
    elif all(_is_known(script_directory(), rev) for rev in found):
        state = "behind"
    elif all(_REVISION_ID.fullmatch(rev) for rev in found) and max(found) > expected:
        state = "ahead"
    else:
        state = "unknown"
    return SchemaStatus(state, found, expected, tables, absent)


def at_head(connection: Connection, tables: TableNames) -> bool:
    """Whether the schema is certainly `current`, in one statement: the version table's rows
    are the head alone, read together with a row-less select of each of our tables (which
    fails if one is missing). False when it is not, or when the statement failed otherwise
    than by a deadlock or a dropped connection (which the caller's unit of work runs again):
    a table missing or locked by a migration. `schema_status` then says where it stands.

    A store runs this on every opening: `schema_status` reads the catalog through
    SQLAlchemy's inspector and Alembic's context, which a store with an engine of its own
    (one per request) paid each time: ~30 ms on PostgreSQL, ~1 ms for this statement.
    """
    version = table(tables.version_table, column("version_num"), schema=tables.schema)
    probes = [
        select(null()).select_from(table(name, schema=tables.schema)).where(false())
        for name in _ours(tables)
    ]
    statement = union_all(select(version.c.version_num), *probes)
    try:
        found = list(connection.execute(statement).scalars())
    except DBAPIError as exc:
        if failure_kind(connection.dialect.name, exc) in ("deadlock", "disconnect"):
            raise
        return False
    return found == [head_revision()]


def _no_such_database(connection: Connection, tables: TableNames) -> bool:
    """Whether `tables.schema` names a MySQL or MariaDB database that does not exist (where
    reading its tables fails; PostgreSQL reads a missing schema as empty)."""
    if tables.schema is None or connection.dialect.name not in ("mysql", "mariadb"):
        return False
    return tables.schema not in inspect(connection).get_schema_names()


def _refuse_unattached(connection: Connection, tables: TableNames) -> None:
    """`ConfigurationError` where `tables.schema` is given on SQLite, which reads it as an
    attached database, and no database of that name is attached (every statement failed on
    a missing `schema.sqlite_master`)."""
    if tables.schema is None or connection.dialect.name != "sqlite":
        return
    if tables.schema not in inspect(connection).get_schema_names():
        raise ConfigurationError(
            f"schema {tables.schema!r}: SQLite has no schemas; it reads one as the name of "
            "an attached database, and no database of that name is attached to this "
            "connection. Leave the schema unset on SQLite (or ATTACH the database in the "
            "engine's connect listener)"
        )


def _ours(tables: TableNames) -> list[str]:
    """The tables of a whole set at head, version table aside."""
    return [tables.name(role) for role in ROLES if role != "version"]


def existing_view(connection: Connection, tables: TableNames) -> tuple[str, ...]:
    """The view's name, if a view or table has it (an upgrade would fail creating it)."""
    inspector, name = inspect(connection), tables.messages_view_name
    views = inspector.get_view_names(tables.schema)
    present = _folded(connection, [*views, *inspector.get_table_names(tables.schema)])
    return (name,) if _fold(connection, name) in present else ()


def _existing(connection: Connection, tables: TableNames, ours: list[str]) -> tuple[str, ...]:
    present = _folded(connection, inspect(connection).get_table_names(schema=tables.schema))
    return tuple(name for name in ours if _fold(connection, name) in present)


def _case_twins(connection: Connection, tables: TableNames, ours: list[str]) -> tuple[str, ...]:
    """MySQL and MariaDB: tables whose names differ from ours only in case. Table names
    there may tell case apart, but InnoDB's foreign key names never do, and ours are built
    from the table names: the migrations would fail on them, past their first statement."""
    if connection.dialect.name not in ("mysql", "mariadb") or _folds_case(connection):
        return ()
    wanted = {name.lower() for name in ours}
    present = inspect(connection).get_table_names(schema=tables.schema)
    return tuple(sorted(name for name in present if name.lower() in wanted))


def _fold(connection: Connection, name: str) -> str:
    """A table name as the database compares it: SQLite ignores the case of ASCII letters
    (`chat_sessions` is `Chat_sessions` there, which Alembic's version table lookup finds),
    and so do MySQL and MariaDB where `lower_case_table_names` is set (macOS, Windows)."""
    return name.lower() if _folds_case(connection) else name


def _folds_case(connection: Connection) -> bool:
    if connection.dialect.name == "sqlite":
        return True
    if connection.dialect.name not in ("mysql", "mariadb"):
        return False
    if "lower_case_table_names" not in connection.info:
        setting = connection.exec_driver_sql("SELECT @@lower_case_table_names").scalar_one()
        connection.info["lower_case_table_names"] = int(setting)
    return bool(connection.info["lower_case_table_names"])


def _folded(connection: Connection, names: list[str]) -> set[str]:
    return {_fold(connection, name) for name in names}


def _columns(connection: Connection, name: str, schema: str | None) -> set[str]:
    return {column["name"] for column in inspect(connection).get_columns(name, schema=schema)}


def _foreign(
    connection: Connection, tables: TableNames, existing: tuple[str, ...]
) -> tuple[tuple[str, ...], bool]:
    """Tables at our sessions/items names that are not ours; and whether they are the SDK's."""
    marks = {tables.sessions_table: "session_hash", tables.items_table: "seq"}
    foreign, sdk_layout = [], False
    for name, mark in marks.items():
        if name in existing:
            columns = _columns(connection, name, tables.schema)
            if mark not in columns:
                foreign.append(name)
                sdk_layout |= "message_data" in columns or columns == SDK_SESSIONS_COLUMNS
    return tuple(foreign), sdk_layout


def _other_version_tables(connection: Connection, tables: TableNames) -> tuple[str, ...]:
    """Version tables of this library under other prefixes (`<prefix>version` beside a
    `<prefix>sessions`, holding one of our revisions)."""
    names = set(inspect(connection).get_table_names(schema=tables.schema))
    folded = _folded(connection, list(names))
    found = []
    for name in sorted(names):
        prefix = name.removesuffix("version")
        if _fold(connection, name) == _fold(connection, tables.version_table):
            continue
        if prefix == name or _fold(connection, f"{prefix}sessions") not in folded:
            continue
        if _columns(connection, name, tables.schema) != {"version_num"}:
            continue
        context = MigrationContext.configure(
            connection, opts={"version_table": name, "version_table_schema": tables.schema}
        )
        heads = context.get_current_heads()
        if heads and all(_is_known(script_directory(), rev) for rev in heads):
            found.append(name)
    return tuple(found)


def _is_known(scripts: ScriptDirectory, revision: str) -> bool:
    try:
        return scripts.get_revision(revision) is not None
    except CommandError:
        return False
