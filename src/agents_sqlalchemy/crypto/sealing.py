"""Sealing: AES-256-GCM under a fresh data key per item, bound to its place, key wrapped by the KEK.

Layouts (all binary)::

    items.ciphertext        0x01 | nonce (12) | AES-GCM ciphertext | tag (16)   = len + 29
    items.wrapped_key       AES key wrap (RFC 3394) of the 32-byte data key   = 40 bytes
    sessions.sealed_state   0x01 | len | kek_id | wrapped key (40) | nonce | ciphertext | tag

The AAD is the format byte and the `Place`: purpose, session hash and sequence number,
each length-prefixed. Bytes moved to another session, position or purpose fail to open,
and the failure raises (`TamperedItemError` for an item, `DecryptionError` otherwise):
nothing is ever skipped. Deleting the wrapped key (in the item's row) destroys the item.

Example::

    place = Place(session.hash, seq)
    sealed = seal_item(kek, payload.encode(), place)     # .ciphertext, .wrapped_key, .kek_id
    vector = sealed.data_key.seal(floats, place.for_purpose("embedding:model-x"))
    payload = open_item(kek, sealed.ciphertext, sealed.wrapped_key, place).decode()
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ..errors import DecryptionError, InvalidKeyError, KeyringError, TamperedItemError
from .kdf import KEY_BYTES, LABEL_PREFIX

VERSION = b"\x01"
NONCE_BYTES = 12
TAG_BYTES = 16
# What sealing adds to an item's plaintext: the version byte, the nonce and the tag.
SEALED_OVERHEAD = len(VERSION) + NONCE_BYTES + TAG_BYTES
WRAPPED_BYTES = KEY_BYTES + 8
_AAD_PREFIX = LABEL_PREFIX + b"sealed\x00" + VERSION
_BODY = len(VERSION) + NONCE_BYTES  # where the ciphertext starts, after the nonce


class Wrapper(Protocol):
    """What wraps item data keys: the store's `KeyEncryptionKey`, or an `OwnerKey`."""

    @property
    def kek_id(self) -> str:
        """The id stored beside every key it wraps (the items' `kek_id`)."""
        ...

    def wrap(self, data_key: bytes) -> bytes: ...

    def unwrap(self, wrapped: bytes) -> bytes: ...


@dataclass(frozen=True, slots=True)
class Place:
    """Where sealed bytes belong; it is their AAD. `seq` is None for session-level data.

    Example::

        Place(session_hash, 7)                        # item 7
        Place(session_hash, 7, "embedding:model-x")   # its embedding for one model
        Place(session_hash, None, "state")            # the session's state
    """

    session_hash: str
    seq: int | None = None
    purpose: str = "item"

    def for_purpose(self, purpose: str) -> Place:
        """The same place for another purpose (an item's embedding, say)."""
        return Place(self.session_hash, self.seq, purpose)

    def aad(self) -> bytes:
        """The associated data: unambiguous, length-prefixed fields."""
        if self.seq is None:
            return _aad_head(self.purpose, self.session_hash) + b"\x00"
        return (
            _aad_head(self.purpose, self.session_hash)
            + _SEQ
            + self.seq.to_bytes(8, "big", signed=True)
        )

    def __str__(self) -> str:
        at = "" if self.seq is None else f" #{self.seq}"
        return f"{self.purpose}{at} of session {self.session_hash[:16]}"


_SEQ = (8).to_bytes(1, "big")  # the length of a sequence number's field


@lru_cache(maxsize=4096)
def _aad_head(purpose: str, session_hash: str) -> bytes:
    """The AAD up to the sequence number, the same for every item of a session (cached)."""
    head, session = purpose.encode(), session_hash.encode()
    return b"".join(
        (
            _AAD_PREFIX,
            len(head).to_bytes(2, "big"),
            head,
            len(session).to_bytes(2, "big"),
            session,
        )
    )


def _error_for(place: Place) -> type[DecryptionError]:
    return DecryptionError if place.seq is None else TamperedItemError


def _failure(
    place: Place, where: str | None, what: str, error: type[DecryptionError] | None = None
) -> DecryptionError:
    return (error or _error_for(place))(
        f"{where or place} cannot be decrypted: {what}. Its bytes were altered, or moved "
        "from another session or position; it was left in place and not returned"
    )


