"""`SessionStore`: one database, its engines and configuration, and the sessions it mints."""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from agents.memory import SessionSettings
from agents.memory.session_settings import coerce_session_settings
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from .codec import decode_item, encode_items
from .engines import EngineSource
from .errors import ConfigurationError, InvalidSessionIdError
from .models import build_models
from .repository import Repository, SessionKey
from .tables import TableNames

if TYPE_CHECKING:
    from .session import SQLAlchemySession


def session_key(
    session_id: object, user_id: str | None = None, metadata: dict[str, Any] | None = None
) -> SessionKey:
    """Validate an SDK session id: any non-empty Unicode text without NUL characters."""
    if not isinstance(session_id, str) or not session_id:
        raise InvalidSessionIdError(f"session id must be a non-empty string, got {session_id!r}")
    if "\x00" in session_id:
        raise InvalidSessionIdError("session id must not contain NUL characters")
    try:
        return SessionKey.of(session_id, user_id, metadata)
    except UnicodeEncodeError as exc:
        raise InvalidSessionIdError(f"session id is not valid Unicode text: {exc}") from exc


class SessionStore:
    """Agents SDK sessions kept in SQLite or PostgreSQL through SQLAlchemy.

    `url_or_engine` is a database URL (`"postgresql://..."`, `"sqlite+aiosqlite:///a.db"`),
    a bare file path (SQLite), or an `AsyncEngine` the app owns. A store made from a URL
    keeps one engine per event loop, so it works from `asyncio.run` called repeatedly and
    from `Runner.run_sync` in several threads.

    Example::

        async with SessionStore("agent.db", create_tables=True) as store:
            session = store.session("user-123", user_id="alice")
            await Runner.run(agent, "hello", session=session)
    """

    def __init__(
        self,
        url_or_engine: str | Path | URL | AsyncEngine,
        *,
        tables: TableNames | None = None,
        create_tables: bool = False,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        engine_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.tables = tables or TableNames()
        self.create_tables = create_tables
        self.session_settings = _settings(session_settings) or SessionSettings()
        self._source = EngineSource(url_or_engine, engine_kwargs)
        self._repository = Repository(self._source, build_models(self.tables))
        self._source.get_unbound()  # fail fast on a missing driver or a bad engine option
        self._schema_ready = False

    @property
    def engine(self) -> AsyncEngine:
        """The engine for the running event loop (the app's own engine if one was given)."""
        return self._source.get_unbound()

    def session(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> SQLAlchemySession:
        """A session object for `Runner.run(..., session=...)`; its row is made on first write.

        `user_id` and `metadata` are recorded when the session is first written.
        """
        from .session import SQLAlchemySession

        return SQLAlchemySession(
            session_id,
            store=self,
            user_id=user_id,
            metadata=metadata,
            session_settings=session_settings,
        )

    async def close(self) -> None:
        """Release the engines this store made; an engine passed in stays open."""
        await self._source.close()

    async def __aenter__(self) -> SessionStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # -- operations of one session, used by SQLAlchemySession -----------------------------------

    async def read_items(self, key: SessionKey, limit: int | None) -> list[Any]:
        """Live items of a session in order; with a limit, the latest `limit`."""
        if limit is not None and limit < 0:
            raise ConfigurationError(f"limit must be None or >= 0, got {limit}")
        if limit == 0:
            return []
        await self._ready()
        rows = await self._repository.read(key, limit)
        return [decode_item(payload, _where(key, seq)) for seq, payload in rows]

    async def append_items(self, key: SessionKey, items: list[Any]) -> None:
        """Append a batch, all or nothing."""
        payloads = encode_items(items)
        if payloads:
            await self._ready()
            await self._repository.append(key, payloads, None)

    async def pop_item(self, key: SessionKey) -> Any | None:
        """Remove and return the latest live item, or None."""
        await self._ready()
        return await self._repository.pop(
            key, lambda seq, text: decode_item(text, _where(key, seq))
        )

    async def clear_items(self, key: SessionKey) -> int:
        """Delete every item of a session; return how many."""
        await self._ready()
        return await self._repository.clear(key)

    async def _ready(self) -> None:
        if not self._schema_ready:
            await self._repository.ensure_schema(create=self.create_tables)
            self._schema_ready = True


def _settings(value: SessionSettings | dict[str, Any] | None) -> SessionSettings | None:
    return None if value is None else coerce_session_settings(value)


def _where(key: SessionKey, seq: int) -> str:
    return f"#{seq} of session {key.session_id[:80]!r}"
