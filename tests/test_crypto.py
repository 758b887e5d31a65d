"""The crypto layer on its own: keys, keyring checks, sealing, binding, rotation, term hashes.

Pure tests, no database. A passphrase costs a real scrypt derivation (~0.5 s), so the
passphrase keyring is made once per module.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import unicodedata
from dataclasses import replace

import pytest
from cryptography.hazmat.primitives.keywrap import aes_key_unwrap, aes_key_wrap

from agents_sqlalchemy.crypto import (
    DataKey,
    KeyEncryptionKey,
    KeyProvider,
    KeyringRecord,
    Place,
    ScryptParams,
    create_kek,
    item_opener,
    open_item,
    open_kek,
    open_state,
    rewrap,
    rewrap_many,
    rewrap_state,
    seal_item,
    seal_items,
    seal_state,
    term_hasher,
    unwrap_data_key,
    validate_key,
)
from agents_sqlalchemy.errors import (
    AgentsSQLAlchemyError,
    CorruptItemError,
    DecryptionError,
    InvalidKeyError,
    KeyProviderError,
    KeyringError,
    TamperedItemError,
    WrongKeyError,
)
from agents_sqlalchemy.search.postings import term_id

PASSPHRASE = "correct horse battery staple"
SESSION = hashlib.sha256(b"chat-1").hexdigest()
OTHER_SESSION = hashlib.sha256(b"chat-2").hexdigest()
ITEM = '{"role":"user","content":"my dog is called Mochi, ünïcødé 🐕"}'.encode()


@pytest.fixture(scope="module")
def passphrase_kek() -> KeyEncryptionKey:
    return asyncio.run(create_kek(PASSPHRASE))


@pytest.fixture
def kek() -> KeyEncryptionKey:
    return asyncio.run(create_kek(os.urandom(32)))


class LocalProvider:
    """A stand-in for a KMS: AES key wrap under a key held in memory; counts its calls."""

    def __init__(self, kek_id: str = "local/test-key", key: bytes | None = None) -> None:
        self.kek_id = kek_id
        self.key = key or os.urandom(32)
        self.calls = 0

    def wrap(self, data_key: bytes) -> bytes:
        self.calls += 1
        return aes_key_wrap(self.key, data_key)

    def unwrap(self, wrapped: bytes) -> bytes:
        self.calls += 1
        return aes_key_unwrap(self.key, wrapped)


class AsyncLocalProvider(LocalProvider):
    """The same, with `async` methods (as an aiobotocore or Vault client would have)."""

    async def wrap(self, data_key: bytes) -> bytes:  # type: ignore[override]
        await asyncio.sleep(0)
        return LocalProvider.wrap(self, data_key)

    async def unwrap(self, wrapped: bytes) -> bytes:  # type: ignore[override]
        await asyncio.sleep(0)
        return LocalProvider.unwrap(self, wrapped)


# -- the key option ---------------------------------------------------------------------------


def test_key_forms() -> None:
    assert validate_key("pass") == "pass"
    raw = os.urandom(32)
    assert validate_key(raw) == raw
    assert validate_key(bytearray(raw)) == raw
    assert isinstance(validate_key(LocalProvider()), LocalProvider)


@pytest.mark.parametrize("size", [0, 16, 31, 33, 64])
def test_raw_key_must_be_exactly_32_bytes(size: int) -> None:
    with pytest.raises(InvalidKeyError, match="exactly 32 bytes"):
        validate_key(os.urandom(size))


@pytest.mark.parametrize("bad", ["", "\ud800", None, 42, ["k"], {"key": b"x"}])
def test_bad_key_options_are_rejected(bad: object) -> None:
    with pytest.raises(InvalidKeyError):
        validate_key(bad)


async def test_empty_passphrase_is_rejected_before_any_derivation() -> None:
    with pytest.raises(InvalidKeyError, match="non-empty"):
        await create_kek("")


def test_provider_needs_a_kek_id() -> None:
    with pytest.raises(InvalidKeyError, match="kek_id"):
        validate_key(LocalProvider(kek_id=""))

    class Failing:
        @property
        def kek_id(self) -> str:
            raise RuntimeError("no key id today")

        def wrap(self, data_key: bytes) -> bytes:
            return data_key

        def unwrap(self, wrapped: bytes) -> bytes:
            return wrapped

    # The provider's own failure was a bare RuntimeError out of the store's constructor.
    with pytest.raises(KeyProviderError, match="Failing failed to give its kek_id"):
        validate_key(Failing())


# -- passphrases and the KDF ------------------------------------------------------------------


def test_kdf_parameters_meet_owasp(passphrase_kek: KeyEncryptionKey) -> None:
    record = passphrase_kek.record
    params = record.params
    assert record.kind == "passphrase" and params is not None
    assert params["kdf"] == "scrypt"
    assert params["n"] >= 2**17 and params["r"] >= 8 and params["p"] >= 1
    assert params["length"] == 32
    defaults = ScryptParams()
    assert defaults.n >= 2**17 and defaults.r >= 8 and defaults.p >= 1


@pytest.mark.parametrize(
    "params",
    [
        {"kdf": "scrypt", "n": 2**14, "r": 8, "p": 1, "length": 32},  # weaker than OWASP
        {"kdf": "scrypt", "n": 2**17, "r": 1, "p": 1, "length": 32},
        {"kdf": "scrypt", "n": 2**30, "r": 8, "p": 1, "length": 32},  # a memory bomb
        {"kdf": "scrypt", "n": 3 * 2**17, "r": 8, "p": 1, "length": 32},
        {"kdf": "scrypt", "n": "131072", "r": 8, "p": 1, "length": 32},
        {"kdf": "pbkdf2"},
        None,
    ],
)
async def test_stored_kdf_parameters_are_bounded(
    passphrase_kek: KeyEncryptionKey, params: dict[str, object] | None
) -> None:
    record = replace(passphrase_kek.record, params=params)
    with pytest.raises(KeyringError):
        await open_kek(PASSPHRASE, record)


def test_weak_scrypt_parameters_cannot_be_chosen() -> None:
    with pytest.raises(InvalidKeyError):
        ScryptParams(n=2**16)


@pytest.mark.slow
async def test_passphrase_reopens_off_the_event_loop(passphrase_kek: KeyEncryptionKey) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    task = asyncio.create_task(ticker())
    # The same passphrase in decomposed form (NFD) opens it: passphrases are NFKC-normalised.
    reopened = await open_kek(unicodedata.normalize("NFD", PASSPHRASE), passphrase_kek.record)
    task.cancel()
    assert ticks > 5, "scrypt blocked the event loop"
    data_key = os.urandom(32)
    assert reopened.unwrap(passphrase_kek.wrap(data_key)) == data_key


@pytest.mark.slow
async def test_wrong_passphrase_fails_verification(passphrase_kek: KeyEncryptionKey) -> None:
    with pytest.raises(WrongKeyError, match=r"wrong key.*nothing was read or written"):
        await open_kek("correct horse battery stapler", passphrase_kek.record)


@pytest.mark.slow
async def test_salt_and_kek_id_are_random_per_keyring(passphrase_kek: KeyEncryptionKey) -> None:
    again = await create_kek(PASSPHRASE)
    first, second = passphrase_kek.record, again.record
    assert first.salt and second.salt and len(first.salt) >= 16
    assert first.salt != second.salt
    assert first.kek_id != second.kek_id
    assert first.verifier != second.verifier
    raw = os.urandom(32)
    one, two = (await create_kek(raw)).record, (await create_kek(raw)).record
    assert one.salt != two.salt and one.kek_id != two.kek_id


async def test_kek_id_and_repr_reveal_nothing(passphrase_kek: KeyEncryptionKey) -> None:
    raw = os.urandom(32)
    kek = await create_kek(raw)
    for opened, secret in ((kek, raw.hex()), (passphrase_kek, PASSPHRASE)):
        assert len(opened.kek_id) <= 64
        assert secret not in opened.kek_id
        assert secret not in repr(opened) and secret not in repr(opened.record)
    assert repr(DataKey.generate()) == "DataKey(...)"


# -- raw keys, records, verification ----------------------------------------------------------


async def test_raw_key_round_trip_through_a_stored_row() -> None:
    raw = os.urandom(32)
    kek = await create_kek(raw)
    row = kek.record.as_row()
    assert set(row) == {"kek_id", "kind", "salt", "params", "verifier", "created_at", "retired_at"}
    # Drivers may hand binary columns back as memoryview.
    stored = dict(row, salt=memoryview(row["salt"]), verifier=memoryview(row["verifier"]))
    reopened = await open_kek(raw, KeyringRecord.from_row(stored))
    sealed = seal_item(kek, ITEM, Place(SESSION, 1))
    assert open_item(reopened, sealed.ciphertext, sealed.wrapped_key, Place(SESSION, 1)) == ITEM


def test_a_sealed_batch_opens_item_by_item_each_under_its_own_key(
    kek: KeyEncryptionKey,
) -> None:
    plaintexts = [b"first", b"second", b"first"]
    sealed = seal_items(kek, plaintexts, SESSION, 7)
    for seq, ((ciphertext, wrapped), plaintext) in enumerate(
        zip(sealed, plaintexts, strict=True), 7
    ):
        assert open_item(kek, ciphertext, wrapped, Place(SESSION, seq)) == plaintext
        with pytest.raises(TamperedItemError):  # bound to its place
            open_item(kek, ciphertext, wrapped, Place(SESSION, seq + 1))
    keys = {kek.unwrap(wrapped) for _, wrapped in sealed}
    nonces = {ciphertext[1:13] for ciphertext, _ in sealed}
    assert len(keys) == len(nonces) == 3  # no key or nonce shared
    assert sealed[0][0] != sealed[2][0]  # equal plaintexts, unrelated ciphertexts


async def test_wrong_raw_key_fails_verification(kek: KeyEncryptionKey) -> None:
    with pytest.raises(WrongKeyError, match="raw 32-byte key"):
        await open_kek(os.urandom(32), kek.record)


async def test_key_of_another_kind_is_a_wrong_key(
    kek: KeyEncryptionKey, passphrase_kek: KeyEncryptionKey
) -> None:
    with pytest.raises(WrongKeyError, match="encrypted with a raw 32-byte key"):
        await open_kek(PASSPHRASE, kek.record)
    with pytest.raises(WrongKeyError, match="encrypted with a passphrase"):
        await open_kek(os.urandom(32), passphrase_kek.record)
    with pytest.raises(WrongKeyError, match="key provider"):
        await open_kek(LocalProvider(), kek.record)


async def test_keyring_row_is_bound_to_its_id() -> None:
    raw = os.urandom(32)
    kek = await create_kek(raw)
    other = await create_kek(raw)
    swapped = replace(kek.record, verifier=other.record.verifier)
    with pytest.raises(WrongKeyError):
        await open_kek(raw, swapped)
    flipped = bytearray(kek.record.verifier)
    flipped[-1] ^= 1
    with pytest.raises(WrongKeyError):
        await open_kek(raw, replace(kek.record, verifier=bytes(flipped)))


async def test_malformed_keyring_rows_raise_keyring_error(kek: KeyEncryptionKey) -> None:
    with pytest.raises(KeyringError, match="no salt"):
        await open_kek(os.urandom(32), replace(kek.record, salt=None))
    with pytest.raises(KeyringError, match="unknown kind"):
        await open_kek(os.urandom(32), replace(kek.record, kind="rot13"))
    with pytest.raises(KeyringError, match="malformed"):
        KeyringRecord.from_row({"kek_id": "x"})


# -- items ------------------------------------------------------------------------------------


def test_item_round_trip(kek: KeyEncryptionKey) -> None:
    for seq, plaintext in enumerate([ITEM, b"", b"x" * 100_000], start=1):
        place = Place(SESSION, seq)
        sealed = seal_item(kek, plaintext, place)
        assert sealed.kek_id == kek.kek_id
        assert len(sealed.wrapped_key) == 40
        assert len(sealed.ciphertext) == len(plaintext) + 29
        assert open_item(kek, sealed.ciphertext, sealed.wrapped_key, place) == plaintext
    sealed = seal_item(kek, ITEM, Place(SESSION, 1))
    assert b"Mochi" not in sealed.ciphertext and b"Mochi" not in sealed.wrapped_key


def test_every_item_gets_its_own_data_key(kek: KeyEncryptionKey) -> None:
    one, two = (seal_item(kek, ITEM, Place(SESSION, 1)) for _ in range(2))
    assert one.wrapped_key != two.wrapped_key
    assert one.ciphertext != two.ciphertext


@pytest.mark.parametrize(
    "moved_to",
    [Place(OTHER_SESSION, 3), Place(SESSION, 4), Place(SESSION, 3, "embedding:m"), Place(SESSION)],
)
def test_moved_item_fails_loudly(kek: KeyEncryptionKey, moved_to: Place) -> None:
    sealed = seal_item(kek, ITEM, Place(SESSION, 3))
    with pytest.raises(TamperedItemError, match=r"#9 of session 'chat-9'.*moved"):
        open_item(
            kek, sealed.ciphertext, sealed.wrapped_key, moved_to, where="#9 of session 'chat-9'"
        )


def test_the_read_paths_opener_opens_only_the_same_bytes_at_the_same_place(
    kek: KeyEncryptionKey,
) -> None:
    sealed = seal_item(kek, ITEM, Place(SESSION, 3))
    other = seal_item(kek, ITEM, Place(SESSION, 4))
    assert item_opener(kek, SESSION)(sealed.ciphertext, sealed.wrapped_key, 3) == ITEM
    altered = bytearray(sealed.ciphertext)
    altered[len(altered) // 2] ^= 1
    for opener, ciphertext, wrapped, seq in (
        (item_opener(kek, SESSION), sealed.ciphertext, sealed.wrapped_key, 4),  # moved
        (item_opener(kek, OTHER_SESSION), sealed.ciphertext, sealed.wrapped_key, 3),
        (item_opener(kek, SESSION), bytes(altered), sealed.wrapped_key, 3),
        (item_opener(kek, SESSION), sealed.ciphertext, other.wrapped_key, 3),  # swapped key
        (item_opener(kek, SESSION), b"\x02" + sealed.ciphertext[1:], sealed.wrapped_key, 3),
    ):
        with pytest.raises(TamperedItemError):
            opener(ciphertext, wrapped, seq)


def test_swapped_wrapped_keys_fail(kek: KeyEncryptionKey) -> None:
    one = seal_item(kek, ITEM, Place(SESSION, 1))
    two = seal_item(kek, ITEM, Place(SESSION, 2))
    with pytest.raises(TamperedItemError):
        open_item(kek, one.ciphertext, two.wrapped_key, Place(SESSION, 1))


def test_tampered_ciphertext_fails_at_every_byte(kek: KeyEncryptionKey) -> None:
    place = Place(SESSION, 1)
    sealed = seal_item(kek, b"short item", place)
    for index in range(len(sealed.ciphertext)):
        altered = bytearray(sealed.ciphertext)
        altered[index] ^= 0x40
        with pytest.raises(TamperedItemError):
            open_item(kek, bytes(altered), sealed.wrapped_key, place)
    for cut in (0, 1, 13, len(sealed.ciphertext) - 1):
        with pytest.raises(TamperedItemError, match=r"truncated|authentication"):
            open_item(kek, sealed.ciphertext[:cut], sealed.wrapped_key, place)


def test_tampered_wrapped_key_fails(kek: KeyEncryptionKey) -> None:
    place = Place(SESSION, 1)
    sealed = seal_item(kek, ITEM, place)
    for index in (0, 8, 39):
        altered = bytearray(sealed.wrapped_key)
        altered[index] ^= 1
        with pytest.raises(TamperedItemError, match="wrapped data key"):
            open_item(kek, sealed.ciphertext, bytes(altered), place)
    with pytest.raises(TamperedItemError):
        open_item(kek, sealed.ciphertext, sealed.wrapped_key[:20], place)


def test_tampered_item_error_is_a_corrupt_item_in_our_hierarchy() -> None:
    assert issubclass(TamperedItemError, CorruptItemError)
    assert issubclass(TamperedItemError, DecryptionError)
    assert issubclass(WrongKeyError, AgentsSQLAlchemyError)
    assert issubclass(InvalidKeyError, ValueError)


async def test_another_databases_key_cannot_open_an_item(kek: KeyEncryptionKey) -> None:
    stranger = await create_kek(os.urandom(32))
    sealed = seal_item(kek, ITEM, Place(SESSION, 1))
    with pytest.raises(TamperedItemError):
        open_item(stranger, sealed.ciphertext, sealed.wrapped_key, Place(SESSION, 1))


def test_item_under_another_kek_id_names_the_unfinished_rotation(kek: KeyEncryptionKey) -> None:
    sealed = seal_item(kek, ITEM, Place(SESSION, 1))
    with pytest.raises(KeyringError, match="rotation is unfinished"):
        open_item(kek, sealed.ciphertext, sealed.wrapped_key, Place(SESSION, 1), kek_id="old")


def test_companions_sealed_with_the_items_key(kek: KeyEncryptionKey) -> None:
    place = Place(SESSION, 5)
    sealed = seal_item(kek, ITEM, place)
    vector = os.urandom(1536 * 4)
    vector_place = place.for_purpose("embedding:text-embedding-3-small")
    sealed_vector = sealed.data_key.seal(vector, vector_place)
    data_key = unwrap_data_key(kek, sealed.wrapped_key, place, kek_id=kek.kek_id)
    assert data_key.open(sealed_vector, vector_place) == vector
    with pytest.raises(TamperedItemError):
        data_key.open(sealed_vector, place.for_purpose("embedding:other-model"))
    with pytest.raises(TamperedItemError):
        data_key.open(sealed.ciphertext, vector_place)  # purposes do not mix


# -- session state ----------------------------------------------------------------------------


def header_kek_id(sealed_state: bytes) -> str:
    """The kek_id in a sealed state's header: version byte, id length, the id in ASCII."""
    return sealed_state[2 : 2 + sealed_state[1]].decode("ascii")


