"""`Prepared` and `PreparedRows`: statements run on the driver's cursor.

`PreparedRows` puts many rows in one statement, each statement inside the caller's
transaction: pysqlite opens a transaction only before a statement it sees is a write (one
that starts with INSERT, UPDATE, DELETE or REPLACE), and a statement starting with WITH
would commit on its own. Read from a second connection, on a real file.

On an async driver a statement is built and compiled in a worker thread, and many
parameter sets go to the server in parts, so that neither holds the event loop.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import (
    Column,
    Integer,
    MetaData,
    String,
    Table,
    bindparam,
    create_engine,
    func,
    select,
    text,
)
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.sql import ClauseElement

from agents_sqlalchemy import SessionStore
from agents_sqlalchemy.database.units import Database
from agents_sqlalchemy.repository.prepared import MANY_ROWS, Prepared, PreparedRows

from .support.items import message


def test_rows_over_several_statements_are_one_transaction_s_own(tmp_path: Path) -> None:
    path = tmp_path / "rows.db"
    engine = create_engine(f"sqlite:///{path}")
    metadata = MetaData()
    target = Table("target", metadata, Column("a", Integer), Column("b", String))
    metadata.create_all(engine)
    copy = PreparedRows(
        lambda given: target.insert().from_select(["a", "b"], select(given)),
        {"a": Integer(), "b": String()},
    )
    rows = [(n, f"row {n}") for n in range(copy.most_rows * 2 + 1)]

    def seen_elsewhere() -> int:
        with sqlite3.connect(path) as other:
            count: int = other.execute("SELECT count(*) FROM target").fetchone()[0]
        return count

    with engine.connect() as conn:
        copy.run(conn, rows)
        assert seen_elsewhere() == 0  # nothing committed before the transaction is
        conn.rollback()
    assert seen_elsewhere() == 0
    with engine.connect() as conn:
        copy.run(conn, rows)
        conn.commit()
        assert conn.execute(select(target.c.a, target.c.b).order_by(target.c.a)).all() == rows
        assert conn.execute(select(func.count()).select_from(target)).scalar() == len(rows)
    engine.dispose()


@pytest.mark.dialects("postgresql", "mariadb")
async def test_a_statement_is_built_and_compiled_off_the_event_loop(db_url: str) -> None:
    """On asyncpg and asyncmy a unit of work runs in a greenlet on the event loop: the
    statement's first run builds and compiles it in a worker thread, once."""
    db = Database(db_url)
    target = Table("target", MetaData(), Column("a", Integer, primary_key=True))
    built_on: list[int] = []

    def build() -> ClauseElement:
        built_on.append(threading.get_ident())
        return select(target.c.a).where(target.c.a > bindparam("above")).order_by(target.c.a)

    above = Prepared(build)
    try:
        await db.write(lambda conn: target.create(conn))
        await db.write(lambda conn: conn.execute(target.insert(), [{"a": n} for n in range(1, 6)]))
        for _ in range(2):
            assert await db.read(lambda conn: above.run(conn, {"above": 3})) == [(4,), (5,)]
    finally:
        await db.close()
    assert len(built_on) == 1
    assert built_on[0] != threading.get_ident()  # the loop's thread


async def test_many_parameter_sets_go_to_mariadb_in_parts(mariadb_url: str) -> None:
    """asyncmy writes one INSERT of every parameter set it is given, on the event loop: in
    parts of `MANY_ROWS`, the server counts one INSERT per part, in one transaction."""
    db = Database(mariadb_url)
    target = Table("target", MetaData(), Column("a", Integer), Column("b", String(20)))
    insert = Prepared(target.insert().values(a=bindparam("a"), b=bindparam("b")))
    rows = [{"a": n, "b": f"row {n}"} for n in range(2 * MANY_ROWS + 1)]

    def counted(conn: Connection) -> int:
        return int(conn.execute(text("SHOW SESSION STATUS LIKE 'Com_insert'")).one()[1])

    def inserted(conn: Connection) -> int:
        before = counted(conn)
        insert.run_many(conn, rows)
        return counted(conn) - before

    try:
        await db.write(lambda conn: target.create(conn))
        statements = await db.write(inserted)
        stored = await db.read(
            lambda conn: conn.execute(select(target.c.a, target.c.b).order_by(target.c.a)).all()
        )
    finally:
        await db.close()
    assert statements == 3
    assert [tuple(row) for row in stored] == [(r["a"], r["b"]) for r in rows]


