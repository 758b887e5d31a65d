"""Many workers through PgBouncer in transaction-pooling mode (Debian's 1.18, which keeps no
prepared statement across transactions), with the URL setting `pgbouncer=true`.

The concurrency and protocol tests run again here, their `db_url` pointing at PgBouncer.
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy.engine import make_url

from agents_sqlalchemy import ConfigurationError, DatabaseError, SessionStore

from .items import message
from .test_concurrency import (
    test_concurrent_pops_return_each_item_once,
    test_eight_processes_never_lose_or_interleave_a_batch,
    test_first_use_creates_tables_once_under_concurrency,
    test_first_write_to_a_new_session_from_many_tasks,
    test_one_store_from_asyncio_run_three_times,
    test_one_store_from_run_sync_in_three_threads,
)
from .test_protocol import (
    test_items_round_trip_verbatim,
    test_limits_follow_the_sdk,
    test_pop_and_clear,
)
from .test_runner import test_run_with_tools_then_history

__all__ = [
    "test_concurrent_pops_return_each_item_once",
    "test_eight_processes_never_lose_or_interleave_a_batch",
    "test_first_use_creates_tables_once_under_concurrency",
    "test_first_write_to_a_new_session_from_many_tasks",
    "test_items_round_trip_verbatim",
    "test_limits_follow_the_sdk",
    "test_one_store_from_asyncio_run_three_times",
    "test_one_store_from_run_sync_in_three_threads",
    "test_pop_and_clear",
    "test_run_with_tools_then_history",
]


@pytest.fixture
def db_url(pgbouncer_url: str) -> str:
    """Every test of this module talks to PostgreSQL through PgBouncer."""
    return pgbouncer_url


async def _busy_workers(url: str) -> list[BaseException]:
    """Four stores, forty tasks at a time, each a write and a read; the errors they met."""
    stores = [SessionStore(url) for _ in range(4)]
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

    # The same work without the setting: asyncpg's named statements meet other clients'
    # server connections, and fail.
    plain = make_url(pgbouncer_url).difference_update_query(["pgbouncer"])
    errors = await _busy_workers(plain.render_as_string(hide_password=False))
    assert errors and all(isinstance(error, DatabaseError) for error in errors)
    assert any("prepared statement" in str(error) for error in errors), errors[:3]


def test_the_setting_takes_true_or_false_on_postgresql_only() -> None:
    with pytest.raises(ConfigurationError, match="true or false"):
        SessionStore("postgresql://u@localhost/db?pgbouncer=maybe")
    with pytest.raises(ConfigurationError, match="PostgreSQL URLs only"):
        SessionStore("mysql://u@localhost/db?pgbouncer=true")
    off = SessionStore("postgresql://u@localhost/db?pgbouncer=false")
    assert off.engine.url.query == {}
