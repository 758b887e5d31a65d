"""Encryption at rest, checked against what really lies in the tables and in the SQLite file.

Raw 32-byte keys are used wherever the key's form does not matter, so that scrypt (about
half a second per derivation) runs only in the tests about passphrases.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import json
import os
import sqlite3
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from operator import attrgetter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from agents_sqlalchemy import (
    AgentsSQLAlchemyError,
    ConfigurationError,
    SessionStore,
    SQLAlchemySession,
)
from agents_sqlalchemy.candidate_cache import CACHE_FROM
from agents_sqlalchemy.crypto import Key, kdf, state_kek_id
from agents_sqlalchemy.errors import (
    CorruptItemError,
    DecryptionError,
    KeyProviderError,
    KeyringError,
    OwnerKeyError,
    TamperedItemError,
    WrongKeyError,
)
from agents_sqlalchemy.services import keys as keys_module
from agents_sqlalchemy.types import SessionKey

from .support.clock import travel
from .support.disk import found_on_disk, on_disk, sqlite_path
from .support.items import message
from .support.sealed import (
    ITEM_MARKER,
    MARKERS,
    STATE_MARKER,
    as_bytes,
    blob,
    blobs_of,
    sealed_rows,
    secret_items,
)
from .support.tables import (
    ITEMS,
    KEYRING,
    OWNER_KEYS,
    SESSIONS,
    dump,
    execute,
    our_tables,
    raw_rows,
)

ROOT = Path(__file__).resolve().parent.parent


# -- changing what lies in the database ----------------------------------------------------------


@pytest.fixture
def key() -> bytes:
    return os.urandom(32)


# -- what is stored ------------------------------------------------------------------------------


async def test_nothing_of_the_content_is_stored_in_plaintext(db_url: str, key: bytes) -> None:
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        session = store.session("chat-1", user_id="alice", metadata={"channel": "web"})
        await session.add_items(secret_items("1"))
        await session.set_state("note", {"remember": STATE_MARKER, "n": 1})
        await store.session("chat-2").add_items(secret_items("2"))
        assert await session.get_items() == secret_items("1")
        assert await session.get_state("note") == {"remember": STATE_MARKER, "n": 1}

    tables = await our_tables(db_url)
    for table, column in (
        (ITEMS, "ciphertext"),
        (ITEMS, "wrapped_key"),
        (SESSIONS, "sealed_state"),
        (KEYRING, "verifier"),
    ):
        (reflected,) = [c for c in tables[table] if c["name"] == column]
        assert reflected["type"].python_type is bytes, (table, column, reflected["type"])

    rows = await dump(db_url)
    cells = [as_bytes(value) for table in rows.values() for row in table for value in row]
    for marker in MARKERS:
        assert not [cell for cell in cells if marker.encode() in cell], marker
    # The clear columns hold what they should: ids, the owner, the metadata.
    assert await raw_rows(db_url, f"SELECT payload FROM {ITEMS} WHERE payload IS NOT NULL") == []
    assert await raw_rows(db_url, f"SELECT state FROM {SESSIONS} WHERE state IS NOT NULL") == []
    (state,) = await raw_rows(db_url, f"SELECT sealed_state FROM {SESSIONS} WHERE user_id='alice'")
    assert isinstance(state[0], bytes) and len(state[0]) > 40
    ciphertexts = await raw_rows(db_url, f"SELECT ciphertext FROM {ITEMS}")
    assert len(ciphertexts) == 2 * len(secret_items("1"))
    assert all(isinstance(c, bytes) for (c,) in ciphertexts)
    keys = await raw_rows(db_url, f"SELECT wrapped_key, kek_id FROM {ITEMS}")
    assert len(keys) == len(ciphertexts)  # each row carries its own wrapped data key
    assert all(len(blob(w)) == 40 and k for w, k in keys)

    if sqlite_path(db_url) is not None:
        disk = on_disk(db_url)
        for marker in MARKERS:
            assert marker.encode() not in disk, marker
        assert b"alice" in disk  # the scan does see text that is stored in the clear


async def test_every_item_has_its_own_data_key(db_url: str, key: bytes) -> None:
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        same = message("the same words, fifty times")
        await store.session("a").add_items([same] * 50)
        await store.session("b").add_items([same] * 10)
        assert await store.session("a").get_items() == [same] * 50
    rows = await sealed_rows(db_url, "a") + await sealed_rows(db_url, "b")
    wrapped = [w for _, _, w, _ in rows]
    ciphertexts = [c for _, c, _, _ in rows]
    assert len(rows) == 60
    assert len(set(wrapped)) == 60 and {len(w) for w in wrapped} == {40}
    assert len(set(ciphertexts)) == 60
    # Each session without a user is its own owner: one owner key wraps each one's items.
    assert len({kek for _, _, _, kek in rows}) == 2


async def test_appends_of_two_stores_to_one_session_land_at_their_own_places(
    db_url: str, key: bytes
) -> None:
    # A store seals an append at the place it last saw free (PostgreSQL appends in one
    # statement); another store's append in between takes that place, so the first store's
    # next append must be sealed again at the place it actually claims.
    async with (
        SessionStore(db_url, create_tables=True, key=key) as one,
        SessionStore(db_url, key=key) as other,
    ):
        written = []
        for turn in range(4):
            for store in (one, one, other):
                batch = [message(f"turn {turn} by {id(store)}"), message(f"reply {turn}")]
                await store.session("shared").add_items(batch)
                written += batch
        for store in (one, other):
            assert await store.session("shared").get_items() == written
    seqs = [seq for seq, _, _, _ in await sealed_rows(db_url, "shared")]
    assert sorted(seqs) == list(range(1, len(written) + 1))


@pytest.mark.slow
async def test_passphrase_kdf_meets_owasp_and_runs_once_per_store(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[int] = []
    real = kdf.derive_passphrase_key

    def counting(passphrase: str, salt: bytes, params: kdf.ScryptParams) -> bytes:
        calls.append(params.n)
        return real(passphrase, salt, params)

    monkeypatch.setattr(kdf, "derive_passphrase_key", counting)
    passphrase = "correct horse battery staple"
    async with SessionStore(sqlite_url, create_tables=True, key=passphrase) as store:
        session = store.session("s")
        # Many first calls at once: one derivation between them.
        await asyncio.gather(*(session.add_items([message(str(i))]) for i in range(8)))
        await asyncio.gather(session.get_items(), session.pop_item(), store.list_sessions())
        await session.set_state("k", 1)
        assert len(await session.get_items()) == 7
    assert len(calls) == 1

    async with SessionStore(sqlite_url, key=passphrase) as store:
        for _ in range(5):
            await store.session("s").get_items()
    assert len(calls) == 2  # another store derives once more, then never again

    async with SessionStore(sqlite_url, key="not the passphrase") as store:
        for _ in range(4):
            with pytest.raises(WrongKeyError):
                await store.session("s").get_items()
    assert len(calls) == 3  # a wrong key is refused once, not re-derived per call

    # Sessions built the SDK way on one URL share one store, and so one derivation.
    first = SQLAlchemySession("s", sqlite_url, key=passphrase)
    second = SQLAlchemySession.from_url("t", url=sqlite_url, key=passphrase)
    await first.get_items()
    await second.add_items([message("t")])
    assert len(calls) == 4
    await first.store.close()

    ((kind, salt, params),) = await raw_rows(
        sqlite_url, f"SELECT kind, salt, params FROM {KEYRING}"
    )
    params = params if isinstance(params, dict) else json.loads(str(params))
    assert kind == "passphrase" and params["kdf"] == "scrypt"
    assert params["n"] >= 2**17 and params["r"] >= 8 and params["p"] >= 1
    assert isinstance(salt, bytes) and len(salt) >= 16
    assert set(calls) == {params["n"]}

    other_url = f"sqlite+aiosqlite:///{tmp_path / 'other.db'}"
    async with SessionStore(other_url, create_tables=True, key=passphrase) as store:
        await store.session("s").add_items([message("x")])
    ((other_salt,),) = await raw_rows(other_url, f"SELECT salt FROM {KEYRING}")
    assert other_salt != salt  # a random salt per database


# -- wrong keys ------------------------------------------------------------------------------------

Operation = Callable[[SessionStore], Awaitable[object]]

OPERATIONS: dict[str, Operation] = {
    "get_items": lambda store: store.session("a").get_items(),
    "get_items(limit)": lambda store: store.session("a").get_items(limit=1),
    "add_items": lambda store: store.session("a").add_items([message("intruder")]),
    "add_items (new session)": lambda store: store.session("new").add_items([message("x")]),
    "pop_item": lambda store: store.session("a").pop_item(),
    "clear_session": lambda store: store.session("a").clear_session(),
    "get_metadata": lambda store: store.session("a").get_metadata(),
    "update_metadata": lambda store: store.session("a").update_metadata({"x": 1}),
    "set_user_id": lambda store: store.session("a").set_user_id("mallory"),
    "get_state": lambda store: store.session("a").get_state("k"),
    "set_state": lambda store: store.session("a").set_state("k", "overwritten"),
    "delete_state": lambda store: store.session("a").delete_state("k"),
    "session_info": lambda store: store.session_info("a"),
    "list_sessions": lambda store: store.list_sessions(),
    "delete_session": lambda store: store.delete_session("a"),
    "delete_user": lambda store: store.delete_user("alice"),
    "purge_inactive": lambda store: store.purge_inactive(timedelta(seconds=1)),
    "purge_expired": lambda store: store.purge_expired(),
    "rotate_key": lambda store: store.rotate_key(os.urandom(32)),
}


async def _seed(url: str, key: Key) -> None:
    async with SessionStore(url, create_tables=True, key=key, ttl=3600) as store:
        session = store.session("a", user_id="alice", metadata={"plan": "pro"})
        await session.add_items(secret_items("a"))
        await session.set_state("k", "v")
        await store.session("b").add_items([message("b")])


async def test_a_wrong_key_fails_every_operation_before_any_read_or_write(
    db_url: str, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _seed(db_url, key)
    travel(monkeypatch, timedelta(hours=2))  # every item expired: purges would delete them
    before = await dump(db_url)
    wrong_keys: dict[str, Key | None] = {"raw": os.urandom(32), "none": None}
    for label, wrong in wrong_keys.items():
        for name, operation in OPERATIONS.items():
            # A fresh store each time: every operation is the store's first.
            async with SessionStore(db_url, key=wrong) as store:
                with pytest.raises(WrongKeyError) as raised:
                    await operation(store)
                assert isinstance(raised.value, AgentsSQLAlchemyError)
                assert "nothing was read or written" in str(raised.value), (label, name)
                with pytest.raises(WrongKeyError):  # and again: still refused
                    await operation(store)
            assert await dump(db_url) == before, f"{name} with a {label} key changed the database"

    monkeypatch.undo()
    async with SessionStore(db_url, key=key) as store:
        assert await store.session("a").get_items() == secret_items("a")
        assert await store.session("a").get_state("k") == "v"
        assert await store.session("a").get_metadata() == {"plan": "pro"}
        assert await store.session("b").get_items() == [message("b")]


async def test_a_key_of_another_kind_is_wrong_too(sqlite_url: str, key: bytes) -> None:
    await _seed(sqlite_url, key)
    before = await dump(sqlite_url)
    for wrong in ("a passphrase, not the raw key", key.hex()):
        async with SessionStore(sqlite_url, key=wrong) as store:
            with pytest.raises(WrongKeyError, match="raw 32-byte key"):
                await store.session("a").get_items()
    assert await dump(sqlite_url) == before


async def test_two_sessions_on_one_url_with_different_keys(db_url: str, key: bytes) -> None:
    first = SQLAlchemySession("a", db_url, create_tables=True, key=key)
    await first.add_items([message("first")])
    with pytest.raises(ConfigurationError, match="another key"):
        SQLAlchemySession("b", db_url, key=os.urandom(32))
    with pytest.raises(ConfigurationError, match="another key"):
        SQLAlchemySession("b", db_url)  # no key at all
    same = SQLAlchemySession("b", db_url, key=bytes(key))
    assert same.store is first.store
    await first.store.close()

    del first, same  # the shared store is gone: a new one is made, and refuses the key
    gc.collect()
    before = await dump(db_url)
    second = SQLAlchemySession("b", db_url, key=os.urandom(32))
    with pytest.raises(WrongKeyError):
        await second.add_items([message("second")])
    with pytest.raises(WrongKeyError):
        await second.get_items()
    await second.store.close()
    assert await dump(db_url) == before


async def test_a_keyed_store_refuses_a_database_written_without_key(
    db_url: str, key: bytes
) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        await store.session("plain").add_items([message("plain")])
    before = await dump(db_url)
    async with SessionStore(db_url, key=key) as store:
        with pytest.raises(KeyringError, match="without a key"):
            await store.session("plain").get_items()
    assert await dump(db_url) == before  # no keyring was created: it still opens without key
    async with SessionStore(db_url) as store:
        assert await store.session("plain").get_items() == [message("plain")]


async def test_a_keyed_store_refuses_a_database_of_sessions_made_without_key(
    db_url: str, key: bytes
) -> None:
    """Sessions with a state and metadata but no item yet: a read with a key (a key left in
    the shell, for `sessions list`) said the state was None and made a keyring, and from
    then on the app's own store, which has no key, was refused ("this database is
    encrypted")."""
    async with SessionStore(db_url, create_tables=True) as store:
        made = await store.create_session(metadata={"plan": "pro"})
        await made.set_state("cart", ["apple"])
    before = await dump(db_url)
    async with SessionStore(db_url, key=key) as store:
        with pytest.raises(KeyringError, match="sessions stored without a key"):
            await store.session(made.session_id).get_state("cart")
        with pytest.raises(KeyringError, match="sessions stored without a key"):
            await store.list_sessions()
    assert await dump(db_url) == before
    async with SessionStore(db_url) as store:
        assert await store.session(made.session_id).get_state("cart") == ["apple"]


