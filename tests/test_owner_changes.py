"""A session given to another owner (`set_user_id`) while the same store reads and writes
it, or erases the new owner: every call finds its items and state under the owner the row
names when it runs, none refuses them as another owner's, and none is left under a key
that is gone."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agents_sqlalchemy import SessionStore
from agents_sqlalchemy.repository.sessions import Sessions
from agents_sqlalchemy.services.owners import Owners
from agents_sqlalchemy.types import SessionKey

from .support.items import message


@pytest.fixture
def key() -> bytes:
    return os.urandom(32)


async def _set_state(store: SessionStore) -> Any:
    await store.session("moved").set_state("k", "after")
    return await store.session("moved").get_state("k")


async def _branch(store: SessionStore) -> Any:
    session = store.session("moved")
    await session.create_branch_from_turn(2)
    await session.add_items([message("on the branch")])
    return await session.get_items()


# What each call does, and what it returns once done; the looks it races (`Owners.owned`
# for the branch's reads, `Owners.sealer` for the state's write, which opens it).
_CALLS: dict[str, tuple[Callable[[SessionStore], Awaitable[Any]], str, Any]] = {
    "set_state": (_set_state, "sealer", "after"),
    "create_branch": (_branch, "owned", [message("a"), message("on the branch")]),
}


_STATE = {"set_state": "after", "create_branch": "before"}


@pytest.mark.parametrize("call", sorted(_CALLS))
async def test_a_call_beside_a_change_of_owner_opens_the_new_owner_s(
    db_url: str, key: bytes, call: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session is given to bob between the call's look at its owner (or its owner
    key) and the transaction that opens its items or state: the call opens them as bob's
    (they were refused as tampered with, `TamperedItemError`, though nothing was)."""
    run, looked_up, expected = _CALLS[call]
    async with SessionStore(db_url, create_tables=True, key=key, search=False) as store:
        session = store.session("moved", user_id="alice")
        await session.add_items([message("a"), message("b")])
        await session.set_state("k", "before")
        look = getattr(Owners, looked_up)
        armed = True

        async def looking(self: Owners, key: SessionKey) -> Any:
            nonlocal armed
            if not armed:
                return await look(self, key)
            armed = False
            if looked_up == "sealer":  # given before the write's own look at its key
                await store.session("moved").set_user_id("bob")
                return await look(self, key)
            found = await look(self, key)  # given after the read looked at its owner
            await store.session("moved").set_user_id("bob")
            return found

        monkeypatch.setattr(Owners, looked_up, looking)
        assert await run(store) == expected
        assert not armed
        monkeypatch.undo()
    async with SessionStore(db_url, key=key, search=False) as cold:
        info = await cold.session_info("moved")
        assert info is not None and info.user_id == "bob"
        assert await cold.session("moved").get_items(branch_id="main") == [
            message("a"),
            message("b"),
        ]
        assert await cold.session("moved").get_state("k") == _STATE[call]


async def test_a_session_given_to_a_user_being_erased_is_sealed_under_a_live_key(
    db_url: str, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bob is erased between `set_user_id("bob")`'s look at bob's key and its transaction:
    the session is re-wrapped under a new key of bob's, not the destroyed one (its items
    and state named a key that was no longer there: unreadable, though the move was
    reported done)."""
    async with SessionStore(db_url, create_tables=True, key=key, search=False) as store:
        await store.session("bob's", user_id="bob").add_items([message("old")])
        session = store.session("moved", user_id="alice")
        await session.add_items([message("a")])
        await session.set_state("k", "v")
        give = Sessions.give
        erased = []

        async def erasing_first(self: Sessions, *args: Any, **kwargs: Any) -> Any:
            if not erased:
                erased.append(await store.erase_user("bob"))
            return await give(self, *args, **kwargs)

        monkeypatch.setattr(Sessions, "give", erasing_first)
        await session.set_user_id("bob")
        monkeypatch.undo()
        assert erased[0].sessions == 1
    async with SessionStore(db_url, key=key, search=False) as cold:
        moved = cold.session("moved")
        assert await moved.get_items() == [message("a")]
        assert await moved.get_state("k") == "v"
        assert (await cold.session_info("moved")).user_id == "bob"  # type: ignore[union-attr]
