"""Lifetime: closing a store or a session, `with` and `async with`, sync use with run_sync."""

from __future__ import annotations

import asyncio
import gc
import threading
import warnings
from collections.abc import AsyncGenerator

import pytest
from agents import Agent, Runner
from agents.testing import ScriptedModel, assistant_message
from sqlalchemy import event
from sqlalchemy.pool import Pool

from agents_sqlalchemy import (
    AgentsSQLAlchemyError,
    ConfigurationError,
    DatabaseTimeoutError,
    SessionStore,
    SQLAlchemySession,
    StoreClosedError,
)
from agents_sqlalchemy.aio import run_blocking

from .support.items import message
from .support.tables import raw_rows

#: What counts the other connections to the test's database, by dialect.
CONNECTIONS = {
    "postgresql": "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
    "AND pid <> pg_backend_pid()",
    "mysql": "SELECT count(*) FROM information_schema.processlist WHERE db = database() "
    "AND id <> connection_id()",
}
CONNECTIONS["mariadb"] = CONNECTIONS["mysql"]


def replying(*replies: str) -> Agent:
    return Agent(name="a", model=ScriptedModel([[assistant_message(r)] for r in replies]))


async def test_calls_after_close_raise_instead_of_reopening(db_url: str) -> None:
    store = SessionStore(db_url, create_tables=True)
    session = store.session("s")
    await session.add_items([message("kept")])
    await store.close()
    calls = {
        "get_items": session.get_items(),
        "add_items": session.add_items([message("lost")]),
        "list_sessions": store.list_sessions(),
        "session_info": store.session_info("s"),
        "delete_session": store.delete_session("s"),
        "purge_expired": store.purge_expired(),
        "flush": store.flush(),  # returned None after close
    }
    for name, call in calls.items():
        with pytest.raises(StoreClosedError, match="closed"):
            await call
            pytest.fail(f"{name} ran on a closed store")
    with pytest.raises(StoreClosedError):
        store.session("t")
    with pytest.raises(StoreClosedError):
        store.engine  # noqa: B018
    with pytest.raises(StoreClosedError):  # it was entered, and failed at the first call
        async with store:
            pytest.fail("a closed store was entered")
    assert store.closed
    assert issubclass(StoreClosedError, AgentsSQLAlchemyError)
    await store.close()  # closing twice is fine
    async with SessionStore(db_url) as again:  # nothing was written after the close
        assert await again.session("s").get_items() == [message("kept")]


async def test_async_with_closes_the_store(sqlite_url: str) -> None:
    async with SessionStore(sqlite_url, create_tables=True) as store:
        await store.session("s").add_items([message("x")])
    with pytest.raises(StoreClosedError):
        await store.list_sessions()


def test_sync_with_and_run_sync(db_url: str) -> None:
    with SessionStore(db_url, create_tables=True) as store:
        result = Runner.run_sync(replying("hello"), "hi", session=store.session("s"))
        assert result.final_output == "hello"
    assert store.closed
    with pytest.raises(StoreClosedError):
        asyncio.run(store.list_sessions())


@pytest.mark.dialects("postgresql", "mariadb")
def test_runs_from_threads_that_end_keep_no_engine_each(db_url: str) -> None:
    """`Runner.run_sync` in a thread per request leaves the thread's loop open: one store
    kept for the process held an engine and a server connection per thread that ever used
    it, until close() (101 after 100 requests)."""

    def request(n: int) -> None:
        Runner.run_sync(replying(f"{n}"), "hi", session=store.session(f"r{n}"))

    with SessionStore(db_url, create_tables=True, search=False) as store:
        for n in range(12):
            thread = threading.Thread(target=request, args=(n,))
            thread.start()
            thread.join()
        request(12)  # a new loop here: the ended threads' engines are dropped
        assert len(store._services.db._source.engines()) <= 2


@pytest.mark.dialects("postgresql", "mariadb")
def test_asyncio_run_in_threads_leaves_no_server_connection_open(db_url: str) -> None:
    """The connections of a loop that `asyncio.run` ended stayed open until Python's
    garbage collector freed them: two idle on the server per request handled with
    `asyncio.run` in a thread of its own, until the server refused more."""
    count = CONNECTIONS[db_url.split(":")[0].split("+")[0]]

    async def request(n: int) -> None:
        session = store.session(f"r{n}")
        await asyncio.gather(session.add_items([message("x")]), session.get_items())

    gc.disable()  # as between two of the collector's rare full collections
    try:
        with SessionStore(db_url, create_tables=True, search=False) as store:
            for n in range(10):
                thread = threading.Thread(target=asyncio.run, args=(request(n),))
                thread.start()
                thread.join()
            assert asyncio.run(raw_rows(db_url, count)) == [(0,)]
    finally:
        gc.enable()