def test_state_round_trip_and_binding(kek: KeyEncryptionKey) -> None:
    state = b'{"step": 3, "notes": "Mochi"}'
    blob = seal_state(kek, state, SESSION)
    assert b"Mochi" not in blob
    assert header_kek_id(blob) == kek.kek_id  # the header names its key, in clear
    assert open_state(kek, blob, SESSION) == state
    with pytest.raises(DecryptionError, match="state of session") as moved:
        open_state(kek, blob, OTHER_SESSION)
    assert not isinstance(moved.value, TamperedItemError)
    altered = bytearray(blob)
    altered[-3] ^= 1
    with pytest.raises(DecryptionError):
        open_state(kek, bytes(altered), SESSION)
    with pytest.raises(DecryptionError, match="truncated"):
        open_state(kek, blob[:30], SESSION)


# -- rotation ---------------------------------------------------------------------------------


async def test_rewrap_moves_keys_to_the_new_kek_without_touching_ciphertexts(
    kek: KeyEncryptionKey,
) -> None:
    new_key = os.urandom(32)
    new = await create_kek(new_key, previous=kek)
    assert new.kek_id != kek.kek_id
    items = [seal_item(kek, ITEM + bytes([seq]), Place(SESSION, seq)) for seq in range(1, 6)]
    rewrapped = rewrap_many([item.wrapped_key for item in items], kek, new)
    for seq, (item, wrapped) in enumerate(zip(items, rewrapped, strict=True), start=1):
        assert open_item(new, item.ciphertext, wrapped, Place(SESSION, seq)) == ITEM + bytes([seq])
        with pytest.raises(DecryptionError):
            kek.unwrap(wrapped)  # the old KEK no longer unwraps it
        with pytest.raises(TamperedItemError):
            open_item(kek, item.ciphertext, wrapped, Place(SESSION, seq))
    with pytest.raises(DecryptionError, match="data key 0 of the batch"):
        rewrap_many(rewrapped[:1], kek, new)  # already moved: not silently re-wrapped twice
    assert rewrap(items[0].wrapped_key, kek, new) != items[0].wrapped_key
    # The new keyring row opens with the new key only.
    assert (await open_kek(new_key, new.record)).kek_id == new.kek_id
    with pytest.raises(WrongKeyError):
        await open_kek(os.urandom(32), new.record)


