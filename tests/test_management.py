"""Retention and management: TTL, owners, metadata, state, listing and removal."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from agents_sqlalchemy import ConfigurationError, ItemError, Removed, SessionPage, SessionStore
from agents_sqlalchemy.database.engines import normalize_url
from agents_sqlalchemy.services import management as management_module

from .support.clock import travel
from .support.items import message
from .support.tables import raw_rows


async def test_expired_items_never_come_back(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async with SessionStore(db_url, create_tables=True, ttl=3600) as store:
        short = store.session("s", ttl=timedelta(minutes=10))
        await short.add_items([message("old-1"), message("old-2")])
        keep = store.session("s", ttl=timedelta(days=2))
        await keep.add_items([message("kept")])
        await short.add_items([message("old-3")])
        travel(monkeypatch, timedelta(hours=1, minutes=1))  # past 10 min and the store's hour
        assert await keep.get_items() == [message("kept")]
        assert await keep.get_items(limit=1) == [message("kept")]
        assert await keep.get_items(limit=5) == [message("kept")]  # limit counts live items
        assert await keep.pop_item() == message("kept")
        assert await keep.pop_item() is None  # expired items are not popped either
        assert (await store.session_info("s")).item_count == 0  # type: ignore[union-attr]
        assert len(await raw_rows(db_url, "SELECT id FROM agents_sqlalchemy_items")) == 3
        assert await store.purge_expired(batch_size=2) == 3
        assert await raw_rows(db_url, "SELECT id FROM agents_sqlalchemy_items") == []
        assert await store.purge_expired() == 0


async def test_items_without_ttl_do_not_expire(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        await store.session("s").add_items([message("forever")])
        travel(monkeypatch, timedelta(days=3650))
        assert await store.session("s").get_items() == [message("forever")]
        assert await store.purge_expired() == 0


def test_ttl_must_be_positive(sqlite_url: str) -> None:
    with pytest.raises(ConfigurationError):
        SessionStore(sqlite_url, ttl=0)
    with pytest.raises(ConfigurationError):
        SessionStore(sqlite_url).session("s", ttl=-5)
    for endless in (float("nan"), float("-inf")):  # said "at most 365,000 days"
        with pytest.raises(ConfigurationError, match="a finite number of seconds"):
            SessionStore(sqlite_url, ttl=endless)


def test_a_stores_ttl_is_read_only(sqlite_url: str) -> None:
    """Assigned, it was taken and ignored: the sessions had been built with the first."""
    store = SessionStore(sqlite_url, ttl=60)
    assert store.ttl == timedelta(seconds=60)
    with pytest.raises(AttributeError):
        store.ttl = timedelta(seconds=1)  # type: ignore[misc]


@pytest.mark.parametrize("far", [timedelta(days=365_001), 3e11, 1e300, float("inf")])
async def test_a_ttl_or_window_past_1000_years_is_refused_and_changes_nothing(
    db_url: str, far: timedelta | float
) -> None:
    # A date 10**8 days away is no date: expiry dates and purge windows raised OverflowError.
    async with SessionStore(db_url, create_tables=True) as store:
        await store.session("s").add_items([message("kept")])
        said = "at most 365,000 days|a finite number"
        with pytest.raises(ConfigurationError, match=said):
            store.session("t", ttl=far)
        with pytest.raises(ConfigurationError, match=said):
            await store.purge_inactive(far)
        with pytest.raises(ConfigurationError, match=said):
            await store.archive_inactive(far)
        assert await store.session("s").get_items() == [message("kept")]
        longest = store.session("u", ttl=timedelta(days=365_000))
        await longest.add_items([message("for a long time")])
        assert await longest.get_items() == [message("for a long time")]
        assert await store.purge_inactive(timedelta(days=365_000)) == Removed()


async def test_listing_usage_and_state_refuse_arguments_of_the_wrong_kind(
    sqlite_url: str,
) -> None:
    # They reached SQLAlchemy (StatementError around our error, or an AttributeError), or
    # answered: usage(user_id=5) an empty report, list_sessions(archived="yes") no session.
    naive = datetime(2020, 1, 1)
    far_east = datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5)))
    far_west = datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5)))
    async with SessionStore(sqlite_url, create_tables=True) as store:
        session = store.session("s", user_id="alice")
        await session.add_items([message("kept")])
        calls: list[tuple[Callable[[], Awaitable[object]], str]] = [
            (lambda: store.list_sessions(updated_after=naive), "updated_after must be timezone"),
            (lambda: store.list_sessions(updated_before="May"), "updated_before must be a datet"),
            (lambda: store.list_sessions(archived="yes"), "archived must be True or False"),
            (lambda: store.usage(since=naive), "since must be timezone-aware"),
            (lambda: store.usage(until="2020-01-01"), "until must be a datetime"),
            (lambda: store.usage(user_id=5), "a user id is a non-empty string"),
            (lambda: session.get_state(5), "state names are non-empty strings"),
            # OverflowError from the driver: UTC cannot express them.
            (lambda: store.list_sessions(updated_after=far_east), "updated_after is out of"),
            (lambda: store.usage(until=far_west), "until is out of range in UTC"),
            # Each made and listed a session, then raised (TypeError for the unknown one).
            (lambda: store.create_session(user_id="bob", ttl=-1), "ttl must be"),
            # Under a microsecond rounds to none: not said to be "not positive".
            (lambda: store.create_session(ttl=1e-7), "at least one microsecond, got 1e-07"),
            (lambda: store.create_session(user_id="bob", bogus=1), "unknown session options"),
            (lambda: store.create_session(user_id="bob", repair_on_read="y"), "repair_on_read"),
        ]
        for call, match in calls:
            with pytest.raises(ConfigurationError, match=match):
                await call()
        assert [info.session_id for info in await store.list_sessions(archived=None)] == ["s"]
        assert await session.get_items() == [message("kept")]


async def test_owner_and_metadata(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("s", user_id="alice", metadata={"channel": "web", "tier": 1})
        assert await session.get_metadata() == {}  # nothing written yet
        await session.add_items([message("hi")])
        assert await session.get_metadata() == {"channel": "web", "tier": 1}
        merged = await session.update_metadata({"tier": 2, "channel": None, "lang": "fr"})
        assert merged == {"tier": 2, "lang": "fr"}
        assert await store.session("s").get_metadata() == merged
        info = await store.session_info("s")
        assert info is not None and info.user_id == "alice" and info.item_count == 1
        await session.set_user_id("bob")
        assert [i.session_id for i in await store.list_sessions(user_id="bob")] == ["s"]
        assert await store.list_sessions(user_id="alice") == []
        # Metadata set before any item creates the session row.
        fresh = store.session("new", user_id="carol")
        await fresh.update_metadata({"topic": "billing"})
        info = await store.session_info("new")
        assert info is not None and info.user_id == "carol" and info.item_count == 0
        with pytest.raises(ItemError):
            await session.update_metadata({"bad": object()})
        assert await session.get_metadata() == merged


async def test_a_change_that_changes_nothing_writes_nothing(db_url: str) -> None:
    """Metadata merged to what it was, a state value set to what it is, or a session given
    to its own user, is no activity: the listing keeps its order. On a session with no row
    yet, each makes the row, as a first write does."""
    async with SessionStore(db_url, create_tables=True, search=False) as store:
        older, newer = store.session("older", user_id="alice"), store.session("newer")
        await older.add_items([message("first")])
        await older.update_metadata({"tier": 1})
        await older.set_state("step", 3)
        await newer.add_items([message("second")])
        order = [info.session_id for info in await store.list_sessions()]
        assert order == ["newer", "older"]
        assert await older.update_metadata({"tier": 1, "missing": None}) == {"tier": 1}
        await older.update_metadata({})
        await older.set_user_id("alice")
        await older.set_state("step", 3)
        assert [info.session_id for info in await store.list_sessions()] == order
        await older.update_metadata({"tier": 2})  # a change still is activity
        assert [info.session_id for info in await store.list_sessions()] == ["older", "newer"]
        await newer.set_state("step", 4)
        assert [info.session_id for info in await store.list_sessions()] == order
        await older.set_user_id("bob")
        assert [info.session_id for info in await store.list_sessions(user_id="bob")] == ["older"]
        # Alike to Python, not to JSON: 1, 1.0 and true are three values, each written.
        await older.update_metadata({"tier": 1})
        await older.update_metadata({"tier": True})
        assert json.dumps(await older.get_metadata()) == '{"tier": true}'
        await older.set_state("step", 1)
        await older.set_state("step", 1.0)
        assert repr(await older.get_state("step")) == "1.0"
        made = store.session("made", user_id="carol", metadata={"topic": "x"})
        await made.update_metadata({"topic": "x"})
        assert await made.get_metadata() == {"topic": "x"}
        given = store.session("given", user_id="dave")
        await given.set_user_id("dave")
        assert [info.session_id for info in await store.list_sessions(user_id="dave")] == ["given"]


async def test_state(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("s")
        assert await session.get_state("cart", default=[]) == []
        await session.set_state("cart", [{"sku": "A-1", "qty": 2}])
        await session.set_state("step", 3)
        await session.set_state("note", "Zürich ✓")
        assert await session.get_state("cart") == [{"sku": "A-1", "qty": 2}]
        await session.delete_state("step")
        await session.delete_state("never-set")
        with pytest.raises(ItemError):
            await session.set_state("bad", {1, 2})
        with pytest.raises(ConfigurationError):
            await session.set_state("", 1)
    async with SessionStore(db_url) as store:
        session = store.session("s")
        assert await session.get_state("step") is None
        assert await session.get_state("note") == "Zürich ✓"
        assert await session.get_state("cart") == [{"sku": "A-1", "qty": 2}]
        assert await session.get_items() == []  # state is not history


async def test_list_sessions_pages_most_recent_first(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        for i in range(7):
            owner = "alice" if i % 2 == 0 else "bob"
            session = store.session(f"s{i}", user_id=owner, metadata={"i": i, "odd": i % 2 == 1})
            await session.add_items([message(str(n)) for n in range(i)] or [message("x")])
        await store.session("s2").add_items([message("s2 is now the most recent")])
        seen, cursor, pages = [], None, 0
        while True:
            page = await store.list_sessions(limit=3, cursor=cursor)
            seen += page
            pages += 1
            cursor = page.next_cursor
            if cursor is None:
                break
        assert pages == 3
        assert [i.session_id for i in seen] == ["s2", "s6", "s5", "s4", "s3", "s1", "s0"]
        assert [i.item_count for i in seen] == [3, 6, 5, 4, 3, 1, 1]
        assert all(i.updated_at.tzinfo is not None for i in seen)
        assert all(i.updated_at.utcoffset() == timedelta(0) for i in seen)
        assert seen[0].metadata == {"i": 2, "odd": False}
        alice = await store.list_sessions(user_id="alice")
        assert [i.session_id for i in alice] == ["s2", "s6", "s4", "s0"]
        assert alice.next_cursor is None
        odd = await store.list_sessions(metadata={"odd": True})
        assert [i.session_id for i in odd] == ["s5", "s3", "s1"]
        assert [i.session_id for i in await store.list_sessions(metadata={"i": 4})] == ["s4"]
        middle = seen[3].updated_at
        newer = await store.list_sessions(updated_after=middle)
        assert [i.session_id for i in newer] == ["s2", "s6", "s5"]
        older = await store.list_sessions(updated_before=middle, user_id="bob")
        assert [i.session_id for i in older] == ["s3", "s1"]
        with pytest.raises(ConfigurationError):
            await store.list_sessions(cursor="garbage!")
        with pytest.raises(ConfigurationError):
            await store.list_sessions(metadata={"i": [1]})


async def test_removal(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        for i in range(4):
            session = store.session(f"a{i}", user_id="alice")
            await session.add_items([message("x")] * 3)
            await session.set_state("k", i)
        await store.session("b0", user_id="bob").add_items([message("y")] * 2)
        assert await store.delete_session("a0") == Removed(sessions=1, items=3)
        assert await store.delete_session("a0") == Removed()
        assert await store.session("a0").get_state("k") is None
        assert await store.delete_user("alice") == Removed(sessions=3, items=9)
        assert [i.session_id for i in await store.list_sessions()] == ["b0"]
        travel(monkeypatch, timedelta(days=31))
        await store.session("fresh").add_items([message("new")])  # active "now"
        assert await store.purge_inactive(timedelta(days=30)) == Removed(sessions=1, items=2)
        assert [i.session_id for i in await store.list_sessions()] == ["fresh"]
    rows = await raw_rows(db_url, "SELECT session_id FROM agents_sqlalchemy_sessions")
    assert rows == [("fresh",)]
    assert len(await raw_rows(db_url, "SELECT id FROM agents_sqlalchemy_items")) == 1


@pytest.mark.dialects("postgresql", "mariadb")
@pytest.mark.parametrize("removal", ["delete_user", "archive_inactive"])
async def test_a_removal_in_batches_goes_on_past_a_session_deleted_meanwhile(
    db_url: str, removal: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """delete_user and archive_inactive go in batches. A session that another transaction
    deletes while the first batch waits for its lock does not end them early: on PostgreSQL
    the batch came back one short and was taken for the last, so three of alice's sessions
    stayed (deleted: with their owner key gone with the "last" batch)."""
    monkeypatch.setattr(management_module, "DELETE_BATCH", 2)
    async with SessionStore(db_url, create_tables=True, key="pass", search=False) as store:
        for i in range(5):
            await store.session(f"a{i}", user_id="alice").add_items([message("x")])
        travel(monkeypatch, timedelta(days=31))
        engine = create_async_engine(normalize_url(db_url))
        try:
            async with engine.begin() as other:  # holds a0 while the removal waits for it
                first = "SELECT id FROM agents_sqlalchemy_sessions WHERE session_id = 'a0'"
                pk = (await other.execute(text(first + " FOR UPDATE"))).scalar_one()
                if removal == "delete_user":
                    removing = asyncio.ensure_future(store.delete_user("alice"))
                else:
                    removing = asyncio.ensure_future(store.archive_inactive(timedelta(days=30)))
                await asyncio.sleep(0.5)
                assert not removing.done()
                for table, column in (("items", "session_pk"), ("sessions", "id")):
                    await other.execute(
                        text(f"DELETE FROM agents_sqlalchemy_{table} WHERE {column} = {pk}")
                    )
            done = await removing
        finally:
            await engine.dispose()
        assert done == (Removed(sessions=4, items=4) if removal == "delete_user" else 4)
        assert await store.list_sessions(user_id="alice") == SessionPage([], None)
        archived = await store.list_sessions(user_id="alice", archived=True)
        assert len(archived) == (0 if removal == "delete_user" else 4)


async def hold_session(other: AsyncConnection, session_id: str) -> None:
    """Lock one session's row in `other`'s transaction: that row only, found by its id (a
    scan locks every row it reads on MariaDB)."""
    found = f"SELECT id FROM agents_sqlalchemy_sessions WHERE session_id = '{session_id}'"
    pk = (await other.execute(text(found))).scalar_one()
    await other.execute(
        text(f"SELECT id FROM agents_sqlalchemy_sessions WHERE id = {pk} FOR UPDATE")
    )


async def stopped_in_the_second_batch(
    db_url: str, erase: Callable[[SessionStore], Awaitable[object]]
) -> str:
    """`erase(store)`, an encrypted store's, while session v3 (in the second batch) is held
    past its lock_timeout: the message of the `SessionBusyError` it raises."""
    from agents_sqlalchemy import SessionBusyError

    engine = create_async_engine(normalize_url(db_url))
    try:
        async with (
            engine.begin() as other,
            SessionStore(db_url, key="pass", search=False, lock_timeout=1) as store,
        ):
            await hold_session(other, "v3")
            with pytest.raises(SessionBusyError) as raised:
                await erase(store)
    finally:
        await engine.dispose()
    return str(raised.value)


@pytest.mark.dialects("postgresql", "mariadb")
@pytest.mark.parametrize("removal", ["delete_user", "archive_inactive"])
async def test_a_removal_stopped_after_a_batch_says_what_its_batches_did(
    db_url: str, removal: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A removal whose second batch waited past lock_timeout said "nothing was changed",
    though its first batch had committed."""
    from agents_sqlalchemy import SessionBusyError

    monkeypatch.setattr(management_module, "DELETE_BATCH", 2)
    async with SessionStore(db_url, create_tables=True, search=False, lock_timeout=1) as store:
        for i in range(4):
            await store.session(f"a{i}", user_id="alice").add_items([message("x")])
        travel(monkeypatch, timedelta(days=31))
        engine = create_async_engine(normalize_url(db_url))
        try:
            async with engine.begin() as other:
                await hold_session(other, "a3")  # in the second batch
                with pytest.raises(SessionBusyError) as raised:
                    if removal == "delete_user":
                        await store.delete_user("alice")
                    else:
                        await store.archive_inactive(timedelta(days=30))
        finally:
            await engine.dispose()
        done = "2 sessions (2 items) deleted" if removal == "delete_user" else "2 sessions archived"
        assert f"before it: {done}. Run it again to finish)" in str(raised.value)
        assert len(await store.list_sessions(user_id="alice")) == 2  # a2 and a3 are left


