"""Checks of what callers pass in, each raising the library's own error before any I/O.

Example::

    key = session_key("chat-1", user_id="alice")       # InvalidSessionIdError if unusable
    ttl = ttl_delta(3600)                              # timedelta(hours=1)
    check_range("limit", 20, 1, 1000)
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from .codec import encode_item
from .errors import ConfigurationError, InvalidSessionIdError
from .types import SessionKey


def session_key(
    session_id: object, user_id: str | None = None, metadata: dict[str, Any] | None = None
) -> SessionKey:
    """Validate an SDK session id (any non-empty Unicode text without NUL) and key it."""
    if not isinstance(session_id, str) or not session_id:
        raise InvalidSessionIdError(f"session id must be a non-empty string, got {session_id!r}")
    if "\x00" in session_id:
        raise InvalidSessionIdError("session id must not contain NUL characters")
    try:
        return SessionKey.of(session_id, user_id=user_id, metadata=json_object(metadata))
    except UnicodeEncodeError as exc:
        raise InvalidSessionIdError(f"session id is not valid Unicode text: {exc}") from exc


def ttl_delta(ttl: float | timedelta | None) -> timedelta | None:
    """A ttl option as a positive timedelta (or None)."""
    if ttl is None:
        return None
    ttl = ttl if isinstance(ttl, timedelta) else timedelta(seconds=ttl)
    if ttl <= timedelta(0):
        raise ConfigurationError(f"ttl must be positive, got {ttl}")
    return ttl


def json_object(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """Check that metadata is a JSON object; raise `ItemError` if not."""
    if value is not None:
        encode_item(value, "metadata")
    return value


def check_range(name: str, value: int, low: int, high: int | None = None) -> None:
    """Raise `ConfigurationError` unless `low <= value (<= high)`."""
    if value < low or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ConfigurationError(f"{name} must be {bounds}, got {value}")