async def closing_reply(session: SQLAlchemySession) -> AsyncGenerator[int, None]:
    """An app's reply, a generator that writes as it is closed (its client stopped reading)."""
    try:
        yield 1
    finally:
        await session.add_items([message("closing")])


@pytest.mark.dialects("postgresql", "mariadb")
# That write's connection, opened after the store closed the loop's, is left to the
# collector as before (which reports it unclosed).
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_write_as_asyncio_run_closes_the_apps_generators_is_stored(db_url: str) -> None:
    """An app's generator still open as `asyncio.run` ends (a reply its client stopped
    reading) writes in its `finally`, while the store closes the loop's connections: the
    store made a second closer then, too late for the loop (a ResourceWarning, an error
    where warnings are), and the write was refused."""

    open_replies = []

    async def request(session: SQLAlchemySession) -> None:
        await session.add_items([message("first")])
        open_replies.append(closing_reply(session))
        await open_replies[-1].__anext__()  # left open: asyncio.run closes it as it ends

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with SessionStore(db_url, create_tables=True, search=False) as store:
            for n in range(3):
                asyncio.run(request(store.session(f"s{n}")))
            for n in range(3):
                items = asyncio.run(store.session(f"s{n}").get_items())
                assert [item["content"] for item in items] == ["first", "closing"]


@pytest.mark.dialects("postgresql", "mariadb")
# The write's connection is left to the collector, as a loop closed without
# shutdown_asyncgens leaves its connections (which the collector reports unclosed).
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_an_apps_generator_first_to_use_the_store_on_its_loop_writes_as_it_closes(
    db_url: str,
) -> None:
    """The same generator, the only use of the store on its loop: the store began its
    closer while `asyncio.run` was closing the loop's generators already (a
    ResourceWarning, an error where warnings are), and the write was refused."""

    open_replies = []

    async def request(session: SQLAlchemySession) -> None:
        open_replies.append(closing_reply(session))
        await open_replies[-1].__anext__()  # left open: asyncio.run closes it as it ends

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with SessionStore(db_url, create_tables=True, search=False) as store:
            asyncio.run(store.session("warm").add_items([message("x")]))
            for n in range(3):
                asyncio.run(request(store.session(f"s{n}")))
            for n in range(3):
                items = asyncio.run(store.session(f"s{n}").get_items())
                assert [item["content"] for item in items] == ["closing"]


@pytest.mark.dialects("postgresql", "mariadb")
def test_close_while_another_threads_asyncio_run_closes_its_engine(db_url: str) -> None:
    """`close()` while `asyncio.run` in another thread was closing its loop's engine (a
    slow network) raised "aclose(): asynchronous generator is already running", and left
    the other engines open."""
    worker_closing, go_on = threading.Event(), threading.Event()

    def slow_close(dbapi_connection: object, record: object) -> None:
        if threading.current_thread() is worker:  # the worker loop's engine, disposed
            worker_closing.set()
            go_on.wait(10)

    store = SessionStore(db_url, create_tables=True, search=False)
    asyncio.run(store.session("main").add_items([message("x")]))  # an engine of its own
    worker = threading.Thread(
        target=asyncio.run, args=(store.session("s").add_items([message("y")]),)
    )
    event.listen(Pool, "close", slow_close)
    try:
        worker.start()
        assert worker_closing.wait(10)
        store.__exit__(None, None, None)  # raised here
        assert store.closed
    finally:
        go_on.set()
        worker.join()
        event.remove(Pool, "close", slow_close)
    assert asyncio.run(raw_rows(db_url, CONNECTIONS[db_url.split(":")[0].split("+")[0]])) == [(0,)]


def test_drop_in_session_with_run_sync(db_url: str) -> None:
    with SQLAlchemySession.from_url("s", url=db_url, create_tables=True) as session:
        Runner.run_sync(replying("one"), "hi", session=session)
        Runner.run_sync(replying("two"), "again", session=session)
        store = session.store
    assert store.closed  # the session was the store's only user
    with SQLAlchemySession.from_url("s", url=db_url) as session:
        assert session.store is not store  # a closed shared store is not handed out again
        contents = [item.get("content") for item in run_blocking(session.get_items)]
        assert contents[0] == "hi" and contents[2] == "again" and len(contents) == 4


