"""Holes around keys: an overwritten sealed state, or keys wrapped anew when a session
changes hands, leave no copy on disk, and a store still holding a key that was rotated away
is refused before it writes anything."""

from __future__ import annotations

import asyncio
import os

import pytest

from agents_sqlalchemy import KeyringError, SessionStore, WrongKeyError

from .support.disk import found_on_disk, on_disk, pieces
from .support.items import message
from .support.sealed import blob, sealed_rows, sealed_state
from .support.tables import OWNER_KEYS, raw_rows


async def test_set_state_scrubs_the_state_it_overwrites(sqlite_url: str) -> None:
    async with SessionStore(sqlite_url, create_tables=True, key=os.urandom(32)) as store:
        session = store.session("s")
        await session.add_items([message("x")])
        await session.set_state("card", os.urandom(3000).hex())
        before = await sealed_state(sqlite_url)
        assert sum(piece in on_disk(sqlite_url) for piece in pieces(before)) > 300
        await session.set_state("card", "replaced")  # an overwrite, not a deletion
        await store.flush()  # the WAL is checkpointed just after, on the store's thread
        after = await sealed_state(sqlite_url)
        disk = on_disk(sqlite_url)
        left = [piece for piece in pieces(before) if piece not in after and piece in disk]
        assert left == [], f"{len(left)} pieces of the overwritten state are still on disk"
        assert await session.get_state("card") == "replaced"


async def test_giving_a_session_to_a_user_scrubs_what_its_keys_were_wrapped_by(
    sqlite_url: str,
) -> None:
    """`set_user_id` wraps the items' keys and the state's anew under the new owner's key
    and destroys the key a userless session had of its own: neither the old wrappings nor
    that key are left in the file or its WAL."""
    async with SessionStore(sqlite_url, create_tables=True, key=os.urandom(32)) as store:
        session = store.session("s")
        items = [message("one"), {"role": "assistant", "content": "ok"}]
        await session.add_items(items)
        await session.set_state("card", os.urandom(3000).hex())
        await store.flush()
        wrapped = [wrapped for _, _, wrapped, _ in await sealed_rows(sqlite_url, "s")]
        [(own_key,)] = await raw_rows(sqlite_url, f"SELECT kept FROM {OWNER_KEYS}")
        state = await sealed_state(sqlite_url)
        assert found_on_disk(sqlite_url, [*wrapped, blob(own_key)]) != []
        await session.set_user_id("alice")
        await store.flush()  # the WAL is checkpointed just after, on the store's thread
        now = await sealed_state(sqlite_url)
        assert found_on_disk(sqlite_url, [*wrapped, blob(own_key)]) == []
        disk = on_disk(sqlite_url)
        assert [piece for piece in pieces(state) if piece not in now and piece in disk] == []
        assert await session.get_items() == items


async def test_a_store_holding_a_rotated_key_is_refused_before_it_writes(db_url: str) -> None:
    """Two stores, as two processes would hold them: one rotates; the other, still on the
    old key, has every sealed write refused (items, on main and on a branch, and state),
    and everything stays readable with the new key."""
    old, new = os.urandom(32), os.urandom(32)
    async with (
        SessionStore(db_url, create_tables=True, key=old) as stale,
        SessionStore(db_url, create_tables=True, key=old) as rotating,
    ):
        session = stale.session("s", user_id="alice")
        await session.add_items([message("one"), {"role": "assistant", "content": "ok"}])
        await session.set_state("step", 1)
        on_branch = stale.session("s")
        await on_branch.create_branch_from_turn(1, "b")  # holds nothing of main yet
        await rotating.rotate_key(new)

        fresh = stale.session("fresh")
        for write in (
            lambda: session.add_items([message("two")]),
            lambda: fresh.add_items([message("first words of a new session")]),
            lambda: fresh.set_state("step", 2),  # no sealed state to read first
            lambda: on_branch.add_items([message("on the branch")]),
        ):
            with pytest.raises(WrongKeyError, match="rotated away"):
                await write()
        # A write that reads sealed data first fails at that read, naming the rotation.
        with pytest.raises(KeyringError, match="rotated away"):
            await session.set_state("step", 2)

    async with SessionStore(db_url, key=new) as reopened:
        again = reopened.session("s")
        assert await again.get_items() == [message("one"), {"role": "assistant", "content": "ok"}]
        assert await again.get_state("step") == 1
        assert await reopened.session("fresh").get_items() == []
        assert await again.get_items(branch_id="b") == []
        await again.add_items([message("two")])  # the new key writes
        assert len(await again.get_items()) == 3
    async with SessionStore(db_url, key=old) as refused:
        with pytest.raises(WrongKeyError):
            await refused.session("s").get_items()


async def test_writes_racing_a_rotation_stay_readable_or_are_refused(db_url: str) -> None:
    """A writer on the old key appends while another store rotates: each append either went
    in before the key was retired (and was re-wrapped) or was refused; every item that went
    in reads back with the new key."""
    old, new = os.urandom(32), os.urandom(32)
    async with (
        SessionStore(db_url, create_tables=True, key=old, search=False) as writer,
        SessionStore(db_url, create_tables=True, key=old, search=False) as rotating,
    ):
        sessions = [writer.session(f"s{n}") for n in range(4)]
        for session in sessions:
            await session.add_items([message("before")])
        written: dict[str, list[dict[str, object]]] = {
            s.session_id: [message("before")] for s in sessions
        }
        refused = 0

        rotated = asyncio.Event()

        async def write() -> None:
            nonlocal refused
            n = after = 0
            while after < 5:  # until the rotation is over, and five more
                session = sessions[n % len(sessions)]
                item = message(f"during {n}")
                n, after = n + 1, after + rotated.is_set()
                try:
                    await session.add_items([item])
                except WrongKeyError:
                    refused += 1
                else:
                    written[session.session_id].append(item)
                await asyncio.sleep(0)

        async def rotate() -> None:
            await rotating.rotate_key(new, batch_size=2)
            rotated.set()

        await asyncio.gather(write(), rotate())
    assert refused >= 5  # at least the writes after the rotation
    async with SessionStore(db_url, key=new) as reopened:
        for session_id, items in written.items():
            assert await reopened.session(session_id).get_items() == items
