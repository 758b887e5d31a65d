"""`Database`: where the repository's units of work run, each in one transaction.

A unit of work is a plain function of a synchronous SQLAlchemy `Connection`. How it runs
depends on the database:

- a SQLite file given by URL or path: a synchronous pysqlite engine (`SQLiteFile`), the
  whole unit in one worker thread, so an operation costs one thread hop (through aiosqlite
  every cursor call is a hop of its own, about 18 for an append); a unit the caller marks
  `small` runs on the caller's thread, unless the database is locked;
- an async engine (asyncpg, asyncmy, aiomysql, or an app's own `AsyncEngine`): the whole
  unit, the connection's checkout and return included, in one greenlet on the running
  loop's engine (SQLAlchemy's `greenlet_spawn`, what `AsyncConnection.run_sync` uses); a
  store made from a URL keeps one engine per event loop, as asyncpg connections belong to
  the loop that opened them.

Waits are bounded: a write waits at most `lock_timeout` for another writer's lock
(`SessionBusyError`), a unit of work on a server at most `statement_timeout`
(`DatabaseTimeoutError`). A deadlock victim is run again; so is a unit of work whose
connection turned out to be dead (a server restart) before it committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import greenlet_spawn

from ..aio import settle
from ..errors import (
    AgentsSQLAlchemyError,
    ConfigurationError,
    ConstraintError,
    CorruptItemError,
    DatabaseError,
    DatabaseTimeoutError,
    SchemaError,
    SessionBusyError,
    StoreClosedError,
)
from ..telemetry import Operation, Probe, Telemetry, current, in_context
from .engines import DEFAULT_LOCK_TIMEOUT, MYSQL, EngineSource, mysql_in_transaction, sqlite_file
from .failures import (
    failure_kind,
    missing_table,
    mysql_number,
    never_sent,
    not_utf8,
    raised_by_trigger,
)
from .sqlite_file import Locked, SQLiteFile, begin_immediate, in_one_snapshot

T = TypeVar("T")
Work = Callable[[Connection], T]
# A deadlock victim is run again this many times, after a short random pause.
DEADLOCK_RETRIES = 8


@dataclass
class _Attempt:
    """How far one run of a unit of work got: past it, the outcome of a commit is unknown."""

    committing: bool = False


#: The drivers whose own exceptions SQLAlchemy may let through unwrapped.
DRIVERS = ("asyncpg", "asyncmy", "aiomysql", "pymysql", "aiosqlite", "sqlite3")


def _from_driver(exc: BaseException) -> bool:
    """Whether `exc` is a database driver's own exception."""
    return type(exc).__module__.split(".")[0] in DRIVERS


class _Unsent(Exception):
    """A statement the driver refused to send, its connection broken: run it again."""


class Unchanged(Exception):
    """Raised by a write's work that found nothing to change: its transaction rolls back,
    and with it the touch of the session's row its lock made (a pop of an empty session is
    no activity), and `Database.write` returns `result`.

    Example::

        def pop(conn):
            taken = take_last(conn)
            if taken is None:
                raise Unchanged(None)
            return taken
    """

    def __init__(self, result: Any = None) -> None:
        super().__init__()
        self.result = result


def leave_autocommit(conn: Connection) -> None:
    """Give `conn` its dialect's default isolation level if an app's engine made it in
    autocommit, where `begin()` alone would start nothing (the pool restores the engine's
    level as the connection goes back)."""
    driver = conn.connection.dbapi_connection
    if driver is not None and conn.dialect.detect_autocommit_setting(driver):
        conn.execution_options(isolation_level=conn.default_isolation_level)


@contextlib.contextmanager
def database_errors(url: URL, what: str, *, outcome: str = "nothing was changed") -> Iterator[None]:
    """Turn the driver's failures into `DatabaseError` ("{what}, {outcome}: ..."); the
    library's own errors pass through."""
    try:
        yield
    except AgentsSQLAlchemyError:
        raise
    except DBAPIError as exc:
        problem = known_problem(url, exc)
        raise DatabaseError(problem or f"{what}, {outcome}: {exc.orig}") from exc
    except (OSError, asyncio.TimeoutError) as exc:
        raise unreachable(url, exc) from exc


