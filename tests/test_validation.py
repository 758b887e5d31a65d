"""Bad input: every kind gets the library's own error, the same on SQLite and PostgreSQL,
and changes nothing that is stored."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agents_sqlalchemy import ConfigurationError, ItemError, SessionStore
from agents_sqlalchemy.validation import MAX_JSON_DEPTH

from .support.items import message
from .support.tables import raw_rows


def nested(depth: int) -> dict[str, Any]:
    """A JSON object `depth` objects deep."""
    item: dict[str, Any] = {"leaf": True}
    for _ in range(depth - 1):
        item = {"a": item}
    return item


async def item_rows(url: str) -> list[tuple[object, ...]]:
    return await raw_rows(url, "SELECT payload FROM agents_sqlalchemy_items ORDER BY id")


async def test_a_deeply_nested_item_is_an_item_error(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("deep")
        await session.add_items([message("kept")])
        for depth in (MAX_JSON_DEPTH + 1, 5000):
            with pytest.raises(ItemError, match="nested"):
                await session.add_items([message("lost"), nested(depth)])
            lists: list[Any] = []
            for _ in range(depth):
                lists = [lists]
            with pytest.raises(ItemError, match="nested"):
                await session.add_items([{"role": "user", "content": lists}])
            with pytest.raises(ItemError, match="nested"):
                await session.set_state("deep", nested(depth))
            with pytest.raises(ItemError, match="nested"):
                store.session("m", metadata={"deep": nested(depth)})
        assert await session.get_items() == [message("kept")]
        fits = nested(MAX_JSON_DEPTH)
        await session.add_items([fits])
        assert (await session.get_items())[-1] == fits


async def test_non_string_keys_are_refused_not_changed(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("keys")
        for bad in ({1: "a"}, {"role": "user", "content": [{"type": "x", 2.5: "b"}]}, {None: 1}):
            with pytest.raises(ItemError, match="keys"):
                await session.add_items([bad])
        with pytest.raises(ItemError, match="keys"):
            await session.set_state("s", {True: "yes"})
        with pytest.raises(ItemError, match="keys"):
            await session.update_metadata({1: "a"})  # type: ignore[dict-item]
        with pytest.raises(ItemError, match="keys"):
            store.session("m", metadata={1: "a"})  # type: ignore[dict-item]
        assert await session.get_items() == []
        assert await item_rows(db_url) == []
        assert await session.get_state("s") is None


async def test_metadata_with_nul_is_refused_and_filters_keep_working(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        await store.session("ok", user_id="bob", metadata={"k": 1}).add_items([message("x")])
        with pytest.raises(ItemError, match="NUL"):
            await store.session("n", metadata={"note": "a\x00b"}).add_items([message("x")])
        with pytest.raises(ItemError, match="NUL"):
            await store.session("ok").update_metadata({"n\x00te": "x"})
        with pytest.raises(ConfigurationError, match="NUL"):
            await store.list_sessions(metadata={"k": "a\x00"})
        [info] = await store.list_sessions(metadata={"k": 1})
        assert info.session_id == "ok"
        assert [i.session_id for i in await store.list_sessions(user_id="bob")] == ["ok"]


@pytest.mark.parametrize("name", ['a"b', "a.b", "a[0]", "$", "é \\ '", "a'b\"c\\"])
async def test_metadata_keys_match_whatever_their_characters(db_url: str, name: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        await store.session("s", metadata={name: 7, "other": "x"}).add_items([message("x")])
        await store.session("t", metadata={name: "7"}).add_items([message("x")])
        assert [i.session_id for i in await store.list_sessions(metadata={name: 7})] == ["s"]
        assert [i.session_id for i in await store.list_sessions(metadata={name: "7"})] == ["t"]
        assert await store.list_sessions(metadata={name: 8}) == []


async def test_filter_values_out_of_range_are_our_errors(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("s")
        await session.add_items([message("x")])
        for bad in (2**63, -(2**63) - 1, 10**30, float("nan"), float("inf"), "\ud800", None, [1]):
            with pytest.raises(ConfigurationError):
                await store.list_sessions(metadata={"k": bad})
        for name in ("\ud800", "a\x00", 5):
            with pytest.raises(ConfigurationError):
                await store.list_sessions(metadata={name: 1})  # type: ignore[dict-item]
        for limit in (10**19, 2**63):  # the error names the bound that was passed
            with pytest.raises(ConfigurationError, match="limit must be between 0 and 9223"):
                await session.get_items(limit=limit)
        # The largest values that fit still work.
        assert await store.list_sessions(metadata={"k": 2**63 - 1}) == []
        assert await session.get_items(limit=2**63 - 1) == [message("x")]


async def test_user_ids_are_validated_like_session_ids(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        bad_ids: list[Any] = ["u" * 256, "a\x00b", 5, "", "\ud800", b"alice"]
        for bad in bad_ids:
            with pytest.raises(ConfigurationError, match="user id"):
                store.session("s", user_id=bad)
            with pytest.raises(ConfigurationError, match="user id"):
                await store.session("s").set_user_id(bad)
            with pytest.raises(ConfigurationError, match="user id"):
                await store.list_sessions(user_id=bad)
            with pytest.raises(ConfigurationError, match="user id"):
                await store.delete_user(bad)
        with pytest.raises(ConfigurationError, match="user id"):
            await store.delete_user(None)  # type: ignore[arg-type]  # not "every session"
        assert await store.list_sessions() == []
        assert await raw_rows(db_url, "SELECT id FROM agents_sqlalchemy_sessions") == []
        longest = "ü" * 255
        await store.session("s", user_id=longest).add_items([message("x")])
        [info] = await store.list_sessions(user_id=longest)
        assert info.user_id == longest


Call = Callable[[SessionStore], Awaitable[object]]

BAD_NUMBERS: dict[str, Call] = {
    "get_items(limit=True)": lambda s: s.session("s").get_items(limit=True),
    "get_items(limit=2.5)": lambda s: s.session("s").get_items(limit=2.5),  # type: ignore[arg-type]
    "get_items(limit='5')": lambda s: s.session("s").get_items(limit="5"),  # type: ignore[arg-type]
    "get_items(limit=-1)": lambda s: s.session("s").get_items(limit=-1),
    "list_sessions(limit=2.5)": lambda s: s.list_sessions(limit=2.5),  # type: ignore[arg-type]
    "list_sessions(limit=False)": lambda s: s.list_sessions(limit=False),
    "list_sessions(limit=10**30)": lambda s: s.list_sessions(limit=10**30),
    "purge_expired(batch_size=1.5)": lambda s: s.purge_expired(batch_size=1.5),  # type: ignore[arg-type]
    "purge_expired(batch_size=True)": lambda s: s.purge_expired(batch_size=True),
}


@pytest.mark.parametrize("call", BAD_NUMBERS.values(), ids=BAD_NUMBERS.keys())
async def test_non_integer_limits_are_refused(sqlite_url: str, call: Call) -> None:
    async with SessionStore(sqlite_url, create_tables=True) as store:
        await store.session("s").add_items([message("1"), message("2"), message("3")])
        with pytest.raises(ConfigurationError):
            await call(store)
        assert len(await store.session("s").get_items()) == 3


async def test_add_items_takes_a_list(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("s")
        for bad in (None, message("not in a list"), "text", 5):
            with pytest.raises(ItemError, match="list"):
                await session.add_items(bad)  # type: ignore[arg-type]
        await session.add_items((message("a tuple is fine"),))  # type: ignore[arg-type]
        assert await session.get_items() == [message("a tuple is fine")]


async def test_a_value_json_cannot_hold_is_named_by_its_type_not_quoted(sqlite_url: str) -> None:
    """An item, state or metadata value JSON cannot hold (bytes, a set) was quoted in the
    ItemError's message, which an app's logs and tracebacks keep: an encrypted store's
    plaintext ended up beside its ciphertext."""
    secret = "078-05-1120"
    async with SessionStore(sqlite_url, create_tables=True, key="a passphrase") as store:
        session = store.session("s")
        calls: list[Callable[[], Awaitable[Any]]] = [
            lambda: session.add_items([{"role": "user", "content": secret.encode()}]),
            lambda: session.add_items([{"role": "user", "content": {secret.encode(): 1}}]),
            lambda: session.set_state("card", {"pan": {secret}}),
            lambda: session.update_metadata({"token": secret.encode()}),
        ]
        for call in calls:
            with pytest.raises(ItemError) as raised:
                await call()
            assert secret not in str(raised.value) and secret not in repr(raised.value)
            assert "bytes" in str(raised.value) or "set" in str(raised.value)
