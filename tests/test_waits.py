"""Bounded waits and dropped connections: a busy session, a hung or restarted server.

The restart and hang tests start a PostgreSQL of their own (scripts/pg.sh with PG_DIR), so
the shared throwaway server is never touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from agents_sqlalchemy import (
    ConfigurationError,
    DatabaseError,
    DatabaseTimeoutError,
    SessionBusyError,
    SessionStore,
)

from .support.items import message
from .support.locks import holding_the_lock, until_waiting
from .support.servers import MARIADB_URL, PG_URL, REQUIRE_PG

ROOT = Path(__file__).resolve().parent.parent
SESSIONS = "agents_sqlalchemy_sessions"


@pytest.mark.pgbouncer
async def test_a_write_behind_another_writer_gives_up_after_lock_timeout(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True, lock_timeout=0.5) as store:
        session = store.session("contended")
        await session.add_items([message("before")])
        async for _ in holding_the_lock(db_url, "contended"):
            started = time.monotonic()
            with pytest.raises(SessionBusyError) as caught:
                await session.add_items([message("blocked"), message("also blocked")])
            waited = time.monotonic() - started
            assert caught.value.session_id == "contended"
            assert "'contended'" in str(caught.value) and "lock_timeout=0.5" in str(caught.value)
            with pytest.raises(SessionBusyError):
                await session.pop_item()
            # Every write of one session names it (these said "a lock is busy").
            one_session = (
                session.clear_session(),
                session.create_branch_from_turn(1),
                store.delete_session("contended"),
                store.archive_session("contended"),
            )
            for write in one_session:
                with pytest.raises(SessionBusyError) as caught:
                    await write
                assert caught.value.session_id == "contended"
        # MySQL waits whole seconds (at least one); nobody waits for the default 30.
        assert 0.4 < waited < 10
        # Nothing of the failed writes was kept; the session works again.
        assert [item["content"] for item in await session.get_items()] == ["before"]
        await session.add_items([message("after")])
        assert [item["content"] for item in await session.get_items()] == ["before", "after"]


@pytest.mark.dialects("postgresql", "mariadb")
async def test_statement_timeout_does_not_cut_the_creation_of_the_tables_short(
    db_url: str,
) -> None:
    """Making the tables runs to its end whatever `statement_timeout` says: on MySQL a DDL
    stopped halfway leaves tables without their revision, which every later store refuses;
    on PostgreSQL a migration of a big table would never finish."""
    async with SessionStore(db_url, create_tables=True, statement_timeout=0.01) as store:
        try:
            await store.session("s").add_items([message("one")])
        except DatabaseTimeoutError as exc:  # the append itself may take longer than that
            assert "the database did not answer" in str(exc)
    async with SessionStore(db_url, search=False) as reopened:  # the schema is whole
        await reopened.session("t").add_items([message("two")])
        assert await reopened.session("t").get_items() == [message("two")]


@pytest.mark.dialects("postgresql", "mariadb")
async def test_statement_timeout_bounds_a_write_stuck_behind_a_lock(db_url: str) -> None:
    """The client gives up (and rolls back) even where the server would wait on; the
    connection it gave up on is not handed out again broken (asyncmy's would refuse every
    later statement)."""
    async with SessionStore(db_url, create_tables=True) as setup:  # DDL has no such bound
        await setup.session("stuck").add_items([message("before")])
    async with SessionStore(db_url, lock_timeout=60, statement_timeout=0.5) as store:
        session = store.session("stuck")
        async for _ in holding_the_lock(db_url, "stuck"):
            with pytest.raises(DatabaseTimeoutError, match="nothing was changed"):
                await session.add_items([message("never")])
        for _ in range(3):  # every connection of the pool serves
            assert [item["content"] for item in await session.get_items()] == ["before"]


@pytest.mark.dialects("postgresql", "mariadb")
def test_the_end_of_asyncio_run_waits_for_a_write_in_flight(db_url: str) -> None:
    """`asyncio.run` cancels every task left as its main returns. A write's task that took
    every cancellation (to let its own timeouts end it) was cut short there, behind another
    writer's lock: a sealed append was lost, a plain one committed after the program went
    on. It refuses all but its own timeouts, and the end of `asyncio.run` waits for it."""
    key = os.urandom(32)

    async def before() -> None:
        async with SessionStore(db_url, create_tables=True, key=key) as store:
            await store.session("held").add_items([message("before")])

    asyncio.run(before())
    held = threading.Event()

    def hold() -> None:
        async def holding() -> None:
            async for _ in holding_the_lock(db_url, "held"):
                held.set()
                await asyncio.sleep(1.0)

        asyncio.run(holding())

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    store = SessionStore(db_url, key=key)

    left: list[asyncio.Future[None]] = []

    async def main() -> None:
        await store.session("held").get_items()
        left.append(asyncio.ensure_future(store.session("held").add_items([message("in")])))
        await asyncio.sleep(0.2)  # it waits behind the lock as main returns

    started = time.monotonic()
    asyncio.run(main())
    waited = time.monotonic() - started
    holder.join()

    async def after() -> list[str]:
        async with SessionStore(db_url, key=key) as reopened:
            return [item["content"] for item in await reopened.session("held").get_items()]

    assert asyncio.run(after()) == ["before", "in"]
    assert left[0].cancelled()  # its caller was, once the write had ended
    assert waited > 0.5  # the lock was held for 1 s


@pytest.mark.dialects("postgresql", "mariadb")
async def test_a_write_waiting_for_a_connection_gives_up_after_pool_timeout(db_url: str) -> None:
    """With the pool's only connection held by a write stuck behind a lock, the next write
    gave up only once that one had (after `lock_timeout`, one write after another): a write
    ran as a task that refused every cancellation, and SQLAlchemy's wait for a connection
    ends by cancelling the task it runs in."""
    async with SessionStore(db_url, create_tables=True) as setup:
        await setup.session("stuck").add_items([message("before")])
    pool = {"pool_size": 1, "max_overflow": 0, "pool_timeout": 0.3}
    async with SessionStore(db_url, lock_timeout=3, engine_kwargs=pool, search=False) as store:
        async for _ in holding_the_lock(db_url, "stuck"):
            stuck = asyncio.ensure_future(store.session("stuck").add_items([message("1")]))
            await until_waiting(db_url, 1)
            started = time.monotonic()
            with pytest.raises(DatabaseTimeoutError, match="pool_timeout"):
                await store.session("other").add_items([message("never")])
            assert time.monotonic() - started < 2
            stuck.cancel()  # it waits on for its lock; the caller is told when it ends
        with pytest.raises(asyncio.CancelledError):
            await stuck
        assert await store.session("other").get_items() == []


@pytest.mark.dialects("postgresql")
@pytest.mark.pgbouncer
async def test_a_read_cancelled_while_its_connection_opens_leaves_nothing_logged(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A read cancelled at each turn of the loop in turn, each on a connection of its own
    (NullPool, as apps behind PgBouncer often have): some land while asyncpg opens its
    socket, where one left a future failed with "unexpected connection_lost() call" that
    asyncio logged as never retrieved (a traceback in the app's log, from nothing it did
    wrong)."""
    options = {"poolclass": NullPool}
    async with SessionStore(db_url, create_tables=True, engine_kwargs=options) as store:
        session = store.session("s")
        await session.add_items([message("before")])
        gc.collect()  # what earlier tests on this worker left is reported before, not here
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            for turns in range(20):
                read = asyncio.create_task(session.get_items())
                for _ in range(turns):
                    await asyncio.sleep(0)
                read.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await read
                await asyncio.sleep(0.01)  # the dropped sockets' callbacks run
                gc.collect()  # an unread failed future is reported as it is collected
        assert not [r for r in caplog.records if r.name == "asyncio"], caplog.text
        assert [item["content"] for item in await session.get_items()] == ["before"]