async def test_keyed_stores_starting_together_on_an_empty_database_share_one_keyring(
    db_url: str, key: bytes
) -> None:
    """The first store's session must not make the second refuse the database as one
    written without a key: it finds the keyring the first made."""
    stores = [SessionStore(db_url, create_tables=True, key=key) for _ in range(4)]
    try:
        await asyncio.gather(
            *(
                store.session(f"s{i}").add_items([message(f"m{i}")])
                for i, store in enumerate(stores)
            )
        )
        for i, store in enumerate(stores):
            assert await store.session(f"s{(i + 1) % 4}").get_items() == [
                message(f"m{(i + 1) % 4}")
            ]
    finally:
        for store in stores:
            await store.close()


# -- binding -------------------------------------------------------------------------------------


async def _item_ids(url: str, session_id: str) -> list[int]:
    rows = await raw_rows(
        url,
        f"SELECT i.id FROM {ITEMS} i JOIN {SESSIONS} s ON s.id = i.session_pk "
        f"WHERE s.session_id = '{session_id}' ORDER BY i.seq",
    )
    return [int(str(r[0])) for r in rows]


async def _session_pk(url: str, session_id: str) -> int:
    ((pk,),) = await raw_rows(url, f"SELECT id FROM {SESSIONS} WHERE session_id = '{session_id}'")
    return int(str(pk))


