"""Ids, names and filter values compare exactly on every dialect: MySQL and MariaDB
collations pad (`'alice' = 'alice '` is true even in `utf8mb4_bin`), the library's
comparisons do not."""

from __future__ import annotations

import pytest

import agents_sqlalchemy
from agents_sqlalchemy import BranchError, SessionStore
from agents_sqlalchemy.migrations import api as migrate

from .support.items import message

NEAR = ["alice ", "alice\t", " alice"]


async def test_a_user_id_with_trailing_space_is_another_user(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        await store.session("a", user_id="alice").add_items([message("alice's invoice")])
        for n, other in enumerate(NEAR):
            await store.session(f"n{n}", user_id=other).add_items([message("near's invoice")])
        for n, other in enumerate(NEAR):
            listed = [info.session_id for info in await store.list_sessions(user_id=other)]
            assert listed == [f"n{n}"], repr(other)
            hits = await store.search("invoice", user_id=other, mode="keyword")
            assert {hit.session_id for hit in hits} == {f"n{n}"}, repr(other)
        assert [i.session_id for i in await store.list_sessions(user_id="alice")] == ["a"]
        assert {h.session_id for h in await store.search("invoice", user_id="alice")} == {"a"}
        assert (await store.delete_user("alice ")).sessions == 1
        assert await store.session("a").get_items() == [message("alice's invoice")]
        assert (await store.delete_user("alice")).sessions == 1
        assert await store.session("n1").get_items() == [message("near's invoice")]


async def test_metadata_filters_compare_exactly(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        await store.session("plain", metadata={"plan": "pro"}).add_items([message("x")])
        await store.session("spaced", metadata={"plan": "pro "}).add_items([message("y")])
        found = await store.list_sessions(metadata={"plan": "pro"})
        assert [info.session_id for info in found] == ["plain"]
        found = await store.list_sessions(metadata={"plan": "pro "})
        assert [info.session_id for info in found] == ["spaced"]


@pytest.mark.parametrize("name", ["b ", "b\t"])
async def test_branch_names_compare_exactly(db_url: str, name: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("s")
        await session.add_items([message("one"), {"role": "assistant", "content": "ok"}])
        await session.create_branch_from_turn(1, "b")
        await session.add_items([message("on b")])
        assert await session.get_items(branch_id="b") == [message("on b")]
        # Another name is another branch: there is none of that name.
        assert await session.get_items(branch_id=name) == []
        with pytest.raises(BranchError, match="does not exist"):
            await session.switch_to_branch(name)
        names = {branch["branch_id"] for branch in await session.list_branches()}
        assert name not in names and "b" in names
        # And it can be made, beside "b".
        await session.create_branch_from_turn(1, name)
        await session.add_items([message("on the other")])
        assert await session.get_items(branch_id=name) == [message("on the other")]
        assert await session.get_items(branch_id="b") == [message("on b")]


async def test_a_database_of_the_first_revision_upgrades_to_exact_branch_names(
    db_url: str,
) -> None:
    await agents_sqlalchemy.upgrade(db_url, "0001")
    await agents_sqlalchemy.upgrade(db_url)
    async with SessionStore(db_url) as store:
        session = store.session("s")
        await session.add_items([message("one"), {"role": "assistant", "content": "ok"}])
        await session.create_branch_from_turn(1, "b")
        await session.switch_to_branch("main")
        await session.create_branch_from_turn(1, "b ")  # not the same name as "b"
        await session.add_items([message("on b-space")])
        assert await session.get_items(branch_id="b ") == [message("on b-space")]
        assert await session.get_items(branch_id="b") == []
        # Back at 0001, "b" and "b " would be one key: a downgrade needs them gone first.
        await store.delete_session("s")
    await agents_sqlalchemy.downgrade(db_url, "0001")
    assert await migrate.current(db_url) == "0001"
