"""`EngineSource`: the engine to use from the running event loop.

Connections of async drivers (asyncpg above all) belong to the loop that opened them, so a
store made from a URL keeps one engine per event loop; an engine the app passes in is used
as it is, and never disposed by the library.

URLs name PostgreSQL (asyncpg), SQLite (aiosqlite), MySQL or MariaDB (asyncmy or aiomysql).
A PostgreSQL URL ending in `?pgbouncer=true` is safe behind a transaction-pooling PgBouncer:
no prepared statement outlives its transaction or meets another client's.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import math
import os
import threading
import uuid
import weakref
from collections.abc import AsyncGenerator, Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, InvalidRequestError, NoSuchModuleError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool, PoolResetState

from ..errors import ConfigurationError
from .pragmas import open_existing, sqlite_pragmas

DEFAULT_LOCK_TIMEOUT = 30.0
_ASYNC_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+asyncpg",
    "mysql": "mysql+asyncmy",
    "mariadb": "mariadb+asyncmy",
}
# The extra that installs each backend's driver.
_EXTRAS = {"postgresql": "postgres", "mysql": "mysql", "mariadb": "mysql", "aiomysql": "aiomysql"}
MYSQL = ("mysql", "mariadb")
# The URL setting for a transaction-pooling PgBouncer (or another pooler like it).
PGBOUNCER = "pgbouncer"


def normalize_url(url: str | Path | URL) -> URL:
    """Turn a URL, or a bare file path meaning SQLite, into an async SQLAlchemy URL.

    MySQL and MariaDB URLs talk utf8mb4 unless they name a charset.

    >>> normalize_url("agent.db").render_as_string()
    'sqlite+aiosqlite:///agent.db'
    >>> normalize_url("chat?v2.db").database
    'chat?v2.db'
    >>> normalize_url("postgresql://u@db/app").drivername
    'postgresql+asyncpg'
    >>> normalize_url("mariadb://u@db/app").render_as_string()
    'mariadb+asyncmy://u@db/app?charset=utf8mb4'
    >>> normalize_url("postgresql://u@db/app?sslmode=require").query
    immutabledict({'ssl': 'require'})
    """
    if isinstance(url, str) and not url.strip():  # an unset variable, most often
        raise ConfigurationError(
            "the database URL is empty: give a URL, or a file path for SQLite "
            "(':memory:' for a database in memory)"
        )
    if isinstance(url, Path) or (isinstance(url, str) and "://" not in url):
        if str(url).startswith("file:"):  # an SQLite URI filename, with its query
            return make_url(f"sqlite+aiosqlite:///{url}")
        # A path is a path: its '?' starts no query, its '%41' is no escape.
        return URL.create("sqlite+aiosqlite", database=str(url))
    try:
        parsed = make_url(url)
        port = parsed.port
    except (ArgumentError, ValueError) as exc:
        raise ConfigurationError(f"not a database URL: {exc}") from exc
    if port is not None and not 0 < port < 65536:
        raise ConfigurationError(f"not a database URL: port {port} is not from 1 to 65535")
    backend = "postgresql" if parsed.drivername == "postgres" else parsed.drivername
    parsed = parsed.set(drivername=_ASYNC_DRIVERS.get(backend, backend))
    try:
        parsed.get_dialect()
    except NoSuchModuleError as exc:
        raise ConfigurationError(
            f"no SQLAlchemy dialect for {parsed.drivername!r}, the URL's database and driver: "
            "use SQLite, PostgreSQL, MySQL or MariaDB (sqlite://, postgresql://, mysql://, "
            "mariadb://)"
        ) from exc
    if parsed.get_backend_name() in MYSQL and "charset" not in parsed.query:
        parsed = parsed.update_query_dict({"charset": "utf8mb4"})
    if parsed.get_driver_name() == "asyncpg" and "sslmode" in parsed.query:
        # libpq's name, in the URLs psql and hosting providers give: asyncpg's is `ssl`.
        mode = parsed.query["sslmode"]
        parsed = parsed.difference_update_query(["sslmode"]).update_query_dict({"ssl": mode})
    return parsed


def pgbouncer_mode(url: URL) -> tuple[URL, bool]:
    """The URL without the library's `pgbouncer` setting, and whether it was on."""
    value = url.query.get(PGBOUNCER)
    if value is None:
        return url, False
    if not isinstance(value, str) or value.lower() not in ("true", "false", "1", "0"):
        raise ConfigurationError(f"{PGBOUNCER}= takes true or false, got {value!r}")
    if url.get_backend_name() != "postgresql":
        raise ConfigurationError(f"{PGBOUNCER}= applies to PostgreSQL URLs only")
    return url.difference_update_query([PGBOUNCER]), value.lower() in ("true", "1")


