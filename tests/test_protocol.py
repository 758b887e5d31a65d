"""The four protocol methods on SQLite and PostgreSQL: round-trips, order, limits, errors."""

from __future__ import annotations

import asyncio
import inspect
import json
from datetime import datetime, timezone
from typing import Any
from unittest.mock import create_autospec

import pytest
from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession as SdkSession
from agents.memory import Session, SessionSettings
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from agents_sqlalchemy import (
    AgentsSQLAlchemyError,
    ConfigurationError,
    ConstraintError,
    CorruptItemError,
    InvalidSessionIdError,
    ItemError,
    SchemaError,
    SessionStore,
    SQLAlchemySession,
)
from agents_sqlalchemy.repository import schema as repository_module
from agents_sqlalchemy.repository.schema import ARRAY_ROWS, TAIL_LIMITS, page_rows

from .support.items import ALL, message, texts
from .support.tables import execute, raw_rows


@pytest.mark.pgbouncer
async def test_items_round_trip_verbatim(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("round-trip")
        assert isinstance(session, Session)
        await session.add_items(ALL)
        assert await session.get_items() == ALL
        # A fresh store reads the same from disk.
    async with SessionStore(db_url) as store:
        assert await store.session("round-trip").get_items() == ALL


async def test_payload_is_json_plain_sql_can_query(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        await store.session("sql").add_items(ALL)
    extract = (
        "payload::json->>'call_id'"
        if db_url.startswith("postgresql")
        else "json_unquote(json_extract(payload, '$.call_id'))"
        if db_url.startswith("mysql")
        else "json_extract(payload, '$.call_id')"
    )
    rows = await raw_rows(
        db_url,
        f"SELECT {extract} FROM agents_sqlalchemy_items WHERE {extract} IS NOT NULL ORDER BY seq",
    )
    assert rows == [("call_1",), ("call_1",), ("call_2",)]
    payloads = await raw_rows(db_url, "SELECT payload FROM agents_sqlalchemy_items ORDER BY seq")
    assert [json.loads(str(p)) for (p,) in payloads] == ALL
    assert "Zürich" in str(payloads[0][0])  # stored readable, not \\u-escaped
    sealed = "SELECT COUNT(*) FROM agents_sqlalchemy_items WHERE ciphertext IS NOT NULL"
    sealed += " OR wrapped_key IS NOT NULL OR kek_id IS NOT NULL"
    assert await raw_rows(db_url, sealed) == [(0,)]  # no key: the key columns stay NULL


async def test_order_is_the_sequence_not_the_clock(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    frozen = datetime(2026, 1, 1, tzinfo=timezone.utc)
    monkeypatch.setattr(repository_module, "utcnow", lambda: frozen)
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("same-time")
        for i in range(30):
            await session.add_items([message(f"{i}-a"), message(f"{i}-b")])
        expected = [message(f"{i}-{s}") for i in range(30) for s in "ab"]
        assert await session.get_items() == expected
        assert await session.get_items(limit=3) == expected[-3:]
        assert await session.pop_item() == expected[-1]
    rows = await raw_rows(db_url, "SELECT DISTINCT created_at FROM agents_sqlalchemy_items")
    assert len(rows) == 1  # every row has the same timestamp, and order still held


@pytest.mark.pgbouncer
async def test_limits_follow_the_sdk(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("limits", session_settings=SessionSettings(limit=2))
        items = [message(str(i)) for i in range(5)]
        await session.add_items(items)
        assert await session.get_items() == items[-2:]  # settings' limit is the default
        assert await session.get_items(limit=4) == items[-4:]  # an explicit limit wins
        assert await session.get_items(limit=0) == []
        assert await session.get_items(limit=50) == items
        unlimited = store.session("limits")
        assert await unlimited.get_items() == items
        assert await unlimited.get_items(limit=1) == items[-1:]
        with pytest.raises(ConfigurationError):
            await unlimited.get_items(limit=-1)


@pytest.mark.parametrize("key", [None, "passphrase"])
async def test_every_tail_limit_reads_right_past_the_ones_written_into_sql(
    db_url: str, key: str | None
) -> None:
    """On PostgreSQL the first `TAIL_LIMITS` limits get a read with the limit in its SQL,
    the others share one with the limit bound: both read the same."""
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        session = store.session("tails")
        items = [message(str(i)) for i in range(TAIL_LIMITS + 8)]
        await session.add_items(items)
        for limit in range(1, len(items) + 3):
            assert await session.get_items(limit=limit) == items[-limit:]


@pytest.mark.parametrize("key", [None, "passphrase"])
async def test_an_emptied_session_reads_and_pops_nothing_of_the_session_before_it(
    db_url: str, key: str | None
) -> None:
    """A session's newest items are found at the end of its range of places (PostgreSQL):
    one with none left must not be given the last items of the session before it."""
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        before, emptied = store.session("before"), store.session("emptied")
        await before.add_items([message("1"), message("2")])
        await emptied.add_items([message("3")])
        assert await emptied.pop_item() == message("3")
        assert await emptied.get_items(limit=5) == []
        assert await emptied.pop_item() is None
        assert await store.session("never written").get_items(limit=5) == []
        assert await store.session("never written").pop_item() is None
        assert await before.get_items() == [message("1"), message("2")]


async def test_store_wide_settings_and_dict_settings(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True, session_settings={"limit": 1}) as store:
        session = store.session("s")
        await session.add_items([message("a"), message("b")])
        assert session.session_settings == SessionSettings(limit=1)
        assert await session.get_items() == [message("b")]
        wider = store.session("s", session_settings={"limit": 2})
        assert await wider.get_items() == [message("a"), message("b")]


@pytest.mark.pgbouncer
async def test_pop_and_clear(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session, other = store.session("a"), store.session("b")
        assert await session.pop_item() is None  # no session row yet
        await session.add_items([message("1"), message("2")])
        await other.add_items([message("other")])
        assert await session.pop_item() == message("2")
        await session.add_items([message("3")])
        assert await session.get_items() == [message("1"), message("3")]
        await session.clear_session()
        assert await session.get_items() == []
        assert await session.pop_item() is None
        assert await other.get_items() == [message("other")]  # isolation
        await session.add_items([message("after clear")])
        assert await session.get_items() == [message("after clear")]


@pytest.mark.parametrize("key", [None, "a passphrase"], ids=["plaintext", "encrypted"])
async def test_a_history_of_several_pages_reads_whole_and_in_order(
    db_url: str, key: str | None
) -> None:
    """PostgreSQL reads a long history as arrays, `ARRAY_ROWS` items a statement: past one
    page, again in one snapshot, so that a writer meanwhile is seen whole or not at all."""
    count = ARRAY_ROWS * 2 + 7
    async with SessionStore(db_url, create_tables=True, key=key, search=False) as store:
        session = store.session("long")
        for start in range(0, count, 20_000):
            await session.add_items(
                [message(str(n)) for n in range(start, min(count, start + 20_000))]
            )
        await session.pop_item()  # a gap at the end, none at the pages' edges
        more = [message(f"more {n}") for n in range(5)]
        read, _ = await asyncio.gather(session.get_items(), session.add_items(more))
        assert texts(read[: count - 1]) == [str(n) for n in range(count - 1)]
        assert read[count - 1 :] in ([], more)
        assert texts(await session.get_items(limit=3)) == ["more 2", "more 3", "more 4"]


@pytest.mark.parametrize("sealed", [False, True], ids=["plaintext", "encrypted"])
def test_a_page_whose_arrays_come_out_of_place_order_is_put_in_order(sealed: bool) -> None:
    """A page's arrays share one order, which PostgreSQL does not promise to be by place
    (the aggregates have no ORDER BY of their own): the rows come out by place anyway."""
    seqs = [3, 1, 2]
    if sealed:  # the ciphertexts, wrapped keys and kek ids; then the user
        arrays = [seqs, [b"c3", b"c1", b"c2"], [b"w3", b"w1", b"w2"], [None, "k", None], "u"]
        expected = [(1, b"c1", b"w1", "k"), (2, b"c2", b"w2", None), (3, b"c3", b"w3", None)]
    else:
        arrays = [seqs, ["three", "one", "two"]]
        expected = [(1, "one"), (2, "two"), (3, "three")]
    assert page_rows(arrays, sealed) == expected


@pytest.mark.parametrize(
    "session_id",
    [
        "x" * 1500,
        "🐶" * 1500,
        "Robert'); DROP TABLE agents_sqlalchemy_items;--",
        'quote " and \\ and % and _ and \n newline',
        "用户-123",
        " ",
    ],
)
async def test_any_unicode_session_id(db_url: str, session_id: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session(session_id)
        await session.add_items([message(session_id[:10])])
        neighbour = store.session(session_id[:-1] or "other")
        await neighbour.add_items([message("neighbour")])
        assert await session.get_items() == [message(session_id[:10])]
    rows = await raw_rows(db_url, "SELECT session_id FROM agents_sqlalchemy_sessions")
    assert (session_id,) in rows


@pytest.mark.parametrize("bad", ["", "\ud800", "a\udfffb", None, 42])
async def test_bad_session_ids_are_rejected(sqlite_url: str, bad: object) -> None:
    async with SessionStore(sqlite_url, create_tables=True) as store:
        with pytest.raises(InvalidSessionIdError):
            store.session(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bad_item",
    [
        {"content": object()},
        {"content": float("nan")},
        {"content": "lone surrogate \ud800"},
        "not a dict",
        ["a", "list"],
    ],
)
async def test_bad_item_raises_and_stores_nothing_of_the_batch(
    db_url: str, bad_item: object
) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("bad")
        await session.add_items([message("kept")])
        with pytest.raises(ItemError) as raised:
            await session.add_items([message("first of batch"), bad_item])  # type: ignore[list-item]
        assert isinstance(raised.value, AgentsSQLAlchemyError)
        assert "item 1" in str(raised.value)
        assert await session.get_items() == [message("kept")]


async def test_missing_tables_say_what_to_do(db_url: str) -> None:
    async with SessionStore(db_url) as store:
        with pytest.raises(SchemaError) as raised:
            await store.session("s").get_items()
    assert "create_tables=True" in str(raised.value)
    assert "upgrade" in str(raised.value)


async def test_add_empty_list_is_a_no_op(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("empty")
        assert await session.get_items() == []
        await session.add_items([])
    assert await raw_rows(db_url, "SELECT * FROM agents_sqlalchemy_sessions") == []


@pytest.mark.parametrize("payload", ["not json", '{"a": NaN}', '{"a": -Infinity}', "[1]"])
async def test_a_tampered_row_is_loud_and_stays(db_url: str, payload: str) -> None:
    """A row changed outside the library into what it never writes (not JSON, NaN or
    Infinity, which it refuses to store, not an object) is a `CorruptItemError`."""
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("tampered")
        await session.add_items([message("1"), message("2")])
        engine = create_async_engine(db_url)
        try:
            async with engine.begin() as conn:
                await conn.execute(
                    text("UPDATE agents_sqlalchemy_items SET payload = :p WHERE seq = 2"),
                    {"p": payload},
                )
        finally:
            await engine.dispose()
        with pytest.raises(CorruptItemError, match="#2"):
            await session.get_items()
        with pytest.raises(CorruptItemError):
            await session.pop_item()
        rows = await raw_rows(db_url, "SELECT seq FROM agents_sqlalchemy_items ORDER BY seq")
        assert rows == [(1,), (2,)]  # the pop rolled back: nothing was lost


@pytest.mark.parametrize("key", [None, b"k" * 32])
async def test_a_sqlite_row_rewritten_as_text_that_is_not_utf8_is_a_corrupt_row(
    sqlite_url: str, key: bytes | None
) -> None:
    """SQLite keeps whatever type a value is written with: an item's column rewritten as
    TEXT that is not UTF-8 failed the read in the driver, a `DatabaseError` quoting the
    row's text. It is a `CorruptItemError` naming the column alone, nothing removed."""
    async with SessionStore(sqlite_url, create_tables=True, key=key) as store:
        await store.session("s").add_items([message("1"), message("2 secret")])
    column = "payload" if key is None else "ciphertext"
    await execute(
        sqlite_url,
        f"UPDATE agents_sqlalchemy_items SET {column} = CAST(x'61ff62' AS TEXT) WHERE seq = 2",
    )
    async with SessionStore(sqlite_url, key=key) as store:
        with pytest.raises(CorruptItemError, match=f"its column '{column}'") as raised:
            await store.session("s").get_items()
        assert "secret" not in str(raised.value) and "a\ufffdb" not in str(raised.value)
    rows = await raw_rows(sqlite_url, "SELECT seq FROM agents_sqlalchemy_items ORDER BY seq")
    assert rows == [(1,), (2,)]


@pytest.mark.parametrize("key", [None, b"k" * 32])
async def test_a_next_seq_set_back_names_itself_and_loses_nothing(
    db_url: str, key: bytes | None
) -> None:
    """A session's `next_seq` lowered outside the library below its items' places: each
    write is refused with a `ConstraintError` that names the session and `next_seq` (it
    named only the database's unique constraint), and nothing stored is lost."""
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        session = store.session("set back")
        await session.add_items([message(str(n)) for n in range(4)])
    await execute(db_url, "UPDATE agents_sqlalchemy_sessions SET next_seq = 1")
    async with SessionStore(db_url, key=key) as store:
        session = store.session("set back")
        for _ in range(2):  # the one-statement path and the transaction after it
            with pytest.raises(ConstraintError, match="session 'set back': its next_seq in"):
                await session.add_items([message("new")])
        assert texts(await session.get_items()) == ["0", "1", "2", "3"]
        await execute(db_url, "UPDATE agents_sqlalchemy_sessions SET next_seq = 4")
        await session.add_items([message("new")])
        assert texts(await session.get_items()) == ["0", "1", "2", "3", "new"]


@pytest.mark.parametrize("key", [None, b"k" * 32])
async def test_a_next_seq_set_below_zero_is_refused_and_loses_nothing(
    db_url: str, key: bytes | None
) -> None:
    """A session's `next_seq` set below 0 outside the library conflicts with no item: the
    next items went in at places below every other (first on SQLite and MariaDB, out of
    sight on PostgreSQL). Each write is refused with a `ConstraintError` naming the
    session and `next_seq`, and nothing is written."""
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        session = store.session("below")
        await session.add_items([message(str(n)) for n in range(3)])
    await execute(db_url, "UPDATE agents_sqlalchemy_sessions SET next_seq = -5")
    async with SessionStore(db_url, key=key) as store:
        session = store.session("below")
        refused = r"'below': its next_seq in \w+ was set below 0"
        for _ in range(2):
            with pytest.raises(ConstraintError, match=refused):
                await session.add_items([message("new")])
        assert texts(await session.get_items()) == ["0", "1", "2"]
    rows = await raw_rows(db_url, "SELECT seq FROM agents_sqlalchemy_items ORDER BY seq")
    assert rows == [(1,), (2,), (3,)]
    assert await raw_rows(db_url, "SELECT next_seq FROM agents_sqlalchemy_sessions") == [(-5,)]


@pytest.mark.parametrize("value", ["[1]", '"x"', "5", "true"])
async def test_metadata_or_state_changed_into_another_kind_of_json_is_a_corrupt_row(
    db_url: str, value: str
) -> None:
    """Metadata or state changed outside the library into JSON that is not an object read as
    a `CorruptItemError` (they raised the `TypeError` of `dict(...)`, and one such row broke
    every listing); nothing else is touched."""
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("s", metadata={"channel": "web"})
        await session.add_items([message("kept")])
        await session.set_state("step", 1)
        for column, read in (
            ("metadata", session.get_metadata),
            ("metadata", store.list_sessions),
            ("state", lambda: session.get_state("step")),
        ):
            engine = create_async_engine(db_url)
            try:
                async with engine.begin() as conn:
                    change = f"UPDATE agents_sqlalchemy_sessions SET {column} = :v"
                    await conn.execute(text(change), {"v": value})
            finally:
                await engine.dispose()
            with pytest.raises(CorruptItemError, match="not an object"):
                await read()
        assert await session.get_items() == [message("kept")]


async def test_a_state_name_no_database_stores_is_refused_alike_everywhere(db_url: str) -> None:
    """A state name with a lone surrogate was stored by SQLite and PostgreSQL, refused by
    MariaDB's JSON check (`DatabaseError`) and by an encrypted store (`ItemError`)."""
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("s")
        await session.set_state("step", 1)
        for call in (
            lambda: session.set_state("\ud800", 1),
            lambda: session.get_state("\ud800"),
            lambda: session.delete_state("\ud800"),
        ):
            with pytest.raises(ConfigurationError, match="valid Unicode"):
                await call()
        assert await session.get_state("step") == 1


async def test_the_sessions_methods_are_coroutine_functions_as_the_sdks_are(
    sqlite_url: str,
) -> None:
    """On Python before 3.12, asyncio (and so a mock made with autospec) did not take the
    traced methods for coroutine functions: such a mock of a session was not awaitable. Nor
    did inspect, as retry libraries ask it (tenacity's `retry` wrapped them as plain
    functions, and retried nothing)."""
    for name in ("get_items", "add_items", "pop_item", "clear_session", "search"):
        for check in (asyncio.iscoroutinefunction, inspect.iscoroutinefunction):
            if name != "search":
                assert check(getattr(SdkSession, name)), name
            assert check(getattr(SQLAlchemySession, name)), (name, check)
            assert check(SessionStore.list_sessions), check
    mocked = create_autospec(SQLAlchemySession, instance=True)
    mocked.get_items.return_value = [message("mocked")]
    assert await mocked.get_items() == [message("mocked")]
    async with SessionStore(sqlite_url, create_tables=True) as store:  # and still works
        await store.session("s").add_items([message("real")])
        assert await store.session("s").get_items() == [message("real")]


def test_a_subclass_overriding_the_sdks_item_hooks_is_refused() -> None:
    """The SDK's class calls `_serialize_item` on the way in: a subclass redacting there was
    taken, and its items stored as given."""

    with pytest.raises(TypeError, match="overrides _serialize_item, which this library"):

        class Redacting(SQLAlchemySession):
            async def _serialize_item(self, item: Any) -> str:
                return json.dumps({"role": "user", "content": "[redacted]"})

    class Plain(SQLAlchemySession):  # any other subclass is fine
        async def add_items(self, items: Any, **kwargs: Any) -> None:
            await super().add_items(items, **kwargs)

    assert issubclass(Plain, SQLAlchemySession)
