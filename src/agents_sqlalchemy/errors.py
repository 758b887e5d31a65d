"""The library's exception hierarchy: everything it raises derives from `AgentsSQLAlchemyError`.

Example::

    try:
        await session.add_items(items)
    except agents_sqlalchemy.ItemError as exc:
        log.warning("item rejected: %s", exc)
"""

from __future__ import annotations


class AgentsSQLAlchemyError(Exception):
    """Base class of every error this library raises."""


class ConfigurationError(AgentsSQLAlchemyError, ValueError):
    """An option is invalid: a table name, a URL, a session id, a limit."""


class InvalidSessionIdError(ConfigurationError):
    """A session id that cannot be stored (empty, not a string)."""


class ItemError(AgentsSQLAlchemyError, ValueError):
    """An item is not a JSON object that can be stored; nothing of its batch was written."""


class CorruptItemError(AgentsSQLAlchemyError):
    """A stored row cannot be read back as an item; it is left in place, never skipped."""


class SchemaError(AgentsSQLAlchemyError):
    """The database does not hold the tables this library expects."""


class DatabaseError(AgentsSQLAlchemyError):
    """The database failed or went away; the operation was rolled back."""
