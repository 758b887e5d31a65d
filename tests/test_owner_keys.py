"""A key per owner: each user's items (or a session's, without a user) are wrapped under
that owner's key; moving a session re-wraps it, erasing an owner destroys the key, and a
session handed to another user behind the library's back does not open.

Every test reads what lies in the tables (and, for the key directory, on disk), not only
what the API returns.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import threading
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import create_async_engine

from agents_sqlalchemy import (
    DatabaseError,
    KeyDirectory,
    KeyProviderError,
    OwnerKeyError,
    SessionStore,
    TamperedItemError,
    WrongKeyError,
)
from agents_sqlalchemy.crypto import OwnerKey
from agents_sqlalchemy.database.engines import normalize_url
from agents_sqlalchemy.errors import ConfigurationError, DecryptionError
from agents_sqlalchemy.repository.keyring import KeyringRows
from agents_sqlalchemy.repository.owner_keys import OwnerKeyRows
from agents_sqlalchemy.repository.schema import Schema
from agents_sqlalchemy.repository.sessions import Sessions
from agents_sqlalchemy.services import keys as keys_module
from agents_sqlalchemy.services.owners import Owners
from agents_sqlalchemy.types import SessionKey, StoredItem, owner_of

from .support.cli import cli
from .support.disk import found_on_disk, on_disk
from .support.items import message
from .support.locks import until_waiting
from .support.server_disk import key_files, opened
from .support.tables import ITEMS, KEYRING, OWNER_KEYS, SESSIONS, execute, raw_rows
from .support.telemetry import Exported

_KEYS_OF = (
    f"SELECT i.wrapped_key FROM {ITEMS} i JOIN {SESSIONS} s ON s.id = i.session_pk "
    "WHERE s.user_id = '{}'"
)


@pytest.fixture
def key() -> bytes:
    return os.urandom(32)


async def _item_keks(url: str, session_id: str) -> set[str]:
    rows = await raw_rows(
        url,
        f"SELECT i.kek_id FROM {ITEMS} i JOIN {SESSIONS} s ON s.id = i.session_pk "
        f"WHERE s.session_id = '{session_id}'",
    )
    return {str(row[0]) for row in rows}


async def _owner_keys(url: str) -> dict[str, str]:
    """Owner key id -> owner, as the owner keys table holds them."""
    rows = await raw_rows(url, f"SELECT key_id, owner FROM {OWNER_KEYS}")
    return {str(key_id): str(owner) for key_id, owner in rows}


async def test_each_owner_has_its_own_key_and_users_share_theirs(db_url: str, key: bytes) -> None:
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        await store.session("a1", user_id="alice").add_items([message("a1")])
        await store.session("a2", user_id="alice").add_items([message("a2")])
        await store.session("b1", user_id="bob").add_items([message("b1")])
        await store.session("n1").add_items([message("n1")])
        await store.session("a1", user_id="alice").set_state("k", "v")
    keys = await _owner_keys(db_url)
    assert len(keys) == 3  # alice, bob, and the session without a user
    a1, a2 = await _item_keks(db_url, "a1"), await _item_keks(db_url, "a2")
    b1, n1 = await _item_keks(db_url, "b1"), await _item_keks(db_url, "n1")
    assert a1 == a2 and len(a1) == 1 and len({*a1, *b1, *n1}) == 3
    assert keys[a1.pop()] == owner_of("alice", "") and keys[b1.pop()] == owner_of("bob", "")
    # Owners are hashes: no user id in the owner keys table.
    assert not any("alice" in owner or "bob" in owner for owner in keys.values())


async def test_a_session_given_to_another_user_behind_the_library_does_not_open(
    db_url: str, key: bytes
) -> None:
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        await store.session("s", user_id="alice").add_items([message("alice's secret")])
        await store.session("s").set_state("k", "alice's state")
        await store.session("b", user_id="bob").add_items([message("bob's")])
    await execute(db_url, f"UPDATE {SESSIONS} SET user_id = 'bob' WHERE session_id = 's'")
    async with SessionStore(db_url, key=key) as store:
        session = store.session("s")
        with pytest.raises(TamperedItemError, match="another owner"):
            await session.get_items()
        with pytest.raises(TamperedItemError, match="another owner"):
            await session.get_items(limit=1)
        with pytest.raises(TamperedItemError):
            await session.get_state("k")
        with pytest.raises(TamperedItemError):
            await session.pop_item()
        with pytest.raises(TamperedItemError):
            await store.search("secret", user_id="bob")
        assert await store.session("b").get_items() == [message("bob's")]
    assert len(await _item_keks(db_url, "s")) == 1  # the pop rolled back: nothing removed


async def test_a_store_that_only_reads_a_session_expects_the_key_its_rows_named(
    db_url: str, key: bytes
) -> None:
    """A store that never wrote to a session expected its own key-encryption key, and every
    row named the owner's key instead; after one read it expects the owner's key, and a
    session moved meanwhile (its rows name another key) reads as well, then expects that."""
    items = [message(f"m{i}") for i in range(3)]
    async with SessionStore(db_url, create_tables=True, key=key) as writer:
        await writer.session("s", user_id="alice").add_items(items)
    [alice_key] = await _item_keks(db_url, "s")
    async with SessionStore(db_url, key=key) as reader:
        session = reader.session("s")
        conversation = session._services.conversation
        assert conversation._owners.known_key_id(session._key) is None
        assert await session.get_items() == items
        assert conversation._owners.known_key_id(session._key) == alice_key
        _, rows = await conversation._items.read(session._key, None, alice_key)
        assert [StoredItem(*row).kek_id for row in rows] == [None] * 3  # named once, not per row
        async with SessionStore(db_url, key=key) as mover:
            await mover.session("s").set_user_id("bob")
        [bob_key] = await _item_keks(db_url, "s")
        assert bob_key != alice_key
        assert await session.get_items(limit=2) == items[1:]
        assert conversation._owners.known_key_id(session._key) == bob_key


async def test_set_user_id_rewraps_every_key_and_destroys_the_session_s_own(
    db_url: str, key: bytes
) -> None:
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        session = store.session("s")
        await session.add_items([message("one"), {"role": "assistant", "content": "ok"}])
        await session.add_items([message("two")])
        await session.set_state("k", "v")
        await session.create_branch_from_turn(2, "b")
        await session.add_items([message("on b")])  # the branch's own item, elsewhere
        ownerless = await _owner_keys(db_url)
        assert list(ownerless.values()) == [owner_of(None, session._key.hash)]
        on_b = await session.get_items(branch_id="b")
        await session.set_user_id("carol")
        keys = await _owner_keys(db_url)
        assert set(keys.values()) == {owner_of("carol", "")}  # the session's own is gone
        rows = await raw_rows(db_url, f"SELECT kek_id FROM {ITEMS}")
        assert {row[0] for row in rows} == set(keys)  # main line and branch alike
        assert await session.get_state("k") == "v"
        assert await session.get_items(branch_id="b") == on_b
        await session.set_user_id(None)  # and back to nobody: a fresh key of its own
        keys = await _owner_keys(db_url)
        assert owner_of(None, session._key.hash) in keys.values()
    async with SessionStore(db_url, key=key) as store:
        again = store.session("s")
        assert len(await again.get_items(branch_id="main")) == 3
        assert await again.get_state("k") == "v"


async def test_a_writer_that_missed_a_move_seals_under_the_new_owner(
    db_url: str, key: bytes
) -> None:
    """Two stores, as two processes: one moves the session to another user while the other
    keeps writing to it; every write lands under the owner the row names, none is lost."""
    async with (
        SessionStore(db_url, create_tables=True, key=key) as writer,
        SessionStore(db_url, create_tables=True, key=key) as mover,
    ):
        await writer.session("s").add_items([message("before")])
        await mover.session("s").set_user_id("dave")
        assert await writer.session("s").get_items() == [message("before")]  # a stale key
        await writer.session("s").add_items([message("after")])  # its owner cache is stale
        await writer.session("s").set_state("k", 1)
        assert await mover.session("s").get_items() == [message("before"), message("after")]
        assert await mover.session("s").get_state("k") == 1
    keys = await _owner_keys(db_url)
    assert await _item_keks(db_url, "s") == set(keys)
    assert set(keys.values()) == {owner_of("dave", "")}


async def test_state_written_after_another_store_erased_the_user_opens_everywhere(
    db_url: str, key: bytes
) -> None:
    """A store that had a user's owner key open sealed state under it after another store
    erased the user: the call succeeded, and every other store (and this one, reopened)
    then found the state sealed under a key that no longer exists. Items already took a
    fresh key; state now does too, checked in the write's transaction."""
    async with (
        SessionStore(db_url, create_tables=True, key=key) as writer,
        SessionStore(db_url, create_tables=True, key=key) as eraser,
    ):
        await writer.session("old", user_id="alice").add_items([message("before")])
        await writer.session("old").set_state("k", 1)
        await eraser.erase_user("alice")
        await writer.session("old", user_id="alice").set_state("k", 2)
        await writer.session("new", user_id="alice").set_state("k", 3)
        await writer.session("whole", user_id="alice").add_items([message("after")])
    async with SessionStore(db_url, key=key) as fresh:
        assert await fresh.session("old").get_state("k") == 2
        assert await fresh.session("new").get_state("k") == 3
        assert await fresh.session("whole").get_items() == [message("after")]
    assert set((await _owner_keys(db_url)).values()) == {owner_of("alice", "")}


async def test_stores_taking_turns_on_one_session_seal_each_batch_at_its_place(
    db_url: str, key: bytes
) -> None:
    """Three stores (as three processes) write one session at once, and a fourth gives it
    to another user midway (the first user's key stays: it is theirs for other sessions):
    each store's idea of where the session's next items go, and of its owner, is often
    stale. No batch is lost, split or sealed for a place it does not hold, and every item
    is wrapped under the key of the owner the row names."""
    async with (
        SessionStore(db_url, create_tables=True, key=key, search=False) as first,
        SessionStore(db_url, key=key, search=False) as second,
        SessionStore(db_url, key=key, search=False) as third,
        SessionStore(db_url, key=key, search=False) as mover,
    ):
        await first.session("other", user_id="dana").add_items([message("dana's")])
        await first.session("shared", user_id="dana").add_items([message("first")])

        async def write(store: SessionStore, name: str) -> None:
            for n in range(12):
                batch = [message(f"{name} {n} {i}") for i in range(3)]
                await store.session("shared").add_items(batch)
                if name == "first" and n == 5:
                    await mover.session("shared").set_user_id("erin")

        stores = {"first": first, "second": second, "third": third}
        await asyncio.gather(*(write(store, name) for name, store in stores.items()))
        items = await mover.session("shared").get_items()
        for store in stores.values():  # each knows a key of its own as the session's
            assert await store.session("shared").get_items() == items
            assert await store.session("shared").get_items(limit=40) == items[-40:]
    assert items[0] == message("first")
    contents = [item["content"] for item in items[1:]]
    assert len(contents) == 108
    for start in range(0, 108, 3):
        name, n, _ = contents[start].split()
        assert contents[start : start + 3] == [f"{name} {n} {i}" for i in range(3)]
    for name in stores:
        mine = [c for c in contents if c.startswith(f"{name} ") and c.endswith(" 0")]
        assert mine == [f"{name} {n} 0" for n in range(12)]
    keys = {key_id: owner for key_id, owner in (await _owner_keys(db_url)).items()}
    assert {keys[kek] for kek in await _item_keks(db_url, "shared")} == {owner_of("erin", "")}
    places = await raw_rows(
        db_url,
        f"SELECT seq FROM {ITEMS} i JOIN {SESSIONS} s ON s.id = i.session_pk "
        "WHERE s.session_id = 'shared'",
    )
    assert sorted(seq for (seq,) in places) == list(range(1, 110))  # no place claimed twice


