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
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from agents_sqlalchemy import SessionStore
from agents_sqlalchemy.crypto import KeyEncryptionKey, KeyringRecord, open_kek
from agents_sqlalchemy.errors import DecryptionError, WrongKeyError

from .support.items import message
from .support.server_disk import holding, own_server
from .support.tables import ITEMS, KEYRING, SESSIONS

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


def _opened(keks: list[KeyEncryptionKey], wrapped: list[bytes]) -> int:
    """How many of `wrapped` some of `keks` unwraps."""
    count = 0
    for one in wrapped:
        for kek in keks:
            try:
                kek.unwrap(one)
            except DecryptionError:
                continue
            count += 1
            break
    return count


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

            await store.delete_user("alice")
            popped = [await store.session("bob-0").pop_item() for _ in range(5)]
            assert all(item is not None for item in popped)
            survivors = await _wrapped_keys(url, "bob")
            removed = alice + [key for key in bob if key not in survivors]
            assert len(removed) == 2 * ITEMS_PER_SESSION + 5
            await _checkpoint(dialect, url)

            old_keks = await _keks(url, old_key)
            before = holding(server.files(), removed)
            in_backup = holding(backup, removed)
            # The limit the guide states: the removed keys are still in the server's files
            # (the WAL or the redo log at least) and in the backup, and the live key opens
            # every one of them.
            assert before, "no removed key found in the server's files"
            assert len(in_backup) == len(removed)
            assert _opened(old_keks, list(before)) == len(before)
            assert _opened(old_keks, list(in_backup)) == len(removed)

            rewrapped = await store.rotate_key(new_key)
            assert rewrapped == len(survivors)
        del old_key  # the old key is destroyed: nobody holds it any more
        await _checkpoint(dialect, url)

        after = holding(server.files(), removed)
        new_keks = await _keks(url, new_key)
        assert len(new_keks) == 1
        # What lies anywhere, the live server's files and the backup alike, opens with no
        # key that still exists.
        assert _opened(new_keks, list(after)) == 0
        assert _opened(new_keks, list(in_backup)) == 0
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
            f"decryptable; after rotation and destroying the old key {len(after)} in the "
            f"server's files, {len(in_backup)} in the backup, 0 decryptable"
        )