class DataKey:
    """A random AES-256-GCM key for one item (or one state value) and its companions.

    Example::

        key = DataKey.generate()
        sealed = key.seal(b"hello", Place(h, 1))
        assert key.open(sealed, Place(h, 1)) == b"hello"
    """

    __slots__ = ("_aead", "material")

    def __init__(self, material: bytes) -> None:
        if len(material) != KEY_BYTES:
            raise InvalidKeyError(f"a data key is {KEY_BYTES} bytes, got {len(material)}")
        self.material = material
        self._aead = AESGCM(material)

    @classmethod
    def generate(cls) -> DataKey:
        """A fresh key from the OS random source."""
        return cls(os.urandom(KEY_BYTES))

    def seal(self, plaintext: bytes, place: Place) -> bytes:
        """`VERSION | nonce | ciphertext | tag`, bound to `place`."""
        return _sealed(self._aead, os.urandom(NONCE_BYTES), plaintext, place.aad())

    def open(self, sealed: bytes, place: Place, *, where: str | None = None) -> bytes:
        """The plaintext of `seal(..., place)`; anything else raises, naming `where`.

        The error is `TamperedItemError` for a place with a `seq`, else `DecryptionError`.
        """
        return self._open(sealed, place, where, _error_for(place))

    def open_item(self, sealed: bytes, session_hash: str, seq: int) -> bytes:
        """`open(sealed, Place(session_hash, seq))` in fewer steps: every item read runs it."""
        if sealed[:1] == VERSION:
            aad = _aad_head("item", session_hash) + _SEQ + seq.to_bytes(8, "big", signed=True)
            nonce, body = sealed[1:_BODY], sealed[_BODY:]
            try:
                return self._aead.decrypt(nonce, body, aad)
            except InvalidTag:
                pass
        return self.open(sealed, Place(session_hash, seq))  # raises, saying why

    def _open(
        self, sealed: bytes, place: Place, where: str | None, error: type[DecryptionError]
    ) -> bytes:
        if len(sealed) < SEALED_OVERHEAD or sealed[:1] != VERSION:
            raise _failure(place, where, "it is truncated or of an unknown format", error)
        try:
            return self._aead.decrypt(sealed[1:_BODY], sealed[_BODY:], place.aad())
        except InvalidTag:
            raise _failure(place, where, "authentication failed", error) from None

    def __repr__(self) -> str:
        return "DataKey(...)"


@dataclass(frozen=True, slots=True)
class SealedItem:
    """What to store for one item: `ciphertext`, `kek_id`, `wrapped_key`: one items row.

    `data_key` stays in memory to seal the item's companions (embeddings) in the same write.
    """

    ciphertext: bytes
    wrapped_key: bytes
    kek_id: str
    data_key: DataKey = field(repr=False, compare=False)


def seal_item(kek: Wrapper, plaintext: bytes, place: Place) -> SealedItem:
    """Seal one item under a fresh data key and wrap that key with `kek` (~5 us)."""
    data_key = DataKey.generate()
    return SealedItem(
        data_key.seal(plaintext, place), kek.wrap(data_key.material), kek.kek_id, data_key
    )


def seal_items(
    kek: Wrapper, plaintexts: Sequence[bytes], session_hash: str, first_seq: int
) -> list[tuple[bytes, bytes]]:
    """`seal_item` for consecutive items of one session, numbered from `first_seq`: each
    item's `(ciphertext, wrapped_key)`, with one draw from the OS random source for all
    their keys and nonces (an append seals a batch; a draw costs as much as a seal)."""
    step = KEY_BYTES + NONCE_BYTES
    random = os.urandom(len(plaintexts) * step)
    head = _aad_head("item", session_hash) + _SEQ
    out = []
    for i, plaintext in enumerate(plaintexts):
        material = random[i * step : i * step + KEY_BYTES]
        nonce = random[i * step + KEY_BYTES : (i + 1) * step]
        aad = head + (first_seq + i).to_bytes(8, "big", signed=True)
        out.append((_sealed(AESGCM(material), nonce, plaintext, aad), kek.wrap(material)))
    return out


def _sealed(aead: AESGCM, nonce: bytes, plaintext: bytes, aad: bytes) -> bytes:
    return VERSION + nonce + aead.encrypt(nonce, plaintext, aad)


def unwrap_data_key(
    kek: Wrapper,
    wrapped_key: bytes,
    place: Place,
    *,
    kek_id: str | None = None,
    where: str | None = None,
) -> DataKey:
    """An item's data key, to open its companions; `kek_id` is the item row's, if known."""
    return _unwrap(kek, wrapped_key, place, kek_id, where, _error_for(place))


def _unwrap(
    kek: Wrapper,
    wrapped_key: bytes,
    place: Place,
    kek_id: str | None,
    where: str | None,
    error: type[DecryptionError],
) -> DataKey:
    if kek_id is not None and kek_id != kek.kek_id:
        raise KeyringError(
            f"{where or place} is wrapped by key-encryption key {kek_id!r}, not the store's "
            f"{kek.kek_id!r}: a key rotation is unfinished (run it again to finish it), or "
            "this store holds a key that was rotated away (open it again with the new key)"
        )
    try:
        return DataKey(kek.unwrap(wrapped_key))
    except (DecryptionError, ValueError):
        raise _failure(place, where, "its wrapped data key does not unwrap", error) from None


def open_item(
    kek: Wrapper,
    ciphertext: bytes,
    wrapped_key: bytes,
    place: Place,
    *,
    kek_id: str | None = None,
    where: str | None = None,
) -> bytes:
    """The plaintext of one sealed item at `place`; `where` ("#3 of session 'x'") names it."""
    data_key = _unwrap(kek, wrapped_key, place, kek_id, where, TamperedItemError)
    return data_key._open(ciphertext, place, where, TamperedItemError)