@pytest.mark.dialects("postgresql", "mariadb")
async def test_an_erasure_stopped_after_destroying_the_keys_says_so(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """erase_user destroys the user's owner key first, then deletes the sessions: when the
    deletion waited past lock_timeout, its error said "nothing was changed", though the
    user's items could no longer be read (and a batch had gone)."""
    from agents_sqlalchemy import OwnerKeyError

    monkeypatch.setattr(management_module, "DELETE_BATCH", 2)
    async with SessionStore(db_url, create_tables=True, key="pass", search=False) as store:
        for n in range(4):
            await store.session(f"v{n}", user_id="victim").add_items([message("x")])
    raised = await stopped_in_the_second_batch(db_url, lambda store: store.erase_user("victim"))
    said = (
        "(in this step; before it: 1 owner key destroyed, whose items cannot be read; "
        "2 sessions (2 items) deleted. Run it again to finish)"
    )
    assert raised.endswith(said)
    async with SessionStore(db_url, key="pass", search=False) as store:
        with pytest.raises(OwnerKeyError):
            await store.session("v2").get_items()
        await store.erase_user("victim")  # run again: it ends
        assert await store.list_sessions(user_id="victim") == SessionPage([], None)


@pytest.mark.dialects("postgresql", "mariadb")
async def test_a_deletion_stopped_before_its_key_rows_go_destroyed_no_key(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sessions without a user: their keys, kept in the database, go with their rows after
    the sessions. A deletion stopped in its second batch said "4 owner keys destroyed,
    whose items cannot be read", and the sessions it left read as they did."""

    monkeypatch.setattr(management_module, "DELETE_BATCH", 2)
    async with SessionStore(db_url, create_tables=True, key="pass", search=False) as store:
        for n in range(4):
            await store.session(f"v{n}").add_items([message("x")])
    raised = await stopped_in_the_second_batch(db_url, lambda store: store.delete_all(confirm=True))
    said = "(in this step; before it: 2 sessions (2 items) deleted. Run it again to finish)"
    assert raised.endswith(said)
    async with SessionStore(db_url, key="pass", search=False) as store:
        for n in (2, 3):
            assert await store.session(f"v{n}").get_items() == [message("x")]


async def test_times_are_utc_and_aware(db_url: str) -> None:
    before = datetime.now(timezone.utc)
    async with SessionStore(db_url, create_tables=True) as store:
        await store.session("s").add_items([message("x")])
        info = await store.session_info("s")
    assert info is not None
    for stamp in (info.created_at, info.updated_at):
        assert stamp.tzinfo is not None and stamp.utcoffset() == timedelta(0)
        assert before - timedelta(seconds=5) <= stamp <= datetime.now(timezone.utc)


async def test_metadata_filters_respect_json_types(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        values = {"int": 7, "str7": "7", "word": "web", "yes": True, "float": 7.5, "none": None}
        for name, value in values.items():
            await store.session(name, metadata={"code": value}).update_metadata({})
        await store.session("missing", metadata={"other": 1}).update_metadata({})

        async def found(value: object) -> set[str]:
            return {i.session_id for i in await store.list_sessions(metadata={"code": value})}

        assert await found(7) == {"int"}
        assert await found("7") == {"str7"}
        assert await found("web") == {"word"}
        assert await found(True) == {"yes"}
        assert await found(7.5) == {"float"}
        assert await found(1) == set()  # true is not 1
        # Numbers compare exactly: MariaDB compared a float with a JSON integer as a double.
        await store.session("big", metadata={"code": 2**53 + 1}).update_metadata({})
        await store.session("big float", metadata={"code": 2.0**53}).update_metadata({})
        assert await found(2.0**53) == {"big float"}
        assert await found(2**53 + 1) == {"big"}
        assert await found(7.0) == {"int"}
        # Past 64 bits an integral float still meets the integer it is (MariaDB calls 1e+20
        # a JSON integer: it was missed).
        await store.session("huge", metadata={"code": 10**20}).update_metadata({})
        assert await found(1e20) == {"huge"}


@pytest.mark.parametrize("key", [None, "passphrase"], ids=["plain", "sealed"])
async def test_a_call_that_changes_nothing_is_no_activity(db_url: str, key: str | None) -> None:
    """A pop of a session whose items all expired touched its row on SQLite and MariaDB,
    not on PostgreSQL: purge_inactive, archive_inactive and the listing's order differed
    by database. A clear of an empty session and a delete_state of a name never set
    touched it on all three, and delete_state on a session never written made its row (a
    listed session, for an erased user too). None of them is activity now."""
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        expired = store.session("expired", ttl=0.2)
        await expired.add_items([message("soon gone")])
        empty = store.session("empty")
        await empty.add_items([message("x")])
        assert await empty.pop_item() == message("x")
        before = {info.session_id: info.updated_at for info in await store.list_sessions()}
        await asyncio.sleep(0.3)
        assert await expired.pop_item() is None
        assert await empty.pop_item() is None
        await empty.clear_session()
        await empty.delete_state("never set")
        await store.session("never-written", user_id="bob").delete_state("cart")
        after = {info.session_id: info.updated_at for info in await store.list_sessions()}
        assert after == before
        assert (await store.purge_inactive(0.25)).sessions == 2
        await empty.set_state("step", 1)  # a change still is activity, and makes the row
        await empty.delete_state("step")
        assert await empty.get_state("step") is None