def _unnamed_statement() -> str:
    """A prepared statement name no other client of a pooled server connection uses."""
    return f"__asyncpg_{uuid.uuid4().hex}__"


def pgbouncer_options(url: URL, options: dict[str, Any]) -> tuple[URL, dict[str, Any]]:
    """Engine URL and options for a transaction pooler: no statement cache anywhere.

    asyncpg's cache and SQLAlchemy's keep named statements that another transaction (so
    another server connection) does not have; unique names keep clients from colliding.
    """
    connect_args = {
        "statement_cache_size": 0,
        "prepared_statement_name_func": _unnamed_statement,
        **options.get("connect_args", {}),
    }
    url = url.update_query_dict({"prepared_statement_cache_size": "0"})
    return url, {**options, "connect_args": connect_args}


def shared_memory(url: URL) -> URL:
    """An in-memory SQLite URL as a named in-memory database that every connection of this
    process can open while one stays open, so that `store.engine` reaches the store's own
    data (`:memory:` would give each connection a database of its own); other URLs as they
    are.
    """
    if url.get_backend_name() != "sqlite" or url.database not in (None, "", ":memory:"):
        return url
    name = f"file:agents_sqlalchemy_{uuid.uuid4().hex}"
    return url.set(database=name).update_query_dict(
        {"mode": "memory", "cache": "shared", "uri": "true"}
    )


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


def anchored(url: URL) -> URL:
    """A SQLite URL naming its file by a relative path, by the absolute one (from this
    process's directory now); other URLs as they are. A store opens the file its path named
    when it opened: SQLite resolves a relative path as each connection opens, and after a
    `chdir` the next connection would open another file.

    >>> anchored(normalize_url("/data/agent.db")).database
    '/data/agent.db'
    >>> anchored(normalize_url("agent.db")).database == os.path.abspath("agent.db")
    True
    """
    path = sqlite_file(url)
    if path is None or path.is_absolute():
        return url
    return url.set(database=os.path.abspath(path))


#: Server-side prepared statements an asyncmy connection keeps (the repository runs a few
#: dozen distinct statements).
STATEMENT_CACHE = 128


def _release(distribution: str) -> tuple[int, ...]:
    """The installed release of `distribution` as numbers (() if it is not installed)."""
    try:
        found = metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return ()
    numbers = []
    for part in found.split(".")[:3]:
        digits = "".join(itertools.takewhile(str.isdigit, part))
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers)


def refuse_broken_aiomysql(url: URL) -> None:
    """aiomysql up to 0.3.2 cannot send bytes with PyMySQL 1.2 (aiomysql issue 1080): every
    write failed deep in the driver with "'str' object is not callable"."""
    if url.get_driver_name() != "aiomysql":
        return
    pymysql, aiomysql = _release("PyMySQL"), _release("aiomysql")
    if pymysql >= (1, 2) and aiomysql and aiomysql <= (0, 3, 2):
        raise ConfigurationError(
            f"aiomysql {'.'.join(map(str, aiomysql))} cannot send bytes with PyMySQL "
            f"{'.'.join(map(str, pymysql))} (aiomysql issue 1080): "
            "pip install 'openai-agents-sqlalchemy[aiomysql]' (PyMySQL below 1.2), or use "
            "asyncmy (a mysql:// or mariadb:// URL, the [mysql] extra)"
        )


def asyncmy_statement_cache(url: URL, options: dict[str, Any]) -> dict[str, Any]:
    """Engine options whose asyncmy connections keep a cache of server-side prepared
    statements, where the installed asyncmy has one (`stmt_cache_size`) and neither the URL
    nor the app's `connect_args` set it.

    A cached statement runs in MySQL's binary protocol: no escaping of values into SQL text
    on the event loop (asyncmy escaped 400 sealed bytes in about 40 us, a 300-character
    JSON item in 20), and on MariaDB an `executemany` is one bulk command
    (`COM_STMT_BULK_EXECUTE`). A statement the server refuses to prepare (its
    `max_prepared_stmt_count` reached) runs as text, as without the cache."""
    connect_args = options.get("connect_args", {})
    if url.get_driver_name() != "asyncmy" or "stmt_cache_size" in {*url.query, *connect_args}:
        return options
    try:
        import asyncmy

        takes = "stmt_cache_size" in inspect.signature(asyncmy.connect).parameters
    except (ImportError, TypeError, ValueError):  # no driver (reported later), no signature
        return options
    if not takes:
        return options
    return {**options, "connect_args": {**connect_args, "stmt_cache_size": STATEMENT_CACHE}}