def item_opener(kek: Wrapper, session_hash: str) -> Callable[[bytes, bytes, int], bytes]:
    """`open_one(ciphertext, wrapped_key, seq)`: the plaintext of an item of this session.

    A read's crypto and nothing more (unwrap, AES-GCM): the AAD's head is built once per
    session, no `DataKey` is made. A failure raises without saying why; `open_item` on
    the same bytes gives the error that does.

    Example::

        open_one = item_opener(kek, session_hash)
        texts = [open_one(c, w, seq) for seq, c, w in rows]
    """
    head = _aad_head("item", session_hash) + _SEQ
    unwrap = kek.unwrap

    def open_one(ciphertext: bytes, wrapped_key: bytes, seq: int) -> bytes:
        if ciphertext[:1] != VERSION:
            raise TamperedItemError(f"item #{seq}: unknown format")
        aad = head + seq.to_bytes(8, "big", signed=True)
        try:
            return AESGCM(unwrap(wrapped_key)).decrypt(ciphertext[1:_BODY], ciphertext[_BODY:], aad)
        except (InvalidTag, ValueError):
            raise TamperedItemError(f"item #{seq} cannot be decrypted") from None

    return open_one


def state_place(session_hash: str) -> Place:
    """The place of a session's state."""
    return Place(session_hash, None, "state")


def seal_state(kek: Wrapper, plaintext: bytes, session_hash: str) -> bytes:
    """Seal a session's state under a fresh data key carried, wrapped, in the same blob."""
    data_key = DataKey.generate()
    header = _state_header(kek.kek_id, kek.wrap(data_key.material))
    return header + data_key.seal(plaintext, state_place(session_hash))


def open_state(
    kek: Wrapper, sealed: bytes, session_hash: str, *, where: str | None = None
) -> bytes:
    """The plaintext of `seal_state(..., session_hash)`; anything else raises."""
    place = state_place(session_hash)
    kek_id, wrapped, body = _split_state(sealed, place, where)
    data_key = _unwrap(kek, wrapped, place, kek_id, where, DecryptionError)
    return data_key._open(body, place, where, DecryptionError)


def state_kek_id(sealed: bytes) -> str:
    """The id of the key that wraps a sealed state's data key (a store's or an owner's)."""
    return _split_state(sealed, state_place(""), "a sealed state")[0]


def rewrap(wrapped: bytes, old: Wrapper, new: Wrapper, *, where: str | None = None) -> bytes:
    """Re-wrap one data key from `old` to `new`; the ciphertext it opens is untouched."""
    try:
        return new.wrap(old.unwrap(wrapped))
    except DecryptionError:
        raise DecryptionError(
            f"{where or 'a data key'} does not unwrap under key-encryption key {old.kek_id}: "
            "it was altered, or is wrapped by another key"
        ) from None


def rewrap_many(wrapped: Iterable[bytes], old: Wrapper, new: Wrapper) -> list[bytes]:
    """Re-wrap a batch (the keys of a window of items rows), in order; ~3 us per key."""
    return [
        rewrap(one, old, new, where=f"data key {index} of the batch")
        for index, one in enumerate(wrapped)
    ]


def rewrap_state(sealed: bytes, old: Wrapper, new: Wrapper) -> bytes:
    """Re-wrap a sealed state's data key; a state already under `new` comes back unchanged."""
    place = state_place("")
    kek_id, wrapped, body = _split_state(sealed, place, "a sealed state")
    if kek_id == new.kek_id:
        return sealed
    if kek_id != old.kek_id:
        raise KeyringError(
            f"a sealed state is wrapped by {kek_id!r}, neither {old.kek_id!r} nor {new.kek_id!r}"
        )
    return _state_header(new.kek_id, rewrap(wrapped, old, new, where="a sealed state")) + body


def check_state_key(sealed: bytes, wrapper: Wrapper, *, where: str) -> None:
    """Unwrap a sealed state's data key under `wrapper`, as a rotation will (`rewrap_state`
    returns a state under its new key unchanged, unwrapping nothing), or raise naming
    `where`."""
    _, wrapped, _ = _split_state(sealed, state_place(""), where)
    rewrap(wrapped, wrapper, wrapper, where=where)


def _state_header(kek_id: str, wrapped: bytes) -> bytes:
    ident = kek_id.encode()
    return VERSION + len(ident).to_bytes(1, "big") + ident + wrapped


def _split_state(sealed: bytes, place: Place, where: str | None) -> tuple[str, bytes, bytes]:
    sealed = bytes(sealed)  # a driver may return a memoryview
    if len(sealed) < 2 or sealed[:1] != VERSION:
        raise _failure(place, where, "it is truncated or of an unknown format")
    end = 2 + sealed[1]
    body = end + WRAPPED_BYTES
    if len(sealed) < body + SEALED_OVERHEAD:
        raise _failure(place, where, "it is truncated")
    try:
        kek_id = sealed[2:end].decode("ascii")
    except UnicodeDecodeError:
        raise _failure(place, where, "its header is damaged") from None
    return kek_id, sealed[end:body], sealed[body:]
