"""The two public classes: `SessionStore`, a database and its configuration, and
`SQLAlchemySession`, one conversation in it as the Agents SDK sees it.

The store is a façade: what it does is done by its services (`services/`); the session's
behaviour is in `session.py`. They share this module because each builds the other: a
store mints sessions, and a session built the SDK's way opens (or shares) a store.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from .aio import run_blocking
from .crypto import Key, same_key
from .engines import DEFAULT_LOCK_TIMEOUT, normalize_url
from .errors import ConfigurationError
from .records import SearchHit
from .search import Embedder, SearchMode
from .services import ROTATE_BATCH, Services
from .session import StoreSession
from .store_management import ManagementMethods
from .store_options import (
    default_settings,
    drop_in_tables,
    embedder_option,
    model_id,
    settings_option,
)
from .tables import TableNames
from .types import Scope
from .validation import check_user_id, session_key, ttl_delta

if TYPE_CHECKING:
    from agents.memory import SessionSettings

Target = str | Path | URL | AsyncEngine


class SessionStore(ManagementMethods):
    """Agents SDK sessions kept in SQLite or PostgreSQL through SQLAlchemy.

    `url_or_engine` is a database URL (`"postgresql://..."`, `"sqlite+aiosqlite:///a.db"`),
    a bare file path (SQLite), or an `AsyncEngine` the app owns. The store works from any
    event loop or thread: `asyncio.run` called repeatedly, `Runner.run_sync` in threads.

    With `key` (a passphrase, 32 raw bytes, or a `KeyProvider`), every item and state is
    sealed under its own data key; deleting an item destroys its key. `ttl` (seconds or a
    timedelta) makes items expire: reads never return them, `purge_expired` deletes them.
    Items are indexed for `search()` just after they are written, by `embedder` (an
    `Embedder`, or a built-in's name; None: the built-in default, which downloads nothing);
    `search=False` turns indexing off. A write waits at most `lock_timeout` seconds for
    another writer of its session (`SessionBusyError`); with `statement_timeout`, no unit of
    work waits longer than that for a server (`DatabaseTimeoutError`).

    `close()` (or the end of an `async with` or `with` block) releases its connections;
    any call after that raises `StoreClosedError`.

    Example::

        async with SessionStore("agent.db", create_tables=True, key="passphrase") as store:
            session = store.session("user-123", user_id="alice")
            await Runner.run(agent, "hello", session=session)

        with SessionStore("agent.db", create_tables=True) as store:   # sync code
            Runner.run_sync(agent, "hello", session=store.session("user-123"))
    """

    def __init__(
        self,
        url_or_engine: Target,
        *,
        tables: TableNames | None = None,
        create_tables: bool = False,
        key: Key | None = None,
        ttl: float | timedelta | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        search: bool = True,
        embedder: Embedder | str | None = None,
        engine_kwargs: dict[str, Any] | None = None,
        sqlite_synchronous: str = "NORMAL",
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        statement_timeout: float | None = None,
    ) -> None:
        self.tables = tables or TableNames()
        self.ttl = ttl_delta(ttl)
        self._session_settings = settings_option(session_settings)  # None: made when asked
        self.embedder = embedder_option(search, embedder)
        self._services = Services.build(
            url_or_engine,
            tables=self.tables,
            key=key,
            ttl=self.ttl,
            embedder=self.embedder,
            create_tables=create_tables,
            engine_kwargs=engine_kwargs,
            sqlite_synchronous=sqlite_synchronous,
            lock_timeout=lock_timeout,
            statement_timeout=statement_timeout,
        )
        # Drop-in sessions sharing this store (see `SQLAlchemySession.close`).
        self._shares = 0
        self._shared_as: tuple[Any, ...] | None = None

    @property
    def session_settings(self) -> SessionSettings:
        """What every session of this store starts from (made, with the SDK, on first use)."""
        if self._session_settings is None:
            self._session_settings = default_settings()
        return self._session_settings

    @session_settings.setter
    def session_settings(self, value: SessionSettings | dict[str, Any] | None) -> None:
        self._session_settings = settings_option(value)

    @property
    def key(self) -> Key | None:
        """The key the store was opened with (after `rotate_key`, the new one)."""
        return self._services.keyring.key

    @property
    def create_tables(self) -> bool:
        """Whether the store migrates its tables to head on first use."""
        return self._services.keyring.create_tables

    @property
    def engine(self) -> AsyncEngine:
        """An `AsyncEngine` on the store's database (the app's own, if it gave one)."""
        return self._services.db.engine

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
        self._services.db.check_open()
        return SQLAlchemySession(
            session_id,
            store=self,
            user_id=user_id,
            metadata=metadata,
            session_settings=session_settings,
            ttl=ttl,
        )

    @property
    def closed(self) -> bool:
        """Whether the store was closed; every call then raises `StoreClosedError`."""
        return self._services.db.closed

    async def close(self) -> None:
        """Release the connections this store made; an engine passed in stays open.

        Afterwards every call on the store or its sessions raises `StoreClosedError`.
        """
        await self._services.close()

    async def _release(self) -> None:
        """A drop-in session lets go of its share; the last one closes the store."""
        with _shared_stores_lock:
            self._shares -= 1
            last = self._shares <= 0
            if last and _shared_stores.get(self._shared_as or ()) is self:
                del _shared_stores[self._shared_as or ()]
        if last:
            await self.close()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        run_blocking(self.close)

    async def __aenter__(self) -> SessionStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def search(
        self,
        query: str,
        *,
        user_id: str | None = None,
        limit: int = 5,
        mode: SearchMode = "hybrid",
        min_score: float | None = None,
    ) -> list[SearchHit]:
        """The stored items that best answer `query`, across sessions (one user's, or all).

        Ranks on vector similarity, keyword rank and recency together (`mode="vector"` or
        `"keyword"` for one signal); each hit says which session it came from. Only hits
        with evidence are returned (see `SQLAlchemySession.search`), or with `min_score`
        every hit whose score reaches it.
        """
        searcher = self._services.search()
        scope = Scope(user_id=check_user_id(user_id))
        return await searcher.search(scope, query, limit, mode, min_score)

    async def reindex(
        self, *, batch_size: int = 200, progress: Callable[[int, int], None] | None = None
    ) -> int:
        """Index every live item for the store's embedder; drop other models' vectors.

        Run it after changing the embedder (its `model_id`); until then the items indexed
        under the old model are found by keyword only, and vectors of two models are never
        compared. Items added meanwhile are indexed as they come. `progress(done, total)` is
        called before the first batch and after each one. Returns how many items were
        gone over (those without text to index included).
        """
        searcher = self._services.search()
        return await searcher.reindex(batch_size=batch_size, progress=progress)

    async def indexed_model(self) -> str | None:
        """The `model_id` of the embedder the latest item was indexed with (None: none yet).

        What the database was indexed with, so a tool can search with the same model.
        """
        return await self._services.management.indexed_model()

    async def flush(self) -> None:
        """Wait for the work that follows writes: new items indexed for search, and (in
        encrypted mode, on SQLite) removed keys checkpointed out of the WAL.

        Both run just after the write, off the caller's path; a search waits for the
        indexing by itself, and `close()` for all of it.
        """
        await self._services.background.flush()

    async def rotate_key(
        self,
        new_key: Key,
        *,
        batch_size: int = ROTATE_BATCH,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Re-wrap every data key under `new_key`, without re-encrypting any item.

        Runs in batches, one transaction each; if interrupted, call it again on a store
        opened with the old key and it resumes. Afterwards only `new_key` opens the
        database, and the old keyring row is deleted (on SQLite, scrubbed from the file).
        `progress(done, total)` is called before the first batch and after each one.
        Returns how many item keys were re-wrapped.
        """
        return await self._services.keyring.rotate(
            new_key, batch_size=batch_size, progress=progress
        )


class SQLAlchemySession(StoreSession):
    """An Agents SDK session kept by a `SessionStore`; also a drop-in for the SDK's class.

    Mint it from a store, or build it the way the SDK's `SQLAlchemySession` is built:
    sessions on the same database and tables then share one store, which the last of them
    to `close()` closes (a session from `store.session()` leaves its store open).

    Example::

        session = store.session("user-123")
        session = SQLAlchemySession("user-123", "agent.db", create_tables=True)
        session = SQLAlchemySession("user-123", engine=engine, create_tables=True)
        session = SQLAlchemySession.from_url("user-123", url="postgresql://...")
        await Runner.run(agent, "hello", session=session)

        with SQLAlchemySession.from_url("user-123", url="agent.db", create_tables=True) as s:
            Runner.run_sync(agent, "hello", session=s)
    """

    def __init__(
        self,
        session_id: str,
        url_or_engine: Target | None = None,
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
        search: bool = True,
        embedder: Embedder | str | None = None,
        engine_kwargs: dict[str, Any] | None = None,
    ) -> None:
        session_key(session_id, user_id, metadata)  # a bad id fails before any store opens
        targets = [x for x in (url_or_engine, engine, store) if x is not None]
        if len(targets) != 1:
            raise ConfigurationError("pass exactly one of url_or_engine, engine= or store=")
        owns_store = store is None
        if store is None:
            if tables is not None and (sessions_table or messages_table):
                raise ConfigurationError("pass tables= or sessions_table/messages_table, not both")
            store = _shared_store(
                targets[0],  # type: ignore[arg-type]
                tables or drop_in_tables(sessions_table, messages_table),
                engine_kwargs,
                create_tables,
                key,
                embedder_option(search, embedder),
            )
        elif not search or any(
            (tables, sessions_table, messages_table, create_tables, engine_kwargs, key, embedder)
        ):
            raise ConfigurationError(
                "table, key, search and engine options belong to the store= given"
            )
        super().__init__(
            session_id,
            store,
            store._services,
            user_id=user_id,
            metadata=metadata,
            session_settings=session_settings,
            ttl=ttl,
            owns_store=owns_store,
        )

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


# Sessions made on the same database and tables share one store (and so one engine per loop).
_shared_stores: weakref.WeakValueDictionary[tuple[Any, ...], SessionStore] = (
    weakref.WeakValueDictionary()
)
_shared_stores_lock = threading.Lock()


def _shared_store(
    url_or_engine: Target,
    tables: TableNames,
    engine_kwargs: dict[str, Any] | None,
    create_tables: bool,
    key: Key | None,
    embedder: Embedder | None,
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
        if store is None or store.closed:
            store = SessionStore(
                url_or_engine,
                tables=tables,
                create_tables=create_tables,
                key=key,
                search=embedder is not None,
                embedder=embedder,
                engine_kwargs=engine_kwargs,
            )
            store._shared_as = identity
            _shared_stores[identity] = store
        elif not same_key(store.key, key):
            raise ConfigurationError(
                "these tables are already open in this process with another key (or none): "
                "one database has one key"
            )
        elif model_id(store.embedder) != model_id(embedder):
            raise ConfigurationError(
                f"these tables are already open in this process with the embedder "
                f"{model_id(store.embedder)!r}, not {model_id(embedder)!r}: open both the same way"
            )
        store._services.keyring.create_tables |= create_tables
        store._shares += 1
        return store
