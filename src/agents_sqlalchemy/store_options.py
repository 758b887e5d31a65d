"""How `SessionStore` and `SQLAlchemySession` options become values: search and embedder,
session settings, and the tables the SDK's `sessions_table`/`messages_table` name.

The SDK's `SessionSettings` is imported only when settings are made: importing the SDK
loads all of `agents` (seconds), and the command line often makes no session at all.

Example::

    embedder_option(True, "hashing")              # a HashingEmbedder
    drop_in_tables("chat_sessions", "chat_items")  # chat_sessions, chat_items, chat_sessions_*
    session_limit(None, settings_option({"limit": 20}))   # 20
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError
from .search import Embedder, HashingEmbedder, embedder_by_name
from .tables import TableNames

if TYPE_CHECKING:
    from agents.memory import SessionSettings


def drop_in_tables(sessions_table: str | None, messages_table: str | None) -> TableNames:
    """Tables for the SDK's two names: its own, and the rest prefixed by the first of them."""
    if not (sessions_table or messages_table):
        return TableNames()
    base = sessions_table or messages_table
    return TableNames(prefix=f"{base}_", sessions=sessions_table, items=messages_table)


def embedder_option(search: bool, embedder: Embedder | str | None) -> Embedder | None:
    """The store's embedder: None when search is off, else the one named or the default."""
    if not isinstance(search, bool):
        raise ConfigurationError(f"search must be True or False, got {search!r}")
    if isinstance(embedder, str):
        embedder = embedder_by_name(embedder)
    if embedder is not None and not isinstance(embedder, Embedder):
        raise ConfigurationError(f"embedder must be an Embedder or a name, got {embedder!r}")
    if not search:
        return None
    return embedder or HashingEmbedder()


def model_id(embedder: Embedder | None) -> str | None:
    """The embedder's model id (None: no search)."""
    return None if embedder is None else embedder.model_id


def settings_option(value: SessionSettings | dict[str, Any] | None) -> SessionSettings | None:
    """Session settings as the SDK coerces them (a dict is fine); None stays None."""
    if value is None:
        return None
    from agents.memory.session_settings import coerce_session_settings

    return coerce_session_settings(value)


def default_settings() -> SessionSettings:
    """The SDK's default session settings (no limit)."""
    from agents.memory import SessionSettings

    return SessionSettings()


def session_limit(
    limit: int | None, settings: SessionSettings | dict[str, Any] | None
) -> int | None:
    """What the SDK's `resolve_session_limit` gives: `limit` if given, else the settings'
    own (a dict is coerced first; typed settings are read as they are).

    >>> session_limit(5, None), session_limit(None, None), session_limit(None, {"limit": 3})
    (5, None, 3)
    """
    if limit is not None or settings is None:
        return limit
    if isinstance(settings, dict):
        settings = settings_option(settings)
    return None if settings is None else settings.limit