@pytest.mark.parametrize("closed", [1, 1_000])
async def test_a_connection_closed_while_it_is_set_up_is_replaced_or_named(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, closed: int
) -> None:
    """The server closed a new connection while the driver set up its type codecs: asyncpg's
    own InterfaceError ("connection is closed") came out of get_items and add_items, neither
    retried nor in the library's hierarchy."""
    import asyncpg  # type: ignore[import-untyped]
    from sqlalchemy.dialects.postgresql.asyncpg import PGDialect_asyncpg

    real, calls = PGDialect_asyncpg.setup_asyncpg_json_codec, []

    async def closing(self: PGDialect_asyncpg, conn: object) -> None:
        calls.append(1)
        if len(calls) <= closed:
            raise asyncpg.exceptions.InterfaceError("connection is closed")
        await real(self, conn)

    monkeypatch.setattr(PGDialect_asyncpg, "setup_asyncpg_json_codec", closing)
    async with SessionStore(pg_url, create_tables=True, search=False) as store:
        session = store.session(f"s-{closed}")
        if closed == 1:  # once: a new connection takes its place
            await session.add_items([message("kept")])
            assert await session.get_items() == [message("kept")]
        else:
            with pytest.raises(DatabaseError, match="nothing was changed"):
                await session.add_items([message("lost")])
            monkeypatch.undo()
            assert await session.get_items() == []