async def test_a_shared_store_closes_with_its_last_session(sqlite_url: str) -> None:
    first = SQLAlchemySession("a", sqlite_url, create_tables=True)
    second = SQLAlchemySession("b", sqlite_url)
    assert first.store is second.store
    await first.add_items([message("a")])
    await first.close()
    with pytest.raises(StoreClosedError, match="session"):
        await first.get_items()
    await second.add_items([message("b")])  # the other session still works
    assert not second.store.closed
    async with second:
        assert await second.get_items() == [message("b")]
    assert second.store.closed
    await second.close()  # closing twice is fine


async def test_a_share_given_back_twice_is_refused(sqlite_url: str) -> None:
    """`release()` once more than `shared()` went below no shares, silently."""
    store = SessionStore.shared(sqlite_url, create_tables=True)
    assert SessionStore.shared(sqlite_url) is store
    await store.release()
    assert not store.closed
    await store.release()
    assert store.closed
    with pytest.raises(ConfigurationError, match="released twice"):
        await store.release()
    alone = SessionStore(sqlite_url)  # not shared: release() closes it
    await alone.release()
    assert alone.closed


async def test_a_session_from_a_store_leaves_the_store_open(sqlite_url: str) -> None:
    async with SessionStore(sqlite_url, create_tables=True) as store:
        async with store.session("s") as session:
            await session.add_items([message("x")])
        with pytest.raises(StoreClosedError):
            await session.get_items()
        assert not store.closed
        assert await store.session("s").get_items() == [message("x")]
        with store.session("t") as other:  # sync `with` too
            assert other.session_id == "t"


async def test_close_ends_while_writes_go_on_and_starts_no_worker_after(db_url: str) -> None:
    """close() waited for the indexing to go idle, which a stream of appends never let it
    do: it did not return while a writer went on. An append that committed meanwhile then
    started the background worker again, a thread nothing stopped. Indexing submitted once
    close has begun is left to the next search."""
    before = _workers()
    store = SessionStore(db_url, create_tables=True)
    session = store.session("busy")
    await session.add_items([message("first")])
    stop = False

    async def writer() -> None:
        while not stop:
            await session.add_items([message(f"m{n}") for n in range(50)])

    task = asyncio.ensure_future(writer())
    await asyncio.sleep(0.3)
    try:
        await asyncio.wait_for(store.close(), 20)
    finally:
        stop = True
        await asyncio.gather(task, return_exceptions=True)
    assert task.exception() is None or isinstance(task.exception(), StoreClosedError)
    with pytest.raises(StoreClosedError):
        await session.add_items([message("after")])
    await asyncio.sleep(0.2)
    assert _workers() <= before
    async with SessionStore(db_url) as again:  # what was written is there, and searchable
        assert (await again.session("busy").get_items(limit=1))[0]["content"].startswith("m")
        assert await again.session("busy").search("first", mode="keyword")


async def test_a_read_cancelled_while_a_checkpoint_runs_leaves_close_working(
    sqlite_url: str,
) -> None:
    """A small read waiting for the SQLite file's checkpoint, cancelled, cancelled the
    checkpoint's future every other waiter shared: close() then raised CancelledError and
    left the connections open."""
    store = SessionStore(sqlite_url, create_tables=True)
    session = store.session("s")
    for number in range(200):  # a checkpoint of the write-ahead log is due by then
        await session.add_items([message(str(number))])
    reader = asyncio.ensure_future(session.get_items(limit=5))
    await asyncio.sleep(0)
    reader.cancel()
    await asyncio.gather(reader, return_exceptions=True)
    assert len(await session.get_items()) == 200
    await store.close()
    assert all(in_use == idle == 0 for _, in_use, idle in store._services.db.pools())


def _workers() -> int:
    """Background worker threads alive in this process."""
    return sum(t.name == "agents-sqlalchemy-background" for t in threading.enumerate())


@pytest.mark.dialects("postgresql", "mariadb")
async def test_a_pool_with_no_connection_free_is_a_database_timeout(db_url: str) -> None:
    """SQLAlchemy's own `TimeoutError` came out as it was, outside the library's errors."""
    pool = {"pool_size": 1, "max_overflow": 0, "pool_timeout": 0.2}
    async with SessionStore(db_url, create_tables=True, engine_kwargs=pool) as store:
        session = store.session("s")
        await session.add_items([message("kept")])
        async with store.engine.connect():  # the pool's one connection, held
            with pytest.raises(DatabaseTimeoutError, match="no connection of the pool"):
                await session.get_items()
        assert await session.get_items() == [message("kept")]
