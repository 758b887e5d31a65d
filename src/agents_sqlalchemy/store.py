"""`SessionStore`: one database, its engines and configuration, and the sessions it mints."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from agents.memory import SessionSettings
from agents.memory.session_settings import coerce_session_settings
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from .codec import decode_item, encode_item, encode_items
from .engines import EngineSource
from .errors import ConfigurationError, InvalidSessionIdError
from .models import build_models
from .records import Removed, SessionInfo, SessionPage, decode_cursor, encode_cursor
from .repository import Repository, SessionKey
from .tables import TableNames

if TYPE_CHECKING:
    from .session import SQLAlchemySession

DELETE_BATCH = 500


def session_key(
    session_id: object, user_id: str | None = None, metadata: dict[str, Any] | None = None
) -> SessionKey:
    """Validate an SDK session id (any non-empty Unicode text without NUL) and key it."""
    if not isinstance(session_id, str) or not session_id:
        raise InvalidSessionIdError(f"session id must be a non-empty string, got {session_id!r}")
    if "\x00" in session_id:
        raise InvalidSessionIdError("session id must not contain NUL characters")
    try:
        return SessionKey.of(session_id, user_id=user_id, metadata=_json_object(metadata))
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
        ttl: float | timedelta | None = None,
        engine_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.tables = tables or TableNames()
        self.ttl = ttl_delta(ttl)
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
        ttl: float | timedelta | None = None,
    ) -> SQLAlchemySession:
        """A session object for `Runner.run(..., session=...)`; its row is made on first write.

        `user_id` and `metadata` are recorded when the session is first written (change
        them later with `session.update_metadata` and `session.set_user_id`); `ttl`, in
        seconds or a timedelta, overrides the store's for items this object adds.
        """
        from .session import SQLAlchemySession

        return SQLAlchemySession(
            session_id,
            store=self,
            user_id=user_id,
            metadata=metadata,
            session_settings=session_settings,
            ttl=ttl,
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

    async def append_items(
        self, key: SessionKey, items: list[Any], ttl: timedelta | None = None
    ) -> None:
        """Append a batch, all or nothing; items expire after `ttl` (else the store's)."""
        payloads = encode_items(items)
        if payloads:
            await self._ready()
            await self._repository.append(key, payloads, ttl or self.ttl)

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

    async def get_metadata(self, key: SessionKey) -> dict[str, Any]:
        """The session's metadata ({} when it has none or no row yet)."""
        await self._ready()
        row = await self._repository.read_session_columns(key, ("metadata",))
        return dict(row.metadata or {}) if row else {}

    async def update_metadata(self, key: SessionKey, values: dict[str, Any]) -> dict[str, Any]:
        """Merge `values` into the session's metadata (a None value removes a name)."""
        values = _json_object(values) or {}
        merged: dict[str, Any] = {}

        def change(row: Any) -> dict[str, Any]:
            merged.update(row.metadata or {})
            merged.update(values)
            for name in [name for name, value in values.items() if value is None]:
                del merged[name]
            return {"metadata": merged}

        await self._ready()
        await self._repository.update_session(key, change, ("metadata",))
        return merged

    async def set_user_id(self, key: SessionKey, user_id: str | None) -> None:
        """Give the session to `user_id` (None: to nobody)."""
        await self._ready()
        await self._repository.update_session(key, lambda _: {"user_id": user_id}, ())

    async def get_state(self, key: SessionKey) -> dict[str, Any]:
        """The session's whole state mapping ({} when empty)."""
        await self._ready()
        row = await self._repository.read_session_columns(key, ("state",))
        return dict(row.state or {}) if row else {}

    async def change_state(
        self, key: SessionKey, name: str, value: Any = None, *, delete: bool = False
    ) -> None:
        """Set (or delete) one named state value, under the session's lock."""
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"state names are non-empty strings, got {name!r}")
        if not delete:
            encode_item({"value": value}, f"state {name!r}")  # ItemError before any write

        def change(row: Any) -> dict[str, Any]:
            state = dict(row.state or {})
            if delete:
                state.pop(name, None)
            else:
                state[name] = value
            return {"state": state}

        await self._ready()
        await self._repository.update_session(key, change, ("state",))

    async def session_info(self, session_id: str) -> SessionInfo | None:
        """How the session stands (owner, metadata, times, live item count), or None."""
        await self._ready()
        row = await self._repository.describe(session_key(session_id))
        return _info(row) if row else None

    async def list_sessions(
        self,
        *,
        user_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> SessionPage:
        """A page of sessions, most recently active first; follow `page.next_cursor`.

        Filters: the owner, metadata values (all must match), and an activity window.
        Pages are keyset-paginated, so a page costs the same however many sessions exist.
        """
        if not 1 <= limit <= 1000:
            raise ConfigurationError(f"limit must be between 1 and 1000, got {limit}")
        await self._ready()
        rows = await self._repository.list_sessions(
            user_id=user_id,
            metadata=metadata,
            updated_after=updated_after,
            updated_before=updated_before,
            after=decode_cursor(cursor) if cursor else None,
            limit=limit + 1,
        )
        page = [_info(row) for row in rows[:limit]]
        last = rows[limit - 1] if len(rows) > limit else None
        return SessionPage(page, encode_cursor(last.updated_at, last.id) if last else None)

    async def delete_session(self, session_id: str) -> Removed:
        """Delete a session: its items (and their keys), state and row."""
        return await self._delete(session_hash=session_key(session_id).hash)

    async def delete_user(self, user_id: str) -> Removed:
        """Delete every session of a user, e.g. for an erasure request."""
        return await self._delete(user_id=user_id)

    async def purge_inactive(self, older_than: timedelta) -> Removed:
        """Delete the sessions with no activity for `older_than`."""
        return await self._delete(inactive_for=older_than)

    async def purge_expired(self, *, batch_size: int = 1000) -> int:
        """Delete expired items (reads already hide them), in batches; return how many."""
        await self._ready()
        return await self._repository.purge_expired(batch_size)

    async def _delete(self, **where: Any) -> Removed:
        await self._ready()
        condition = self._repository.sessions_where(**where)
        sessions, items = await self._repository.delete_sessions(condition, DELETE_BATCH)
        return Removed(sessions=sessions, items=items)

    async def _ready(self) -> None:
        if not self._schema_ready:
            await self._repository.ensure_schema(create=self.create_tables)
            self._schema_ready = True


def ttl_delta(ttl: float | timedelta | None) -> timedelta | None:
    if ttl is None:
        return None
    ttl = ttl if isinstance(ttl, timedelta) else timedelta(seconds=ttl)
    if ttl <= timedelta(0):
        raise ConfigurationError(f"ttl must be positive, got {ttl}")
    return ttl


def _json_object(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """Check that metadata is a JSON object; raise `ItemError` if not."""
    if value is not None:
        encode_item(value, "metadata")
    return value


def _info(row: Any) -> SessionInfo:
    return SessionInfo(
        session_id=row.session_id,
        user_id=row.user_id,
        metadata=dict(row.metadata or {}),
        created_at=row.created_at,
        updated_at=row.updated_at,
        item_count=row.item_count,
    )


def _settings(value: SessionSettings | dict[str, Any] | None) -> SessionSettings | None:
    return None if value is None else coerce_session_settings(value)


def _where(key: SessionKey, seq: int) -> str:
    return f"#{seq} of session {key.session_id[:80]!r}"