def test_wait_options_are_checked() -> None:
    for bad in (0, -1, "30", True):
        with pytest.raises(ConfigurationError, match="lock_timeout"):
            SessionStore("agent.db", lock_timeout=bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="statement_timeout"):
            SessionStore("agent.db", statement_timeout=bad)  # type: ignore[arg-type]


# -- a server of the test's own -------------------------------------------------------------


def _pg(command: str, directory: Path) -> None:
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "pg.sh"), command],
        env={**os.environ, "PG_DIR": str(directory)},
        check=True,
        capture_output=True,
        timeout=120,
    )


@pytest.fixture
def own_pg() -> Iterator[Path]:
    """A PostgreSQL server only this test uses (its directory holds `url` and `pid`)."""
    if os.environ.get("AGENTS_SQLALCHEMY_PG_URL") is None and not REQUIRE_PG:
        pytest.skip("no PostgreSQL: run the tests with `make test`")
    directory = ROOT / f".pgtmp-{uuid.uuid4().hex[:8]}"
    _pg("start", directory)
    try:
        yield directory
    finally:
        _pg("stop", directory)


def _server_processes(directory: Path) -> list[int]:
    """The postmaster and its children."""
    postmaster = int((directory / "pid").read_text().split()[0])
    children = subprocess.run(
        ["ps", "-o", "pid=", "--ppid", str(postmaster)], capture_output=True, text=True
    ).stdout.split()
    return [postmaster, *map(int, children)]


@pytest.mark.servers
@pytest.mark.slow
async def test_the_first_operations_after_a_server_restart_succeed(own_pg: Path) -> None:
    url = (own_pg / "url").read_text().strip()
    async with SessionStore(url, create_tables=True) as store:
        session = store.session("restarted")
        await session.add_items([message("0")])
        for number, first in enumerate(("write", "read", "pop", "write"), start=1):
            await asyncio.to_thread(_pg, "restart", own_pg)  # every pooled connection dies
            if first == "write":
                await session.add_items([message(str(number))])
            elif first == "read":
                assert len(await session.get_items()) == number
                await session.add_items([message(str(number))])
            else:
                assert (await session.pop_item()) == message(str(number - 1))
                await session.add_items([message(str(number - 1)), message(str(number))])
        assert [item["content"] for item in await session.get_items()] == list("01234")