async def _commands(store: SessionStore) -> dict[str, int]:
    """The commands the store's (one) MariaDB connection has run: statements prepared and
    executed prepared (`Com_stmt_*`), and `Questions`, which counts text commands too (this
    one included)."""
    async with store.engine.connect() as conn:
        found = await conn.execute(text("SHOW SESSION STATUS"))
        counts = {str(name): value for name, value in found}
    return {
        name: int(counts[name]) for name in ("Com_stmt_prepare", "Com_stmt_execute", "Questions")
    }


async def test_mariadb_runs_prepared_statements_and_inserts_in_bulk(mariadb_url: str) -> None:
    """The store's asyncmy connections keep server-side prepared statements: a statement
    is prepared once; an append's only text command is its COMMIT, and its items go in one
    bulk command whatever their number (no column of them is NULL in every row)."""
    async with SessionStore(mariadb_url, create_tables=True, search=False) as store:
        session = store.session("bulk")
        await session.add_items([message("first")])
        appends = []
        for count in (4, 40):
            before = await _commands(store)
            await session.add_items([message(f"{count}: {n}") for n in range(count)])
            after = await _commands(store)
            appends.append({name: after[name] - before[name] for name in after})
        assert len(await session.get_items()) == 45
    for commands in appends:
        assert commands["Com_stmt_prepare"] == 0
        assert commands["Questions"] - commands["Com_stmt_execute"] == 2  # COMMIT, SHOW
    assert appends[0]["Com_stmt_execute"] == appends[1]["Com_stmt_execute"]


async def test_an_app_may_turn_mariadb_s_statement_cache_off(mariadb_url: str) -> None:
    """`stmt_cache_size=0` in the URL is asyncmy's own setting, and kept: nothing is
    prepared, and everything still works."""
    url = make_url(mariadb_url).update_query_dict({"stmt_cache_size": "0"})
    async with SessionStore(url, create_tables=True, search=False) as store:
        session = store.session("text")
        await session.add_items([message(f"item {n}") for n in range(4)])
        assert await session.pop_item() == message("item 3")
        commands = await _commands(store)
        assert commands["Com_stmt_prepare"] == commands["Com_stmt_execute"] == 0


@pytest.mark.parametrize("sealed", [False, True], ids=["plaintext", "sealed"])
async def test_an_append_larger_than_max_allowed_packet_goes_in_parts(
    mariadb_url: str, sealed: bool
) -> None:
    """Items each well under the server's `max_allowed_packet` but over it together are one
    append still: a bulk command holds at most `MANY_CHARACTERS` of them."""
    opened = {"key": os.urandom(32)} if sealed else {}
    async with SessionStore(mariadb_url, create_tables=True, search=False, **opened) as store:
        async with store.engine.connect() as conn:
            limit = int((await conn.execute(text("SELECT @@max_allowed_packet"))).scalar_one())
        size = 1_000_000
        items = [message(f"{n} " + "x" * size) for n in range(limit // size + 2)]
        session = store.session("big")
        await session.add_items(items)
        assert await session.get_items() == items


async def test_the_work_runs_in_place_when_no_worker_thread_takes_it(pg_url: str) -> None:
    """At interpreter exit the thread pools take no more work (a store never closed indexes
    then): the statement is built and compiled on the unit's own thread instead."""
    db = Database(pg_url)
    built_on: list[int] = []

    def build() -> ClauseElement:
        built_on.append(threading.get_ident())
        return select(bindparam("n", type_=Integer()))

    echo = Prepared(build)
    refusing = ThreadPoolExecutor(1)
    refusing.shutdown()
    asyncio.get_running_loop().set_default_executor(refusing)
    try:
        assert await db.read(lambda conn: echo.run(conn, {"n": 7})) == [(7,)]
    finally:
        await db.close()
    assert built_on == [threading.get_ident()]


@pytest.mark.parametrize("url", ["sqlite://", "postgresql+asyncpg://", "mysql+asyncmy://"])
def test_the_sql_of_many_rows_is_written_as_compiling_would(url: str) -> None:
    """A `PreparedRows` statement of n rows is written from those of one, two and three
    (compiling 128 rows took 70 ms): exactly what compiling n rows gives, on SQLite; where
    the parameters are numbered across the statement (asyncpg), each size is compiled."""
    dialect = create_engine(url).dialect
    target = Table("target", MetaData(), Column("a", Integer), Column("b", String))
    copy = PreparedRows(
        lambda given: target.insert().from_select(["a", "b"], select(given)),
        {"a": Integer(), "b": String()},
    )
    for count in (*range(1, 20), 64, 128, copy.most_rows):
        assert copy._written(count, dialect) == copy._compile(count, dialect)
    written = copy._rows_sql[(dialect.name, dialect.driver)]
    assert (written is None) == (dialect.paramstyle == "numeric_dollar")