def _pg_lock_timeout(options: dict[str, Any], lock_timeout: float) -> dict[str, Any]:
    """Engine options whose asyncpg connections open with `lock_timeout` set (no round trip
    per write); a `lock_timeout` of the app's own `server_settings` wins."""
    connect_args = dict(options.get("connect_args", {}))
    settings = {"lock_timeout": str(max(1, round(lock_timeout * 1000)))}
    connect_args["server_settings"] = settings | dict(connect_args.get("server_settings", {}))
    return {**options, "connect_args": connect_args}


def mysql_lock_wait(engine: Engine, lock_timeout: float) -> None:
    """Bound InnoDB's row-lock waits on every new connection of an engine the library made
    (whole seconds, at least one: what `innodb_lock_wait_timeout` takes)."""
    seconds = max(1, math.ceil(lock_timeout))

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"SET SESSION innodb_lock_wait_timeout = {seconds}")
        finally:
            cursor.close()


# The server's status flag of an open transaction, in every MySQL protocol OK packet.
_SERVER_STATUS_IN_TRANS = 1


def mysql_in_transaction(dbapi_connection: Any) -> bool:
    """Whether the server said the MySQL connection's transaction is still open (True when
    its driver does not say)."""
    status = getattr(dbapi_connection.driver_connection, "server_status", None)
    return status is None or bool(status & _SERVER_STATUS_IN_TRANS)


def mysql_reset_if_open(engine: Engine) -> None:
    """Roll back a MySQL connection going back to the pool only if its transaction is
    still open, in place of the pool's own reset (the engine is made with
    `pool_reset_on_return=None`), which costs a round trip after every commit too."""

    @event.listens_for(engine, "reset")
    def _on_reset(dbapi_connection: Any, _record: Any, state: PoolResetState) -> None:
        if state.terminate_only or not state.asyncio_safe:
            return
        if mysql_in_transaction(dbapi_connection):
            dbapi_connection.rollback()


def _close_within_bounds(engine: AsyncEngine) -> None:
    """PostgreSQL: the pool closes a connection as SQLAlchemy terminates one, gracefully for
    two seconds at most, then dropped. asyncpg's graceful close waits for the server without
    end, so `close()` never returned from a server that stopped answering."""
    dialect = engine.sync_engine.dialect
    dialect.do_close = dialect.do_terminate  # type: ignore[method-assign]


def _connect_whole(engine: AsyncEngine) -> None:
    """PostgreSQL: a connection attempt runs to its end even when its caller is cancelled
    (a task cancelled, `statement_timeout`): the caller stops waiting at once, and the
    connection made for no one is closed. asyncpg first opens a socket to ask for TLS;
    cancelled before asyncio handed that socket over, it failed a future of its own with
    "unexpected connection_lost() call" that nothing read, and asyncio logged "Future
    exception was never retrieved"."""
    connect = engine.sync_engine.dialect.loaded_dbapi.asyncpg.connect

    async def whole(*args: Any, **kwargs: Any) -> Any:
        attempt = asyncio.ensure_future(connect(*args, **kwargs))
        try:
            return await asyncio.shield(attempt)
        except asyncio.CancelledError:
            _UNCLAIMED.add(attempt)  # kept until it ends
            attempt.add_done_callback(_close_unclaimed)
            raise

    @event.listens_for(engine.sync_engine, "do_connect")
    def _on_connect(_dialect: Any, _record: Any, _cargs: Any, cparams: dict[str, Any]) -> None:
        cparams.setdefault("async_creator_fn", whole)


# Connection attempts whose callers were cancelled, still under way.
_UNCLAIMED: set[asyncio.Future[Any]] = set()


def _close_unclaimed(attempt: asyncio.Future[Any]) -> None:
    """Close what a connection attempt its caller gave up on made; its failure, if it
    failed, is no one's to hear (the caller was cancelled, and a later attempt meets it)."""
    _UNCLAIMED.discard(attempt)
    if not attempt.cancelled() and attempt.exception() is None:
        attempt.result().terminate()


def engine_options(engine_kwargs: object) -> dict[str, Any]:
    """A copy of the `engine_kwargs` option (a dict, or None for none)."""
    if engine_kwargs is None:
        return {}
    if not isinstance(engine_kwargs, dict):
        raise ConfigurationError(f"engine_kwargs must be a dict, got {engine_kwargs!r:.100}")
    refuse_streaming(engine_kwargs.get("execution_options") or {}, "engine_kwargs")
    return dict(engine_kwargs)