def unreachable(url: URL, exc: Exception) -> DatabaseError:
    """The error of a database that could not be reached: `exc` says why (a connect
    timeout, whose text is empty, as no answer in time).

    >>> from sqlalchemy import make_url
    >>> print(unreachable(make_url("postgresql://u:p@db/x"), asyncio.TimeoutError()))
    cannot reach the database postgresql://u:***@db/x: no answer in time
    """
    timed_out = isinstance(exc, (TimeoutError, asyncio.TimeoutError))
    why = str(exc) or ("no answer in time" if timed_out else repr(exc))
    return DatabaseError(f"cannot reach the database {url!r}: {why}")


def known_problem(url: URL, exc: DBAPIError) -> str | None:
    """What a driver's failure means, said so that a user can act on it: a server that
    cannot be reached, a pooler that refuses the connection, a SQLite file that cannot be
    opened; None for any other failure."""
    if url.get_backend_name() in MYSQL and mysql_number(exc) in (2002, 2003, 2005):
        return f"cannot reach the database {url!r}: {exc.orig}"
    if "unsupported startup parameter" in str(exc.orig):  # PgBouncer's refusal
        return (
            f"the server refused the connection, nothing was changed ({exc.orig}): a pooler "
            "such as PgBouncer refuses the lock_timeout this library sets when a connection "
            "opens; add ?pgbouncer=true to the URL"
        )
    return sqlite_open_problem(url) if "unable to open" in str(exc.orig) else None


def sqlite_open_problem(url: URL) -> str | None:
    """Why SQLite cannot open the file `url` names (a path and a cause), or None."""
    path = sqlite_file(url)
    if path is None:
        return None
    where = f"cannot open the SQLite database {path}"
    if path.is_dir():
        return f"{where}: it is a directory, not a database file"
    parent = path.parent
    if not parent.is_dir():
        existing = next((p for p in (parent, *parent.parents) if p.exists()), None)
        if existing is not None and not existing.is_dir():
            return f"{where}: {existing} is not a directory"
        return f"{where}: the directory {parent} does not exist (create it first)"
    if not path.exists():
        if not os.access(parent, os.W_OK | os.X_OK):
            return f"{where}: the directory {parent} is not writable"
        return f"{where}: there is no such file (moved or deleted?), and nothing was created"
    if not os.access(path, os.R_OK | os.W_OK):
        return f"{where}: the file is not readable and writable by this user"
    return None