async def test_rewrap_state_is_idempotent(kek: KeyEncryptionKey) -> None:
    new = await create_kek(os.urandom(32), previous=kek)
    blob = seal_state(kek, b"{}", SESSION)
    moved = rewrap_state(blob, kek, new)
    assert header_kek_id(moved) == new.kek_id
    assert rewrap_state(moved, kek, new) == moved  # a resumed rotation skips it
    assert open_state(new, moved, SESSION) == b"{}"
    with pytest.raises(KeyringError, match="rotation is unfinished"):
        open_state(kek, moved, SESSION)
    third = await create_kek(os.urandom(32))
    with pytest.raises(KeyringError, match="neither"):
        rewrap_state(blob, third, new)


@pytest.mark.slow
async def test_term_hashes_are_stable_across_rotation(
    kek: KeyEncryptionKey, passphrase_kek: KeyEncryptionKey
) -> None:
    rotated = await create_kek(PASSPHRASE, previous=kek)  # even across kinds
    twice = await create_kek(os.urandom(32), previous=rotated)
    stranger = await create_kek(os.urandom(32))
    terms = ["mochi", "dog", "ünïcødé"]
    before = [term_hasher(kek)(term) for term in terms]
    assert [term_hasher(rotated)(term) for term in terms] == before
    assert [term_hasher(twice)(term) for term in terms] == before
    assert [term_hasher(stranger)(term) for term in terms] != before
    assert [term_hasher(passphrase_kek)(term) for term in terms] != before
    reopened = await open_kek(PASSPHRASE, rotated.record)
    assert [term_hasher(reopened)(term) for term in terms] == before