async def test_an_item_moved_to_another_session_fails_loudly(db_url: str, key: bytes) -> None:
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        a, b = store.session("a"), store.session("b")
        await a.add_items([message("a1"), message("a2")])
        await b.add_items([message("b1"), message("b2"), message("b3")])
        moved = (await _item_ids(db_url, "a"))[0]
        # The row keeps its ciphertext and its wrapped key (both in the row).
        await execute(
            db_url,
            f"UPDATE {ITEMS} SET session_pk = :b, seq = 4 WHERE id = :id",
            {"b": await _session_pk(db_url, "b"), "id": moved},
        )
        with pytest.raises(TamperedItemError, match="#4"):
            await b.get_items()
        with pytest.raises(TamperedItemError):
            await b.get_items(limit=1)
        with pytest.raises(TamperedItemError):
            await b.pop_item()
        assert len(await _item_ids(db_url, "b")) == 4  # the pop rolled back: never skipped
        assert await a.get_items() == [message("a2")]


async def test_an_item_moved_to_another_position_fails_loudly(db_url: str, key: bytes) -> None:
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        a = store.session("a")
        await a.add_items([message("1"), message("2"), message("3")])
        assert len(await a.get_items()) == 3  # a whole read, kept: it answers nothing moved
        first, second, _ = await _item_ids(db_url, "a")
        # Swap the first two positions, ciphertexts and keys together.
        await execute(db_url, f"UPDATE {ITEMS} SET seq = 100 WHERE id = :id", {"id": first})
        await execute(db_url, f"UPDATE {ITEMS} SET seq = 1 WHERE id = :id", {"id": second})
        await execute(db_url, f"UPDATE {ITEMS} SET seq = 2 WHERE id = :id", {"id": first})
        with pytest.raises(TamperedItemError, match="#1"):
            await a.get_items()
        assert await a.get_items(limit=1) == [message("3")]  # untouched items still read


async def test_a_ciphertext_and_key_copied_over_another_item_fail(db_url: str, key: bytes) -> None:
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        a, b = store.session("a"), store.session("b")
        await a.add_items([message("secret of a")])
        await b.add_items([message("b")])
        ((_, ciphertext, wrapped, _),) = await sealed_rows(db_url, "a")
        (target,) = await _item_ids(db_url, "b")
        await execute(
            db_url,
            f"UPDATE {ITEMS} SET ciphertext = :c WHERE id = :id",
            {"c": ciphertext, "id": target},
        )
        await execute(
            db_url,
            f"UPDATE {ITEMS} SET wrapped_key = :w WHERE id = :id",
            {"w": wrapped, "id": target},
        )
        with pytest.raises(TamperedItemError):
            await b.get_items()
        with pytest.raises(TamperedItemError):
            await b.pop_item()
        assert await a.get_items() == [message("secret of a")]