class Database:
    """Runs units of work against one database, from any event loop or thread.

    Example::

        db = Database("agent.db")
        one = await db.read(lambda conn: conn.execute(text("SELECT 1")).scalar())
        await db.write(lambda conn: conn.execute(text("CREATE TABLE t (x INT)")))
        await db.close()
    """

    def __init__(
        self,
        url_or_engine: str | Path | URL | AsyncEngine,
        *,
        engine_kwargs: dict[str, Any] | None = None,
        sqlite_synchronous: str = "NORMAL",
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        statement_timeout: float | None = None,
        telemetry: Telemetry | None = None,
        tables: Collection[str] = (),
        refusals: Mapping[str, str] | None = None,
    ) -> None:
        modes = {"OFF", "NORMAL", "FULL", "EXTRA"}
        if not isinstance(sqlite_synchronous, str) or sqlite_synchronous.upper() not in modes:
            raise ConfigurationError(f"unknown SQLite synchronous mode {sqlite_synchronous!r}")
        self.lock_timeout = _seconds("lock_timeout", lock_timeout)
        self.statement_timeout = (
            None if statement_timeout is None else _seconds("statement_timeout", statement_timeout)
        )
        # Whether a SQLite file that is not there may be created (a store's `create_tables`);
        # if not, a connection to it fails instead.
        self.create_file = True
        # The library's tables (a store's names): one of them missing is a `SchemaError`.
        self.tables = frozenset(tables)
        # What a refusal by one of the store's constraints means, by a text that names the
        # constraint in the database's message.
        self.refusals = dict(refusals or {})
        self._source = EngineSource(
            url_or_engine,
            engine_kwargs,
            lock_timeout=self.lock_timeout,
            may_create=lambda: self.create_file,
        )
        self.closed = False
        self._sync: SQLiteFile | None = None
        if self._source.owns_engines and self._source.dialect_name == "sqlite":
            self._sync = SQLiteFile(
                self.url.set(drivername="sqlite+pysqlite"),
                engine_kwargs or {},
                sqlite_synchronous.upper(),
                lock_timeout=self.lock_timeout,
                may_create=lambda: self.create_file,
            )
        # The store's spans and metrics (telemetry.py); the store names its tables to it.
        self.telemetry = Probe(telemetry or Telemetry(), self.url)

    @property
    def url(self) -> URL:
        """The database URL (with an async driver)."""
        return self._source.url

    @property
    def owns_engines(self) -> bool:
        """Whether the engines are made here (so another thread may have one of its own)."""
        return self._source.owns_engines

    @property
    def dialect_name(self) -> str:
        """ "sqlite", "postgresql", "mysql" or "mariadb"."""
        return self._source.dialect_name

    @property
    def engine(self) -> AsyncEngine:
        """An `AsyncEngine` on this database for the running loop (the app's, if it gave one)."""
        self.check_open()
        return self._source.get_unbound()

    def check_open(self) -> None:
        """Raise `StoreClosedError` once `close()` was called."""
        if self.closed:
            raise StoreClosedError(
                "this store was closed (close(), or the end of its `with` block): "
                "nothing was read or written; open a new one"
            )

    async def read(self, work: Work[T], *, small: bool = False, snapshot: bool = False) -> T:
        """Run `work(connection)`, which only reads: each statement sees a consistent
        snapshot (on a server, not one transaction for all of them).

        `small`: a few rows, known in advance (a SQLite file may read them on this thread).
        `snapshot`: all of `work`'s statements see one snapshot, as reads that must agree
        with each other need (a read in pages): a transaction begun REPEATABLE READ on
        PostgreSQL, MySQL and MariaDB (an app's engine may read committed), which takes no
        lock, so no writer waits for it (and not READ ONLY, which would fail an app's
        `begin` listener that writes); on SQLite a deferred transaction, whose first read
        fixes what the others see (Python's sqlite3 begins none for a read).
        """
        return await self.run(work, write=False, small=small, snapshot=snapshot)

    async def write(
        self,
        work: Work[T],
        *,
        session_id: str | None = None,
        small: bool = False,
        one_statement: bool = False,
        bounded: bool = True,
    ) -> T:
        """Run `work(connection)` in one transaction, committed if it raises nothing.

        A caller cancelled meanwhile still waits for the outcome (`settle`): the write
        committed or rolled back, never "maybe". A lock wait past `lock_timeout` is a
        `SessionBusyError` naming `session_id`. `small`: as for `read`. `one_statement`:
        `work` changes the database in a single statement, atomic by itself (reads may come
        before it), and raises nothing after it; on a PostgreSQL server whose connections
        the store opened, it then runs without BEGIN and COMMIT, two round trips fewer.
        `bounded=False`: no `statement_timeout` (a migration: its DDL, stopped midway on
        MySQL, would leave the schema half made). `work` raising `Unchanged(result)` rolls
        the transaction back and returns `result`.
        """
        try:
            if self._sync is not None:  # `run` settles the worker thread's own future
                return await self.run(work, write=True, session_id=session_id, small=small)
            return await settle(
                self.run(
                    work,
                    write=True,
                    session_id=session_id,
                    one_statement=one_statement,
                    bounded=bounded,
                )
            )
        except Unchanged as unchanged:
            result: T = unchanged.result
            return result

    async def run(
        self,
        work: Work[T],
        *,
        write: bool,
        session_id: str | None = None,
        small: bool = False,
        one_statement: bool = False,
        bounded: bool = True,
        snapshot: bool = False,
    ) -> T:
        """Run `work(connection)` in one transaction (committed if `write` and no error),
        within `statement_timeout` if `bounded`; a read in one `snapshot` if asked.

        Database failures become `DatabaseError`; the transaction is rolled back.
        """
        self.check_open()
        timeout = self.statement_timeout if bounded else None
        deadlocks, reconnected = 0, False
        while True:
            attempt, started = _Attempt(), time.perf_counter()
            try:
                if self._sync is not None:
                    if small and not snapshot:  # on this thread, unless it is locked
                        try:
                            result = self._sync.run_here(work, write)
                        except Locked:
                            pass
                        else:
                            # Then the WAL's checkpoint if one is due, and a turn for the
                            # loop's other tasks: a cancellation or a timeout of the caller's
                            # finds the work done, as in a worker thread (one that came
                            # first lost an append); a unit that never suspended starved the
                            # other tasks, and a timeout never fired.
                            if self._sync.checkpoint_due:
                                await self._sync.checkpoint()
                            await asyncio.sleep(0)
                            return result
                        if (locked := current()) is not None:  # waits for the lock there
                            return await self._waited(locked, work, write)
                    loop = asyncio.get_running_loop()
                    run = in_context(self._sync.run_in_thread)  # under the caller's span
                    done = loop.run_in_executor(None, run, work, write, snapshot)
                    # A write's future is settled as it is: no task is made to wrap it.
                    return await (settle(done) if write else done)
                return await asyncio.wait_for(
                    self._run_async(work, write, attempt, one_statement, snapshot), timeout
                )
            except AgentsSQLAlchemyError:
                raise
            except DBAPIError as exc:
                kind = failure_kind(self.dialect_name, exc)
                if kind == "busy":
                    if (operation := current()) is not None:  # what it waited, as measured
                        operation.busy(time.perf_counter() - started)
                    raise self._busy(exc, session_id) from exc
                if kind == "deadlock" and deadlocks < DEADLOCK_RETRIES:
                    deadlocks += 1
                    if (operation := current()) is not None:
                        operation.retried("deadlock")
                    await asyncio.sleep(random.uniform(0.005, 0.02) * deadlocks)
                    continue
                if kind != "disconnect" or attempt.committing or reconnected:
                    raise self._failed(exc, attempt, session_id) from exc
            except _Unsent as unsent:
                cause = unsent.__cause__
                assert isinstance(cause, DBAPIError)
                if reconnected:
                    raise self._failed(cause, attempt, session_id) from cause
            except asyncio.TimeoutError as exc:
                if timeout is None:  # the driver's own (connect) timeout
                    raise unreachable(self.url, exc) from exc
                raise DatabaseTimeoutError(
                    f"the database did not answer within statement_timeout="
                    f"{self.statement_timeout}s; {_outcome(attempt)}"
                ) from exc
            except OSError as exc:
                raise unreachable(self.url, exc) from exc
            except PoolTimeout as exc:  # every connection of the pool is in use
                raise DatabaseTimeoutError(
                    f"no connection of the pool came free within its pool_timeout ({exc}): "
                    "more work at once than the pool holds (engine_kwargs pool_size, "
                    "max_overflow, pool_timeout); nothing was done"
                ) from exc
            except Exception as exc:
                # The driver's own, unwrapped by SQLAlchemy: a new connection's set-up (its
                # type codecs) on a connection the server closed meanwhile.
                if not _from_driver(exc):
                    raise
                if reconnected or attempt.committing:
                    raise DatabaseError(
                        f"the connection to the database failed ({type(exc).__name__}: "
                        f"{exc}); {_outcome(attempt)}"
                    ) from exc
            # A connection lost before the work was committed: tried once more on a new one
            # (the pool has dropped its dead connections).
            reconnected = True
            if (operation := current()) is not None:
                operation.retried("disconnect")

    async def _waited(self, operation: Operation, work: Work[T], write: bool) -> T:
        """A small unit that met the SQLite file locked, in a worker thread; the time it
        took there counts as the operation's lock wait (a unit that gave up counts
        `lock_timeout`, in `run`)."""
        assert self._sync is not None
        started = time.perf_counter()
        loop = asyncio.get_running_loop()
        done = loop.run_in_executor(None, in_context(self._sync.run_in_thread), work, write)
        result: T = await (settle(done) if write else done)
        operation.waited(time.perf_counter() - started)
        return result

    def pools(self) -> list[tuple[str, int, int]]:
        """(name, connections in use, idle ones) of each connection pool this object made."""
        engines = [] if self._sync is None else [self._sync.engine]
        return pool_usage([*engines, *self._source.engines()])

    async def _run_async(
        self,
        work: Work[T],
        write: bool,
        attempt: _Attempt,
        one_statement: bool = False,
        snapshot: bool = False,
    ) -> T:
        engine = self._source.get().sync_engine
        # A statement that commits by itself: its connection sets lock_timeout already, and
        # no statement_timeout may cancel it midway (its outcome would be unknown).
        alone = (
            write
            and one_statement
            and self._source.sets_lock_timeout
            and self.statement_timeout is None
        )
        # One snapshot: a transaction begun REPEATABLE READ (MySQL's reads run in one
        # already, but an app's engine may read committed).
        snapshot = snapshot and not write
        return await greenlet_spawn(self._unit, engine, work, write, attempt, alone, snapshot)

    def _unit(
        self,
        engine: Engine,
        work: Work[T],
        write: bool,
        attempt: _Attempt,
        alone: bool,
        snapshot: bool,
    ) -> T:
        """`_run_async`'s unit on the engine's synchronous face, in one greenlet: taking the
        connection, the work and giving it back cost one hop to the driver's coroutines
        each, not a greenlet and a task apiece (a tail read of 20 items: a fifth faster).

        A unit cancelled midway drops its connection where it may have been in a
        transaction: on MySQL (asyncmy, stopped halfway through a reply, refuses every
        later statement on it, and its reads run in one), and in any unit that began one
        (writes, reads in one snapshot, and reads behind a transaction pooler). Cancelled
        while its `BEGIN` ran, asyncpg's connection stays in that transaction without
        SQLAlchemy knowing: the pool's reset rolled nothing back, and every later
        transaction on it was only a savepoint, never committed. (A read in autocommit on
        asyncpg keeps its connection: the query is cancelled and the pool's reset waits for
        it.)"""
        with engine.connect() as conn:
            try:
                if snapshot:
                    return self._in_snapshot(conn, work)
                result = self._run_on(conn, work, write, attempt, alone)
                if self.dialect_name in MYSQL:
                    self._end_read(conn)
                return result
            except asyncio.CancelledError:
                if write or snapshot or self._source.pooled or self.dialect_name in MYSQL:
                    self._drop(conn)
                raise

    @staticmethod
    def _in_snapshot(conn: Connection, work: Work[T]) -> T:
        """`work` in a transaction that reads one snapshot, rolled back: begun REPEATABLE
        READ unless the engine's level gives one snapshot already (MySQL's default, where
        switching costs four statements; asyncpg's BEGIN names the level: a query an app's
        `begin` listener runs would fix a snapshot before any SET TRANSACTION), the level
        restored by the pool as the connection goes back; on SQLite, an app's engine here,
        a deferred transaction."""
        if conn.dialect.name == "sqlite":
            return in_one_snapshot(conn, work)
        level = (
            conn.get_execution_options().get("isolation_level")
            or getattr(conn.dialect, "isolation_level", None)
            or conn.default_isolation_level
        )
        if level not in ("REPEATABLE READ", "SERIALIZABLE"):
            conn.execution_options(isolation_level="REPEATABLE READ")
        conn.begin()
        try:
            return work(conn)
        finally:
            conn.rollback()

    @staticmethod
    def _end_read(conn: Connection) -> None:
        """End a MySQL read's transaction here, where a cancellation drops the connection,
        rather than in the pool's reset, where one left it counted in use. Its statements
        may have gone to the driver's cursor, past SQLAlchemy's own transaction."""
        if conn.in_transaction():
            conn.rollback()
        elif mysql_in_transaction(conn.connection):
            conn.connection.dbapi_connection.rollback()  # type: ignore[union-attr]

    def _drop(self, conn: Connection) -> None:
        """Invalidate `conn`; asyncpg's connection is ended at once first. SQLAlchemy closes
        an invalidated one gracefully, for two seconds at most: a wait for the server that
        may be why the unit was cancelled (hung: `statement_timeout` overshot by two)."""
        if self.dialect_name == "postgresql" and not conn.invalidated:  # (else: done already)
            conn.connection.dbapi_connection.driver_connection.terminate()  # type: ignore[union-attr]
        conn.invalidate()

    def _run_on(
        self, conn: Connection, work: Work[T], write: bool, attempt: _Attempt, alone: bool
    ) -> T:
        """`_unit`'s work on its connection: autocommit for reads and lone statements, else
        one transaction."""
        driver = conn.connection.dbapi_connection
        if write and not alone:
            leave_autocommit(conn)
            conn.begin()
            if self.dialect_name == "sqlite":
                begin_immediate(conn)
            result = self._bounded(conn, work)
            attempt.committing = True
            conn.commit()
            return result
        # A read runs outside a transaction: no BEGIN and ROLLBACK round trips. Each
        # statement still sees one snapshot, and reads that must agree with each other ask
        # for one (`read`'s `snapshot`). Behind a transaction pooler it keeps
        # its transaction: that holds one server connection from a statement's prepare to
        # its execution. A write of one statement is atomic by itself: no BEGIN and COMMIT
        # either. MySQL drivers pay a round trip to switch autocommit on, and three to
        # switch it back: a read runs there in a transaction (one snapshot), rolled back as
        # its connection is returned.
        if self._source.pooled or self.dialect_name in MYSQL:
            return self._read_or_alone(conn, work, attempt, alone)
        if conn.dialect.driver != "asyncpg" or driver is None:
            conn.execution_options(isolation_level="AUTOCOMMIT")
            return self._read_or_alone(conn, work, attempt, alone)
        # asyncpg's adapter takes autocommit as an attribute, set back here, before the
        # connection goes back to the pool (an app's engine may lend it to a transaction
        # next). SQLAlchemy's isolation-level option does the same at more cost: a tail
        # read of 20 items took 311 µs through it, 268 µs so.
        driver.autocommit = True
        try:
            return self._read_or_alone(conn, work, attempt, alone)
        finally:
            driver.autocommit = False

    def _read_or_alone(self, conn: Connection, work: Work[T], attempt: _Attempt, alone: bool) -> T:
        """A read, or a write of one statement (`alone`), in no transaction of the unit's
        own: once a lone statement is sent, its outcome is the commit's."""
        if not alone:
            return work(conn)
        attempt.committing = True
        try:
            return work(conn)
        except DBAPIError as exc:
            if never_sent(exc):  # nothing reached the server: its connection is broken
                if not exc.connection_invalidated:
                    conn.invalidate()
                attempt.committing = False
                raise _Unsent() from exc
            if failure_kind(self.dialect_name, exc) != "disconnect":
                attempt.committing = False  # the server refused it, changing nothing
            raise

    def _bounded(self, conn: Connection, work: Work[T]) -> T:
        """`work` in a write transaction whose lock waits end at `lock_timeout`.

        The connections the store opens have it set already; on an app's PostgreSQL engine
        or behind PgBouncer, `SET LOCAL`, which ends with the transaction.
        """
        if conn.dialect.name == "postgresql" and not self._source.sets_lock_timeout:
            milliseconds = max(1, round(self.lock_timeout * 1000))
            conn.exec_driver_sql(f"SET LOCAL lock_timeout = {milliseconds}")
        return work(conn)

    def _busy(self, exc: DBAPIError, session_id: str | None) -> SessionBusyError:
        what = f"session {session_id!r}" if session_id is not None else "a lock"
        return SessionBusyError(
            f"{what} is busy: another writer held it longer than lock_timeout="
            f"{self.lock_timeout}s; nothing was changed ({exc.orig})",
            session_id,
        )

    def _failed(
        self, exc: DBAPIError, attempt: _Attempt, session_id: str | None = None
    ) -> DatabaseError | SchemaError | CorruptItemError:
        # What the SDK's class raises: catchable as such. A trigger's refusal is one too.
        if isinstance(exc, IntegrityError) or raised_by_trigger(self.dialect_name, exc):
            message = f"{self.dialect_name} refused the write, {_outcome(attempt)}: {exc.orig}"
            meaning = next((m for n, m in self.refusals.items() if n in str(exc.orig)), None)
            if meaning is not None:
                where = "" if session_id is None else f"session {session_id!r}: "
                message = f"{where}{meaning} ({message})"
            return ConstraintError(message, exc.statement, exc.params, exc.orig)
        if (column := not_utf8(self.dialect_name, exc)) is not None:
            return CorruptItemError(
                f"a stored row holds bytes that are not UTF-8 text in its column {column!r} "
                f"(changed outside the library); it is left in place, {_outcome(attempt)}"
            )
        if missing_table(self.dialect_name, exc) in self.tables:  # all there as the store opened
            return SchemaError(
                f"{exc.orig}, {_outcome(attempt)}: the library's tables are gone from the "
                "database since the store opened (dropped, or the database made anew): run "
                "`agents-sqlalchemy db upgrade` with the store's URL and table options, then "
                "open the store again"
            )
        if (problem := known_problem(self.url, exc)) is not None:
            return DatabaseError(problem)
        if self.dialect_name in ("mysql", "mariadb") and (closed := _closed_by_mysql(exc)):
            cause = (
                "the statement was larger than the server's max_allowed_packet"
                if closed == "packet"
                else "the server went away (a restart, a crash, a network cut), or it refused "
                "a statement larger than its max_allowed_packet"
            )
            return DatabaseError(
                f"{self.dialect_name} closed the connection, {_outcome(attempt)} ({exc.orig}): "
                f"{cause}. For a very large item, raise max_allowed_packet on the server (SET "
                "GLOBAL max_allowed_packet = ...; 1 GB at most) or store smaller items"
            )
        return DatabaseError(f"{self.dialect_name} error, {_outcome(attempt)}: {exc.orig}")

    async def release_loop(self) -> None:
        """Close the running loop's engine, made here, before that loop stops."""
        if self._sync is None:
            await self._source.release_loop()

    async def close(self) -> None:
        """Release the connections this object made; an app's engine stays open.

        Every call after this raises `StoreClosedError`; closing again does nothing.
        """
        if self.closed:
            return
        self.closed = True
        if self._sync is not None:
            await self._sync.dispose()
        await self._source.close()


