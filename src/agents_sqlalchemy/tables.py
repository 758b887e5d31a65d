"""`TableNames`: which tables the library uses, so it fits beside an app's own schema."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields

from .errors import ConfigurationError

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Constraint names are built from table names and must fit PostgreSQL's 63-byte identifiers.
MAX_NAME_LENGTH = 36
# The tables, in creation order; each can be renamed, the rest take `prefix + role`.
ROLES = (
    "sessions",
    "items",
    "keyring",
    "owner_keys",
    "search_index",
    "branches",
    "branch_items",
    "turn_usage",
    "version",
)
# The views, named the same way: `messages_view` shows the items in the layout of the Agents
# SDK's `agent_messages` table (id, session_id, message_data, created_at).
VIEWS = ("messages_view",)
#: The keys naming tables in an alembic.ini section and in `-x key=value`, by field.
OPTION_KEYS = (
    {"prefix": "prefix", "schema": "schema"}
    | {f"{role}_table": role for role in ROLES}
    | {view: view for view in VIEWS}
)


def _to_fill_in(url: str) -> str:
    """`url` as a command to paste takes it: a password hidden as ``***`` spelled PASSWORD,
    for the reader to fill in (``***`` would be sent as the password).

    >>> _to_fill_in("postgresql://app:***@db/app")
    'postgresql://app:PASSWORD@db/app'
    """
    scheme, found, rest = url.partition("://")
    credentials, at, place = rest.rpartition("@")
    user, colon, password = credentials.partition(":")
    if not (found and at and colon and password == "***"):
        return url
    return f"{scheme}://{user}:PASSWORD@{place}"


def check_identifier(what: str, value: str) -> str:
    """Return `value` if it is a plain SQL identifier, else raise `ConfigurationError`."""
    if not isinstance(value, str) or not _IDENTIFIER.fullmatch(value):
        raise ConfigurationError(
            f"{what} {value!r} is not a safe SQL identifier: use letters, digits and "
            "underscores, not starting with a digit"
        )
    if len(value) > MAX_NAME_LENGTH:
        raise ConfigurationError(f"{what} {value!r} is longer than {MAX_NAME_LENGTH} characters")
    return value


@dataclass(frozen=True, repr=False)
class TableNames:
    """Names of the library's tables: a prefix, per-table overrides and an optional schema.

    Example::

        TableNames()                              # agents_sqlalchemy_sessions, ..._items, ...
        TableNames(prefix="chat_")                # chat_sessions, chat_items, ...
        TableNames(items="transcript", schema="agents")
        TableNames().items_table                  # "agents_sqlalchemy_items"
        TableNames(prefix="chat_").messages_view_name   # "chat_messages_view"
    """

    prefix: str = "agents_sqlalchemy_"
    schema: str | None = None
    sessions: str | None = None
    items: str | None = None
    keyring: str | None = None
    owner_keys: str | None = None
    search_index: str | None = None
    branches: str | None = None
    branch_items: str | None = None
    turn_usage: str | None = None
    version: str | None = None
    messages_view: str | None = None

    def __post_init__(self) -> None:
        if self.prefix:
            check_identifier("table prefix", self.prefix)
        if self.schema is not None:
            check_identifier("schema", self.schema)
        names = [check_identifier(f"{role} table name", self.name(role)) for role in ROLES]
        names += [check_identifier(f"{view} name", self.name(view)) for view in VIEWS]
        if len(set(names)) != len(names):
            raise ConfigurationError(f"table names must be distinct, got {names}")

    @classmethod
    def from_options(cls, options: Mapping[str, str], *, strict: bool = False) -> TableNames:
        """The names an alembic.ini section or `-x` options give: `prefix`, `schema`,
        `items_table` (a `*_table` per table), `messages_view`, `version_table`. An app's
        env.py reads the names its `[agents_sqlalchemy]` section migrates so. Other keys
        (`script_location`, `sqlalchemy.url`) are left, or with `strict` refused (but `url`).

        >>> section = {"script_location": "agents_sqlalchemy:migrations", "prefix": "chat_",
        ...            "items_table": "chat_log"}
        >>> TableNames.from_options(section)
        TableNames(prefix='chat_', items='chat_log')
        """
        unknown = set(options) - set(OPTION_KEYS) - {"url"}
        if strict and unknown:
            keys = ", ".join(sorted(OPTION_KEYS))
            raise ConfigurationError(f"unknown option(s) {sorted(unknown)}; known: url, {keys}")
        return cls(**{OPTION_KEYS[k]: v for k, v in options.items() if k in OPTION_KEYS})

    def name(self, role: str) -> str:
        """The name for a role in `ROLES` (or a view of `VIEWS`): its override, else
        prefix + role."""
        override: str | None = getattr(self, role)
        return override or f"{self.prefix}{role}"

    def __repr__(self) -> str:
        """Only what differs from the defaults, as a user would write it.

        >>> TableNames(prefix="chat_")
        TableNames(prefix='chat_')
        """
        given = ", ".join(f"{name}={value!r}" for name, value in self.overrides().items())
        return f"TableNames({given})"

    def overrides(self) -> dict[str, str]:
        """The options that differ from the defaults, e.g. for a command line."""
        return {
            f.name: value
            for f in fields(self)
            if (value := getattr(self, f.name)) is not None and value != f.default
        }

    def command_line(
        self, action: str, url: str, revision: str = "", *, program: str = "agents-sqlalchemy db"
    ) -> str:
        """The command that runs `action` on these tables, e.g. for an error message.

        >>> TableNames(prefix="chat_").command_line("upgrade", "sqlite:///a.db")
        "agents-sqlalchemy db upgrade --url 'sqlite:///a.db' --prefix chat_"
        """
        options = [
            f"--{key.replace('_', '-')}-table {value}"
            if key in ROLES
            else f"--{key.replace('_', '-')} {value}"
            for key, value in self.overrides().items()
        ]
        words = [program, action, revision, f"--url '{_to_fill_in(url)}'", *options]
        return " ".join(word for word in words if word)

    @property
    def sessions_table(self) -> str:
        return self.name("sessions")

    @property
    def items_table(self) -> str:
        return self.name("items")

    @property
    def messages_view_name(self) -> str:
        """The read-only view of the items in the SDK's `agent_messages` layout:
        `id, session_id, message_data, created_at` (plaintext stores; see the README)."""
        return self.name("messages_view")

    @property
    def version_table(self) -> str:
        """The migrations' own version table (never the app's `alembic_version`)."""
        return self.name("version")


def table_names(tables: object) -> TableNames:
    """`tables` if it is a `TableNames`, the default names for None; else `ConfigurationError`."""
    if tables is None:
        return TableNames()
    if isinstance(tables, TableNames):
        return tables
    raise ConfigurationError(f"tables must be a TableNames, got {tables!r:.100}")