async def test_erasing_a_user_destroys_their_key_only(db_url: str, key: bytes) -> None:
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        await store.session("a", user_id="alice").add_items([message("a")])
        await store.session("b", user_id="bob").add_items([message("b")])
        receipt = await store.erase_user("alice")
        assert receipt.owner_keys_destroyed == 1 and receipt.owner_key_status == "destroyed"
        assert receipt.owner_keys_kept == "database" and receipt.owner_key_gone_at is not None
        assert set((await _owner_keys(db_url)).values()) == {owner_of("bob", "")}
        # A session without a user, deleted, takes its key with it.
        await store.session("n").add_items([message("n")])
        assert len(await _owner_keys(db_url)) == 2
        assert (await store.delete_session("n")).sessions == 1
        assert set((await _owner_keys(db_url)).values()) == {owner_of("bob", "")}
        # Alice again is a new owner, with a new key.
        await store.session("a2", user_id="alice").add_items([message("new")])
        assert await store.session("a2").get_items() == [message("new")]
        assert await store.session("b").get_items() == [message("b")]


async def test_a_key_directory_keeps_owner_keys_out_of_the_database(
    db_url: str, key: bytes, tmp_path: Path
) -> None:
    directory = tmp_path / "owner-keys"
    keys = KeyDirectory(directory)
    async with SessionStore(db_url, create_tables=True, key=key, owner_keys=keys) as store:
        await store.session("a", user_id="alice").add_items([message("alice's")])
        await store.session("b", user_id="bob").add_items([message("bob's")])
        files = sorted(path.name for path in directory.glob("*.key"))
        assert len(files) == 2 and {p.name for p in directory.iterdir()} == {*files, "destroyed"}
        assert all(path.stat().st_mode & 0o777 == 0o600 for path in directory.iterdir())
        rows = await raw_rows(db_url, f"SELECT kept, kek_id FROM {OWNER_KEYS}")
        assert rows == [(None, None), (None, None)]  # nothing of the keys in the database
        receipt = await store.erase_user("alice")
        assert receipt.owner_keys_kept == "KeyDirectory" and receipt.owner_keys_destroyed == 1
        [left] = directory.glob("*.key")
        [gone] = {name.removesuffix(".key") for name in files} - {left.stem}
        assert (directory / "destroyed").read_text() == gone + "\n"  # its id logged
    # Reopened with the directory, bob reads; without it, nothing opens.
    async with SessionStore(db_url, key=key, owner_keys=KeyDirectory(directory)) as store:
        assert await store.session("b").get_items() == [message("bob's")]
    async with SessionStore(db_url, key=key) as store:
        with pytest.raises((OwnerKeyError, DecryptionError)):
            await store.session("b").get_items()


async def alice_and_bob(url: str, key: bytes, directory: Path) -> None:
    """Sessions "a" of alice and "b" of bob, their owner keys in a key directory."""
    async with SessionStore(
        url, create_tables=True, key=key, owner_keys=KeyDirectory(directory)
    ) as store:
        await store.session("a", user_id="alice").add_items([message("alice's")])
        await store.session("b", user_id="bob").add_items([message("bob's")])


async def test_a_key_file_of_another_owner_is_refused(
    sqlite_url: str, key: bytes, tmp_path: Path
) -> None:
    directory = tmp_path / "keys"
    await alice_and_bob(sqlite_url, key, directory)
    [alice_key] = await _item_keks(sqlite_url, "a")
    [bob_key] = await _item_keks(sqlite_url, "b")
    # Bob's key file copied over alice's: it is bound to bob, and refused.
    (directory / f"{alice_key}.key").write_bytes((directory / f"{bob_key}.key").read_bytes())
    async with SessionStore(sqlite_url, key=key, owner_keys=KeyDirectory(directory)) as store:
        with pytest.raises(Exception, match="another owner"):
            await store.session("a").get_items()
    # Emptied or cut short: said to be damaged (it read as "another owner", or the items'
    # DecryptionError), and the items stay as they are.
    whole = (directory / f"{bob_key}.key").read_bytes()
    for damaged in (b"", whole[:-1], whole + b"\n"):
        (directory / f"{bob_key}.key").write_bytes(damaged)
        async with SessionStore(sqlite_url, key=key, owner_keys=KeyDirectory(directory)) as store:
            with pytest.raises(KeyProviderError, match="is damaged"):
                await store.session("b").get_items()
    (directory / f"{bob_key}.key").write_bytes(whole)
    async with SessionStore(sqlite_url, key=key, owner_keys=KeyDirectory(directory)) as store:
        assert await store.session("b").get_items() == [message("bob's")]


async def test_an_erasure_leaves_a_key_file_of_another_owner(
    sqlite_url: str, key: bytes, tmp_path: Path
) -> None:
    """A key row relabelled outside the library as another user's made that user's erasure
    destroy it: the file says whose it is, and is not destroyed for someone else, so bob's
    items stay readable (in every copy of the database too)."""
    directory = tmp_path / "keys"
    await alice_and_bob(sqlite_url, key, directory)
    [bob_key] = await _item_keks(sqlite_url, "b")
    alice_owner = owner_of("alice", "")
    await execute(
        sqlite_url,
        f"UPDATE {OWNER_KEYS} SET owner = :o WHERE key_id = :k",
        {"o": alice_owner, "k": bob_key},
    )
    async with SessionStore(sqlite_url, key=key, owner_keys=KeyDirectory(directory)) as store:
        with pytest.raises(KeyProviderError, match=f"{bob_key} belongs to another owner"):
            await store.erase_user("alice")
    assert (directory / f"{bob_key}.key").exists()
    await execute(
        sqlite_url,
        f"UPDATE {OWNER_KEYS} SET owner = :o WHERE key_id = :k",
        {"o": owner_of("bob", ""), "k": bob_key},
    )
    async with SessionStore(sqlite_url, key=key, owner_keys=KeyDirectory(directory)) as store:
        assert await store.session("b").get_items() == [message("bob's")]


async def test_a_key_directory_holding_none_of_the_keys_takes_no_key(
    sqlite_url: str, key: bytes, tmp_path: Path
) -> None:
    """A volume not mounted leaves its mount point, an empty directory: new owners' keys
    went there, and their items could not be read once the volume came back. A directory
    that holds none of the keys the database names as kept outside it takes none, however
    often it is opened; a new directory shared by two stores takes keys from both."""
    directory = tmp_path / "keys"
    await alice_and_bob(sqlite_url, key, directory)
    mounted = tmp_path / "volume"
    directory.rename(mounted)
    directory.mkdir(mode=0o700)  # the mount point, the volume not mounted
    before = await _owner_keys(sqlite_url)
    for _ in range(2):  # a restart: the directory is no longer empty (its log), still not it
        keys = KeyDirectory(directory)
        async with SessionStore(sqlite_url, key=key, owner_keys=keys) as store:
            with pytest.raises(ConfigurationError, match="is its volume mounted"):
                await store.session("c", user_id="carol").add_items([message("carol's")])
    assert await _owner_keys(sqlite_url) == before
    assert [path.name for path in directory.iterdir()] == ["destroyed"]
    shutil.rmtree(directory)
    mounted.rename(directory)
    async with SessionStore(sqlite_url, key=key, owner_keys=KeyDirectory(directory)) as store:
        await store.session("c", user_id="carol").add_items([message("carol's")])
        assert await store.session("b").get_items() == [message("bob's")]
    # A new deployment: two stores open the new directory, then each makes a key.
    fresh, url = tmp_path / "fresh", f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}"
    async with (
        SessionStore(url, create_tables=True, key=key, owner_keys=KeyDirectory(fresh)) as one,
        SessionStore(url, create_tables=True, key=key, owner_keys=KeyDirectory(fresh)) as other,
    ):
        await other.session("b", user_id="bob").add_items([message("bob's")])
        await one.session("a", user_id="alice").add_items([message("alice's")])
    assert len(list(fresh.glob("*.key"))) == 2


async def test_a_damaged_key_file_is_destroyed_by_an_erasure(
    sqlite_url: str, key: bytes, tmp_path: Path
) -> None:
    """A key file cut short holds no key: an erasure destroys it, as before a file's owner
    was checked (its empty first line read as another owner's)."""
    directory = tmp_path / "keys"
    await alice_and_bob(sqlite_url, key, directory)
    [alice_key] = await _item_keks(sqlite_url, "a")
    (directory / f"{alice_key}.key").write_bytes(b"")
    async with SessionStore(sqlite_url, key=key, owner_keys=KeyDirectory(directory)) as store:
        assert (await store.erase_user("alice")).owner_keys_destroyed == 1
        assert await store.session("b").get_items() == [message("bob's")]
    assert not (directory / f"{alice_key}.key").exists()


