"""Where databases differ: sizes, time precision, collations, drivers, deadlocks.

Every test that takes `db_url` runs on SQLite, PostgreSQL and MariaDB; the MariaDB server of
`make test` keeps its compiled-in defaults (latin1, second-precision DATETIME unless told),
so nothing here passes by a friendly server setting.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime, timedelta, timezone

import pymysql
import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import create_async_engine

from agents_sqlalchemy import ConfigurationError, DatabaseError, SchemaError, SessionStore
from agents_sqlalchemy.database.engines import normalize_url
from agents_sqlalchemy.database.units import Database
from agents_sqlalchemy.repository import schema as repository_module

from .support.cli import cli
from .support.items import ALL, USER, message
from .support.tables import ITEMS, execute, heap_pages_read


@pytest.mark.parametrize("key", [None, "passphrase"])
async def test_an_item_of_a_megabyte_round_trips(db_url: str, key: str | None) -> None:
    """Past the 64 KB of MySQL's TEXT and BLOB."""
    big = {"type": "function_call_output", "call_id": "c", "output": "🐶x" * 350_000}
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        session = store.session("big " + "🐶" * 300)
        await session.add_items([USER, big])
        await session.set_state("blob", {"text": "é" * 200_000})
        assert await session.get_items() == [USER, big]
        assert await session.get_state("blob") == {"text": "é" * 200_000}
        assert await session.pop_item() == big


async def test_a_tail_read_on_postgresql_reads_the_tail_of_a_big_session_only(
    pg_url: str,
) -> None:
    """`get_items(limit=n)` costs O(n), also before PostgreSQL has statistics (autovacuum
    off here), when it takes every session for a small one: a tail of 20 reads a few pages
    of a 20,000-item session, not all of them at every call."""
    async with SessionStore(pg_url, create_tables=True, search=False) as store:
        await store.session("small").add_items([message("s")] * 100)
        await execute(pg_url, f"ALTER TABLE {ITEMS} SET (autovacuum_enabled = false)")
        big = store.session("big")
        for start in range(0, 20_000, 5_000):
            await big.add_items([message(str(i)) for i in range(start, start + 5_000)])
    before = await heap_pages_read(pg_url, ITEMS)
    async with SessionStore(pg_url) as store:
        session = store.session("big")
        for _ in range(30):
            tail = await session.get_items(limit=20)
            assert tail == [message(str(i)) for i in range(19_980, 20_000)]
    read = await heap_pages_read(pg_url, ITEMS) - before
    assert read < 30 * 20, f"{read} pages read by 30 tail reads"  # the whole session: ~7,000


async def test_a_pop_on_postgresql_reads_its_own_session_whatever_the_plan(pg_url: str) -> None:
    """A pop's statement, prepared on its connection, runs on PostgreSQL's generic plan from
    its sixth run; that plan must still reach the session's items through the index. It
    once scanned the whole items table there (every session's rows, at every pop): 37 ms a
    pop beside 200,000 items of other sessions."""
    async with SessionStore(pg_url, create_tables=True, search=False) as store:
        await store.session("popped").add_items([message(str(i)) for i in range(100)])
        await execute(pg_url, f"ALTER TABLE {ITEMS} SET (autovacuum_enabled = false)")
        other = store.session("other")
        for start in range(0, 20_000, 5_000):
            await other.add_items([message(str(i)) for i in range(start, start + 5_000)])
    await execute(pg_url, f"ANALYZE {ITEMS}")  # the statistics a busy database has
    before = await heap_pages_read(pg_url, ITEMS)
    async with SessionStore(pg_url) as store:
        session = store.session("popped")
        for i in range(99, 69, -1):
            assert await session.pop_item() == message(str(i))
    read = await heap_pages_read(pg_url, ITEMS) - before
    assert read < 30 * 20, f"{read} pages read by 30 pops"  # the other session's: ~300 a pop


