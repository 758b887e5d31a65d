"""`SQLAlchemySession`: the Agents SDK's session protocol over a `SessionStore`."""

from __future__ import annotations

import threading
import weakref
from datetime import timedelta
from pathlib import Path
from typing import Any

from agents.items import TResponseInputItem
from agents.memory import SessionSettings
from agents.memory.session_settings import resolve_session_limit
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from .crypto import Key, same_key
from .engines import normalize_url
from .errors import ConfigurationError
from .records import SearchHit
from .repository import Scope
from .search import SearchMode
from .store import SessionStore, session_key, ttl_delta
from .tables import TableNames

# Sessions made on the same database and tables share one store (and so one engine per loop).
_shared_stores: weakref.WeakValueDictionary[tuple[Any, ...], SessionStore] = (
    weakref.WeakValueDictionary()
)
_shared_stores_lock = threading.Lock()


def _shared_store(
    url_or_engine: str | Path | URL | AsyncEngine,
    tables: TableNames,
    engine_kwargs: dict[str, Any] | None,
    create_tables: bool,
    key: Key | None,
) -> SessionStore:
    """The store of these tables in this database, made on first use and shared after."""
    target = (
        ("engine", id(url_or_engine))
        if isinstance(url_or_engine, AsyncEngine)
        else ("url", normalize_url(url_or_engine).render_as_string(hide_password=False))
    )
    identity = (target, tables, repr(sorted((engine_kwargs or {}).items())))
    with _shared_stores_lock:
        store = _shared_stores.get(identity)
        if store is None:
            store = SessionStore(
                url_or_engine,
                tables=tables,
                create_tables=create_tables,
                key=key,
                engine_kwargs=engine_kwargs,
            )
            _shared_stores[identity] = store
        elif not same_key(store.key, key):
            raise ConfigurationError(
                "these tables are already open in this process with another key (or none): "
                "one database has one key"
            )
        store.create_tables = store.create_tables or create_tables
        return store


def _drop_in_tables(sessions_table: str | None, messages_table: str | None) -> TableNames:
    """Tables for the SDK's two names: its own, and the rest prefixed by the first of them."""
    if not (sessions_table or messages_table):
        return TableNames()
    base = sessions_table or messages_table
    return TableNames(prefix=f"{base}_", sessions=sessions_table, items=messages_table)


class SQLAlchemySession:
    """An Agents SDK session kept by a `SessionStore`; also a drop-in for the SDK's class.

    Mint it from a store, or build it the way the SDK's `SQLAlchemySession` is built:
    sessions on the same database and tables then share one store.

    Example::

        session = store.session("user-123")
        session = SQLAlchemySession("user-123", "agent.db", create_tables=True)
        session = SQLAlchemySession("user-123", engine=engine, create_tables=True)
        session = SQLAlchemySession.from_url("user-123", url="postgresql://...")
        await Runner.run(agent, "hello", session=session)
    """

    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        url_or_engine: str | Path | URL | AsyncEngine | None = None,
        *,
        engine: AsyncEngine | None = None,
        store: SessionStore | None = None,
        user_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        ttl: float | timedelta | None = None,
        tables: TableNames | None = None,
        sessions_table: str | None = None,
        messages_table: str | None = None,
        create_tables: bool = False,
        key: Key | None = None,
        engine_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self._key = session_key(session_id, user_id, metadata)
        self.session_id = session_id
        targets = [x for x in (url_or_engine, engine, store) if x is not None]
        if len(targets) != 1:
            raise ConfigurationError("pass exactly one of url_or_engine, engine= or store=")
        if store is None:
            if tables is not None and (sessions_table or messages_table):
                raise ConfigurationError("pass tables= or sessions_table/messages_table, not both")
            store = _shared_store(
                targets[0],  # type: ignore[arg-type]
                tables or _drop_in_tables(sessions_table, messages_table),
                engine_kwargs,
                create_tables,
                key,
            )
        elif tables or sessions_table or messages_table or create_tables or engine_kwargs or key:
            raise ConfigurationError("table, key and engine options belong to the store= given")
        self._store = store
        self._ttl = ttl_delta(ttl)
        self.session_settings = store.session_settings.resolve(session_settings)

    @classmethod
    def from_url(
        cls,
        session_id: str,
        *,
        url: str | URL,
        engine_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> SQLAlchemySession:
        """Build a session from a database URL, as the SDK's class does."""
        return cls(session_id, url, engine_kwargs=engine_kwargs, **kwargs)

    @property
    def store(self) -> SessionStore:
        """The store that keeps this session."""
        return self._store

    @property
    def engine(self) -> AsyncEngine:
        """The engine for the running event loop."""
        return self._store.engine

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """Items in order; `limit=n` gives the latest n (the settings' limit when None)."""
        return await self._store.read_items(
            self._key, resolve_session_limit(limit, self.session_settings)
        )

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append items, all or nothing."""
        await self._store.append_items(self._key, items, self._ttl)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the most recent item, or None when there is none."""
        item: TResponseInputItem | None = await self._store.pop_item(self._key)
        return item

    async def clear_session(self) -> None:
        """Delete every item of this session."""
        await self._store.clear_items(self._key)

    # -- beyond the protocol: search, owner, metadata, state -----------------------------------

    async def search(
        self, query: str, *, limit: int = 5, mode: SearchMode = "hybrid"
    ) -> list[SearchHit]:
        """The items of this session that best answer `query` (the store needs search=True)."""
        return await self._store.search_items(Scope(session=self._key), query, limit, mode)

    async def get_metadata(self) -> dict[str, Any]:
        """This session's metadata ({} if none)."""
        return await self._store.get_metadata(self._key)

    async def update_metadata(self, values: dict[str, Any]) -> dict[str, Any]:
        """Merge `values` into the metadata (None removes a name); return the result."""
        return await self._store.update_metadata(self._key, values)

    async def set_user_id(self, user_id: str | None) -> None:
        """Give this session to another owner (None: to nobody)."""
        await self._store.set_user_id(self._key, user_id)

    async def get_state(self, name: str, default: Any = None) -> Any:
        """One named state value (JSON), or `default`."""
        return (await self._store.get_state(self._key)).get(name, default)

    async def set_state(self, name: str, value: Any) -> None:
        """Set one named state value; `value` must be JSON-serialisable."""
        await self._store.change_state(self._key, name, value)

    async def delete_state(self, name: str) -> None:
        """Remove one named state value (no error if absent)."""
        await self._store.change_state(self._key, name, delete=True)

    def __repr__(self) -> str:
        return f"SQLAlchemySession({self.session_id!r}, store={self._store!r})"
