"""`SQLiteFile`: units of work on a SQLite database the store opened itself, with pysqlite.

A unit of work runs whole in one worker thread: one thread hop per operation, where
aiosqlite would hop for every cursor call. The writers of one file in this process take
turns on a lock of their own (`writer_of`): SQLite's lock keeps no queue, and a writer
polling for it between sleeps could wait past `lock_timeout` while small writes took it
back to back. A *small* unit (a few rows: an append of one
turn, a tail read, a pop) runs on the caller's thread instead, on a connection that thread
keeps: the hop, and a pool checkout, would cost more than the work. Such a unit never
waits there: its connection has no busy timeout, so when another writer holds the lock it
fails at once and runs again in a worker thread, which waits up to `lock_timeout`. Those
connections leave the WAL alone too (a checkpoint syncs the files): after
`CHECKPOINT_EVERY` small writes a worker thread copies the WAL into the database while
writes go on, and once it is done the next small unit waits for a short RESTART, so that
the WAL starts over (`SQLiteFile.checkpoint`).

Example::

    file = SQLiteFile(make_url("sqlite:///agent.db"), {}, "NORMAL", lock_timeout=30.0)
    one = file.run_here(lambda conn: conn.exec_driver_sql("SELECT 1").scalar(), False)
    count = await loop.run_in_executor(None, file.run_in_thread, work, True)
    await file.dispose()
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

from sqlalchemy import create_engine
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError
from sqlalchemy.pool import NullPool, StaticPool

from ..errors import ConfigurationError, DatabaseError
from .failures import failure_kind
from .pragmas import open_existing, sqlite_pragmas

T = TypeVar("T")
Work = Callable[[Connection], T]
# Small writes between two checkpoints of the WAL (each writes a few pages; SQLite's own
# automatic checkpoint comes every 1,000 pages).
CHECKPOINT_EVERY = 200
# How long a checkpoint waits for the write lock, and then for readers of the WAL.
CHECKPOINT_WAIT = 0.05


class Locked(Exception):
    """A small unit met a locked database and changed nothing: run it in a worker thread."""


_writers: dict[str, threading.Lock] = {}
_writers_lock = threading.Lock()


def writer_of(path: str) -> threading.Lock:
    """The lock this process's writers of the SQLite file at `path` take turns on, across
    stores and threads; waiters on a `threading.Lock` are woken as it is released."""
    with _writers_lock:
        return _writers.setdefault(os.path.realpath(path), threading.Lock())


class SQLiteFile:
    """The synchronous engines of one SQLite database: for worker threads and for here."""

    def __init__(
        self,
        url: URL,
        engine_kwargs: dict[str, Any],
        synchronous: str,
        *,
        lock_timeout: float,
        may_create: Callable[[], bool] = lambda: True,
    ) -> None:
        options = dict(engine_kwargs)
        memory = url.database in (None, "", ":memory:") or url.query.get("mode") == "memory"
        if memory:  # one in-memory database for every thread: one connection, used in turn
            options |= {"poolclass": StaticPool, "connect_args": {"check_same_thread": False}}
        self.engine = _engine(url, options)
        sqlite_pragmas(self.engine, synchronous=synchronous, lock_timeout=lock_timeout)
        open_existing(self.engine, may_create)
        self._lock = threading.Lock() if memory else None
        self._writer = None if memory else writer_of(str(url.database))
        self._file = None if memory else SameFile(str(url.database))
        self._lock_timeout = lock_timeout
        # Small units run here only where neither a lock wait nor a sync can stall the loop.
        self._here: ThreadConnections | None = None
        if not memory and synchronous in ("OFF", "NORMAL"):
            connect_args = {**options.get("connect_args", {}), "check_same_thread": False}
            engine = _engine(url, options | {"poolclass": NullPool, "connect_args": connect_args})
            sqlite_pragmas(engine, synchronous=synchronous, lock_timeout=0, checkpoint=False)
            open_existing(engine, may_create)
            self._here = ThreadConnections(engine)
        self._writes_here = 0
        self._copy: Future[None] | None = None  # the PASSIVE checkpoint of this round
        self._restart: Future[None] | None = None

    @property
    def checkpoint_due(self) -> bool:
        """Whether enough small writes went to the WAL since it last started over."""
        return self._writes_here >= CHECKPOINT_EVERY

    async def checkpoint(self) -> None:
        """Called after a small unit when due: keep the WAL short, making the caller wait
        only for the last few pages.

        A checkpoint's time is its syncs, about in proportion to the pages it copies. So a
        PASSIVE checkpoint first copies the WAL in a worker thread while writes go on; once
        it is over, the next small unit waits for a RESTART, which has only the pages
        written meanwhile left to copy, so that no small write of this loop competes with
        it for the lock and the next write starts the WAL over. A copy still under way
        after `2 * CHECKPOINT_EVERY` writes (a slow disk) is waited for as well.
        """
        loop = asyncio.get_running_loop()
        if self._copy is None:
            self._copy = _submitted(loop, functools.partial(self._checkpoint_wal, "PASSIVE"))
            return
        if not self._copy.done():
            if self._writes_here < 2 * CHECKPOINT_EVERY:
                return
            await _shared(self._copy)
        if self._restart is None or self._restart.done():
            self._writes_here, self._copy = 0, None
            self._restart = _submitted(loop, functools.partial(self._checkpoint_wal, "RESTART"))
        await _shared(self._restart)

    def run_here(self, work: Work[T], write: bool) -> T:
        """Run a small unit on this thread; `Locked` when the database was locked and
        nothing was done (run it in a thread then)."""
        if self._here is None:
            raise Locked("no connection for this thread's units")
        if not write:
            return self._run_here(work, write)
        assert self._writer is not None and self._file is not None
        self._file.check()
        if not self._writer.acquire(blocking=False):  # its turn comes in a worker thread
            raise Locked("another writer of this process holds or awaits the file")
        try:
            result = self._run_here(work, write)
        finally:
            self._writer.release()
        self._writes_here += 1
        return result

    def _run_here(self, work: Work[T], write: bool) -> T:
        assert self._here is not None
        try:
            with self._here.own() as conn:
                if not write:
                    return work(conn)
                with conn.begin():
                    begin_immediate(conn)
                    return work(conn)
        except DBAPIError as exc:
            if failure_kind("sqlite", exc) == "busy":
                raise Locked(str(exc.orig)) from exc
            raise

    def run_in_thread(self, work: Work[T], write: bool, snapshot: bool = False) -> T:
        """Run a unit of work (in a worker thread: it may wait for the lock); a read in one
        `snapshot` if asked."""
        if write and self._file is not None:
            self._file.check()
        with (
            self._one_at_a_time(write),
            self.engine.begin() if write else self.engine.connect() as conn,
        ):
            if write:
                begin_immediate(conn)
            elif snapshot:
                return in_one_snapshot(conn, work)
            return work(conn)

    def _checkpoint_wal(self, mode: str) -> None:
        """Copy the WAL into the database: PASSIVE beside the writers, or RESTART, so that
        the next write starts it over.

        RESTART waits at most `CHECKPOINT_WAIT` for the write lock and for readers (this
        loop's small units wait for it in `checkpoint`; another thread's meet the lock and
        go to a worker thread); a WAL still in use is left to a later round.
        """
        assert self._here is not None
        with contextlib.suppress(DBAPIError), self._here.engine.connect() as conn:
            conn.exec_driver_sql(f"PRAGMA busy_timeout = {round(CHECKPOINT_WAIT * 1000)}")
            conn.exec_driver_sql(f"PRAGMA wal_checkpoint({mode})").all()

    async def dispose(self) -> None:
        """Close every connection, once a checkpoint under way is over."""
        for checkpoint in (self._copy, self._restart):
            if checkpoint is not None:
                await asyncio.wrap_future(checkpoint)
        await asyncio.to_thread(self.engine.dispose)
        if self._here is not None:
            self._here.close()

    @contextlib.contextmanager
    def _one_at_a_time(self, write: bool) -> Iterator[None]:
        """Every unit of an in-memory database in turn; a file's writers in turn, each
        waiting `lock_timeout` at most for its turn (then busy, as SQLite says it)."""
        lock = self._lock or (self._writer if write else None)
        if lock is None:
            yield
            return
        if not lock.acquire(timeout=self._lock_timeout):
            locked = sqlite3.OperationalError("database is locked")
            raise OperationalError("BEGIN (this process's writers' turn)", None, locked)
        try:
            yield
        finally:
            lock.release()


def begin_immediate(conn: Connection) -> None:
    """Begin a write unit's transaction with the write lock: `BEGIN IMMEDIATE`.

    Python's sqlite3 begins a transaction only before the first INSERT, UPDATE or DELETE:
    a write whose first statements read (the sessions a deletion takes) read outside it,
    and then deleted a session another process had just written to. A transaction begun
    already (an app engine's `begin` listener) is left as it is."""
    _begin(conn, "BEGIN IMMEDIATE")


def in_one_snapshot(conn: Connection, work: Work[T]) -> T:
    """`work`, a read, in a deferred transaction (`BEGIN`), rolled back: its first read
    fixes what the others see. Python's sqlite3 begins none for a read, and each statement
    of a read in pages saw the file as it then was (a compaction tail read half of one
    history and half of the next)."""
    began = _begin(conn, "BEGIN")
    try:
        return work(conn)
    finally:
        if began:
            conn.connection.dbapi_connection.rollback()  # type: ignore[union-attr]


def _begin(conn: Connection, statement: str) -> bool:
    """Send `statement` (a BEGIN) unless a transaction is begun already; whether it was.
    Sent to the driver as Python's own BEGIN is (a third of the cost through SQLAlchemy),
    its failure wrapped as SQLAlchemy wraps the others' ("database is locked": busy)."""
    if conn.connection.driver_connection.in_transaction:  # type: ignore[union-attr]
        return False
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    dbapi_error = conn.dialect.loaded_dbapi.Error
    try:
        cursor.execute(statement)
    except dbapi_error as exc:
        raise DBAPIError.instance(statement, None, exc, dbapi_error) from exc
    finally:
        cursor.close()
    return True


class SameFile:
    """The file a store's connections write to, checked before each write: a file deleted
    or replaced (a backup restored over it) while they are open would take their writes
    into a file no one opens again, and report them saved.

    Example::

        file = SameFile("agent.db")
        file.check()   # DatabaseError once agent.db is no longer the file first written
    """

    def __init__(self, path: str) -> None:
        self._path = path
        self._identity: tuple[int, int] | None = None  # (device, inode), once a write found it

    def check(self) -> None:
        try:
            found = os.stat(self._path)
        except OSError:  # not there (or not reachable: the connection says why)
            identity = None
        else:
            identity = (found.st_dev, found.st_ino)
        if self._identity is None:  # the file the first write finds (or makes) is the one
            self._identity = identity
        elif identity != self._identity:
            what = "deleted" if identity is None else "replaced by another file"
            raise DatabaseError(
                f"the database file {self._path} was {what} while this store had it open; "
                "nothing was written (its connections would write to the old file, which no "
                "one opens again): open the store again"
            )


class ThreadConnections:
    """One connection of `engine` per thread, kept open until the thread ends or `close()`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._local = threading.local()
        self._kept: dict[int, tuple[Connection, threading.Lock, weakref.finalize[Any, Any]]] = {}
        self._kept_lock = threading.Lock()
        self._closed = False

    @contextlib.contextmanager
    def own(self) -> Iterator[Connection]:
        """This thread's connection, opened on first use (or after it was invalidated)."""
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is None or conn.invalidated or conn.closed:
            if conn is not None:
                self._drop(id(conn))
            conn = self._open()
        lock: threading.Lock = self._local.lock
        with lock:
            if self._closed:
                raise Locked("closed")
            try:
                yield conn
            finally:
                if conn.in_transaction():  # a read that went through SQLAlchemy's execute
                    conn.rollback()

    def _open(self) -> Connection:
        conn = self.engine.connect()
        lock = threading.Lock()
        key = id(conn)
        # When the thread ends, its connection is closed (without keeping this object).
        finalizer = weakref.finalize(threading.current_thread(), _drop, weakref.ref(self), key)
        with self._kept_lock:
            self._kept[key] = (conn, lock, finalizer)
        self._local.conn, self._local.lock = conn, lock
        return conn

    def _drop(self, key: int) -> None:
        with self._kept_lock:
            kept = self._kept.pop(key, None)
        if kept is not None:
            conn, lock, finalizer = kept
            finalizer.detach()
            with lock:
                conn.close()

    def close(self) -> None:
        """Close every thread's connection (waiting for a unit that runs on one)."""
        self._closed = True
        with self._kept_lock:
            keys = list(self._kept)
        for key in keys:
            self._drop(key)
        self.engine.dispose()


def _drop(connections: weakref.ref[ThreadConnections], key: int) -> None:
    found = connections()
    if found is not None:
        found._drop(key)


def _engine(url: URL, options: dict[str, Any]) -> Engine:
    try:
        # A failed statement's message leaves its parameters (items) out of logs.
        return create_engine(url, **{"hide_parameters": True, **options})
    except (ArgumentError, TypeError) as exc:
        raise ConfigurationError(f"cannot create an engine for {url!r}: {exc}") from exc


async def _shared(checkpoint: Future[None]) -> None:
    """Wait for a checkpoint that other callers may wait for too. Shielded: a cancelled
    caller would cancel the future every waiter shares (`close` then raised
    CancelledError, and left the connections open)."""
    await asyncio.shield(asyncio.wrap_future(checkpoint))


def _submitted(loop: asyncio.AbstractEventLoop, job: Callable[[], None]) -> Future[None]:
    """`job` started in the loop's default executor, as a future any loop can await."""
    done: Future[None] = Future()

    def run() -> None:
        try:
            job()
        finally:
            done.set_result(None)

    loop.run_in_executor(None, run)
    return done