@pytest.mark.parametrize("column", ["ciphertext", "wrapped_key"])
async def test_a_flipped_byte_fails_loudly(db_url: str, key: bytes, column: str) -> None:
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        a = store.session("a")
        await a.add_items([message("1"), message("2")])
        assert len(await a.get_items()) == 2  # a whole read, kept: it answers nothing altered
        (_, ciphertext, wrapped, _), _ = await sealed_rows(db_url, "a")
        first = (await _item_ids(db_url, "a"))[0]
        blob, table, pk = (
            (ciphertext, ITEMS, "id") if column == "ciphertext" else (wrapped, ITEMS, "id")
        )
        change = f"UPDATE {table} SET {column} = :v WHERE {pk} = :id"
        for position in (0, 1, len(blob) // 2, len(blob) - 1):
            flipped = bytearray(blob)
            flipped[position] ^= 0x01
            await execute(db_url, change, {"v": bytes(flipped), "id": first})
            with pytest.raises(TamperedItemError, match="#1"):
                await a.get_items()
            with pytest.raises(TamperedItemError, match="#1"):
                await a.get_items(limit=2)
        await execute(db_url, change, {"v": blob, "id": first})
        assert await a.get_items() == [message("1"), message("2")]


async def test_a_missing_key_row_or_a_plaintext_row_is_loud(db_url: str, key: bytes) -> None:
    """Search too: it left out an item whose wrapped key was gone, where reads raised."""
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        a = store.session("a")
        await a.add_items([message("1 apple"), message("2")])
        await store.flush()
        first, second = await _item_ids(db_url, "a")
        await execute(
            db_url, f"UPDATE {ITEMS} SET wrapped_key = NULL WHERE id = :id", {"id": first}
        )
        with pytest.raises(CorruptItemError, match="#1"):
            await a.get_items()
        with pytest.raises(CorruptItemError, match="item #1 has no data key"):
            await a.search("apple")
        await execute(
            db_url,
            f"UPDATE {ITEMS} SET ciphertext = NULL, payload = :p WHERE id = :id",
            {"p": json.dumps(message("injected")), "id": second},
        )
        with pytest.raises(CorruptItemError, match="#2"):
            await a.get_items(limit=1)


async def test_state_is_sealed_and_bound_to_its_session(db_url: str, key: bytes) -> None:
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        a, b = store.session("a"), store.session("b")
        await a.set_state("secret", STATE_MARKER)
        await b.set_state("other", 1)
        rows = await raw_rows(db_url, f"SELECT session_id, state, sealed_state FROM {SESSIONS}")
        sealed = {str(sid): state for sid, plain, state in rows if plain is None}
        assert set(sealed) == {"a", "b"} and all(isinstance(s, bytes) for s in sealed.values())
        assert all(STATE_MARKER.encode() not in blob(s) for s in sealed.values())
        await execute(
            db_url,
            f"UPDATE {SESSIONS} SET sealed_state = :s WHERE session_id = 'b'",
            {"s": sealed["a"]},
        )
        with pytest.raises(DecryptionError):
            await b.get_state("other")
        flipped = bytearray(blob(sealed["a"]))
        flipped[-5] ^= 0x80
        await execute(
            db_url,
            f"UPDATE {SESSIONS} SET sealed_state = :s WHERE session_id = 'a'",
            {"s": bytes(flipped)},
        )
        with pytest.raises(DecryptionError):
            await a.get_state("secret")
        with pytest.raises(DecryptionError):  # a write reads the state first: nothing is lost
            await a.set_state("more", 2)


# -- removal destroys keys -----------------------------------------------------------------------


async def test_a_pop_never_waits_for_a_long_reader_and_the_scrub_follows(
    sqlite_url: str, key: bytes
) -> None:
    """The WAL checkpoint that scrubs a removed key runs after the pop, not in it: a reader
    holding an old snapshot delays the scrub, never the caller."""
    async with SessionStore(sqlite_url, create_tables=True, key=key, search=False) as store:
        session = store.session("s")
        await session.add_items([_big("first"), _big("second")])
        rows = await sealed_rows(sqlite_url, "s")
        reader = sqlite3.connect(sqlite_path(sqlite_url) or "")
        reader.execute("BEGIN")
        reader.execute(f"SELECT count(*) FROM {ITEMS}").fetchall()  # holds its snapshot
        try:
            started = time.monotonic()
            assert (await session.pop_item())["content"].startswith("second")
            assert time.monotonic() - started < 2  # the busy timeout is 30 s
            await asyncio.sleep(0.5)  # the scrub ran, and could not finish
            assert found_on_disk(sqlite_url, blobs_of(rows[-1:])) != []
        finally:
            reader.rollback()
            reader.close()
        await session.pop_item()  # the next removal's scrub finds no reader in its way
        await store.flush()
        assert found_on_disk(sqlite_url, blobs_of(rows)) == []


def _big(tag: str) -> dict[str, Any]:
    """An item of about 24 KB: its ciphertext spans SQLite overflow pages."""
    return message(f"{tag} " + os.urandom(12_000).hex())


@pytest.mark.slow
async def test_removals_destroy_keys_and_leave_no_bytes_behind(
    db_url: str, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    is_sqlite = sqlite_path(db_url) is not None

    async def check_gone(removed: list[bytes], kept: list[bytes], *sessions: str) -> None:
        await store.flush()  # the WAL is checkpointed just after a removal, off its path
        if is_sqlite:
            assert found_on_disk(db_url, removed) == [], "removed bytes remain in the file or WAL"
            assert found_on_disk(db_url, kept) == kept
        stored = {
            bytes(c) for (c,) in await raw_rows(db_url, f"SELECT ciphertext FROM {ITEMS}")
        } | {bytes(w) for (w,) in await raw_rows(db_url, f"SELECT wrapped_key FROM {ITEMS}")}
        assert not stored & set(removed)
        assert set(kept) <= stored
        for session_id in sessions:
            assert await store.session(session_id).get_items() == expected[session_id]

    async with SessionStore(db_url, create_tables=True, key=key) as store:
        expected: dict[str, list[Any]] = {}
        for session_id, user in (("pop", "u1"), ("clear", "u1"), ("gone", "u2"), ("keep", "u3")):
            items = [_big(session_id), *(message(f"{session_id}-{i}") for i in range(40))]
            for start in range(0, len(items), 7):
                await store.session(session_id, user_id=user).add_items(items[start : start + 7])
            expected[session_id] = items
        await store.session("short", ttl=60).add_items([_big("short"), message("short")])
        await store.session("keep").set_state("k", "v")
        keep = blobs_of(await sealed_rows(db_url, "keep"))
        if is_sqlite:
            assert found_on_disk(db_url, keep) == keep  # the scan finds what is there

        rows = await sealed_rows(db_url, "pop")
        for _ in range(3):
            assert await store.session("pop").pop_item() == expected["pop"].pop()
        popped = blobs_of(rows[-3:])
        await check_gone(popped, keep + blobs_of(rows[:-3]), "pop", "keep")

        cleared = blobs_of(await sealed_rows(db_url, "clear"))
        await store.session("clear").clear_session()
        expected["clear"] = []
        await check_gone(cleared, keep, "clear", "keep")

        gone = blobs_of(await sealed_rows(db_url, "gone"))
        assert (await store.delete_session("gone")).items == 41
        expected["gone"] = []
        await check_gone(gone, keep, "gone", "keep")

        pops = blobs_of(await sealed_rows(db_url, "pop"))
        assert (await store.delete_user("u1")).sessions == 2
        expected["pop"] = []
        await check_gone(pops, keep, "pop", "keep")

        short = blobs_of(await sealed_rows(db_url, "short"))
        travel(monkeypatch, timedelta(minutes=2))
        assert await store.purge_expired() == 2
        await check_gone(short, keep, "keep")
        assert await store.session("keep").get_state("k") == "v"
    assert await raw_rows(
        db_url, f"SELECT COUNT(*) FROM {ITEMS} WHERE wrapped_key IS NOT NULL"
    ) == [(41,)]


#: Where a search for sealed bytes stops: a driver's read buffer keeps the last bytes the
#: server sent (sealed blobs as they travel), which is not what the library keeps.
DRIVERS = {"sqlalchemy", "asyncpg", "asyncmy", "aiosqlite", "sqlite3"}


def reachable_text(word: str | bytes, roots: list[object]) -> list[str]:
    """Every string or byte string holding `word` that the library can still reach: from
    `roots` and the library's modules (caches included), not through other modules. A
    `bytes` word (a sealed blob) is looked for in byte strings, not through the drivers."""
    ours = [m for name, m in sys.modules.items() if name.split(".")[0] == "agents_sqlalchemy"]
    needle = word if isinstance(word, bytes) else word.encode()
    seen, found = {id(word)}, []
    stack: list[object] = [*roots, *ours]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, str):
            found += [obj] if isinstance(word, str) and word in obj else []
        elif isinstance(obj, (bytes, bytearray)):
            found += [repr(obj)] if needle in obj else []
        elif isinstance(word, bytes) and type(obj).__module__.split(".")[0] in DRIVERS:
            continue
        elif not isinstance(obj, ModuleType) or obj in ours:
            if isinstance(obj, dict):
                stack.extend(obj)  # a dict of string keys does not report its keys
            stack.extend(gc.get_referents(obj))
    return found


@pytest.mark.slow
async def test_a_removal_leaves_no_copy_of_the_text_in_the_process(db_url: str, key: bytes) -> None:
    """What the removal leaves in memory is forgotten by the store's worker, on every
    database (the WAL scrub is SQLite's alone)."""
    word = f"zorblax{os.urandom(4).hex()}"  # made here: no constant of the test holds it
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        session = store.session("secret")
        await session.add_items([message(f"the {word} note, {word}.")] * 3)
        await session.add_items([message("kept, and nothing of it secret")] * 2)
        assert (await session.search(word, limit=1))[0]["content"].startswith("the")
        # A pop: on PostgreSQL the store keeps the session as the pop left it, with the
        # sealed item then latest, which the store's key still opens until a removal.
        await session.pop_item()
        sealed = blobs_of(await sealed_rows(db_url, "secret"))
        assert reachable_text(word, [store]), "the scan finds what is there"
        assert any(reachable_text(blob, [store]) for blob in sealed), "sealed bytes too"
        await session.clear_session()
        await store.flush()  # the search caches are emptied after the removal, in slices
        assert reachable_text(word, [store]) == []
        assert [found for blob in sealed for found in reachable_text(blob, [store])] == []
        # Another session's text is indexed and found again after the forgetting.
        await store.session("other").add_items([message(f"the {word} other")])
        assert len(await store.session("other").search(word)) == 1


@pytest.mark.slow
async def test_a_pop_leaves_no_copy_of_the_popped_text_and_keeps_the_others(
    db_url: str, key: bytes
) -> None:
    """A pop drops from memory what the popped item left there, and only that: the other
    items' plaintexts stay, so the next read opens nothing again."""
    word, kept = f"zorblax{os.urandom(4).hex()}", f"quuxle{os.urandom(4).hex()}"
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        session = store.session("secret")
        await session.add_items([message(f"the {kept} note")] * 3)
        await session.add_items([message(f"the {word} note, {word}.")])
        assert (await session.search(word, limit=1))[0]["content"].startswith("the")
        assert len(await session.get_items()) == 4
        assert reachable_text(word, [store]) and reachable_text(kept, [store])
        assert (await session.pop_item()) == message(f"the {word} note, {word}.")
        await store.flush()
        assert reachable_text(word, [store]) == []
        assert reachable_text(kept, [store]), "the other items' plaintexts stay"
        assert await session.search(word) == []
        assert len(await session.search(kept)) == 3


@pytest.mark.slow
@pytest.mark.parametrize("overtaken", [False, True], ids=["kept", "read as the pop came"])
@pytest.mark.parametrize("scope", ["session", "user"])
async def test_a_pop_leaves_no_copy_of_the_popped_item_in_kept_candidates(
    db_url: str, key: bytes, monkeypatch: pytest.MonkeyPatch, overtaken: bool, scope: str
) -> None:
    """A large scope's search candidates (a session's, or its user's), kept while it is
    unchanged, hold each item's wrapped key: a pop forgets those of the scopes holding the
    popped item, and a search whose read the pop overtook keeps none."""
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        session = store.session("big", user_id="ulla")
        await session.add_items([message(f"note {n} on the garden") for n in range(CACHE_FROM)])
        await store.flush()
        popped = (await sealed_rows(db_url, "big"))[-1][2]

        async def search() -> None:
            if scope == "session":
                await session.search("garden")
            else:
                await store.search("garden", user_id="ulla")

        await search()  # the scope is seen to be large ...
        if overtaken:
            index = store._services.search()._index
            pop_after_fetch(monkeypatch, index, "candidates", session, store.flush)
        await search()  # ... and its candidates are kept, unless a pop came
        if not overtaken:
            assert reachable_text(popped, [store]), "the scan finds the kept candidates"
            await session.pop_item()
        await store.flush()
        assert reachable_text(popped, [store]) == []
        [latest] = await session.search("garden", limit=1)  # the popped one was the latest
        assert latest == message(f"note {CACHE_FROM - 2} on the garden")


def pop_after_fetch(
    monkeypatch: pytest.MonkeyPatch,
    reader: object,
    fetch: str,
    session: Any,
    flush: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Make `reader.fetch`'s next call pop `session`'s last item once it has fetched its
    rows, before the reader opens them: a removal that overtakes a read (with `flush`, its
    clean-up done too). (It holds nothing of the item: the memory walk reaches the test's
    own frame, and this with it.)"""
    fetched = getattr(reader, fetch)

    async def fetch_then_pop(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(reader, fetch, fetched)
        found = await fetched(*args, **kwargs)
        assert await session.pop_item() is not None
        if flush is not None:
            await flush()
        return found

    monkeypatch.setattr(reader, fetch, fetch_then_pop)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("reader", "fetch", "read", "returned"),
    [
        ("conversation._items", "read", "get_items", lambda got, word: got[-1] == word),
        ("conversation._compaction", "tail", "repair", lambda got, word: got.ok),
        (
            "branches._branches",
            "line_items",
            "get_conversation_turns",
            lambda got, _: len(got) == 2,
        ),
    ],
    ids=["whole read", "compaction tail", "turns"],
)
async def test_a_read_that_a_pop_overtook_keeps_no_copy_of_the_popped_text(
    db_url: str,
    key: bytes,
    monkeypatch: pytest.MonkeyPatch,
    reader: str,
    fetch: str,
    read: str,
    returned: Callable[[Any, Any], bool],
) -> None:
    """A read that fetched its rows before a pop, and opens them after the pop forgot the
    popped item, returns what it fetched (its snapshot had the item) but keeps nothing of it."""
    word = f"zorblax{os.urandom(4).hex()}"
    async with SessionStore(db_url, create_tables=True, key=key, search=False) as store:
        session = store.session("secret")
        await session.add_items([message("kept"), message(f"the {word} note")])
        pop_after_fetch(monkeypatch, attrgetter(reader)(store._services), fetch, session)
        assert returned(await getattr(session, read)(), message(f"the {word} note"))
        await store.flush()
        assert reachable_text(word, [store]) == []
        assert await session.get_items() == [message("kept")]


@pytest.mark.slow
async def test_a_search_that_a_pop_overtook_keeps_no_vector_of_the_popped_item(
    db_url: str, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search that read its vectors before a pop, and opens them after the pop forgot the
    popped item, keeps none of the vectors it opened."""
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        session = store.session("secret")
        await session.add_items([message("the otter sleeps"), message("the otter swims")])
        await store.flush()
        popped = (await sealed_rows(db_url, "secret"))[-1][2]
        index = store._services.search()._index
        pop_after_fetch(monkeypatch, index, "vectors", session)
        await session.search("otter", mode="vector")
        await store.flush()
        codec = store._services.conversation._opener._codec
        assert [cache for cache in codec._opened.values() if popped in cache.kept] == []
        assert len(await session.search("otter", mode="vector")) == 1
        assert [cache for cache in codec._opened.values() if cache.kept] != []  # no pop came


@pytest.mark.slow
async def test_indexing_that_a_pop_overtook_keeps_no_copy_of_the_popped_text(
    db_url: str, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The indexer reads what was written, then opens it: a pop in between leaves nothing
    of the popped item in memory."""
    word = f"zorblax{os.urandom(4).hex()}"
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        session = store.session("secret")
        index = store._services.index()._index
        pop_after_fetch(monkeypatch, index, "unindexed", session)
        await session.add_items([message("kept"), message(f"the {word} note")])
        await store.flush()
        assert reachable_text(word, [store]) == []
        assert await session.get_items() == [message("kept")]


async def test_a_reindex_goes_on_past_a_batch_whose_session_was_deleted_meanwhile(
    db_url: str, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reindex reads a batch, then opens it: the items of a session deleted in between no
    longer open and are skipped, and the reindex goes on to the items after them."""
    async with SessionStore(db_url, create_tables=True, key=key, search=False) as store:
        await store.session("gone").add_items([message(f"otter {n}") for n in range(10)])
        await store.session("kept").add_items([message(f"otter {n}") for n in range(40)])
    async with SessionStore(db_url, key=key) as store:
        index = store._services.index()._index
        fetched = index.unindexed

        async def fetch_then_delete(*args: Any, **kwargs: Any) -> Any:
            monkeypatch.setattr(index, "unindexed", fetched)
            found = await fetched(*args, **kwargs)
            assert (await store.delete_session("gone")).items == 10
            return found

        monkeypatch.setattr(index, "unindexed", fetch_then_delete)
        assert await store.reindex() == 40  # the first batch held 10 of "gone" and 6 of "kept"
        found = await store.session("kept").search("otter", mode="keyword", limit=50)
        assert len(found) == 40


@pytest.mark.slow
async def test_a_search_hit_that_a_pop_overtook_keeps_no_copy_of_the_popped_text(
    db_url: str, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search reads its hits' rows, then opens them: a pop in between leaves nothing of the
    popped item in memory (the search still returns what it read)."""
    word = f"zorblax{os.urandom(4).hex()}"
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        session = store.session("secret")
        await session.add_items([message("kept"), message(f"the {word} note")])
        await store.flush()
        store._services.conversation._opener._codec.forget_keys()  # hits are opened anew
        index = store._services.search()._index
        pop_after_fetch(monkeypatch, index, "hit_rows", session)
        found = [hit["content"] for hit in await session.search(word)]
        assert found == [f"the {word} note"]  # what it read before the pop
        del found  # the test's own frame is in reach
        await store.flush()
        assert reachable_text(word, [store]) == []
        assert await session.get_items() == [message("kept")]


@pytest.mark.slow
async def test_a_branch_read_that_a_pop_overtook_keeps_no_copy_of_the_popped_text(
    db_url: str, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for a read of a branch."""
    word = f"zorblax{os.urandom(4).hex()}"
    async with SessionStore(db_url, create_tables=True, key=key, search=False) as store:
        session = store.session("secret")
        await session.add_items([message("q1"), message("a1"), message("q2")])
        await session.create_branch_from_turn(2, "side")
        await session.add_items([message("side q2"), message(f"the {word} note")])
        branches = store._services.branches._branches
        pop_after_fetch(monkeypatch, branches, "read_branch", session)
        assert (await session.get_items())[-1] == message(f"the {word} note")
        await store.flush()
        assert reachable_text(word, [store]) == []
        assert await session.get_items() == [message("q1"), message("side q2")]


# -- rotation ----------------------------------------------------------------------------------


class Interrupted(Exception):
    """Stands for a crash in the middle of a rotation."""


def _keys_by_item(rows: list[tuple[object, ...]]) -> dict[int, tuple[str, bytes]]:
    return {int(str(pk)): (str(kek), blob(w)) for pk, kek, w in rows}


async def _key_rows(url: str) -> dict[int, tuple[str, bytes]]:
    return _keys_by_item(await raw_rows(url, f"SELECT id, kek_id, wrapped_key FROM {ITEMS}"))


async def test_an_item_naming_an_owner_key_the_store_lacks_says_so(db_url: str, key: bytes) -> None:
    """An item whose kek_id was set to an owner key id the store does not hold was said to
    be erased ("owner key ... was destroyed"), though its row was there."""
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        await store.session("s1", user_id="alice").add_items([message("a")])
    await execute(db_url, f"UPDATE {ITEMS} SET kek_id = 'o{'0' * 32}'")
    async with SessionStore(db_url, key=key) as store:
        with pytest.raises(OwnerKeyError, match="is not in this store, yet item rows still"):
            await store.session("s1", user_id="alice").get_items()


@pytest.mark.parametrize("named", ["the keyring's key", "nothing"])
async def test_an_item_naming_another_key_is_refused_by_a_store_that_read_it(
    db_url: str, key: bytes, named: str
) -> None:
    """An item whose kek_id was set to the keyring's key (live, and the store's own) read
    back whole in the store that had read it, from the plaintexts it kept, while a store
    that never saw it refused it: the kept plaintext answers only the key it was opened
    under. One whose kek_id was cleared (NULL) read as wrapped by the owner's key, which
    it is, in a store that knew that key, and was refused by one that did not yet."""
    async with SessionStore(db_url, create_tables=True, key=key, search=False) as warm:
        session = warm.session("s1", user_id="alice")
        items = [message("a"), message("b"), message("c")]
        await session.add_items(items)
        assert await session.get_items() == items
        ((kek_id,),) = await raw_rows(db_url, f"SELECT kek_id FROM {KEYRING}")
        kek_id = kek_id if named == "the keyring's key" else None
        await execute(db_url, f"UPDATE {ITEMS} SET kek_id = :k WHERE seq = 3", {"k": kek_id})
        for limit in (None, 1):
            with pytest.raises(TamperedItemError, match="#3"):
                await session.get_items(limit)
    async with SessionStore(db_url, key=key) as cold:
        with pytest.raises(TamperedItemError, match="#3"):
            await cold.session("s1").get_items()


async def test_a_database_whose_keyring_row_is_gone_is_refused(db_url: str, key: bytes) -> None:
    """With its keyring row deleted, the first store to open the database made a new
    keyring under whatever key it held and took writes; reads of the old items then spoke
    of a rotation that never was. Sealed data without a keyring is now refused."""
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        await store.session("s1", user_id="alice").add_items([message("a")])
    await execute(db_url, f"DELETE FROM {KEYRING}")
    before = await dump(db_url)
    for given in (key, "another passphrase"):
        async with SessionStore(db_url, key=given) as store:
            with pytest.raises(KeyringError, match="no keyring row"):
                await store.session("s2").add_items([message("b")])
    assert await dump(db_url) == before


async def test_a_store_that_saw_no_keyring_before_another_made_it_opens_that_one(
    sqlite_url: str, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stores opening a new database at once: one read no keyring row, another then made it
    and sealed items, and the first, seeing sealed data and (it thought) no keyring, refused
    the database as one whose keyring was deleted."""
    from agents_sqlalchemy.repository.keyring import KeyringRows

    async with SessionStore(sqlite_url, create_tables=True, key=key) as first:
        await first.session("s1", user_id="alice").add_items([message("a")])
    real, looked = KeyringRows.keyring_rows, []

    async def late(self: KeyringRows) -> Any:
        if not looked:  # its first look came before the other store's commit
            looked.append(1)
            return []
        return await real(self)

    monkeypatch.setattr(KeyringRows, "keyring_rows", late)
    async with SessionStore(sqlite_url, key=key) as second:
        await second.session("s2", user_id="bob").add_items([message("b")])
        assert await second.session("s1").get_items() == [message("a")]
    assert looked == [1]


async def test_a_rotation_that_meets_an_altered_item_changes_nothing(
    db_url: str, key: bytes
) -> None:
    """An item whose kek_id was set to NULL (or an unknown id) was skipped: the rotation
    said it was done, then destroyed the owner key that alone opened it. An item whose
    wrapped key was altered stopped the rotation halfway, and then neither key opened the
    store. Every key is now opened before anything changes; the error names the item."""
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        await store.session("s1", user_id="alice").add_items([message("a"), message("b")])
        await store.session("s2", user_id="bob").add_items([message("c")])
        await store.session("s2").set_state("k", "v")
    ((item_id, wrapped),) = await raw_rows(
        db_url, f"SELECT id, wrapped_key FROM {ITEMS} WHERE seq = 2"
    )
    altered = bytes(wrapped)[:-1] + bytes([bytes(wrapped)[-1] ^ 1])
    for change, error, said in [
        (f"UPDATE {ITEMS} SET kek_id = NULL WHERE id = {item_id}", KeyringError, "names no key"),
        (
            f"UPDATE {ITEMS} SET kek_id = 'o{'0' * 32}' WHERE id = {item_id}",
            KeyringError,
            "names no",
        ),
        (f"UPDATE {ITEMS} SET wrapped_key = :w WHERE id = {item_id}", DecryptionError, "does not"),
    ]:
        ((kek_id,),) = await raw_rows(db_url, f"SELECT kek_id FROM {ITEMS} WHERE id = {item_id}")
        await execute(db_url, change, {"w": altered})
        before = await dump(db_url)
        async with SessionStore(db_url, key=key) as store:
            with pytest.raises(error, match=f"item #2 of session 's1' {said}"):
                await store.rotate_key(os.urandom(32))
        assert await dump(db_url) == before
        await execute(
            db_url,
            f"UPDATE {ITEMS} SET kek_id = :k, wrapped_key = :w WHERE id = {item_id}",
            {"k": kek_id, "w": wrapped},
        )
    # A state's wrapped key altered passed the check unopened, then stopped the rotation
    # halfway: neither key opened the store, and resuming met the same state.
    ((state,),) = await raw_rows(db_url, f"SELECT sealed_state FROM {SESSIONS} WHERE id = 2")
    state = bytes(state)
    cut = 2 + state[1] + 5  # a byte of the wrapped data key, past the version and key id
    await execute(
        db_url,
        f"UPDATE {SESSIONS} SET sealed_state = :s WHERE id = 2",
        {"s": state[:cut] + bytes([state[cut] ^ 1]) + state[cut + 1 :]},
    )
    before = await dump(db_url)
    async with SessionStore(db_url, key=key) as store:
        with pytest.raises(DecryptionError, match="the state of session 's2' does not unwrap"):
            await store.rotate_key(os.urandom(32))
    assert await dump(db_url) == before
    await execute(db_url, f"UPDATE {SESSIONS} SET sealed_state = :s WHERE id = 2", {"s": state})
    new_key = os.urandom(32)
    async with SessionStore(db_url, key=key) as store:
        assert await store.rotate_key(new_key) == 3
    async with SessionStore(db_url, key=new_key) as store:
        assert await store.session("s1").get_items() == [message("a"), message("b")]
        assert await store.session("s2").get_state("k") == "v"


async def test_rotation_rewraps_resumes_and_retires_the_old_key(
    db_url: str, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    new_key = os.urandom(32)
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        for n in range(4):
            await store.session(f"s{n}").add_items(secret_items(str(n)))
            await store.session(f"s{n}").set_state("k", f"{STATE_MARKER}-{n}")
    expected = {f"s{n}": secret_items(str(n)) for n in range(4)}
    total = sum(len(items) for items in expected.values())
    keys_before = await _key_rows(db_url)
    ciphertexts_before = await raw_rows(db_url, f"SELECT id, ciphertext FROM {ITEMS} ORDER BY id")
    states_before = await raw_rows(db_url, f"SELECT id, sealed_state FROM {SESSIONS} ORDER BY id")
    ((old_kek, old_verifier),) = await raw_rows(db_url, f"SELECT kek_id, verifier FROM {KEYRING}")

    # A crash after the first batch of 5 keys.
    real = keys_module.rewrap_many
    batches: list[int] = []

    def failing(wrapped: list[bytes], old: Any, new: Any) -> list[bytes]:
        if batches:
            raise Interrupted
        batches.append(len(wrapped))
        return real(wrapped, old, new)

    monkeypatch.setattr(keys_module, "rewrap_many", failing)
    async with SessionStore(db_url, key=key) as store:
        with pytest.raises(Interrupted):
            await store.rotate_key(new_key, batch_size=5)
    monkeypatch.undo()
    halfway = await _key_rows(db_url)
    keyring = await raw_rows(db_url, f"SELECT kek_id, retired_at FROM {KEYRING}")
    (new_kek,) = [kek for kek, retired in keyring if retired is None]
    assert len(keyring) == 2 and new_kek != old_kek
    # Each owner key has a fresh successor; the first 5 item keys are re-wrapped under theirs.
    owner_keys = await raw_rows(db_url, f"SELECT key_id, replaces, kept FROM {OWNER_KEYS}")
    successors = {key_id for key_id, replaces, _ in owner_keys if replaces is not None}
    old_owner_keys = {key_id: kept for key_id, replaces, kept in owner_keys if replaces is None}
    assert len(successors) == len(old_owner_keys) == 4  # one per session without a user
    assert sum(kek in successors for kek, _ in halfway.values()) == 5
    assert {kek for kek, _ in keys_before.values()} == set(old_owner_keys)

    # Half-way, neither key opens the store for normal use, and both say why.
    async with SessionStore(db_url, key=new_key) as store:
        with pytest.raises(KeyringError, match="unfinished"):
            await store.session("s0").get_items()
    async with SessionStore(db_url, key=new_key) as store:  # resuming needs the old key
        with pytest.raises(KeyringError, match="previous key"):
            await store.rotate_key(new_key)
    async with SessionStore(db_url, key=key) as store:  # and the same new key
        with pytest.raises(WrongKeyError, match="run rotate_key again with the new key it was"):
            await store.rotate_key(os.urandom(32))  # it blamed the store's key

    # Resumed on a store opened with the old key (one that has just been refused, even).
    reports: list[tuple[int, int]] = []
    async with SessionStore(db_url, key=key) as store:
        with pytest.raises(WrongKeyError, match="rotation is unfinished"):
            await store.session("s0").get_items()
        done = await store.rotate_key(new_key, batch_size=5, progress=lambda *p: reports.append(p))
        assert done == total - 5
        assert reports[0] == (0, total - 5) and reports[-1] == (total - 5, total - 5)
        assert len(reports) == 1 + -(-(total - 5) // 5)
        assert await store.session("s1").get_items() == expected["s1"]  # the store now uses it
        if sqlite_path(db_url) is not None:  # no old wrapped key is left in the file or WAL
            old_wrapped = [wrapped for _, wrapped in keys_before.values()]
            old_kept = [blob(kept) for kept in old_owner_keys.values()]
            assert found_on_disk(db_url, [*old_wrapped, *old_kept, blob(old_verifier)]) == []

    keys_after = await _key_rows(db_url)
    assert set(keys_after) == set(keys_before)
    assert {kek for kek, _ in keys_after.values()} == successors
    # The old owner keys are destroyed: only their successors are left.
    assert {row[0] for row in await raw_rows(db_url, f"SELECT key_id FROM {OWNER_KEYS}")} == (
        successors
    )
    assert all(keys_after[pk][1] != keys_before[pk][1] for pk in keys_before)
    assert await raw_rows(db_url, f"SELECT id, ciphertext FROM {ITEMS} ORDER BY id") == (
        ciphertexts_before
    )
    states_after = await raw_rows(db_url, f"SELECT id, sealed_state FROM {SESSIONS} ORDER BY id")
    for (_, before), (_, after) in zip(states_before, states_after, strict=True):
        assert isinstance(before, bytes) and isinstance(after, bytes)
        assert before != after and before[-60:] == after[-60:]  # re-wrapped, body untouched
        assert state_kek_id(before) in old_owner_keys and state_kek_id(after) in successors
    assert await raw_rows(db_url, f"SELECT kek_id FROM {KEYRING}") == [(new_kek,)]

    async with SessionStore(db_url, key=key) as store:
        with pytest.raises(WrongKeyError):
            await store.session("s0").get_items()
    async with SessionStore(db_url, key=new_key) as store:
        for session_id, items in expected.items():
            assert await store.session(session_id).get_items() == items
        assert await store.session("s3").get_state("k") == f"{STATE_MARKER}-3"


@pytest.mark.slow
async def test_rotation_on_the_same_store_and_to_a_passphrase(sqlite_url: str, key: bytes) -> None:
    async with SessionStore(sqlite_url, create_tables=True, key=key) as store:
        session = store.session("s")
        await session.add_items([message(str(i)) for i in range(12)])
        assert await store.rotate_key("a new passphrase", batch_size=5) == 12
        await session.add_items([message("after")])  # the store goes on with the new key
        assert len(await session.get_items()) == 13
        assert await store.rotate_key(key) == 13  # and back, twice in one store's life
    async with SessionStore(sqlite_url, key=key) as store:
        assert len(await store.session("s").get_items()) == 13
    async with SessionStore(sqlite_url, key="a new passphrase") as store:
        with pytest.raises(WrongKeyError):
            await store.session("s").get_items()


async def test_rotation_needs_an_encrypted_database(sqlite_url: str, key: bytes) -> None:
    async with SessionStore(sqlite_url, create_tables=True) as store:
        await store.session("s").add_items([message("plain")])
        with pytest.raises(ConfigurationError, match="current key"):
            await store.rotate_key(key)
    async with SessionStore(sqlite_url, key=key) as store:
        with pytest.raises(KeyringError, match="nothing to rotate"):
            await store.rotate_key(os.urandom(32))
    assert await raw_rows(sqlite_url, f"SELECT * FROM {KEYRING}") == []


# -- key providers -------------------------------------------------------------------------------


def _kms_example() -> ModuleType:
    path = ROOT / "examples" / "kms_key_provider.py"
    spec = importlib.util.spec_from_file_location("kms_key_provider_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def test_a_kms_key_provider_end_to_end(db_url: str, key: bytes) -> None:
    kms_example = _kms_example()
    kms = kms_example.LocalKmsStandIn()
    provider = kms_example.KmsKeyProvider(kms, "alias/agents-test")
    async with SessionStore(db_url, create_tables=True, key=provider) as store:
        session = store.session("s", user_id="alice")
        await session.add_items(secret_items("kms"))
        await session.set_state("k", STATE_MARKER)
        for _ in range(3):
            assert await session.get_items() == secret_items("kms")
    assert provider.calls == 2  # wrap and check once at creation, never per item
    cells = [as_bytes(v) for rows in (await dump(db_url)).values() for row in rows for v in row]
    assert not [cell for cell in cells if ITEM_MARKER.encode() in cell]
    ((kind, params),) = await raw_rows(db_url, f"SELECT kind, params FROM {KEYRING}")
    assert kind == "provider" and "alias/agents-test" in str(params)

    reopened = kms_example.KmsKeyProvider(kms, "alias/agents-test")
    async with SessionStore(db_url, key=reopened) as store:
        assert await store.session("s").get_items() == secret_items("kms")
        assert await store.session("s").get_state("k") == STATE_MARKER
        assert await store.list_sessions(user_id="alice")
    assert reopened.calls == 1

    before = await dump(db_url)
    async with SessionStore(db_url, key=kms_example.KmsKeyProvider(kms, "alias/other")) as store:
        with pytest.raises(WrongKeyError):
            await store.session("s").get_items()
    other_material = kms_example.KmsKeyProvider(kms_example.LocalKmsStandIn(), "alias/agents-test")
    async with SessionStore(db_url, key=other_material) as store:
        with pytest.raises(KeyProviderError):
            await store.session("s").add_items([message("x")])
    async with SessionStore(db_url, key=key) as store:
        with pytest.raises(WrongKeyError, match="key provider"):
            await store.session("s").get_items()
    assert await dump(db_url) == before

    # From the KMS key to a raw key and back to another KMS key.
    async with SessionStore(db_url, key=reopened) as store:
        assert await store.rotate_key(key) == len(secret_items("kms"))
    moved = kms_example.KmsKeyProvider(kms, "alias/agents-next")
    async with SessionStore(db_url, key=key) as store:
        await store.rotate_key(moved)
    async with SessionStore(db_url, key=reopened) as store:
        with pytest.raises(WrongKeyError):
            await store.session("s").get_items()
    async with SessionStore(db_url, key=moved) as store:
        assert await store.session("s").get_items() == secret_items("kms")


async def test_an_item_whose_kek_id_was_altered_is_named(db_url: str, key: bytes) -> None:
    """An item's kek_id set to an id no key has: the error named neither the item nor its
    session, and blamed a rotation only. It names both now, and the third cause."""
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        await store.session("s1").add_items([message("a"), message("b"), message("c")])
    await execute(db_url, f"UPDATE {ITEMS} SET kek_id = 'deadbeef' WHERE seq = 2")
    said = "item #2 of session 's1' is wrapped by key-encryption key 'deadbeef'"
    async with SessionStore(db_url, key=key) as store:
        session = store.session("s1")
        for read in (session.get_items(), session.get_items(limit=2)):
            with pytest.raises(KeyringError, match=said) as raised:
                await read
            assert "changed outside the library" in str(raised.value)
        assert await session.get_items(limit=1) == [message("c")]
        with pytest.raises(KeyringError, match="the vector of item #2 of the session whose"):
            await session.search("b", mode="vector")  # opening the candidates' vectors


async def test_a_tampered_vector_names_its_item_and_session(db_url: str, key: str) -> None:
    """A vector whose sealed bytes were altered failed every search, with an error that
    named its item's place but not the session, among all the store's."""
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        await store.session("s1").add_items([message("the cat sat"), message("on the mat")])
        await store.flush()
    index = "agents_sqlalchemy_search_index"
    sealed = await raw_rows(db_url, f"SELECT item_pk, vector FROM {index} WHERE vector IS NOT NULL")
    pk, vector = sealed[0]
    altered = bytes(vector)[:-1] + bytes([bytes(vector)[-1] ^ 1])  # type: ignore[arg-type]
    await execute(
        db_url, f"UPDATE {index} SET vector = :v WHERE item_pk = :pk", {"v": altered, "pk": pk}
    )
    prefix = SessionKey.of("s1").hash[:16]
    async with SessionStore(db_url, key=key) as store:
        with pytest.raises(DecryptionError, match=f"of the session whose hash starts {prefix}"):
            await store.search("cat", mode="vector")