def test_term_hashes_are_keyed_normalised_64_bit_ids(kek: KeyEncryptionKey) -> None:
    hasher = term_hasher(kek)
    digest = hasher("mochi")
    assert 0 <= digest < 2**64
    assert digest != term_id("mochi")  # not the plain id a plaintext store packs
    fullwidth = "\uff2d\uff2f\uff23\uff28\uff29"
    assert hasher("Mochi") == hasher("MOCHI") == hasher(fullwidth) == digest
    assert hasher("café") == hasher(unicodedata.normalize("NFD", "café"))
    assert hasher("mochi") != hasher("mochis")


# -- key providers ----------------------------------------------------------------------------


@pytest.mark.parametrize("provider_class", [LocalProvider, AsyncLocalProvider])
async def test_provider_round_trip(provider_class: type[LocalProvider]) -> None:
    provider = provider_class()
    assert isinstance(provider, KeyProvider)
    kek = await create_kek(provider)
    record = kek.record
    assert record.kind == "provider" and record.salt is None
    assert record.params == {"provider": "local/test-key"}
    assert record.kek_id != provider.kek_id
    calls = provider.calls
    sealed = [seal_item(kek, ITEM, Place(SESSION, seq)) for seq in range(100)]
    assert provider.calls == calls, "the provider must not be called per item"
    reopened = await open_kek(provider, record)
    assert provider.calls == calls + 1
    for seq, item in enumerate(sealed):
        assert open_item(reopened, item.ciphertext, item.wrapped_key, Place(SESSION, seq)) == ITEM