#: The longest `lock_timeout` or `statement_timeout` (about 24.8 days), in seconds.
MAX_WAIT = (2**31 - 1) // 1000


def pool_usage(engines: list[Any]) -> list[tuple[str, int, int]]:
    """(name, in use, idle) of each engine's pool that counts its connections."""
    found = []
    for number, engine in enumerate(engines):
        pool = getattr(engine, "sync_engine", engine).pool
        if hasattr(pool, "checkedout") and hasattr(pool, "checkedin"):
            name = f"{engine.url.get_backend_name()}#{number}"  # no host, user or path
            found.append((name, pool.checkedout(), pool.checkedin()))
    return found


def _seconds(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigurationError(f"{name} must be a positive number of seconds, got {value!r}")
    if not value <= MAX_WAIT:  # PostgreSQL takes at most 2**31 - 1 milliseconds
        raise ConfigurationError(f"{name} must be at most {MAX_WAIT} seconds, got {value!r}")
    return float(value)


def _closed_by_mysql(exc: DBAPIError) -> str | None:
    """How MySQL/MariaDB ended a connection: "packet" when it says a packet was over
    max_allowed_packet (1153), "lost" when the connection just ended (2006, 2013: a server
    gone, or one that closed it as it read an oversized packet) or the driver read a reply
    out of turn (asyncmy's "Packet sequence number wrong": the server's refusal of a packet
    of about 100 MB, sent while the driver was still sending it), else None."""
    if mysql_number(exc) == 1153 or "max_allowed_packet" in str(exc.orig):
        return "packet"
    out_of_turn = "Packet sequence number wrong" in str(exc.orig)
    return "lost" if out_of_turn or mysql_number(exc) in (2006, 2013) else None


def _outcome(attempt: _Attempt) -> str:
    if attempt.committing:
        return "while committing: the write may or may not have been saved"
    return "nothing was changed"
