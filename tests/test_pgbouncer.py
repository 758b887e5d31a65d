"""Many workers through PgBouncer in transaction-pooling mode (Debian's 1.18, which keeps no
prepared statement across transactions), with the URL setting `pgbouncer=true`.

The concurrency, protocol, runner and lock-timeout tests marked `pgbouncer` run through it too,
as one more `db_url` (where each write sets its lock timeout with `SET LOCAL`); the tests
here are about PgBouncer itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from agents_sqlalchemy import ConfigurationError, DatabaseError, SessionStore, upgrade
from agents_sqlalchemy.cli import app

from .support.items import message
from .support.servers import PG_URL


async def _busy_workers(url: str) -> list[BaseException]:
    """Four stores, forty tasks at a time, each a write and a read; the errors they met."""
    return await _busy(lambda: [SessionStore(url) for _ in range(4)])


async def _busy_workers_on(engines: list[AsyncEngine]) -> list[BaseException]:
    """`_busy_workers` with a store on each of these engines (no search: its indexing runs
    on a worker thread's own event loop, which an app's asyncpg engine does not serve)."""
    return await _busy(lambda: [SessionStore(engine, search=False) for engine in engines])


async def _busy(make: Callable[[], list[SessionStore]]) -> list[BaseException]:
    stores = make()
    try:
        errors: list[BaseException] = []
        for round_ in range(10):
            results = await asyncio.gather(
                *(
                    store.session(f"w{n}").add_items([message(f"{round_}-{n}")])
                    for store in stores
                    for n in range(10)
                ),
                *(store.session(f"w{n}").get_items() for store in stores for n in range(10)),
                return_exceptions=True,
            )
            errors += [result for result in results if isinstance(result, BaseException)]
        return errors
    finally:
        for store in stores:
            await store.close()


async def test_the_setting_is_what_makes_asyncpg_safe_there(pgbouncer_url: str) -> None:
    async with SessionStore(pgbouncer_url, create_tables=True) as store:
        await store.session("w0").get_items()
    assert await _busy_workers(pgbouncer_url) == []
    async with SessionStore(pgbouncer_url) as store:
        assert len(await store.session("w3").get_items()) == 10 * 4

    # The same work without the setting: the store's connections ask for a lock_timeout
    # PgBouncer does not pass on, and fail at once.
    plain = make_url(pgbouncer_url).difference_update_query(["pgbouncer"])
    errors = await _busy_workers(plain.render_as_string(hide_password=False))
    assert errors and all(isinstance(error, DatabaseError) for error in errors)
    assert "unsupported startup parameter: lock_timeout" in str(errors[0])
    assert "add ?pgbouncer=true to the URL" in str(errors[0])  # what to do about it
    with pytest.raises(DatabaseError, match=r"lock_timeout.*add \?pgbouncer=true to the URL"):
        await upgrade(plain.render_as_string(hide_password=False))  # the migrations say it too


async def test_asyncpg_caches_trip_over_pooled_connections(pgbouncer_url: str) -> None:
    """What the setting prevents: statements prepared on one server connection and run on
    another (an engine made without it, as an app might pass in)."""
    async with SessionStore(pgbouncer_url, create_tables=True) as store:
        await store.session("w0").get_items()
    plain = make_url(pgbouncer_url).difference_update_query(["pgbouncer"])
    engines = [create_async_engine(plain) for _ in range(4)]
    try:
        errors = await _busy_workers_on(engines)
    finally:
        for engine in engines:
            await engine.dispose()
    assert errors and all(isinstance(error, DatabaseError) for error in errors)
    assert any("prepared statement" in str(error) for error in errors), errors[:3]


def test_the_setting_takes_true_or_false_on_postgresql_only() -> None:
    with pytest.raises(ConfigurationError, match="true or false"):
        SessionStore("postgresql://u@localhost/db?pgbouncer=maybe")
    with pytest.raises(ConfigurationError, match="PostgreSQL URLs only"):
        SessionStore("mysql://u@localhost/db?pgbouncer=true")
    off = SessionStore("postgresql://u@localhost/db?pgbouncer=false")
    assert off.engine.url.query == {}


async def test_reads_cancelled_behind_the_pooler_leave_no_transaction_open(
    pgbouncer_url: str,
) -> None:
    """A read runs in a transaction there; cancelled while its BEGIN ran, the connection
    stayed in it unknown to SQLAlchemy, and every later append on it was a savepoint that
    reported success and was never committed: another store saw none of them."""
    async with (
        SessionStore(pgbouncer_url, create_tables=True) as store,
        SessionStore(pgbouncer_url) as other,
    ):
        session = store.session("cancelled reads")
        await session.add_items([message(str(n)) for n in range(50)])
        for attempt in range(300):
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(session.get_items(), 0.0005 + (attempt % 7) * 0.0003)
        for n in range(10):
            await store.session(f"after {n}").add_items([message("kept")])
        seen = [await other.session(f"after {n}").get_items() for n in range(10)]
    assert seen == [[message("kept")]] * 10


def test_the_sdks_tables_are_read_through_the_pooler_too(
    pgbouncer_url: str, tmp_path: Path
) -> None:
    """`import-sdk --from` a URL with `pgbouncer=true`: the setting reached asyncpg (a
    `TypeError` and a traceback), and without it the source's cached statements collided
    on the pooled server connections."""
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession as SdkSession

    direct = make_url(PG_URL or "").set(database=make_url(pgbouncer_url).database)

    async def sdk_history() -> None:
        engine = create_async_engine(direct)
        try:
            for n in range(12):
                session = SdkSession(f"s{n}", engine=engine, create_tables=n == 0)
                await session.add_items([message(f"{n}-{i}") for i in range(3)])
        finally:
            await engine.dispose()

    asyncio.run(sdk_history())
    target = str(tmp_path / "agent.db")
    done = CliRunner().invoke(
        app, ["import-sdk", "--from", pgbouncer_url, "--url", target, "--create"]
    )
    assert done.exit_code == 0, done.output
    assert "Imported 12 sessions (36 items)" in done.output

    async def imported() -> list[str]:
        async with SessionStore(target) as store:
            return [item["content"] for item in await store.session("s11").get_items()]

    assert asyncio.run(imported()) == ["11-0", "11-1", "11-2"]
