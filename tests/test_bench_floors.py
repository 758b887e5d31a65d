"""The benchmark's PostgreSQL floors do the work they are timed for: the bare asyncpg floor
and the same statements through SQLAlchemy's engine store, read, pop and clear alike
(a yardstick that skipped a statement would look cheaper than it is)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from benchmarks.backends import asyncpg_dsn
from benchmarks.core import BenchSession
from benchmarks.floor import postgres_floor, postgres_floor_sqlalchemy

Factory = Callable[[str], BenchSession]
Opener = Callable[[str], AbstractAsyncContextManager[Factory]]


@asynccontextmanager
async def bare_floor(url: str) -> AsyncIterator[Factory]:
    async with postgres_floor(asyncpg_dsn(url)) as factory:
        yield factory


async def _walk(open_floor: Opener, url: str) -> list[Any]:
    """One session's life on a floor: what each call gave back, in order."""
    seen: list[Any] = []
    async with open_floor(url) as session_of:
        session, other = session_of("a"), session_of("b")
        await session.add_items([{"role": "user", "content": f"m{i}"} for i in range(5)])
        await other.add_items([{"role": "user", "content": "elsewhere"}])
        seen.append(await session.get_items())
        seen.append(await session.get_items(limit=2))
        seen.append(await session.pop_item())
        seen.append(await session.get_items())
        await session.clear_session()
        seen.append(await session.get_items())
        seen.append(await session.pop_item())
        seen.append(await other.get_items())
    return seen


def test_both_postgresql_floors_do_the_same_work(pg_url: str) -> None:
    through_engine = asyncio.run(_walk(postgres_floor_sqlalchemy, pg_url))
    # The same database: the second walk starts from the first one's cleared session.
    on_the_driver = asyncio.run(_walk(bare_floor, pg_url))
    first = [{"role": "user", "content": f"m{i}"} for i in range(5)]
    assert through_engine[0] == first
    assert through_engine[1] == first[3:]
    assert through_engine[2] == first[4]
    assert through_engine[3] == first[:4]
    assert through_engine[4] == [] and through_engine[5] is None
    assert through_engine[6] == [{"role": "user", "content": "elsewhere"}]
    assert on_the_driver[:6] == through_engine[:6]
    assert on_the_driver[6] == through_engine[6] * 2  # "b" was written by both walks
