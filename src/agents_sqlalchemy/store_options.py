"""How `SessionStore` and `SQLAlchemySession` options become values: search and embedder,
session settings, and the tables the SDK's `sessions_table`/`messages_table` name.

Example::

    embedder_option(True, "hashing")              # a HashingEmbedder
    drop_in_tables("chat_sessions", "chat_items")  # chat_sessions, chat_items, chat_sessions_*
"""

from __future__ import annotations

from typing import Any

from agents.memory import SessionSettings
from agents.memory.session_settings import coerce_session_settings

from .errors import ConfigurationError
from .search import Embedder, HashingEmbedder, embedder_by_name
from .tables import TableNames


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
    """Session settings as the SDK coerces them (a dict is fine)."""
    return None if value is None else coerce_session_settings(value)
