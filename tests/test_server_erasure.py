"""What removals leave in a server's files, and the maintenance that makes it unreadable.

On PostgreSQL and MariaDB a delete does not reach the write-ahead log, the redo log, free
space in table files, or a backup taken before: the wrapped data keys of removed items lie
there, and the live key-encryption key opens them. `rotate_key` to a fresh key, the old one
then destroyed, is the maintenance the guide gives: every copy of a removed item's key is
then wrapped by a key that no longer exists. These tests start a server of their own, read
its files byte by byte, and decrypt what they find with every key there is.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from agents_sqlalchemy import KeyDirectory, SessionStore
from agents_sqlalchemy.crypto import KeyEncryptionKey, KeyringRecord, OwnerKey, Wrapper, open_kek
from agents_sqlalchemy.errors import WrongKeyError

from .support.items import message
from .support.server_disk import holding, key_files, opened, own_server
from .support.tables import ITEMS, KEYRING, OWNER_KEYS, SESSIONS

pytestmark = [pytest.mark.servers, pytest.mark.slow]

ITEMS_PER_SESSION = 20


async def _sql(url: str, statement: str) -> list[Any]:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            result = await conn.execute(text(statement))
            return list(result) if result.returns_rows else []
    finally:
        await engine.dispose()


async def _wrapped_keys(url: str, user_id: str) -> list[bytes]:
    rows = await _sql(
        url,
        f"SELECT i.wrapped_key FROM {ITEMS} i JOIN {SESSIONS} s ON s.id = i.session_pk "
        f"WHERE s.user_id = '{user_id}'",
    )
    return [bytes(row[0]) for row in rows]


async def _keks(url: str, key: bytes) -> list[KeyEncryptionKey]:
    """The key-encryption keys `key` opens from the keyring rows the database holds now."""
    rows = await _sql(url, f"SELECT * FROM {KEYRING}")
    keks = []
    for row in rows:
        mapping = dict(row._mapping)
        if isinstance(mapping["params"], str):  # MariaDB's JSON is text to a plain query
            mapping["params"] = json.loads(mapping["params"])
        try:
            keks.append(await open_kek(key, KeyringRecord.from_row(mapping)))
        except WrongKeyError:
            continue
    return keks


async def _existing_keys(url: str, key: bytes, directory: Path | None = None) -> list[Wrapper]:
    """Every key that exists now and that `key` reaches: the store's key-encryption keys,
    the owner keys the database keeps under them, and those of a key directory."""
    keks = await _keks(url, key)
    rows = await _sql(url, f"SELECT key_id, owner, kept, kek_id FROM {OWNER_KEYS}")
    return [*keks, *_owner_keys_of(rows, keks), *key_files(directory)]


def _owner_keys_of(rows: list[Any], keks: list[KeyEncryptionKey]) -> list[Wrapper]:
    """The owner keys of owner key rows (key_id, owner, kept, kek_id) that `keks` open."""
    found: list[Wrapper] = []
    for key_id, owner, kept, kek_id in rows:
        for kek in keks:
            if kept is not None and kek.kek_id == kek_id:
                found.append(OwnerKey(key_id, owner, kek.unwrap(bytes(kept))))
    return found


async def _checkpoint(dialect: str, url: str) -> None:
    """Write what the server holds in memory to its files, as time would."""
    if dialect == "postgresql":
        await _sql(url, "CHECKPOINT")
    else:  # the project's server writes its redo log to the file once a second
        await _sql(url, "FLUSH ENGINE LOGS")
        await asyncio.sleep(1.5)


@pytest.mark.parametrize("dialect", ["postgresql", "mariadb"])
async def test_removed_items_stay_in_server_files_until_the_key_is_rotated_and_destroyed(
    dialect: str,
) -> None:
    old_key, new_key = os.urandom(32), os.urandom(32)
    with own_server(dialect) as server:
        url = server.url
        async with SessionStore(url, create_tables=True, key=old_key, search=False) as store:
            for user in ("alice", "bob"):
                for n in range(2):
                    session = store.session(f"{user}-{n}", user_id=user)
                    await session.add_items(
                        [message(f"{user} {n} {i}") for i in range(ITEMS_PER_SESSION)]
                    )
            alice = await _wrapped_keys(url, "alice")
            bob = await _wrapped_keys(url, "bob")
            await _checkpoint(dialect, url)
            backup = server.files()  # a backup taken before the removals
            # What that backup holds of the owner keys: wrapped under the store's key.
            kept_before = await _sql(url, f"SELECT key_id, owner, kept, kek_id FROM {OWNER_KEYS}")
            assert all(holding(backup, [bytes(row[2])]) for row in kept_before)

            await store.delete_user("alice")
            popped = [await store.session("bob-0").pop_item() for _ in range(5)]
            assert all(item is not None for item in popped)
            survivors = await _wrapped_keys(url, "bob")
            removed = alice + [key for key in bob if key not in survivors]
            assert len(removed) == 2 * ITEMS_PER_SESSION + 5
            await _checkpoint(dialect, url)

            old_keks = await _keks(url, old_key)
            live_keys = await _existing_keys(url, old_key)
            from_backup = _owner_keys_of(kept_before, old_keks)
            before = holding(server.files(), removed)
            in_backup = holding(backup, removed)
            # The limit the guide states: the removed keys are still in the server's files
            # (the WAL or the redo log at least) and in the backup, and the live key opens
            # every one of them.
            assert before, "no removed key found in the server's files"
            assert len(in_backup) == len(removed)
            # The popped items' owner (bob) has a live key, which opens them; the deleted
            # user's key is destroyed, but the backup still holds it, wrapped under the
            # store's key: with the live store key it opens every removed item.
            assert opened(live_keys, list(before)) == 5
            assert opened(live_keys + from_backup, list(before)) == len(before)
            assert opened(live_keys + from_backup, list(in_backup)) == len(removed)

            rewrapped = await store.rotate_key(new_key)
            assert rewrapped == len(survivors)
        del old_key  # the old key is destroyed: nobody holds it any more
        await _checkpoint(dialect, url)

        after = holding(server.files(), removed)
        new_keks = await _keks(url, new_key)
        assert len(new_keks) == 1
        existing = await _existing_keys(url, new_key)
        assert _owner_keys_of(kept_before, new_keks) == []  # the backup's keys stay shut
        # What lies anywhere, the live server's files and the backup alike, opens with no
        # key that still exists (the owners' keys were replaced by fresh ones too).
        assert opened(existing, list(after)) == 0
        assert opened(existing, list(in_backup)) == 0
        # The backup's keyring row (the old key's) is there, and the new key does not open it.
        old_record = old_keks[0].record
        assert holding(backup, [old_record.verifier])
        with pytest.raises(WrongKeyError):
            await open_kek(new_key, old_record)
        # Every survivor still reads, under the new key.
        async with SessionStore(url, key=new_key, search=False) as store:
            assert len(await store.session("bob-0").get_items()) == ITEMS_PER_SESSION - 5
            assert len(await store.session("bob-1").get_items()) == ITEMS_PER_SESSION
            assert await store.session("alice-0").get_items() == []
        print(
            f"\n{dialect}: removed {len(removed)} keys; before rotation "
            f"{len(before)} in the server's files, {len(in_backup)} in the backup, all "
            "decryptable with the live store key (the erased user's through her owner key, "
            "which the backup holds); after rotation and destroying the old key "
            f"{len(after)} in the server's files, {len(in_backup)} in the backup, 0 decryptable"
        )


@pytest.mark.parametrize("dialect", ["postgresql", "mariadb"])
async def test_an_erased_user_is_unreadable_everywhere_with_owner_keys_outside(
    dialect: str, tmp_path: Path
) -> None:
    """The issue's measure: owner keys in a key directory; after `erase_user`, none of the
    erased user's items opens with any key that still exists, in the server's files (table
    files, WAL or redo log) or in a copy taken before, while the other user's all do."""
    key, directory = os.urandom(32), tmp_path / "owner-keys"
    with own_server(dialect) as server:
        url = server.url
        async with SessionStore(
            url, create_tables=True, key=key, search=False, owner_keys=KeyDirectory(directory)
        ) as store:
            for user in ("alice", "bob"):
                for n in range(2):
                    await store.session(f"{user}-{n}", user_id=user).add_items(
                        [message(f"{user} {n} {i}") for i in range(ITEMS_PER_SESSION)]
                    )
            alice = await _wrapped_keys(url, "alice")
            bob = await _wrapped_keys(url, "bob")
            await _checkpoint(dialect, url)
            backup = server.files()  # a backup taken before the erasure
            before = await _existing_keys(url, key, directory)
            assert opened(before, alice) == len(alice) == 2 * ITEMS_PER_SESSION

            receipt = await store.erase_user("alice")
            assert receipt.owner_keys_destroyed == 1 and receipt.owner_keys_kept == "KeyDirectory"
            await _checkpoint(dialect, url)
            left = holding(server.files(), alice)
            in_backup = holding(backup, alice)
            assert left and len(in_backup) == len(alice)  # the bytes are still there
            existing = await _existing_keys(url, key, directory)
            assert opened(existing, list(left)) == 0
            assert opened(existing, list(in_backup)) == 0
            assert opened(existing, bob) == len(bob)  # bob's key is there, and opens his
            assert len(await store.session("bob-1").get_items()) == ITEMS_PER_SESSION

            # Items popped from bob's session stay openable with his key, until the owner
            # keys are rotated (the store's key stays).
            for _ in range(5):
                await store.session("bob-0").pop_item()
            survivors = await _wrapped_keys(url, "bob")
            popped = [one for one in bob if one not in survivors]
            await _checkpoint(dialect, url)
            assert opened(await _existing_keys(url, key, directory), popped) == 5
            assert await store.rotate_owner_keys() == len(survivors)
            await _checkpoint(dialect, url)
            existing = await _existing_keys(url, key, directory)
            found = holding(server.files(), popped)
            assert found and opened(existing, list(found)) == 0
            assert opened(existing, popped) == 0
            rewrapped = await _wrapped_keys(url, "bob")
            assert opened(existing, rewrapped) == len(survivors) == 2 * ITEMS_PER_SESSION - 5
            assert len(await store.session("bob-0").get_items()) == ITEMS_PER_SESSION - 5
        print(
            f"\n{dialect}, owner keys in a directory: alice's {len(alice)} item keys; after "
            f"erase_user {len(left)} in the server's files, {len(in_backup)} in the backup, "
            f"0 decryptable with any key that exists; bob's {len(bob)} all decryptable; "
            f"5 of bob's popped, then rotate_owner_keys: {len(found)} in the server's files, "
            "0 decryptable"
        )