async def test_a_key_directory_that_never_held_a_key_does_not_call_it_erased(
    sqlite_url: str, key: bytes, tmp_path: Path
) -> None:
    right, mistyped = tmp_path / "owner-keys", tmp_path / "owner_keys"
    async with SessionStore(
        sqlite_url, create_tables=True, key=key, owner_keys=KeyDirectory(right)
    ) as store:
        for user in ("alice", "bob", "carol"):
            await store.session(user, user_id=user).add_items([message(user)])
    [bob_key] = await _item_keks(sqlite_url, "bob")
    backup = tmp_path / "backup.db"
    live = sqlite_url.removeprefix("sqlite+aiosqlite:///")
    with closing(sqlite3.connect(live)) as source, closing(sqlite3.connect(backup)) as copy:
        source.backup(copy)
    # Opened with a directory that never held its keys: no read says "erased", and an
    # erasure gives no receipt while the key lives on where it is kept.
    async with SessionStore(sqlite_url, key=key, owner_keys=KeyDirectory(mistyped)) as store:
        with pytest.raises(KeyProviderError, match=r"never destroyed there.*not erased"):
            await store.session("alice").get_items()
        with pytest.raises(KeyProviderError, match=rf"not destroyed: delete {bob_key}\.key"):
            await store.erase_user("bob")
    assert (right / f"{bob_key}.key").exists()
    async with SessionStore(sqlite_url, key=key, owner_keys=KeyDirectory(right)) as store:
        assert await store.session("alice").get_items() == [message("alice")]
        assert (await store.erase_user("alice")).owner_key_status == "destroyed"
    # A copy made before alice's erasure: her key is in the log, so she reads as erased.
    copy_url = f"sqlite+aiosqlite:///{backup}"
    async with SessionStore(copy_url, key=key, owner_keys=KeyDirectory(right)) as store:
        with pytest.raises(OwnerKeyError, match="was destroyed"):
            await store.session("alice").get_items()
        assert await store.session("carol").get_items() == [message("carol")]
        # A search across every session passes over her items (it failed for everyone).
        for mode in ("hybrid", "vector", "keyword"):
            found = await store.search("alice carol", mode=mode)  # type: ignore[arg-type]
            assert {hit.session_id for hit in found} <= {"carol", "bob"}, mode
            assert "carol" in {hit.session_id for hit in found}, mode
    # A directory made before the log: a missing file reads as destroyed, as it did.
    [carol_key] = await _item_keks(sqlite_url, "carol")
    (right / "destroyed").unlink()
    (right / f"{carol_key}.key").unlink()
    async with SessionStore(sqlite_url, key=key, owner_keys=KeyDirectory(right)) as store:
        with pytest.raises(OwnerKeyError, match="was destroyed"):
            await store.session("carol").get_items()
    assert not (right / "destroyed").exists()  # a directory with files is not given a log


class FailingOnce(KeyDirectory):
    """A key directory whose first `destroy` fails, as a KMS that times out once."""

    failures = 1

    def destroy(self, key_id: str, owner: str, kept: bytes | None) -> Any:
        if self.failures:
            self.failures -= 1
            raise OSError("the key store timed out")
        return super().destroy(key_id, owner, kept)


async def test_an_erasure_whose_key_store_fails_changes_nothing_and_can_be_run_again(
    db_url: str, key: bytes, tmp_path: Path
) -> None:
    """The sessions and the key's row went first, then the key store failed: the key lived
    on, nothing named it any more, and `erase_user` again found nothing to do."""
    directory = tmp_path / "owner-keys"
    await alice_and_bob(db_url, key, directory)
    [alice_key] = await _item_keks(db_url, "a")
    async with SessionStore(db_url, key=key, owner_keys=FailingOnce(directory)) as store:
        with pytest.raises(KeyProviderError, match=f"failed to destroy owner key {alice_key}"):
            await store.erase_user("alice")
        assert (directory / f"{alice_key}.key").exists()
        assert await store.session("a").get_items() == [message("alice's")]  # all still there
        receipt = await store.erase_user("alice")
        assert (receipt.sessions, receipt.items, receipt.owner_keys_destroyed) == (1, 1, 1)
        assert receipt.owner_key_status == "destroyed"
        assert await store.session("b").get_items() == [message("bob's")]
    assert not (directory / f"{alice_key}.key").exists()
    assert alice_key not in await _owner_keys(db_url)  # bob's alone is left
    assert len(await _owner_keys(db_url)) == 1


async def test_a_session_of_its_own_whose_key_store_fails_is_deleted_when_run_again(
    db_url: str, key: bytes, tmp_path: Path
) -> None:
    """A session without a user owns its key: its rows (and the key's) went first, then
    the key store failed, and `delete_session` again found nothing: the key lived on."""
    directory = tmp_path / "owner-keys"
    async with SessionStore(
        db_url, create_tables=True, key=key, owner_keys=KeyDirectory(directory)
    ) as store:
        await store.session("anon").add_items([message("nobody's")])
    [own_key] = await _item_keks(db_url, "anon")
    async with SessionStore(db_url, key=key, owner_keys=FailingOnce(directory)) as store:
        with pytest.raises(KeyProviderError, match=f"failed to destroy owner key {own_key}"):
            await store.delete_session("anon")
        assert await store.session("anon").get_items() == [message("nobody's")]
        assert await store.delete_session("anon")
        assert await store.session_info("anon") is None
    assert not (directory / f"{own_key}.key").exists()
    assert own_key not in await _owner_keys(db_url)