async def test_provider_with_another_kek_id_is_a_wrong_key() -> None:
    kek = await create_kek(LocalProvider("kms/key-a"))
    with pytest.raises(WrongKeyError, match="kms/key-a"):
        await open_kek(LocalProvider("kms/key-b"), kek.record)


async def test_provider_that_fails_to_unwrap_raises_provider_error() -> None:
    kek = await create_kek(LocalProvider())
    with pytest.raises(KeyProviderError, match=r"failed to unwrap.*InvalidUnwrap"):
        await open_kek(LocalProvider(), kek.record)  # same id, other key material


async def test_provider_returning_other_bytes_is_a_wrong_key() -> None:
    provider = LocalProvider()
    kek = await create_kek(provider)
    liar = LocalProvider()
    liar.unwrap = lambda wrapped: os.urandom(64)  # type: ignore[method-assign]
    with pytest.raises(WrongKeyError, match="fail its check"):
        await open_kek(liar, kek.record)


async def test_provider_returning_non_bytes_raises_provider_error() -> None:
    provider = LocalProvider()
    provider.wrap = lambda data_key: "not bytes"  # type: ignore[method-assign,assignment,return-value]
    with pytest.raises(KeyProviderError, match="expected non-empty bytes"):
        await create_kek(provider)


async def test_provider_that_cannot_unwrap_is_refused_at_creation() -> None:
    provider = LocalProvider()
    provider.unwrap = lambda wrapped: bytes(64)  # type: ignore[method-assign]
    with pytest.raises(InvalidKeyError, match="round-trip"):
        await create_kek(provider)


