"""Items and state to stored rows and back: JSON text, or sealed under per-item keys.

`PlainCodec` stores compact JSON that plain SQL can query; `SealedCodec` stores each item
sealed with AES-256-GCM under its own data key, bound to its session and position.

Example::

    codec = PlainCodec()
    rows = codec.rows(key, [encode_item(item)], first_seq=1)
    item = codec.item(key, stored_row)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from .crypto import (
    DataKey,
    KeyEncryptionKey,
    Place,
    open_item,
    open_state,
    seal_item,
    seal_state,
    term_hasher,
    unwrap_data_key,
)
from .errors import CorruptItemError, ItemError
from .repository import Candidate, NewItem, SessionKey, StoredItem

# Opened vectors a sealed store keeps in memory (about 1 KB each for the default embedder).
VECTOR_CACHE = 100_000


def _index_columns(entry: IndexEntry | None) -> dict[str, Any]:
    if entry is None:
        return {}
    return {"terms": entry.terms, "vector": entry.vector, "model_id": entry.model_id}


def encode_item(item: Any, what: str = "item") -> str:
    """Serialise one item, a JSON object, to compact JSON text.

    >>> encode_item({"role": "user", "content": "héllo"})
    '{"role":"user","content":"héllo"}'
    """
    if not isinstance(item, Mapping):
        raise ItemError(f"{what} is a {type(item).__name__}, not a JSON object (a dict)")
    try:
        text = json.dumps(item, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        text.encode("utf-8")  # lone surrogates cannot be stored by any database
    except (TypeError, ValueError) as exc:
        raise ItemError(f"{what} is not JSON-serialisable: {exc}") from exc
    return text


def encode_items(items: Iterable[Any]) -> list[str]:
    """Serialise a batch; the first bad item raises before anything is written."""
    return [encode_item(item, f"item {index}") for index, item in enumerate(items)]


def decode_item(text: str, key: SessionKey, seq: int | None) -> Any:
    """Parse one stored item (or state); one that is not a JSON object is `CorruptItemError`."""
    try:
        item = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise CorruptItemError(f"stored {where(key, seq)} is not valid JSON: {exc}") from exc
    if not isinstance(item, dict):
        raise CorruptItemError(f"stored {where(key, seq)} is not a JSON object")
    return item


def where(key: SessionKey, seq: int | None) -> str:
    """How errors name an item (by its sequence number) or a state, and its session."""
    what = "state" if seq is None else f"item #{seq}"
    return f"{what} of session {key.session_id[:80]!r}"


@dataclass(frozen=True)
class IndexEntry:
    """What search keeps of one item: its term counts and its vector under one model."""

    terms: Mapping[str, int]
    vector: bytes
    model_id: str


class Codec(Protocol):
    """Turns JSON text into stored rows and back, for items, their index and session state."""

    state_columns: tuple[str, ...]

    def rows(
        self,
        key: SessionKey,
        payloads: list[str],
        first_seq: int,
        index: Sequence[IndexEntry | None] | None = None,
    ) -> list[NewItem]: ...

    def item(self, key: SessionKey, stored: StoredItem) -> Any: ...

    def reindexed(self, key: SessionKey, stored: StoredItem, entry: IndexEntry) -> NewItem: ...

    def terms(self, counts: Mapping[str, int]) -> dict[str, int]: ...

    def vector(self, candidate: Candidate, model_id: str) -> bytes: ...

    def state_values(self, key: SessionKey, state: dict[str, Any]) -> dict[str, Any]: ...

    def state(self, key: SessionKey, row: Any) -> dict[str, Any]: ...


class PlainCodec:
    """Items as compact JSON text; state as a JSON column."""

    state_columns: tuple[str, ...] = ("state",)

    def rows(
        self,
        key: SessionKey,
        payloads: list[str],
        first_seq: int,
        index: Sequence[IndexEntry | None] | None = None,
    ) -> list[NewItem]:
        if index is None:
            return [NewItem(payload=payload) for payload in payloads]
        return [
            NewItem(payload=payload, **_index_columns(entry))
            for payload, entry in zip(payloads, index, strict=True)
        ]

    def reindexed(self, key: SessionKey, stored: StoredItem, entry: IndexEntry) -> NewItem:
        return NewItem(**_index_columns(entry))

    def terms(self, counts: Mapping[str, int]) -> dict[str, int]:
        return dict(counts)

    def vector(self, candidate: Candidate, model_id: str) -> bytes:
        return candidate.vector

    def item(self, key: SessionKey, stored: StoredItem) -> Any:
        if stored.payload is None:
            raise CorruptItemError(
                f"stored {where(key, stored.seq)} is sealed: open the store with its key"
            )
        return decode_item(stored.payload, key, stored.seq)

    def state_values(self, key: SessionKey, state: dict[str, Any]) -> dict[str, Any]:
        return {"state": state}

    def state(self, key: SessionKey, row: Any) -> dict[str, Any]:
        return dict(row.state or {})


class SealedCodec:
    """Items sealed under a fresh data key each, wrapped by the store's key-encryption key."""

    state_columns: tuple[str, ...] = ("sealed_state",)

    def __init__(self, kek: KeyEncryptionKey) -> None:
        self.kek = kek
        self._hash_term = term_hasher(kek)
        # Opened vectors, keyed by the candidate row (its wrapped key is random and unique).
        self._opened = lru_cache(maxsize=VECTOR_CACHE)(self._open_vector)

    def rows(
        self,
        key: SessionKey,
        payloads: list[str],
        first_seq: int,
        index: Sequence[IndexEntry | None] | None = None,
    ) -> list[NewItem]:
        rows = []
        for offset, payload in enumerate(payloads):
            place = Place(key.hash, first_seq + offset)
            sealed = seal_item(self.kek, payload.encode(), place)
            entry = index[offset] if index else None
            rows.append(
                NewItem(
                    ciphertext=sealed.ciphertext,
                    wrapped_key=sealed.wrapped_key,
                    kek_id=sealed.kek_id,
                    **_index_columns(self._sealed_entry(entry, sealed.data_key, place)),
                )
            )
        return rows

    def reindexed(self, key: SessionKey, stored: StoredItem, entry: IndexEntry) -> NewItem:
        place = Place(key.hash, stored.seq)
        if stored.wrapped_key is None:
            raise CorruptItemError(f"stored {where(key, stored.seq)} has no data key")
        data_key = unwrap_data_key(
            self.kek, stored.wrapped_key, place, kek_id=stored.kek_id, where=where(key, stored.seq)
        )
        return NewItem(**_index_columns(self._sealed_entry(entry, data_key, place)))

    def _sealed_entry(
        self, entry: IndexEntry | None, data_key: DataKey, place: Place
    ) -> IndexEntry | None:
        """Terms as keyed hashes, the vector sealed with the item's own data key."""
        if entry is None:
            return None
        vector = data_key.seal(entry.vector, place.for_purpose(f"embedding:{entry.model_id}"))
        return IndexEntry(self.terms(entry.terms), vector, entry.model_id)

    def terms(self, counts: Mapping[str, int]) -> dict[str, int]:
        hashed: dict[str, int] = {}
        for term, count in counts.items():
            digest = self._hash_term(term)
            hashed[digest] = hashed.get(digest, 0) + count
        return hashed

    def vector(self, candidate: Candidate, model_id: str) -> bytes:
        return self._opened(candidate, model_id)

    def _open_vector(self, candidate: Candidate, model_id: str) -> bytes:
        place = Place(candidate.session_hash, candidate.seq)
        where_ = f"vector of item #{candidate.seq}"
        if candidate.wrapped_key is None:
            raise CorruptItemError(f"{where_} has no data key")
        data_key = unwrap_data_key(self.kek, candidate.wrapped_key, place, where=where_)
        return data_key.open(
            candidate.vector, place.for_purpose(f"embedding:{model_id}"), where=where_
        )

    def item(self, key: SessionKey, stored: StoredItem) -> Any:
        if stored.ciphertext is None or stored.wrapped_key is None:
            raise CorruptItemError(f"stored {where(key, stored.seq)} is not sealed")
        plaintext = open_item(
            self.kek,
            stored.ciphertext,
            stored.wrapped_key,
            Place(key.hash, stored.seq),
            kek_id=stored.kek_id,
            where=where(key, stored.seq),
        )
        return decode_item(plaintext.decode("utf-8"), key, stored.seq)

    def state_values(self, key: SessionKey, state: dict[str, Any]) -> dict[str, Any]:
        blob = seal_state(self.kek, encode_item(state, "state").encode(), key.hash)
        return {"sealed_state": blob, "state": None}

    def state(self, key: SessionKey, row: Any) -> dict[str, Any]:
        if row.sealed_state is None:
            return {}
        plaintext = open_state(self.kek, row.sealed_state, key.hash, where=where(key, None))
        return dict(decode_item(plaintext.decode("utf-8"), key, None))