@pytest.mark.servers
@pytest.mark.slow
async def test_statement_timeout_bounds_a_hung_server(own_pg: Path) -> None:
    url = (own_pg / "url").read_text().strip()
    async with SessionStore(url, create_tables=True, statement_timeout=1) as store:
        session = store.session("hung")
        await session.add_items([message("before")])
        processes = _server_processes(own_pg)
        for pid in processes:
            os.kill(pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(DatabaseTimeoutError, match="statement_timeout=1"):
                await session.get_items()
            read = time.monotonic()
            with pytest.raises(DatabaseTimeoutError):
                await session.add_items([message("lost")])
            # The write's connection is dropped at once: it waited two seconds more for
            # the hung server to answer a graceful close.
            assert read - started < 5 and time.monotonic() - read < 2.5
        finally:
            for pid in processes:
                os.kill(pid, signal.SIGCONT)
        assert [item["content"] for item in await session.get_items()] == ["before"]


@pytest.mark.servers
@pytest.mark.slow
async def test_close_returns_from_a_server_that_stopped_answering(own_pg: Path) -> None:
    """`close()` waited forever for a server that stopped answering (a network cut looks
    so): asyncpg's graceful close of each pooled connection has no end, `statement_timeout`
    or not. Each closes now as SQLAlchemy terminates one: two seconds at most, then dropped."""
    url = (own_pg / "url").read_text().strip()
    store = SessionStore(url, create_tables=True, key="a passphrase")
    await store.session("hung").add_items([message("before")])
    await store.flush()  # its indexing done too: every connection idle in the pool
    processes = _server_processes(own_pg)
    for pid in processes:
        os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        await asyncio.wait_for(store.close(), 60)
        assert time.monotonic() - started < 20
    finally:
        for pid in processes:
            os.kill(pid, signal.SIGCONT)
    async with SessionStore(url, key="a passphrase") as again:
        assert await again.session("hung").get_items() == [message("before")]


async def _kill_connections(kind: str, url: str) -> int:
    """End, from the server's side, every connection to the test's database; how many.

    It returns once the server has ended them, and the client's loop has heard so: a
    connection ended while a statement is on its way is another case (that statement's
    outcome is unknown, `test_an_append_whose_connection_ends_midway_...`)."""
    name = make_url(url).database
    engine = create_async_engine(PG_URL if kind == "postgresql" else MARIADB_URL or "")
    try:
        async with engine.connect() as conn:
            if kind == "postgresql":
                killed = await conn.execute(
                    text(
                        "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                        "WHERE datname = :name AND pid <> pg_backend_pid()"
                    ),
                    {"name": name},
                )
                return len(killed.all())
            ids = await conn.execute(
                text("SELECT id FROM information_schema.processlist WHERE db = :name"),
                {"name": name},
            )
            found = [row[0] for row in ids]
            for connection_id in found:
                await conn.exec_driver_sql(f"KILL CONNECTION {int(connection_id)}")
            return len(found)
    finally:
        await engine.dispose()
        await asyncio.sleep(0.05)  # the ended connections' last messages reach their protocol


@pytest.mark.servers
@pytest.mark.parametrize("kind", ["postgresql", "mariadb"])
def test_connections_the_server_dropped_are_replaced(
    kind: str, request: pytest.FixtureRequest
) -> None:
    url = str(request.getfixturevalue("pg_url" if kind == "postgresql" else "mariadb_url"))
    asyncio.run(_write_and_read_across_drops(kind, url))


async def _write_and_read_across_drops(kind: str, url: str) -> None:
    async with SessionStore(url, create_tables=True) as store:
        session = store.session("dropped")
        await session.add_items([message("0")])
        await asyncio.gather(*(session.get_items() for _ in range(4)))  # a few pooled
        assert await _kill_connections(kind, url) >= 1
        await session.add_items([message("1")])
        assert await _kill_connections(kind, url) >= 1
        assert [item["content"] for item in await session.get_items()] == ["0", "1"]


@pytest.mark.servers
def test_an_append_whose_connection_ends_midway_says_its_outcome_is_unknown(pg_url: str) -> None:
    asyncio.run(_append_cut_off_midway(pg_url))


async def _append_cut_off_midway(url: str) -> None:
    """A plaintext append on PostgreSQL commits by itself: once sent, a connection that ends
    before the answer leaves its outcome unknown, and the error says so (it is not retried,
    which could write it twice). What was stored before is untouched."""
    async with SessionStore(url, create_tables=True) as store:
        session = store.session("cut")
        await session.add_items([message("before")])
        async for _ in holding_the_lock(url, "cut"):
            append = asyncio.create_task(session.add_items([message("unknown")]))
            waiting = await _backends_waiting_on_a_lock(url)
            assert await _terminate(url, waiting) == len(waiting) >= 1
            with pytest.raises(DatabaseError, match="may or may not have been saved"):
                await append
        assert [item["content"] for item in await session.get_items()] == ["before"]


async def _backends_waiting_on_a_lock(url: str) -> list[int]:
    engine = create_async_engine(PG_URL or "")
    try:
        async with engine.connect() as conn:
            for _ in range(500):
                pids = await conn.execute(
                    text(
                        "SELECT pid FROM pg_stat_activity WHERE datname = :name "
                        "AND wait_event_type = 'Lock'"
                    ),
                    {"name": make_url(url).database},
                )
                if found := [row[0] for row in pids]:
                    return found
                await asyncio.sleep(0.01)
        raise AssertionError("the append never waited on the lock")
    finally:
        await engine.dispose()


async def _terminate(url: str, pids: list[int]) -> int:
    engine = create_async_engine(PG_URL or "")
    try:
        async with engine.connect() as conn:
            ended = await conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid, 5000) "
                    "FROM unnest(CAST(:pids AS integer[])) AS pid"
                ),
                {"pids": pids},
            )
            return sum(1 for row in ended if row[0])
    finally:
        await engine.dispose()