async def test_provider_whose_wrap_returns_the_key_itself_is_refused() -> None:
    """A stand-in left in place (`wrap` returning its input) kept the keyring's secrets in
    the clear in the database."""
    provider = LocalProvider()
    provider.wrap = lambda data_key: b"v1:" + data_key  # type: ignore[method-assign]
    provider.unwrap = lambda wrapped: wrapped[3:]  # type: ignore[method-assign]
    with pytest.raises(InvalidKeyError, match="wraps nothing"):
        await create_kek(provider)


@pytest.mark.parametrize("kek_id", ["a\x00b", "a\ud800"])
async def test_provider_kek_id_must_be_storable(kek_id: str) -> None:
    """A lone surrogate failed MariaDB's JSON check of the keyring row."""
    provider = LocalProvider()
    provider.kek_id = kek_id
    with pytest.raises(InvalidKeyError, match="no NUL, no lone surrogate"):
        await create_kek(provider)


def test_data_key_must_be_32_bytes() -> None:
    with pytest.raises(ValueError):
        DataKey(os.urandom(16))


def test_data_key_open_item_is_open_at_an_item_place(kek: KeyEncryptionKey) -> None:
    sealed = seal_item(kek, ITEM, Place(SESSION, 3))
    assert sealed.data_key.open_item(sealed.ciphertext, SESSION, 3) == ITEM
    for session, seq in ((SESSION, 4), (OTHER_SESSION, 3)):
        with pytest.raises(TamperedItemError):
            sealed.data_key.open_item(sealed.ciphertext, session, seq)
    with pytest.raises(TamperedItemError):
        sealed.data_key.open_item(b"\x02" + sealed.ciphertext[1:], SESSION, 3)