def refuse_streaming(options: Any, given: str) -> None:
    """Refuse execution options that stream results (`stream_results`, `yield_per`): a
    server-side cursor cannot cross to the worker threads that process many rows, nor
    outlive the statement on PostgreSQL, where the store's units then failed."""
    streaming = sorted(k for k in ("stream_results", "yield_per") if dict(options).get(k))
    if streaming:
        raise ConfigurationError(
            f"the {given} stream results ({', '.join(streaming)}): the store reads rows "
            "whole; give it an engine without that execution option"
        )


class ClosedAtLoopEnd:
    """Closes an engine's connections as `asyncio.run` ends the loop that made it, while
    the loop still runs: those of a loop that has ended cannot be closed from another, and
    stayed open until Python's garbage collector freed them (two per request handled by
    `asyncio.run` in a thread of its own, until the server refused more).

    An async generator begun on the loop does it: `asyncio.run`, as every runner that
    calls the loop's `shutdown_asyncgens`, closes those begun on it, and this one's
    `finally` disposes the engine. The engine stays the loop's: a unit of an app's own
    generator closed at the same time still runs (on a connection left to the collector,
    as before). Made inside the loop (`EngineSource.get`).

    Example::

        closer = ClosedAtLoopEnd(engine)
        closer.cancel()                   # the engine went otherwise
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine: AsyncEngine | None = engine
        self._keeper = self._closing()
        with contextlib.suppress(StopIteration):  # run to its `yield`, here, on this loop
            self._keeper.asend(None).send(None)

    async def _closing(self) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            if (engine := self._engine) is not None:
                self._engine = None
                await engine.dispose()

    def cancel(self) -> None:
        """Nothing to close at the loop's end: the generator ends now, without waiting
        (left to the loop, one that never runs again would hold its `aclose` unawaited).
        One its loop is closing already (`asyncio.run` ending in another thread) is left to
        it: that loop disposes the engine."""
        self._engine = None
        with contextlib.suppress(StopIteration, RuntimeError):  # RuntimeError: "already running"
            self._keeper.aclose().send(None)

    @staticmethod
    def may_begin(loop: asyncio.AbstractEventLoop) -> bool:
        """Whether a closer can still be begun on `loop`: not once its `shutdown_asyncgens`
        has started (a unit of an app's generator closed by it: the loop warns of a
        generator begun then, an error where warnings are; its engine is then left to the
        garbage collector, as a loop closed without that call leaves it)."""
        return not getattr(loop, "_asyncgens_shutdown_called", False)


class EngineSource:
    """Hands out the engine for the running event loop.

    Example::

        source = EngineSource("sqlite+aiosqlite:///agent.db")
        engine = source.get()      # inside a coroutine: this loop's engine
        await source.close()
    """

    def __init__(
        self,
        url_or_engine: str | Path | URL | AsyncEngine,
        engine_kwargs: dict[str, Any] | None,
        *,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        may_create: Callable[[], bool] = lambda: True,
    ) -> None:
        self._lock = threading.Lock()
        self._engines: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncEngine] = (
            weakref.WeakKeyDictionary()
        )
        # The thread each engine's loop ran on (an engine's connections hold its loop: a
        # loop never closed, its thread ended, is kept alive by its engine alone).
        self._threads: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, threading.Thread] = (
            weakref.WeakKeyDictionary()
        )
        self._unbound: AsyncEngine | None = None
        # Per loop, what closes its engine as `asyncio.run` ends the loop.
        self._at_end: dict[asyncio.AbstractEventLoop, ClosedAtLoopEnd] = {}
        self._lock_timeout = lock_timeout
        self._may_create = may_create
        # Behind a transaction pooler: set by the URL's `pgbouncer=true`.
        self.pooled = False
        engine_kwargs = engine_options(engine_kwargs)
        if isinstance(url_or_engine, AsyncEngine):
            if engine_kwargs:
                raise ConfigurationError("engine_kwargs apply only when the store makes the engine")
            refuse_streaming(url_or_engine.get_execution_options(), "engine given")
            sqlite_pragmas(url_or_engine.sync_engine, lock_timeout=lock_timeout)
            self._given: AsyncEngine | None = url_or_engine
            self.url = url_or_engine.url
        else:
            self._given = None
            self.url = anchored(shared_memory(normalize_url(url_or_engine)))
            self._engine_url, self.pooled = pgbouncer_mode(self.url)
            self._engine_kwargs = engine_kwargs

    @property
    def sets_lock_timeout(self) -> bool:
        """Whether PostgreSQL connections get `lock_timeout` when they open (engines made
        here, not behind a pooler); elsewhere each write sets it with `SET LOCAL`."""
        return self._given is None and not self.pooled and self.dialect_name == "postgresql"

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
                self._threads[loop] = threading.current_thread()
                if ClosedAtLoopEnd.may_begin(loop):
                    self._at_end[loop] = ClosedAtLoopEnd(engine)
            return engine

    def engines(self) -> list[AsyncEngine]:
        """The engines in use (the app's, or those made here), for pool gauges."""
        if self._given is not None:
            return [self._given]
        with self._lock:
            made = list(self._engines.values())
            return made if self._unbound is None else [*made, self._unbound]

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
        url, options = self._engine_url, self._engine_kwargs
        if self.pooled:
            url, options = pgbouncer_options(url, options)
        elif self.sets_lock_timeout:
            options = _pg_lock_timeout(options, self._lock_timeout)
        refuse_broken_aiomysql(url)
        options = asyncmy_statement_cache(url, options)
        reset_if_open = self.dialect_name in MYSQL and "pool_reset_on_return" not in options
        if reset_if_open:
            options = {**options, "pool_reset_on_return": None}
        if url.query.get("mode") == "memory":  # kept alive by the store's own connection
            options = {"poolclass": NullPool, **options}
        try:
            # A failed statement's message leaves its parameters (items) out of logs.
            engine = create_async_engine(url, **{"hide_parameters": True, **options})
        except (ImportError, InvalidRequestError) as exc:
            default = _ASYNC_DRIVERS.get(self.dialect_name)
            if default is None or self.url.drivername in (default, f"{self.dialect_name}+aiomysql"):
                name = "aiomysql" if self.url.get_driver_name() == "aiomysql" else self.dialect_name
                extra = f"[{_EXTRAS[name]}]" if name in _EXTRAS else ""
                raise ConfigurationError(
                    f"the driver for {self.url.drivername} is not installed ({exc}): "
                    f"pip install 'openai-agents-sqlalchemy{extra}'"
                ) from exc
            raise ConfigurationError(
                f"{self.url.drivername} is not an asyncio driver this library can use ({exc}): "
                f"give a {default}:// URL (or {self.dialect_name}://, which means it)"
            ) from exc
        except (ArgumentError, TypeError) as exc:
            raise ConfigurationError(f"cannot create an engine for {self.url!r}: {exc}") from exc
        sqlite_pragmas(engine.sync_engine, lock_timeout=self._lock_timeout)
        open_existing(engine.sync_engine, self._may_create)
        if self.dialect_name in MYSQL:
            mysql_lock_wait(engine.sync_engine, self._lock_timeout)
        if reset_if_open:
            mysql_reset_if_open(engine.sync_engine)
        if self.dialect_name == "postgresql":
            _close_within_bounds(engine)
            _connect_whole(engine)
        return engine

    def _forget_closed_loops(self) -> None:
        """Drop the engines of loops that will not run again: closed, or never closed but
        their thread ended (`Runner.run_sync` in a thread per request leaves its loop so):
        one engine and its connections were kept per such thread, for ever."""
        for loop, engine in list(self._engines.items()):
            thread = self._threads.get(loop)
            ended = thread is not None and not thread.is_alive() and not loop.is_running()
            if loop.is_closed() or ended:
                # Its connections cannot be closed from here; drop them.
                engine.sync_engine.dispose(close=False)
                del self._engines[loop]
                if (closer := self._at_end.pop(loop, None)) is not None:
                    closer.cancel()

    async def release_loop(self) -> None:
        """Dispose the running loop's engine, if one was made here (its loop is ending)."""
        if self._given is not None:
            return
        loop = asyncio.get_running_loop()
        with self._lock:
            engine = self._engines.pop(loop, None)
            closer = self._at_end.pop(loop, None)
        if closer is not None:
            closer.cancel()
        if engine is not None:
            await engine.dispose()

    async def close(self) -> None:
        """Dispose the engines made here; an app's own engine is left alone."""
        if self._given is not None:
            return
        with self._lock:
            engines = dict(self._engines)
            self._engines.clear()
            closers, self._at_end = list(self._at_end.values()), {}
            unbound, self._unbound = self._unbound, None
        for closer in closers:
            closer.cancel()
        current = asyncio.get_running_loop()
        for loop, engine in engines.items():
            if loop is current:
                await engine.dispose()
            else:
                engine.sync_engine.dispose(close=False)
        if unbound is not None:
            await unbound.dispose()
