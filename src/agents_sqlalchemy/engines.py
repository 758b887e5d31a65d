"""`EngineSource`: the engine to use from the running event loop.

Connections of async drivers (asyncpg above all) belong to the loop that opened them, so a
store made from a URL keeps one engine per event loop; an engine the app passes in is used
as it is, and never disposed by the library.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from .errors import ConfigurationError

SQLITE_BUSY_TIMEOUT_MS = 30_000
_ASYNC_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg"}


def normalize_url(url: str | Path | URL) -> URL:
    """Turn a URL, or a bare file path meaning SQLite, into an async SQLAlchemy URL.

    >>> normalize_url("agent.db").render_as_string()
    'sqlite+aiosqlite:///agent.db'
    >>> normalize_url("postgresql://u@db/app").drivername
    'postgresql+asyncpg'
    """
    if isinstance(url, Path) or (isinstance(url, str) and "://" not in url):
        return make_url(f"sqlite+aiosqlite:///{url}")
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ConfigurationError(f"not a database URL: {exc}") from exc
    backend = "postgresql" if parsed.drivername == "postgres" else parsed.drivername
    return parsed.set(drivername=_ASYNC_DRIVERS.get(backend, backend))


def sqlite_file(url: URL) -> Path | None:
    """The file a SQLite URL opens; None for another database, memory or a `file:` URI.

    >>> sqlite_file(normalize_url("data/agent.db"))
    PosixPath('data/agent.db')
    >>> sqlite_file(normalize_url("sqlite+aiosqlite://")) is None
    True
    """
    database = url.database
    if url.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    if "uri" in url.query or database.startswith("file:"):
        return None
    return Path(database)


_PREPARED: weakref.WeakSet[Engine] = weakref.WeakSet()


def sqlite_pragmas(engine: Engine, *, synchronous: str | None = None) -> None:
    """Set every new SQLite connection of `engine` up: lock waits, foreign keys, WAL.

    `synchronous` ("NORMAL", "FULL", ...) is set only on engines the library made.
    """
    if engine.dialect.name != "sqlite" or engine in _PREPARED:
        return
    _PREPARED.add(engine)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.execute("PRAGMA secure_delete = ON")
            cursor.execute("PRAGMA journal_mode = WAL")
            if synchronous:
                cursor.execute(f"PRAGMA synchronous = {synchronous}")
        finally:
            cursor.close()


class EngineSource:
    """Hands out the engine for the running event loop.

    Example::

        source = EngineSource("sqlite+aiosqlite:///agent.db")
        engine = source.get()      # inside a coroutine: this loop's engine
        await source.close()
    """

    def __init__(
        self, url_or_engine: str | Path | URL | AsyncEngine, engine_kwargs: dict[str, Any] | None
    ) -> None:
        self._lock = threading.Lock()
        self._engines: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncEngine] = (
            weakref.WeakKeyDictionary()
        )
        self._unbound: AsyncEngine | None = None
        if isinstance(url_or_engine, AsyncEngine):
            if engine_kwargs:
                raise ConfigurationError("engine_kwargs apply only when the store makes the engine")
            sqlite_pragmas(url_or_engine.sync_engine)
            self._given: AsyncEngine | None = url_or_engine
            self.url = url_or_engine.url
        else:
            self._given = None
            self.url = normalize_url(url_or_engine)
            self._engine_kwargs = dict(engine_kwargs or {})

    @property
    def owns_engines(self) -> bool:
        """Whether the engines were made here (and are disposed by `close`)."""
        return self._given is None

    @property
    def dialect_name(self) -> str:
        return self.url.get_backend_name()

    def get(self) -> AsyncEngine:
        """The engine for the running loop (made on first use)."""
        if self._given is not None:
            return self._given
        loop = asyncio.get_running_loop()
        with self._lock:
            engine = self._engines.get(loop)
            if engine is None:
                self._forget_closed_loops()
                engine = self._unbound if self._unbound is not None else self._make()
                self._unbound = None
                self._engines[loop] = engine
            return engine

    def get_unbound(self) -> AsyncEngine:
        """An engine for callers outside any loop; the first loop to run adopts it."""
        if self._given is not None:
            return self._given
        try:
            return self.get()
        except RuntimeError:
            with self._lock:
                if self._unbound is None:
                    self._unbound = self._make()
                return self._unbound

    def _make(self) -> AsyncEngine:
        try:
            engine = create_async_engine(self.url, **self._engine_kwargs)
        except ImportError as exc:
            extra = "[postgres]" if self.dialect_name == "postgresql" else ""
            raise ConfigurationError(
                f"the driver for {self.url.drivername} is not installed ({exc}): "
                f"pip install 'openai-agents-sqlalchemy{extra}'"
            ) from exc
        except (ArgumentError, TypeError) as exc:
            raise ConfigurationError(f"cannot create an engine for {self.url!r}: {exc}") from exc
        sqlite_pragmas(engine.sync_engine)
        return engine

    def _forget_closed_loops(self) -> None:
        for loop, engine in list(self._engines.items()):
            if loop.is_closed():
                # Its connections cannot be closed from here; drop them.
                engine.sync_engine.dispose(close=False)
                del self._engines[loop]

    async def release_loop(self) -> None:
        """Dispose the running loop's engine, if one was made here (its loop is ending)."""
        if self._given is not None:
            return
        with self._lock:
            engine = self._engines.pop(asyncio.get_running_loop(), None)
        if engine is not None:
            await engine.dispose()

    async def close(self) -> None:
        """Dispose the engines made here; an app's own engine is left alone."""
        if self._given is not None:
            return
        with self._lock:
            engines = dict(self._engines)
            self._engines.clear()
            unbound, self._unbound = self._unbound, None
        current = asyncio.get_running_loop()
        for loop, engine in engines.items():
            if loop is current:
                await engine.dispose()
            else:
                engine.sync_engine.dispose(close=False)
        if unbound is not None:
            await unbound.dispose()