async def test_a_purge_keeps_the_key_of_a_session_written_as_it_runs(
    db_url: str, key: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A purge of inactive sessions destroyed their keys before deleting them: a session
    written meanwhile (no longer inactive) was kept, and its key was gone."""
    directory = tmp_path / "owner-keys"
    async with SessionStore(
        db_url, create_tables=True, key=key, owner_keys=KeyDirectory(directory)
    ) as store:
        await store.session("idle").add_items([message("old")])
    delete_sessions = Sessions.delete_sessions

    async def written_first(self: Sessions, *args: Any, **kwargs: Any) -> Any:
        await execute(db_url, f"UPDATE {SESSIONS} SET updated_at = '2999-01-01 00:00:00'")
        return await delete_sessions(self, *args, **kwargs)

    monkeypatch.setattr(Sessions, "delete_sessions", written_first)
    async with SessionStore(db_url, key=key, owner_keys=KeyDirectory(directory)) as store:
        removed = await store.purge_inactive(timedelta(milliseconds=1))
        assert removed.sessions == 0
    monkeypatch.undo()
    async with SessionStore(db_url, key=key, owner_keys=KeyDirectory(directory)) as store:
        assert await store.session("idle").get_items() == [message("old")]


@pytest.mark.parametrize("then", ["purge_inactive", "delete_session", "rotate_owner_keys"])
async def test_a_purge_whose_key_store_fails_leaves_its_keys_for_the_next_to_destroy(
    db_url: str, key: bytes, tmp_path: Path, then: str
) -> None:
    """A purge of inactive sessions deletes them first (a write may keep one), then
    destroys their keys: the key store failed there, and the sessions and their key rows
    were gone, the keys alive, and no later call could name them (a copy taken before
    still opened). The rows stay retired until a deletion or a rotation destroys them."""
    directory = tmp_path / "owner-keys"
    async with SessionStore(
        db_url, create_tables=True, key=key, owner_keys=KeyDirectory(directory)
    ) as store:
        await store.session("idle").add_items([message("nobody's")])
        await store.session("other").add_items([message("kept")])
    [idle_key] = await _item_keks(db_url, "idle")
    await execute(db_url, f"UPDATE {SESSIONS} SET updated_at = '2000-01-01 00:00:00'")
    await execute(
        db_url,
        f"UPDATE {SESSIONS} SET updated_at = '2999-01-01 00:00:00' WHERE session_id = 'other'",
    )
    async with SessionStore(db_url, key=key, owner_keys=FailingOnce(directory)) as store:
        with pytest.raises(KeyProviderError, match=f"failed to destroy owner key {idle_key}"):
            await store.purge_inactive(timedelta(days=1))
        assert await store.session_info("idle") is None
        assert (directory / f"{idle_key}.key").exists() and idle_key in await _owner_keys(db_url)
        if then == "purge_inactive":
            assert (await store.purge_inactive(timedelta(days=1))).sessions == 0
        elif then == "delete_session":
            assert (await store.delete_session("nothing here")).sessions == 0
        else:
            await store.rotate_owner_keys()
        assert await store.session("other").get_items() == [message("kept")]
    assert not (directory / f"{idle_key}.key").exists()
    assert idle_key not in await _owner_keys(db_url)


class Refusing(KeyDirectory):
    """A key directory that refuses to destroy the keys named in `refused`."""

    refused: frozenset[str] = frozenset()

    def destroy(self, key_id: str, owner: str, kept: bytes | None) -> Any:
        if key_id in self.refused:
            raise OSError("the key store refuses")
        return super().destroy(key_id, owner, kept)


async def test_a_key_left_by_a_deletion_stops_no_other_erasure(
    db_url: str, key: bytes, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A key a purge retired and its key store keeps refusing to destroy stopped every
    later deletion and erasure, of every user, with an error naming that key. It is logged
    and left (retired) for the next; a rotation still refuses to start without it gone."""
    directory = tmp_path / "owner-keys"
    async with SessionStore(
        db_url, create_tables=True, key=key, owner_keys=KeyDirectory(directory)
    ) as store:
        await store.session("idle").add_items([message("nobody's")])
        await store.session("bob's", user_id="bob").add_items([message("bob's")])
    [idle_key] = await _item_keks(db_url, "idle")
    await execute(
        db_url,
        f"UPDATE {SESSIONS} SET updated_at = '2000-01-01 00:00:00' WHERE session_id = 'idle'",
    )
    refusing = Refusing(directory)
    refusing.refused = frozenset({idle_key})
    async with SessionStore(db_url, key=key, owner_keys=refusing) as store:
        with pytest.raises(KeyProviderError):
            await store.purge_inactive(timedelta(days=1))
        receipt = await store.erase_user("bob")
        assert (receipt.sessions, receipt.owner_keys_destroyed) == (1, 1)
        assert idle_key in caplog.text and "could not be destroyed yet" in caplog.text
        with pytest.raises(KeyProviderError):
            await store.rotate_owner_keys()
    assert idle_key in await _owner_keys(db_url)
    async with SessionStore(db_url, key=key, owner_keys=KeyDirectory(directory)) as store:
        await store.delete_session("nothing here")  # its first deletion finishes it
    assert await _owner_keys(db_url) == {}


async def test_a_key_store_failing_after_the_sessions_went_says_they_went(
    db_url: str, key: bytes, tmp_path: Path
) -> None:
    """A purge deletes the sessions, then destroys the keys they leave unused: when the key
    store failed then, the error did not say the sessions were gone."""
    directory = tmp_path / "owner-keys"
    async with SessionStore(
        db_url, create_tables=True, key=key, owner_keys=KeyDirectory(directory)
    ) as store:
        for name in ("idle 1", "idle 2"):  # no user: each its own owner, with a key
            await store.session(name).add_items([message("nobody's")])
        await store.session("b", user_id="bob").add_items([message("bob's")])
    idle = f"UPDATE {SESSIONS} SET updated_at = '2000-01-01 00:00:00' WHERE user_id IS NULL"
    await execute(db_url, idle)
    async with SessionStore(db_url, key=key, owner_keys=FailingSecond(directory)) as store:
        with pytest.raises(KeyProviderError) as raised:
            await store.purge_inactive(timedelta(days=1))
        said = (
            "(in this step; before it: 2 sessions (2 items) deleted; 1 owner key destroyed, "
            "whose items cannot be read. Run it again to finish)"
        )
        assert str(raised.value).endswith(said)
        assert [info.session_id for info in await store.list_sessions()] == ["b"]


@pytest.mark.dialects("postgresql", "mariadb")
async def test_an_erasure_stopped_after_its_key_store_destroyed_the_key_says_so(
    db_url: str, key: bytes, tmp_path: Path
) -> None:
    """An erasure destroys the user's key in the key store, then deletes its row: when that
    deletion waited past lock_timeout, the error said "nothing was changed", though the
    user's items could no longer be read."""
    from agents_sqlalchemy import SessionBusyError

    directory = tmp_path / "owner-keys"
    await alice_and_bob(db_url, key, directory)
    [alice_key] = await _item_keks(db_url, "a")
    engine = create_async_engine(normalize_url(db_url))
    try:
        async with (
            engine.begin() as other,
            SessionStore(
                db_url, key=key, owner_keys=KeyDirectory(directory), lock_timeout=1
            ) as store,
        ):
            held = f"SELECT key_id FROM {OWNER_KEYS} WHERE key_id = '{alice_key}' FOR UPDATE"
            await other.execute(text(held))
            with pytest.raises(SessionBusyError) as raised:
                await store.erase_user("alice")
    finally:
        await engine.dispose()
    said = (
        "(in this step; before it: 1 owner key destroyed, whose items cannot be read. "
        "Run it again to finish)"
    )
    assert str(raised.value).endswith(said)
    assert not (directory / f"{alice_key}.key").exists()
    async with SessionStore(db_url, key=key, owner_keys=KeyDirectory(directory)) as store:
        with pytest.raises(OwnerKeyError):
            await store.session("a").get_items()
        receipt = await store.erase_user("alice")  # run again: it ends
        assert receipt.sessions == 1
        assert await store.session("b").get_items() == [message("bob's")]


async def test_a_rotation_whose_key_store_fails_says_no_item_is_lost(
    sqlite_url: str, key: bytes, tmp_path: Path
) -> None:
    """A rotation destroys the old owner keys after re-wrapping every item under the new
    ones: when the key store failed on the second, the error said "1 owner key destroyed,
    whose items cannot be read", though every item still read (as an erasure's says)."""
    directory = tmp_path / "owner-keys"
    async with SessionStore(
        sqlite_url, create_tables=True, key=key, owner_keys=KeyDirectory(directory)
    ) as store:
        for user in ("alice", "bob", "carol"):
            await store.session(user, user_id=user).add_items([message(user)])
    async with SessionStore(sqlite_url, key=key, owner_keys=FailingSecond(directory)) as store:
        with pytest.raises(KeyProviderError) as raised:
            await store.rotate_owner_keys()
        assert "destroyed" not in str(raised.value).split(": ", 1)[1]
        for user in ("alice", "bob", "carol"):
            assert await store.session(user).get_items() == [message(user)]


async def test_a_key_left_by_a_deletion_is_no_unfinished_rotation(tmp_path: Path) -> None:
    """A finished `rotate_key` run again from a store of the old key is a no-op: a key a
    purge had left retired passed for an unfinished rotation of the owner keys, and every
    owner got a new key (a whole walk of the items)."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'agent.db'}"
    directory = tmp_path / "owner-keys"
    old, new = b"1" * 32, b"2" * 32
    async with SessionStore(
        url, create_tables=True, key=old, owner_keys=KeyDirectory(directory)
    ) as store:
        await store.session("a", user_id="alice").add_items([message("alice's")])
        await store.session("idle").add_items([message("nobody's")])
        await store.rotate_key(new)
    await execute(url, f"UPDATE {SESSIONS} SET updated_at = '2000-01-01' WHERE session_id = 'idle'")
    async with SessionStore(url, key=new, owner_keys=FailingOnce(directory)) as store:
        with pytest.raises(KeyProviderError):
            await store.purge_inactive(timedelta(days=1))
    alice = set(await _item_keks(url, "a"))
    async with SessionStore(url, key=old, owner_keys=KeyDirectory(directory)) as store:
        assert await store.rotate_key(new) == 0
    assert set(await _item_keks(url, "a")) == alice


async def test_a_deletion_stopped_between_batches_leaves_no_key_to_its_store(
    db_url: str, key: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A purge whose second batch failed had retired the first batch's keys, then raised
    before destroying them: that store's later deletions did not look for them, and the
    keys stayed alive (every earlier copy of the database opened those sessions)."""
    from agents_sqlalchemy.errors import SessionBusyError
    from agents_sqlalchemy.services import management

    directory = tmp_path / "owner-keys"
    async with SessionStore(
        db_url, create_tables=True, key=key, owner_keys=KeyDirectory(directory)
    ) as store:
        for session_id in ("n1", "n2"):
            await store.session(session_id).add_items([message("nobody's")])
    first = (await _item_keks(db_url, "n1")) | (await _item_keks(db_url, "n2"))
    await execute(db_url, f"UPDATE {SESSIONS} SET updated_at = '2000-01-01 00:00:00'")
    monkeypatch.setattr(management, "DELETE_BATCH", 1)
    batches, delete_batch = [], Sessions._delete_batch

    def second_fails(self: Sessions, conn: Any, **kwargs: Any) -> Any:
        batches.append(1)
        if len(batches) == 2:
            raise SessionBusyError("a lock is busy", None)
        return delete_batch(self, conn, **kwargs)

    monkeypatch.setattr(Sessions, "_delete_batch", second_fails)
    async with SessionStore(db_url, key=key, owner_keys=KeyDirectory(directory)) as store:
        with pytest.raises(SessionBusyError):
            await store.purge_inactive(timedelta(days=1))
        [gone] = [
            k
            for k in first
            if k not in await _item_keks(db_url, "n1") | await _item_keks(db_url, "n2")
        ]
        assert (directory / f"{gone}.key").exists()  # retired by the committed batch
        monkeypatch.undo()
        await store.delete_session("nothing here")
        assert not (directory / f"{gone}.key").exists()
        assert gone not in await _owner_keys(db_url)


class FailingSecond(KeyDirectory):
    """A key directory whose second `destroy` fails."""

    calls = 0

    def destroy(self, key_id: str, owner: str, kept: bytes | None) -> Any:
        self.calls += 1
        if self.calls == 2:
            raise OSError("the key store timed out")
        return super().destroy(key_id, owner, kept)


async def test_an_erasure_failing_part_way_forgets_the_keys_it_destroyed(
    db_url: str, key: bytes, tmp_path: Path
) -> None:
    """`delete_all` destroyed one owner's key, then the key store failed: the store that
    ran it kept that key open, and read the owner's items, and sealed new ones under it,
    which no other store, nor itself after a restart, could ever open."""
    directory = tmp_path / "owner-keys"
    await alice_and_bob(db_url, key, directory)
    async with SessionStore(db_url, key=key, owner_keys=FailingSecond(directory)) as store:
        for session_id in ("a", "b"):  # their keys opened, and kept
            await store.session(session_id).add_items([message("more")])
        with pytest.raises(KeyProviderError):
            await store.delete_all(confirm=True)
        gone = [
            s
            for s in ("a", "b")
            if not (directory / f"{(await _item_keks(db_url, s)).pop()}.key").exists()
        ]
        assert len(gone) == 1
        with pytest.raises(OwnerKeyError, match="destroyed"):
            await store.session(gone[0]).get_items()
        with pytest.raises(OwnerKeyError, match="destroyed"):
            await store.session(gone[0]).add_items([message("lost?")])
        await store.delete_all(confirm=True)  # run again: it ends
        assert await store.list_sessions() == []
    assert await _owner_keys(db_url) == {}


async def test_a_store_without_the_key_store_destroys_no_key_it_cannot_reach(
    db_url: str, key: bytes, tmp_path: Path
) -> None:
    """Opened without `owner_keys=`, a store erased a user whose key a key directory keeps:
    its receipt said the key was destroyed, and the file stayed, opening every backup."""
    directory = tmp_path / "owner-keys"
    await alice_and_bob(db_url, key, directory)
    async with SessionStore(db_url, key=key) as store:
        with pytest.raises(OwnerKeyError, match="keeps its owner keys outside it"):
            await store.session("anon-2").add_items([message("its own")])  # no key made here
        with pytest.raises(OwnerKeyError, match="kept outside the database"):
            await store.erase_user("alice")
        with pytest.raises(OwnerKeyError, match="kept outside the database"):
            await store.delete_all(confirm=True)
        assert await store.session_info("a") is not None
    async with SessionStore(db_url, key=key, owner_keys=KeyDirectory(directory)) as store:
        assert await store.session("a").get_items() == [message("alice's")]
        receipt = await store.erase_user("alice")
        assert receipt.owner_keys_destroyed == 1
    assert len(list(directory.glob("*.key"))) == 1  # bob's


def test_owner_keys_need_a_key_and_the_protocol(sqlite_url: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="needs a key"):
        SessionStore(sqlite_url, owner_keys=KeyDirectory(tmp_path))
    with pytest.raises(ConfigurationError, match="OwnerKeyStore"):
        SessionStore(sqlite_url, key=os.urandom(32), owner_keys=object())  # type: ignore[arg-type]


def test_an_owner_key_is_bound_to_its_owner() -> None:
    material, data_key = os.urandom(32), os.urandom(32)
    alice = OwnerKey("o" + "0" * 32, owner_of("alice", ""), material)
    wrapped = alice.wrap(data_key)
    assert OwnerKey(alice.kek_id, owner_of("alice", ""), material).unwrap(wrapped) == data_key
    with pytest.raises(DecryptionError):  # the same bytes, said to be bob's
        OwnerKey(alice.kek_id, owner_of("bob", ""), material).unwrap(wrapped)


async def test_an_erased_user_is_unreadable_in_a_sqlite_copy_taken_before(
    sqlite_url: str, key: bytes, tmp_path: Path
) -> None:
    """SQLite, owner keys in a key directory: a copy of the database file taken before the
    erasure holds the erased user's items and their wrapped keys, and no key that still
    exists opens one; the other user's all open."""
    directory = tmp_path / "keys"
    async with SessionStore(
        sqlite_url, create_tables=True, key=key, owner_keys=KeyDirectory(directory)
    ) as store:
        for user in ("alice", "bob"):
            await store.session(user, user_id=user).add_items(
                [message(f"{user} {i}") for i in range(20)]
            )
        await store.flush()
        copy = on_disk(sqlite_url)  # the file and its WAL, as a backup would copy them
        alice = [bytes(r[0]) for r in await raw_rows(sqlite_url, _KEYS_OF.format("alice"))]
        bob = [bytes(r[0]) for r in await raw_rows(sqlite_url, _KEYS_OF.format("bob"))]
        assert all(piece in copy for piece in alice)
        files = {path.stem: path.read_bytes() for path in directory.glob("*.key")}
        await store.erase_user("alice")
        await store.flush()
    existing = key_files(directory)
    assert len(files) == 2 and len(existing) == 1

    assert opened(existing, alice) == 0 and opened(existing, bob) == len(bob) == 20
    assert found_on_disk(sqlite_url, alice) == []  # and the live file holds none of them


def test_the_command_line_takes_the_owner_key_directory(sqlite_url: str, tmp_path: Path) -> None:
    directory = tmp_path / "keys"

    async def seed() -> None:
        async with SessionStore(
            sqlite_url, create_tables=True, key="pass", owner_keys=KeyDirectory(directory)
        ) as store:
            await store.session("a", user_id="alice").add_items([message("a")])
            await store.session("b", user_id="bob").add_items([message("b")])

    asyncio.run(seed())
    env = {"AGENTS_SQLALCHEMY_KEY": "pass"}
    shown = cli(
        "sessions", "show", "b", "--url", sqlite_url, "--owner-keys", str(directory), env=env
    )
    assert shown.exit_code == 0, shown.output
    refused = cli("sessions", "show", "b", "--url", sqlite_url, env=env)  # the keys are elsewhere
    assert refused.exit_code != 0 and "owner_keys" in refused.output
    erased = cli(
        "users",
        "erase",
        "alice",
        "--yes",
        "--url",
        sqlite_url,
        "--owner-keys",
        str(directory),
        env=env,
    )
    assert erased.exit_code == 0, erased.output
    receipt = json.loads(erased.stdout)
    assert receipt["owner_keys_destroyed"] == 1 and receipt["owner_keys_kept"] == "KeyDirectory"
    assert len(list(directory.glob("*.key"))) == 1
    for given in ("", sqlite_url):  # an unset variable; a file (was a traceback each)
        bad = cli("sessions", "show", "b", "--url", sqlite_url, "--owner-keys", given, env=env)
        assert bad.exit_code == 2 and "Invalid value for '--owner-keys'" in bad.output, bad.output


class Interrupted(Exception):
    pass


async def alice_said(url: str, key: bytes) -> None:
    """A store made under `key` holding alice's session "a", one item: "alice said"."""
    async with SessionStore(url, create_tables=True, key=key) as store:
        await store.session("a", user_id="alice").add_items([message("alice said")])


def stop_on(monkeypatch: pytest.MonkeyPatch, cls: Any, name: str, after: int = 0) -> None:
    """Make `cls.name` raise `Interrupted` (a process that dies there) after `after` calls."""
    real, calls = getattr(cls, name), []

    def stopping(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) > after:
            raise Interrupted
        return real(*args, **kwargs)

    monkeypatch.setattr(cls, name, stopping)


def pause_on(
    monkeypatch: pytest.MonkeyPatch, cls: Any, name: str
) -> tuple[asyncio.Event, asyncio.Event]:
    """Make the coroutine method `cls.name` stop where it is called (the first event is set
    then) until the second event is set."""
    reached, go_on = asyncio.Event(), asyncio.Event()
    real = getattr(cls, name)

    async def paused(*args: Any, **kwargs: Any) -> Any:
        reached.set()
        await go_on.wait()
        return await real(*args, **kwargs)

    monkeypatch.setattr(cls, name, paused)
    return reached, go_on


class Forgetful(KeyDirectory):
    """A key directory that has none of the keys (another region's KMS, say)."""

    def fetch(self, key_id: str, owner: str, kept: bytes | None) -> bytes | None:
        return None


async def _refused_then_finished(url: str, key: bytes, directory: Path) -> None:
    """A stopped rotation resumed with a key store that has none of its old keys refuses,
    changing nothing, while anything still needs them; resumed with its own, it ends."""
    before = await _owner_keys(url)
    async with SessionStore(url, key=key, owner_keys=Forgetful(directory)) as store:
        with pytest.raises(KeyProviderError, match="items or sessions' states still need it"):
            await store.rotate_owner_keys(batch_size=2)
    assert await _owner_keys(url) == before
    async with SessionStore(url, key=key, owner_keys=KeyDirectory(directory)) as store:
        await store.rotate_owner_keys(batch_size=2)


async def test_a_rotation_resumed_where_its_keys_are_not_keeps_them(
    db_url: str, key: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resumed with a key store that gave nothing for the old keys (the wrong region), a
    rotation took them for destroyed and deleted their rows: the items they still wrapped
    never opened again, the right store back or not."""
    directory = tmp_path / "keys"
    async with SessionStore(
        db_url, create_tables=True, key=key, owner_keys=KeyDirectory(directory)
    ) as store:
        await store.session("a", user_id="alice").add_items(
            [message(f"alice {i}") for i in range(6)]
        )
    stop_on(monkeypatch, keys_module, "rewrap_many", after=1)
    async with SessionStore(db_url, key=key, owner_keys=KeyDirectory(directory)) as store:
        with pytest.raises(Interrupted):
            await store.rotate_owner_keys(batch_size=2)
    monkeypatch.undo()
    await _refused_then_finished(db_url, key, directory)
    async with SessionStore(db_url, key=key, owner_keys=KeyDirectory(directory)) as store:
        assert await store.session("a").get_items() == [message(f"alice {i}") for i in range(6)]


async def test_a_rotation_resumed_where_its_keys_are_not_keeps_those_states_need(
    db_url: str, key: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same, stopped after every item was re-wrapped: only the sessions' sealed states
    still need the old keys, found a page of sessions at a time."""
    directory = tmp_path / "keys"
    async with SessionStore(
        db_url, create_tables=True, key=key, owner_keys=KeyDirectory(directory)
    ) as store:
        await store.session("n").set_state("k", "n")  # a page without alice's states
        for name in ("a", "b"):
            await store.session(name, user_id="alice").add_items([message(name)])
            await store.session(name).set_state("k", name)
    stop_on(monkeypatch, KeyringRows, "rewrap_states")
    async with SessionStore(db_url, key=key, owner_keys=KeyDirectory(directory)) as store:
        with pytest.raises(Interrupted):
            await store.rotate_owner_keys(batch_size=2)
    monkeypatch.undo()
    paged = OwnerKeyRows.sealed_states
    monkeypatch.setattr(OwnerKeyRows, "sealed_states", lambda self, batch=1: paged(self, 1))
    await _refused_then_finished(db_url, key, directory)
    async with SessionStore(db_url, key=key, owner_keys=KeyDirectory(directory)) as store:
        for name in ("a", "b", "n"):
            assert await store.session(name).get_state("k") == name


async def test_rotating_the_owner_keys_resumes_and_destroys_the_old_ones(
    db_url: str, key: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "keys"
    async with SessionStore(
        db_url, create_tables=True, key=key, owner_keys=KeyDirectory(directory)
    ) as store:
        for user in ("alice", "bob"):
            await store.session(user, user_id=user).add_items(
                [message(f"{user} {i}") for i in range(6)]
            )
            await store.session(user).set_state("k", user)
    before = await _owner_keys(db_url)
    files_before = {path.stem for path in directory.glob("*.key")}
    assert files_before == set(before)

    real, calls = keys_module.rewrap_many, []

    def failing(wrapped: list[bytes], old: object, new: object) -> list[bytes]:
        if calls:
            raise Interrupted
        calls.append(len(wrapped))
        return real(wrapped, old, new)  # type: ignore[arg-type]

    monkeypatch.setattr(keys_module, "rewrap_many", failing)
    async with SessionStore(db_url, key=key, owner_keys=KeyDirectory(directory)) as store:
        with pytest.raises(Interrupted):
            await store.rotate_owner_keys(batch_size=4)
    monkeypatch.undo()
    async with SessionStore(db_url, key=key, owner_keys=KeyDirectory(directory)) as store:
        assert await store.rotate_owner_keys(batch_size=4) == 12 - calls[0]
        for user in ("alice", "bob"):
            assert await store.session(user).get_items() == [
                message(f"{user} {i}") for i in range(6)
            ]
            assert await store.session(user).get_state("k") == user
    after = await _owner_keys(db_url)
    assert sorted(after.values()) == sorted(before.values())  # one fresh key per owner
    assert not set(after) & set(before)
    assert {path.stem for path in directory.glob("*.key")} == set(after)  # old files deleted
    assert {kek for user in ("alice", "bob") for kek in await _item_keks(db_url, user)} == set(
        after
    )


async def test_writes_racing_an_owner_key_rotation_all_read_back(db_url: str, key: bytes) -> None:
    """A store appends to a user's sessions while another rotates the owner keys: every
    append that returned went in under a key the rotation re-wrapped (the write holds the
    key's row against its retirement) or under the new one, and reads back after the old
    keys are destroyed."""
    async with (
        SessionStore(db_url, create_tables=True, key=key, search=False) as writer,
        SessionStore(db_url, key=key, search=False) as rotating,
    ):
        sessions = [writer.session(f"race{n}", user_id="alice") for n in range(3)]
        written: dict[str, list[dict[str, object]]] = {}
        for session in sessions:
            written[session.session_id] = [message("before")]
            await session.add_items([message("before")])
        rotated = asyncio.Event()

        async def write() -> None:
            n = after = 0
            while after < 5:  # until the rotation is over, and five more
                session = sessions[n % len(sessions)]
                item = message(f"during {n}")
                n, after = n + 1, after + rotated.is_set()
                await session.add_items([item])
                written[session.session_id].append(item)
                await asyncio.sleep(0)

        async def rotate() -> None:
            await rotating.rotate_owner_keys(batch_size=2)
            rotated.set()

        await asyncio.gather(write(), rotate())
    keys = await _owner_keys(db_url)
    assert list(keys.values()) == [owner_of("alice", "")]  # the old key is gone
    async with SessionStore(db_url, key=key) as reopened:
        for session_id, items in written.items():
            assert len(items) > 1
            assert await reopened.session(session_id).get_items() == items
            assert await _item_keks(db_url, session_id) == set(keys)


@pytest.mark.dialects("postgresql", "mariadb")
async def test_a_state_written_while_a_rotation_re_wraps_it_is_kept(
    db_url: str, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another store sets a session's state between the rotation's read of it and its
    re-wrap: the new state stays (the rotation wrote the old one back, re-wrapped, and the
    write was lost though it had returned)."""
    async with SessionStore(db_url, create_tables=True, key=key, search=False) as store:
        await store.session("s", user_id="alice").set_state("k", "old")
        rewrap_states = KeyringRows.rewrap_states
        written = []

        def write_meanwhile() -> None:
            async def write() -> None:
                async with SessionStore(db_url, key=key, search=False) as writer:
                    await writer.session("s").set_state("k", "new")

            asyncio.run(write())
            written.append(True)

        async def rewrapping(self: KeyringRows, rewrap: Any, *args: Any) -> Any:
            def meanwhile(blob: bytes) -> bytes:
                if not written:  # inside the rotation's transaction, after its read
                    thread = threading.Thread(target=write_meanwhile)
                    thread.start()
                    thread.join(timeout=5)
                return cast(bytes, rewrap(blob))

            return await rewrap_states(self, meanwhile, *args)

        monkeypatch.setattr(KeyringRows, "rewrap_states", rewrapping)
        await store.rotate_owner_keys()
        monkeypatch.undo()
        assert written
    async with SessionStore(db_url, key=key, search=False) as cold:
        assert await cold.session("s").get_state("k") == "new"


@pytest.mark.dialects("postgresql", "mariadb")
async def test_a_sealed_write_holds_its_owner_key_against_retirement_until_it_commits(
    db_url: str, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a sealed write has put its items in, the owner key they are sealed under cannot
    be retired (by a rotation, or an erasure) before the write commits: the retirement
    waits, and then finds the items to re-wrap."""
    async with SessionStore(db_url, create_tables=True, key=key, search=False) as store:
        await store.session("held", user_id="alice").add_items([message("first")])
    [key_id] = await _owner_keys(db_url)
    inserted, tried = threading.Event(), threading.Event()
    outcome: list[str] = []
    insert_items = Schema.insert_items

    def holding(self: Schema, *args: object, **kwargs: object) -> None:
        insert_items(self, *args, **kwargs)  # type: ignore[arg-type]
        inserted.set()
        tried.wait(timeout=10)  # the write's transaction stays open meanwhile

    wait = (
        "SET lock_timeout = '1s'"
        if db_url.startswith("postgresql")
        else "SET SESSION innodb_lock_wait_timeout = 1"
    )
    retire = f"UPDATE {OWNER_KEYS} SET retired_at = created_at WHERE key_id = '{key_id}'"

    def retire_meanwhile() -> None:
        async def attempt() -> None:
            engine = create_async_engine(db_url)
            try:
                async with engine.begin() as conn:
                    await conn.execute(text(wait))
                    await conn.execute(text(retire))
                outcome.append("retired")
            except DBAPIError as exc:
                outcome.append(f"waited: {exc.orig}")
            finally:
                await engine.dispose()

        inserted.wait(timeout=10)
        asyncio.run(attempt())
        tried.set()

    thread = threading.Thread(target=retire_meanwhile)
    thread.start()
    monkeypatch.setattr(Schema, "insert_items", holding)
    async with SessionStore(db_url, key=key, search=False) as writer:
        await writer.session("held").add_items([message("second")])
    thread.join()
    assert outcome and outcome[0].startswith("waited"), outcome
    monkeypatch.undo()
    async with SessionStore(db_url, key=key) as reader:
        assert await reader.session("held").get_items() == [message("first"), message("second")]


def test_the_command_line_rotates_the_owner_keys(sqlite_url: str, tmp_path: Path) -> None:
    directory = tmp_path / "keys"

    async def seed() -> None:
        async with SessionStore(
            sqlite_url, create_tables=True, key="pass", owner_keys=KeyDirectory(directory)
        ) as store:
            await store.session("a", user_id="alice").add_items([message("a")])

    asyncio.run(seed())
    before = {path.name for path in directory.glob("*.key")}
    env = {"AGENTS_SQLALCHEMY_KEY": "pass"}
    command = ["rotate-owner-keys", "--url", sqlite_url, "--owner-keys", str(directory)]
    # It asks first: backups made before it no longer open afterwards.
    refused = cli(*command, "--no-progress", env=env, input="n\n")
    assert refused.exit_code == 1 and "backups made before then" in refused.output
    assert {path.name for path in directory.glob("*.key")} == before
    done = cli(*command, "--no-progress", "--yes", env=env)
    assert done.exit_code == 0, done.output
    assert "Re-wrapped 1 data key under fresh owner keys" in done.output
    after = {path.name for path in directory.glob("*.key")}
    assert len(after) == 1 and not after & before


async def test_items_sealed_before_owner_keys_still_open_move_and_rotate(
    db_url: str, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database written before owner keys existed: its items' keys are wrapped by the
    store's key-encryption key. They read as before, a move re-wraps them under the new
    owner's key, and a rotation too."""

    async def no_owner_key(self: Owners, key: object) -> None:
        return None

    monkeypatch.setattr(Owners, "sealer", no_owner_key)  # writes as before owner keys
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        await store.session("old").add_items([message("one"), message("two")])
        await store.session("old").set_state("k", "v")
    monkeypatch.undo()
    [(kek_id,)] = await raw_rows(db_url, f"SELECT kek_id FROM {KEYRING}")
    assert await _item_keks(db_url, "old") == {kek_id}
    assert await _owner_keys(db_url) == {}
    async with SessionStore(db_url, key=key) as store:
        session = store.session("old")
        assert await session.get_items() == [message("one"), message("two")]
        await session.add_items([message("three")])  # new items: under an owner key
        assert len(await _item_keks(db_url, "old")) == 2
        await session.set_user_id("erin")
        assert set((await _owner_keys(db_url)).values()) == {owner_of("erin", "")}
        assert await _item_keks(db_url, "old") == set(await _owner_keys(db_url))
        assert await session.get_state("k") == "v"
        new_key = os.urandom(32)
        assert await store.rotate_key(new_key) == 3
    async with SessionStore(db_url, key=new_key) as store:
        assert len(await store.session("old").get_items()) == 3


_WRITES = {
    # The store appended to the session before: on PostgreSQL its next append is one
    # statement, which share-locks the owner key before the session's row.
    "append": lambda session: session.add_items([message("during")]),
    # A write that claims the session first (its state, sealed under the owner key).
    "set_state": lambda session: session.set_state("k", "during"),
}


@pytest.mark.dialects("postgresql", "mariadb")
@pytest.mark.parametrize("first", ["writer", "eraser"])
@pytest.mark.parametrize("write", sorted(_WRITES))
async def test_erasing_a_user_beside_a_waiting_write_is_no_deadlock(
    db_url: str, key: bytes, write: str, first: str
) -> None:
    """`erase_user` and a sealed write of the same user, both waiting for the session's
    row, take their locks in one order (on PostgreSQL the owner key's first; on MariaDB
    the row's through its `session_hash`): neither is a deadlock's victim, run again, and
    the result is the one of an order, whole."""
    exported = Exported()
    telemetry = exported.telemetry()
    async with SessionStore(
        db_url, create_tables=True, key=key, search=False, telemetry=telemetry
    ) as store:
        session = store.session("held", user_id="alice")
        await session.add_items([message("first")])
        engine = create_async_engine(db_url)
        try:
            async with engine.begin() as holder:  # holds the session's row meanwhile
                await holder.execute(
                    text(f"SELECT id FROM {SESSIONS} WHERE session_id = 'held' FOR UPDATE")
                )
                started = []
                for who in (first, "eraser" if first == "writer" else "writer"):
                    call = store.erase_user("alice") if who == "eraser" else _WRITES[write](session)
                    started.append(asyncio.ensure_future(call))
                    await until_waiting(db_url, len(started))
        finally:
            await engine.dispose()
        await asyncio.gather(*started)
        assert exported.total("agents_sqlalchemy.retries") == 0
        kept = await store.session("held").get_items()
        state = await store.session("held").get_state("k")
    # Both waited for the row: the database may let either go first (MariaDB does not
    # always let the first), and the outcome is the one of that order, whole.
    erased_last: tuple[object, ...] = ([], None, [])
    written_last = (
        [message("during")] if write == "append" else [],
        "during" if write == "set_state" else None,
        [owner_of("alice", "")],
    )
    owners = list((await _owner_keys(db_url)).values())
    assert (kept, state, owners) in (erased_last, written_last)
    if db_url.startswith("postgresql"):  # which grants a row's lock in the order asked
        # An erasure destroys the user's keys before it waits for the sessions: a write
        # waiting after it has made the user a new key, whose lock the erasure waits for,
        # so the write goes first, and is erased with the rest, whichever came first.
        assert (kept, state, owners) == erased_last


@pytest.mark.dialects("postgresql")
async def test_a_session_written_while_its_user_is_erased_keeps_its_key(
    db_url: str, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that makes the user's first key and session while `erase_user` is between
    its sessions and their keys commits a session the erasure never saw: that session and
    its key stay, readable (the erasure destroyed a key made after it looked, and left the
    session's items unreadable: a write reported saved, and lost)."""
    async with SessionStore(db_url, create_tables=True, key=key, search=False) as store:
        await store.session("old", user_id="alice").add_items([message("old")])
    reached, written = threading.Event(), threading.Event()
    drop_keys = Sessions._drop_keys

    def waiting(self: Sessions, *args: Any, **kwargs: Any) -> list[Any]:
        reached.set()
        written.wait(timeout=10)  # the erasure's transaction stays open meanwhile
        return drop_keys(self, *args, **kwargs)

    def write_meanwhile() -> None:
        async def write() -> None:
            async with SessionStore(db_url, key=key, search=False) as writer:
                await writer.session("new", user_id="alice").add_items([message("new")])

        reached.wait(timeout=10)
        asyncio.run(write())
        written.set()

    async with SessionStore(db_url, key=key, search=False) as eraser:
        await eraser.erase_user("alice")  # alice has no key now, nor a session
        thread = threading.Thread(target=write_meanwhile)
        thread.start()
        monkeypatch.setattr(Sessions, "_drop_keys", waiting)
        receipt = await eraser.erase_user("alice")
        thread.join()
    monkeypatch.undo()
    assert receipt.sessions == 0
    assert list((await _owner_keys(db_url)).values()) == [owner_of("alice", "")]
    async with SessionStore(db_url, key=key) as reader:
        assert await reader.session("new").get_items() == [message("new")]


async def test_a_read_during_an_erasure_waits_for_it_and_finds_nothing(
    db_url: str, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An erasure destroys the user's keys, then deletes their rows: a read between the two
    met rows naming a destroyed key twice and said they "were altered" (tampering)."""
    async with SessionStore(db_url, create_tables=True, key=key, search=False) as store:
        await store.session("s", user_id="alice").add_items([message("a"), message("b")])
    keys_gone, go_on = pause_on(monkeypatch, Sessions, "delete_sessions")
    async with (
        SessionStore(db_url, key=key, search=False) as eraser,
        SessionStore(db_url, key=key, search=False) as reader,
    ):
        erasure = asyncio.create_task(eraser.erase_user("alice"))
        await asyncio.wait_for(keys_gone.wait(), 10)
        read = asyncio.create_task(reader.session("s", user_id="alice").get_items())
        await asyncio.sleep(0.15)
        go_on.set()
        assert (await erasure).sessions == 1
        assert await read == []


@pytest.mark.dialects("postgresql")
async def test_a_session_made_while_its_deletion_locks_keys_is_no_deadlock(
    db_url: str, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session without a user committed after its deletion locked the owner keys it
    would delete, and before it locked the sessions; then a write of another store
    share-locks that session's key and waits for its row. The deletion starts its batch
    again with that key locked first: neither is a deadlock's victim run again (the
    deletion deleted the key after the row, and waited for the write that waited for it),
    the session and its key are gone, and the write starts the session anew."""
    async with SessionStore(db_url, create_tables=True, key=key, search=False) as store:
        assert await store.session("s").get_items() == []
    owner = owner_of(None, SessionKey.of("s").hash)
    looked, made, dropping, waiting = (threading.Event() for _ in range(4))
    exported = Exported()
    lock_keys_first, drop_keys = Sessions._lock_keys_first, Sessions._drop_keys

    def lock_then_wait(self: Sessions, *args: Any, **kwargs: Any) -> list[str]:
        locked = lock_keys_first(self, *args, **kwargs)
        if not looked.is_set():  # the first try: the session is made meanwhile
            looked.set()
            made.wait(timeout=10)
        return locked

    def wait_then_drop(self: Sessions, *args: Any, **kwargs: Any) -> list[Any]:
        dropping.set()
        waiting.wait(timeout=10)  # the deletion's transaction stays open meanwhile
        return drop_keys(self, *args, **kwargs)

    def write_meanwhile() -> None:
        async def write() -> None:
            telemetry = exported.telemetry()
            async with SessionStore(db_url, key=key, search=False, telemetry=telemetry) as w:
                looked.wait(timeout=10)
                await w.session("s").add_items([message("made meanwhile")])
                made.set()
                dropping.wait(timeout=10)
                later = asyncio.ensure_future(w.session("s").add_items([message("later")]))
                await until_waiting(db_url, 1)
                waiting.set()
                await later

        asyncio.run(write())

    async with SessionStore(
        db_url, key=key, search=False, telemetry=exported.telemetry()
    ) as deleter:
        thread = threading.Thread(target=write_meanwhile)
        thread.start()
        monkeypatch.setattr(Sessions, "_lock_keys_first", lock_then_wait)
        monkeypatch.setattr(Sessions, "_drop_keys", wait_then_drop)
        removed = await deleter.delete_session("s")
        thread.join()
    monkeypatch.undo()
    assert exported.total("agents_sqlalchemy.retries") == 0
    assert (removed.sessions, removed.items) == (1, 1)
    async with SessionStore(db_url, key=key) as reader:
        assert await reader.session("s").get_items() == [message("later")]
    [(made_anew,)] = await raw_rows(db_url, f"SELECT kek_id FROM {ITEMS}")
    assert await _owner_keys(db_url) == {made_anew: owner}


@pytest.mark.parametrize("which", ["rotate_key", "rotate_owner_keys"])
async def test_a_rotation_stopped_while_it_makes_the_new_owner_keys_resumes_whole(
    db_url: str, which: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped after making some owners' new keys, before retiring the old ones: resumed,
    `rotate_key` took no owner key for an old one (only retired ones), re-wrapped nothing
    and deleted the old keyring row: every item stood under owner keys kept by a key that
    no longer existed, lost. `rotate_owner_keys` made new keys for the new ones too."""
    old, new = os.urandom(32), os.urandom(32)
    users = ("alice", "bob", "carol")
    async with SessionStore(db_url, create_tables=True, key=old) as store:
        for user in users:
            await store.session(user, user_id=user).add_items([message(f"{user} said")])
    before = await _owner_keys(db_url)
    real, made = Owners._make, []

    async def stopping(self: Owners, *args: Any, **kwargs: Any) -> Any:
        if made:
            raise Interrupted  # the process dies after one owner's new key
        made.append(await real(self, *args, **kwargs))
        return made[-1]

    monkeypatch.setattr(Owners, "_make", stopping)
    async with SessionStore(db_url, key=old) as store:
        with pytest.raises(Interrupted):
            await (store.rotate_key(new) if which == "rotate_key" else store.rotate_owner_keys())
    monkeypatch.undo()
    async with SessionStore(db_url, key=old) as store:  # resumed as the docs say
        await (store.rotate_key(new) if which == "rotate_key" else store.rotate_owner_keys())
    final = new if which == "rotate_key" else old
    async with SessionStore(db_url, key=final) as store:
        for user in users:
            assert await store.session(user).get_items() == [message(f"{user} said")]
    after = await _owner_keys(db_url)
    assert sorted(after.values()) == sorted(before.values())  # one key per owner, all new
    assert not set(after) & set(before)
    keks = {kek for user in users for kek in await _item_keks(db_url, user)}
    assert keks == set(after)
    if which == "rotate_key":
        with pytest.raises(WrongKeyError):
            async with SessionStore(db_url, key=old) as store:
                await store.session("alice").get_items()


async def test_a_rotation_stopped_while_it_destroys_the_old_keys_finishes(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped after its walk, while it destroyed the old owner keys: the next rotation of
    the owner keys failed for good (a retired key it could not open: its file gone, or kept
    under a store key the keyring no longer holds), and the old keys it left stayed."""
    old, new = os.urandom(32), os.urandom(32)
    users = ("alice", "bob", "carol")
    directory = tmp_path / "keys"

    async def fill(url: str, **options: Any) -> None:
        async with SessionStore(url, create_tables=True, key=old, **options) as store:
            for user in users:
                await store.session(user, user_id=user).add_items([message(f"{user} said")])

    # Kept in the database: rotate_key stopped once its old keyring row is deleted.
    await fill(db_url)
    stop_on(monkeypatch, Owners, "destroy_keys")
    async with SessionStore(db_url, key=old) as store:
        with pytest.raises(Interrupted):
            await store.rotate_key(new)
    monkeypatch.undo()
    async with SessionStore(db_url, key=new) as store:
        assert await store.rotate_owner_keys() == len(users)
        for user in users:
            assert await store.session(user).get_items() == [message(f"{user} said")]
    assert len(await _owner_keys(db_url)) == len(users)  # the old ones gone, not left
    # Or run again as the docs say, with the same two keys: it said "wrong key".
    stop_on(monkeypatch, Owners, "destroy_keys")
    async with SessionStore(db_url, key=new) as store:
        with pytest.raises(Interrupted):
            await store.rotate_key(old)
    monkeypatch.undo()
    assert len(await _owner_keys(db_url)) == 2 * len(users)
    async with SessionStore(db_url, key=new) as store:
        assert await store.rotate_key(old) == len(users)
        for user in users:
            assert await store.session(user).get_items() == [message(f"{user} said")]
    async with SessionStore(db_url, key=new) as store:
        assert await store.rotate_key(old) == 0  # once more: nothing is left to do
    assert len(await _owner_keys(db_url)) == len(users)
    with pytest.raises(WrongKeyError):
        async with SessionStore(db_url, key=new) as store:
            await store.session("alice").get_items()

    # In a key directory: rotate_owner_keys stopped after deleting one old key's file.
    if not db_url.startswith("sqlite"):
        return
    other = f"sqlite+aiosqlite:///{tmp_path / 'dir.db'}"
    await fill(other, owner_keys=KeyDirectory(directory))
    stop_on(monkeypatch, KeyDirectory, "destroy", 1)
    async with SessionStore(other, key=old, owner_keys=KeyDirectory(directory)) as store:
        with pytest.raises(Exception, match="Interrupted"):
            await store.rotate_owner_keys()
    monkeypatch.undo()
    async with SessionStore(other, key=old, owner_keys=KeyDirectory(directory)) as store:
        await store.rotate_owner_keys()
        for user in users:
            assert await store.session(user).get_items() == [message(f"{user} said")]
    live = await _owner_keys(other)
    assert len(live) == len(users)
    assert {path.stem for path in directory.glob("*.key")} == set(live)


async def test_a_rotation_meeting_an_erasure_part_way_says_so_and_changes_nothing(
    tmp_path: Path,
) -> None:
    """An owner key destroyed by an erasure whose rows are not deleted yet (it runs now, or
    stopped part-way): the rotation said "the items it wrapped are erased", as if it had
    lost them. It names the erasure, changes nothing, and runs once the erasure has ended."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'agent.db'}"
    directory = KeyDirectory(tmp_path / "keys")
    async with SessionStore(url, create_tables=True, key="k", owner_keys=directory) as store:
        for user in ("alice", "bob"):
            await store.session(user, user_id=user).add_items([message(f"{user} said")])
    before = await _owner_keys(url)
    alice = owner_of("alice", "")
    [alice_key] = [key_id for key_id, owner in before.items() if owner == alice]
    directory.destroy(alice_key, alice, None)  # the erasure's first step, and no more
    async with SessionStore(url, key="k", owner_keys=directory) as store:
        with pytest.raises(OwnerKeyError, match="destroyed by an erasure that runs now"):
            await store.rotate_owner_keys()
        assert await _owner_keys(url) == before
        await store.erase_user("alice")  # run again: it ends
        assert await store.rotate_owner_keys() == 1
        assert await store.session("bob").get_items() == [message("bob said")]


@pytest.mark.parametrize("which", ["rotate_key", "rotate_owner_keys"])
async def test_the_rotating_store_reads_and_writes_while_it_rotates(
    db_url: str, which: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its own writes met the owner keys the rotation had made, kept under the new key, and
    failed with `WrongKeyError` advising to open the store again with the new key."""
    old, new = os.urandom(32), os.urandom(32)
    walking, go_on = pause_on(monkeypatch, KeyringRows, "rewrap_keys")
    async with SessionStore(db_url, create_tables=True, key=old) as store:
        alice = store.session("a", user_id="alice")
        await alice.add_items([message("before")])
        rotation = asyncio.ensure_future(
            store.rotate_key(new) if which == "rotate_key" else store.rotate_owner_keys()
        )
        await walking.wait()
        await alice.add_items([message("during")])
        await alice.set_state("step", 2)
        await store.session("b", user_id="bob").add_items([message("bob, during")])
        assert await alice.get_items() == [message("before"), message("during")]
        go_on.set()
        await rotation
        await alice.add_items([message("after")])
    async with SessionStore(db_url, key=new if which == "rotate_key" else old) as store:
        alice = store.session("a")
        assert await alice.get_items() == [message(m) for m in ("before", "during", "after")]
        assert await alice.get_state("step") == 2
        assert await store.session("b").get_items() == [message("bob, during")]


async def test_an_erasure_refuses_a_key_given_to_another_owner_behind_its_back(
    db_url: str, tmp_path: Path
) -> None:
    """The owner keys table altered so that alice's key reads as someone else's: her
    erasure deleted her rows, destroyed no key and returned a receipt, so a backup still
    opened her items. It refuses, and changes nothing."""
    directory = KeyDirectory(tmp_path / "keys")
    async with SessionStore(db_url, create_tables=True, key="k", owner_keys=directory) as store:
        await store.session("a", user_id="alice").add_items([message("alice said")])
        await store.session("a2", user_id="alice").add_items([message("again")])
        await store.session("b", user_id="bob").add_items([message("bob said")])
    keys = await _owner_keys(db_url)
    [alice_key] = [key for key, owner in keys.items() if owner == owner_of("alice", "")]
    change = f"UPDATE {OWNER_KEYS} SET owner = :other WHERE key_id = :key"
    await execute(db_url, change, {"other": owner_of("mallory", ""), "key": alice_key})
    async with SessionStore(db_url, key="k", owner_keys=directory) as store:
        with pytest.raises(OwnerKeyError, match=f"owner key {alice_key}.*altered"):
            await store.erase_user("alice")
        assert {info.session_id for info in await store.list_sessions()} == {"a", "a2", "b"}
        assert (tmp_path / "keys" / f"{alice_key}.key").exists()
        assert (await store.erase_user("bob")).owner_keys_destroyed == 1  # others go on


async def test_a_rotation_stopped_after_its_store_wrote_for_a_new_owner_resumes(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rotating store made a new owner's key under the new store key after its rotation
    stopped; resumed, the rotation took that key for an old one, could not open it, and
    nothing opened the database any more."""
    old, new = os.urandom(32), os.urandom(32)
    await alice_said(db_url, old)
    stop_on(monkeypatch, KeyringRows, "rewrap_keys")
    async with SessionStore(db_url, key=old) as store:
        with pytest.raises(Interrupted):
            await store.rotate_key(new)
        await store.session("c", user_id="carol").add_items([message("carol, meanwhile")])
        await store.session("n").add_items([message("nobody's, meanwhile")])
    monkeypatch.undo()
    async with SessionStore(db_url, key=old) as store:  # resumed as the docs say
        await store.rotate_key(new)
    async with SessionStore(db_url, key=new) as store:
        for session_id, text in (("a", "alice said"), ("c", "carol, meanwhile")):
            assert await store.session(session_id).get_items() == [message(text)]
        assert await store.session("n").get_items() == [message("nobody's, meanwhile")]


async def test_a_rotation_checks_a_new_owner_s_item_written_as_it_starts(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new owner's first item, written between the rotation listing the owner keys and
    its check of the items, named a key it did not know: the rotation said the item "was
    altered" and told to restore or delete it."""
    old, new = os.urandom(32), os.urandom(32)
    real = KeyringRows.last_item_id
    async with SessionStore(db_url, create_tables=True, key=old) as store:
        await store.session("a", user_id="alice").add_items([message("alice said")])

        async def meanwhile(self: KeyringRows) -> Any:
            if not await store.session_info("d"):
                await store.session("d", user_id="dora").add_items([message("dora, meanwhile")])
            return await real(self)

        monkeypatch.setattr(KeyringRows, "last_item_id", meanwhile)
        await store.rotate_key(new)
        monkeypatch.undo()
    async with SessionStore(db_url, key=new) as store:
        assert await store.session("d").get_items() == [message("dora, meanwhile")]
        assert await store.session("a").get_items() == [message("alice said")]


async def test_a_rotation_that_could_not_end_is_refused_before_it_starts(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`rotate_key` after a `rotate_owner_keys` stopped before destroying the old keys took
    that rotation's new keys for its own, could not open them, and nothing opened the
    database any more; `rotate_key` to the store's own key did the same once stopped."""
    old, new = os.urandom(32), os.urandom(32)
    await alice_said(db_url, old)
    stop_on(monkeypatch, Owners, "destroy_keys")
    async with SessionStore(db_url, key=old) as store:
        with pytest.raises(Interrupted):
            await store.rotate_owner_keys()
    monkeypatch.undo()
    keyring = await raw_rows(db_url, f"SELECT kek_id, retired_at FROM {KEYRING}")
    async with SessionStore(db_url, key=old) as store:
        with pytest.raises(ConfigurationError, match="rotation of the owner keys is unfinished"):
            await store.rotate_key(new)
        assert await raw_rows(db_url, f"SELECT kek_id, retired_at FROM {KEYRING}") == keyring
        await store.rotate_owner_keys()  # finished, as the message says
        with pytest.raises(ConfigurationError, match="the store's key already"):
            await store.rotate_key(old)
        await store.rotate_key(new)
    async with SessionStore(db_url, key=new) as store:
        assert await store.session("a").get_items() == [message("alice said")]


@pytest.mark.parametrize("first_outside", [True, False])
async def test_a_store_keeping_owner_keys_otherwise_than_the_database_makes_none(
    db_url: str, key: bytes, tmp_path: Path, first_outside: bool
) -> None:
    """Two stores on one database, one with a `KeyDirectory` and one without: the other
    one made keys of its own kind for new owners, whom the first then could neither read,
    erase nor rotate (nor search past), and a key in the database outlived the erasure a
    directory promises. It refuses, naming both ways; and a store given a directory names
    a key kept in the database as such (it said the key had no file in the directory)."""
    directory = tmp_path / "keys"

    def opened_store(outside: bool, **options: Any) -> SessionStore:
        keeper = KeyDirectory(directory) if outside else None
        return SessionStore(db_url, key=key, owner_keys=keeper, **options)

    async with opened_store(first_outside, create_tables=True) as store:
        await store.session("a1", user_id="alice").add_items([message("first")])
    before = await raw_rows(db_url, f"SELECT key_id, kek_id FROM {OWNER_KEYS}")
    files = sorted(directory.glob("*.key")) if directory.exists() else []
    ways = ["in it (stores opened without owner_keys=)", "outside it (in an owner_keys= store"]
    async with opened_store(not first_outside) as store:
        for user_id in ("bob", None):  # a user, and a session that is its own owner
            with pytest.raises(OwnerKeyError) as refused:
                await store.session("b1", user_id=user_id).add_items([message("never")])
            database, this_store = ways[first_outside], ways[not first_outside]
            assert f"keeps its owner keys {database}" in str(refused.value)
            assert f"and this store {this_store}" in str(refused.value)
        where = "kept outside the database" if first_outside else "kept in the database, under"
        with pytest.raises(OwnerKeyError, match=where):
            await store.session("a1").get_items()
    assert await raw_rows(db_url, f"SELECT key_id, kek_id FROM {OWNER_KEYS}") == before
    assert await raw_rows(db_url, f"SELECT session_id FROM {SESSIONS}") == [("a1",)]
    assert (sorted(directory.glob("*.key")) if directory.exists() else []) == files


class Flaky(KeyDirectory):
    """A key directory every other fetch of which fails, as a KMS that drops requests."""

    fetches = 0

    def fetch(self, key_id: str, owner: str, kept: bytes | None) -> bytes | None:
        self.fetches += 1
        if self.fetches % 2:
            raise ConnectionResetError("the key store dropped the request")
        return super().fetch(key_id, owner, kept)


class Down(KeyDirectory):
    """A key directory whose every fetch fails."""

    fetches = 0

    def fetch(self, key_id: str, owner: str, kept: bytes | None) -> bytes | None:
        self.fetches += 1
        raise ConnectionResetError("the key store is down")


async def test_a_fetch_of_an_owner_key_is_tried_again_before_it_fails(
    sqlite_url: str, key: bytes, tmp_path: Path
) -> None:
    """One failed fetch failed the operation: a rotation, which fetches every owner's key,
    never ended with a KMS that failed now and then (each run fetched them all again).
    A fetch is tried twice more; a store that stays down still fails, after 3 fetches."""
    directory = tmp_path / "owner-keys"
    async with SessionStore(
        sqlite_url, create_tables=True, key=key, owner_keys=KeyDirectory(directory)
    ) as store:
        for n in range(8):
            await store.session(f"s{n}", user_id=f"user {n}").add_items([message(str(n))])
    flaky = Flaky(directory)
    async with SessionStore(sqlite_url, key=key, owner_keys=flaky) as store:
        assert await store.session("s3").get_items() == [message("3")]
        assert await store.rotate_owner_keys() == 8
        assert await store.session("s5").get_items() == [message("5")]
    assert flaky.fetches >= 16  # a failure at least per owner, each fetched again
    down = Down(directory)
    async with SessionStore(sqlite_url, key=key, owner_keys=down) as store:
        with pytest.raises(KeyProviderError, match="the key store is down"):
            await store.session("s1").get_items()
    assert down.fetches == 3


async def test_a_new_owner_key_whose_row_may_be_saved_is_kept(
    sqlite_url: str, key: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key whose row is refused goes from its key store; one whose row's write failed
    with its outcome unknown (a connection lost while committing) was destroyed too, and
    if the row had been saved, its owner could write nothing again."""
    real = OwnerKeyRows.add
    lost = [True]

    async def committed_then_lost(self: OwnerKeyRows, row: Any, **kwargs: Any) -> None:
        await real(self, row, **kwargs)
        if lost.pop():
            raise DatabaseError("the connection broke while committing: it may have been saved")

    monkeypatch.setattr(OwnerKeyRows, "add", committed_then_lost)
    directory = tmp_path / "keys"
    async with SessionStore(
        sqlite_url, create_tables=True, key=key, owner_keys=KeyDirectory(directory)
    ) as store:
        with pytest.raises(DatabaseError, match="may have been saved"):
            await store.session("a", user_id="alice").add_items([message("1")])
    async with SessionStore(sqlite_url, key=key, owner_keys=KeyDirectory(directory)) as store:
        await store.session("a", user_id="alice").add_items([message("2")])
        assert await store.session("a").get_items() == [message("2")]
    assert len(list(directory.glob("*.key"))) == 1