async def test_sessions_a_microsecond_apart_page_in_order(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keyset pages compare timestamps exactly: whole seconds would tie and skip rows."""
    base = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
    async with SessionStore(db_url, create_tables=True) as store:
        for i in range(6):
            stamp = base + timedelta(microseconds=i)
            monkeypatch.setattr(repository_module, "utcnow", lambda stamp=stamp: stamp)
            await store.session(f"s{i}").add_items([message(str(i))])
        seen, cursor = [], None
        while True:
            page = await store.list_sessions(limit=2, cursor=cursor)
            seen += page
            if (cursor := page.next_cursor) is None:
                break
        assert [info.session_id for info in seen] == [f"s{i}" for i in range(5, -1, -1)]
        assert [info.updated_at for info in seen][-1] == base
        assert seen[0].updated_at == base + timedelta(microseconds=5)


async def test_text_compares_exactly(db_url: str) -> None:
    """No case-insensitive collation: owners and metadata match byte for byte."""
    async with SessionStore(db_url, create_tables=True) as store:
        for session_id, owner, channel in (("a", "alice", "web"), ("b", "Alice", "Web")):
            await store.session(session_id, user_id=owner, metadata={"ch": channel}).add_items(
                [message(session_id)]
            )
        by_owner = await store.list_sessions(user_id="alice")
        assert [info.session_id for info in by_owner] == ["a"]
        by_channel = await store.list_sessions(metadata={"ch": "Web"})
        assert [info.session_id for info in by_channel] == ["b"]
        assert await store.session_info("A") is None


async def test_tables_are_utf8mb4_on_a_latin1_server(mariadb_url: str) -> None:
    async with SessionStore(mariadb_url, create_tables=True) as store:
        await store.session("🐶").add_items(ALL)
    engine = create_async_engine(mariadb_url)
    try:
        async with engine.connect() as conn:
            server = (await conn.execute(text("SELECT @@character_set_server"))).scalar()
            collations = await conn.execute(
                text(
                    "SELECT DISTINCT table_collation FROM information_schema.tables "
                    "WHERE table_schema = DATABASE() AND table_name LIKE 'agents_sqlalchemy_%'"
                    " AND table_name <> 'agents_sqlalchemy_version'"
                    " AND table_type = 'BASE TABLE'"  # not the messages view
                )
            )
            assert server == "latin1"  # the test server's default: the tables say otherwise
            assert collations.scalars().all() == ["utf8mb4_bin"]
    finally:
        await engine.dispose()


async def test_aiomysql_and_mariadb_urls(mariadb_url: str) -> None:
    url = make_url(mariadb_url)
    for driver in ("mysql+aiomysql", "mariadb+asyncmy"):
        other = url.set(drivername=driver).render_as_string(hide_password=False)
        async with SessionStore(other, create_tables=True, search=True) as store:
            session = store.session(driver, user_id="u")
            await session.add_items(ALL)
            assert await session.get_items() == ALL
            assert (await session.search("Mochi", limit=1)) == [ALL[0]]
            assert await session.pop_item() == ALL[-1]
            assert (await store.delete_user("u")).sessions == 1


@pytest.mark.parametrize(
    ("pymysql", "aiomysql", "refused"),
    [("1.2.0", "0.3.2", True), ("1.1.1", "0.3.2", False), ("1.2.0", "0.4.0", False)],
)
async def test_aiomysql_with_a_pymysql_it_cannot_use_is_named(
    monkeypatch: pytest.MonkeyPatch, pymysql: str, aiomysql: str, refused: bool
) -> None:
    """aiomysql 0.3.2 with PyMySQL 1.2 (a plain `pip install aiomysql`) failed every write deep
    in the driver: "TypeError: 'str' object is not callable"."""
    from importlib import metadata

    releases = {"pymysql": pymysql, "aiomysql": aiomysql}
    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: releases.get(name.lower()) or real(name))
    store = SessionStore("mysql+aiomysql://u@127.0.0.1:1/app")  # nothing listens there
    expected = "aiomysql issue 1080" if refused else "cannot reach"
    with pytest.raises((ConfigurationError, DatabaseError), match=expected):
        await store.session("s").get_items()
    await store.close()


def test_urls_name_an_async_driver_and_utf8mb4() -> None:
    assert normalize_url("mysql://u@db/app").render_as_string() == (
        "mysql+asyncmy://u@db/app?charset=utf8mb4"
    )
    assert normalize_url("mariadb+aiomysql://u@db/app?charset=latin1").query == {
        "charset": "latin1"
    }


async def test_a_deadlock_victim_is_run_again(mariadb_url: str) -> None:
    """A real InnoDB deadlock with another client: our transaction, the lighter one, is the
    victim, rolled back whole; it is run again and commits."""
    db = Database(mariadb_url)
    await db.run(
        lambda conn: conn.exec_driver_sql("CREATE TABLE t (id INT PRIMARY KEY, n INT)"),
        write=True,
    )
    await db.run(
        lambda conn: conn.execute(
            text("INSERT INTO t VALUES (:id, 0)"), [{"id": i} for i in range(1, 101)]
        ),
        write=True,
    )
    parsed = make_url(mariadb_url)
    other = pymysql.connect(
        host=parsed.host,
        port=parsed.port,
        user=parsed.username,
        password=parsed.password,
        database=parsed.database,
        autocommit=False,
    )
    ours_waiting = threading.Event()
    attempts: list[int] = []

    def heavy_then_cross() -> None:
        ours_waiting.wait(30)
        with other.cursor() as cursor:
            cursor.execute("SELECT SLEEP(0.3)")
            cursor.execute("UPDATE t SET n = n + 1 WHERE id = 2")  # closes the cycle
        other.commit()

    def work(conn: Connection) -> int:
        attempts.append(1)
        conn.exec_driver_sql("UPDATE t SET n = n + 1 WHERE id = 2")
        ours_waiting.set()
        conn.exec_driver_sql("UPDATE t SET n = n + 1 WHERE id = 1")  # waits for the other
        return len(attempts)

    with other.cursor() as cursor:  # the other client: many rows, then row 1
        cursor.execute("UPDATE t SET n = n + 1 WHERE id >= 3")
        cursor.execute("UPDATE t SET n = n + 1 WHERE id = 1")
    crossing = threading.Thread(target=heavy_then_cross)
    crossing.start()
    try:
        assert await db.run(work, write=True) == 2
    finally:
        crossing.join(30)
        other.close()
    rows = await db.run(
        lambda conn: conn.exec_driver_sql("SELECT id, n FROM t WHERE id <= 3").all(), write=False
    )
    assert [tuple(row) for row in rows] == [(1, 2), (2, 2), (3, 1)]
    await db.close()


@pytest.mark.slow
async def test_many_first_writes_at_once_on_new_sessions(db_url: str) -> None:
    """Gap locks of new rows side by side in the unique index (MySQL): none is lost."""
    async with SessionStore(db_url, create_tables=True) as warm:
        await warm.session("warm").get_items()
    stores = [SessionStore(db_url, key="k", search=True) for _ in range(3)]
    try:
        await asyncio.gather(
            *(
                store.session(f"new-{i}-{n}").add_items([message(f"{i}-{n}")])
                for i, store in enumerate(stores)
                for n in range(15)
            )
        )
        for i, store in enumerate(stores):
            for n in range(15):
                items = await store.session(f"new-{i}-{n}").get_items()
                assert [item["content"] for item in items] == [f"{i}-{n}"]
    finally:
        for store in stores:
            await store.close()


async def test_mariadb_connections_are_rolled_back_only_while_a_transaction_is_open(
    mariadb_url: str,
) -> None:
    """A MySQL driver's rollback is a round trip even with nothing to roll back, and a pool
    rolls back every connection it gets back: the store's engines roll back only those
    whose transaction the server says is open (a read's), never a committed write's; and a
    read leaves no snapshot behind for the next one."""
    one_connection = {"pool_size": 1, "max_overflow": 0}
    async with (
        SessionStore(
            mariadb_url, create_tables=True, search=False, engine_kwargs=one_connection
        ) as store,
        SessionStore(mariadb_url) as other,
    ):
        session = store.session("round trips")
        await session.add_items([message("0")])
        before = await _rollbacks(store)
        for n in range(1, 6):
            await session.add_items([message(str(n))])
        assert await session.pop_item() == message("5")
        assert await _rollbacks(store) == before  # six writes: no rollback
        assert len(await session.get_items()) == 5
        assert await _rollbacks(store) == before + 1  # the read's
        await other.session("round trips").add_items([message("another client's")])
        assert (await session.get_items())[-1] == message("another client's")


async def test_a_mariadb_pop_reads_its_own_session_only(mariadb_url: str) -> None:
    """A pop finds the session's last item by index and deletes it by primary key: no
    statement scans the items table (a `DELETE` whose subquery reads its own table did,
    for a long session: every row of every session read)."""
    one_connection = {"pool_size": 1, "max_overflow": 0}
    async with SessionStore(
        mariadb_url, create_tables=True, search=False, engine_kwargs=one_connection
    ) as store:
        session, other = store.session("popped"), store.session("another")
        await session.add_items([message(str(n)) for n in range(1000)])
        await other.add_items([message(str(n)) for n in range(500)])
        for last in ("999", "998"):
            before = await _scanned(store)
            assert await session.pop_item() == message(last)
            assert await _scanned(store) - before < 100  # the old DELETE's: about 1,500
        assert len(await session.get_items()) == 998
        assert len(await other.get_items()) == 500


@pytest.mark.parametrize("returning", [True, False], ids=["mariadb", "mysql"])
async def test_a_mariadb_append_claims_its_places_in_one_statement(
    mariadb_url: str, returning: bool
) -> None:
    """MariaDB's upsert returns the session's row it locked: an append is that statement,
    its insert and the commit. MySQL has no `RETURNING`, so there the row is read back
    under its lock, one statement more; both number the items alike, writers at once."""
    one_connection = {"pool_size": 1, "max_overflow": 0}
    async with SessionStore(
        mariadb_url, create_tables=True, search=False, engine_kwargs=one_connection
    ) as store:
        session = store.session("claimed")
        await session.add_items([message("0")])  # the dialect learns the server's version
        store.engine.sync_engine.dialect.insert_returning = returning
        before = await _status(store, "Questions")
        await session.add_items([message("1"), message("2")])
        asked = await _status(store, "Questions") - before - 1  # less the status question
        assert asked == (3 if returning else 4)
        async with SessionStore(mariadb_url, search=False) as other:
            await asyncio.gather(
                *(store.session("claimed").add_items([message(f"a{n}")]) for n in range(5)),
                *(other.session("claimed").add_items([message(f"b{n}")]) for n in range(5)),
            )
        items = await session.get_items()
        assert len(items) == 13 and items[:3] == [message("0"), message("1"), message("2")]
        written = {f"{writer}{n}" for writer in "ab" for n in range(5)}
        assert {item["content"] for item in items[3:]} == written


async def _rollbacks(store: SessionStore) -> int:
    """ROLLBACK statements the store's one connection has sent."""
    return await _status(store, "Com_rollback")


async def _scanned(store: SessionStore) -> int:
    """Rows the store's one connection has read by scanning a table."""
    return await _status(store, "Handler_read_rnd_next")


async def _status(store: SessionStore, name: str) -> int:
    """A status counter of the store's one connection (asked on the driver's own
    connection: SQLAlchemy would roll back the transaction it opens for the question)."""
    async with store.engine.connect() as conn:
        raw = (await conn.get_raw_connection()).driver_connection
        async with raw.cursor() as cursor:
            await cursor.execute("SHOW SESSION STATUS LIKE %s", (name,))
            return int((await cursor.fetchone())[1])


async def test_libpq_url_options_and_bad_ports(pg_url: str) -> None:
    """`?sslmode=...`, as psql and hosting providers write URLs, raised asyncpg's TypeError
    ("unexpected keyword argument 'sslmode'") from the first call; a port out of range or
    not a number raised OverflowError or ValueError."""
    url = make_url(pg_url).update_query_dict({"sslmode": "disable"})
    async with SessionStore(url.render_as_string(hide_password=False), create_tables=True) as store:
        await store.session("ssl").add_items([message("over a URL of libpq's")])
        assert await store.session("ssl").get_items() == [message("over a URL of libpq's")]
    for bad in ("postgresql://u@db:99999/app", "mysql://u@db:abc/app"):
        with pytest.raises(ConfigurationError, match="not a database URL"):
            SessionStore(bad)


def test_a_url_of_no_known_database_is_a_configuration_error() -> None:
    """A scheme SQLAlchemy has no dialect for raised its NoSuchModuleError from the store,
    and a traceback from the command line."""
    for bad in ("foo://bar", "postgresql+nosuch://u@db/app", "sqlite+nosuch:///x.db"):
        with pytest.raises(ConfigurationError, match="no SQLAlchemy dialect for"):
            SessionStore(bad)
    result = cli("sessions", "list", "--url", "foo://bar")
    assert result.exit_code == 2 and "no SQLAlchemy dialect for 'foo'" in result.output


async def test_tables_gone_since_the_store_opened_are_a_schema_error(db_url: str) -> None:
    """The items table renamed away under an open store (as a database dropped and made
    anew): each call raised DatabaseError("relation ... does not exist"); it is the
    SchemaError of a schema not there, naming the command, and nothing is lost."""
    async with SessionStore(db_url, create_tables=True, search=False) as store:
        session = store.session("s")
        await session.add_items([message("kept")])
        await execute(db_url, f"ALTER TABLE {ITEMS} RENAME TO away_items")
        for call in (session.get_items(), session.add_items([message("more")])):
            with pytest.raises(SchemaError, match="gone from the database") as raised:
                await call
            assert "agents-sqlalchemy db upgrade" in str(raised.value)
        await execute(db_url, f"ALTER TABLE away_items RENAME TO {ITEMS}")
        assert await session.get_items() == [message("kept")]


async def test_a_table_of_the_app_missing_stays_a_database_error(db_url: str) -> None:
    """An app's engine whose `begin` listener reads a table that is not there: the error is
    the database's (`DatabaseError`, naming the table), not the library's tables gone."""
    async with SessionStore(db_url, create_tables=True, search=False) as store:
        await store.session("s").add_items([message("kept")])
    engine = create_async_engine(db_url)

    @event.listens_for(engine.sync_engine, "begin")
    def tenant(conn: Connection) -> None:
        conn.exec_driver_sql("SELECT COUNT(*) FROM app_tenants")

    try:
        async with SessionStore(engine) as store:
            with pytest.raises(DatabaseError, match="app_tenants") as raised:
                await store.session("s").get_items()
            assert not isinstance(raised.value, SchemaError)
    finally:
        await engine.dispose()
