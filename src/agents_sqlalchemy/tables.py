"""`TableNames`: which tables the library uses, so it fits beside an app's own schema."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .errors import ConfigurationError

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Constraint names are built from table names and must fit PostgreSQL's 63-byte identifiers.
MAX_NAME_LENGTH = 40


def _check_identifier(what: str, value: str) -> str:
    if not isinstance(value, str) or not _IDENTIFIER.fullmatch(value):
        raise ConfigurationError(
            f"{what} {value!r} is not a safe SQL identifier: use letters, digits and "
            "underscores, not starting with a digit"
        )
    if len(value) > MAX_NAME_LENGTH:
        raise ConfigurationError(f"{what} {value!r} is longer than {MAX_NAME_LENGTH} characters")
    return value


@dataclass(frozen=True)
class TableNames:
    """Names of the library's tables: a prefix, per-table overrides and an optional schema.

    Example::

        TableNames()                                   # agents_sqlalchemy_sessions, ...
        TableNames(prefix="chat_")                     # chat_sessions, chat_items, ...
        TableNames(items="conversation_items", schema="agents")
    """

    prefix: str = "agents_sqlalchemy_"
    sessions: str | None = None
    items: str | None = None
    version: str | None = None
    schema: str | None = None
    _resolved: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.prefix:
            _check_identifier("table prefix", self.prefix)
        if self.schema is not None:
            _check_identifier("schema", self.schema)
        resolved = {
            "sessions": self.sessions or f"{self.prefix}sessions",
            "items": self.items or f"{self.prefix}items",
            "version": self.version or f"{self.prefix}version",
        }
        for role, name in resolved.items():
            _check_identifier(f"{role} table name", name)
        if len(set(resolved.values())) != len(resolved):
            raise ConfigurationError(f"table names must be distinct, got {resolved}")
        object.__setattr__(self, "_resolved", resolved)

    @property
    def sessions_table(self) -> str:
        """Name of the sessions table."""
        return self._resolved["sessions"]

    @property
    def items_table(self) -> str:
        """Name of the items table."""
        return self._resolved["items"]

    @property
    def version_table(self) -> str:
        """Name of the migrations' own version table (never the app's `alembic_version`)."""
        return self._resolved["version"]
