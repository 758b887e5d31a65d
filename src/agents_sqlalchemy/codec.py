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
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from .crypto import KeyEncryptionKey, Place, open_item, open_state, seal_item, seal_state
from .errors import CorruptItemError, ItemError
from .repository import NewItem, SessionKey, StoredItem


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


class Codec(Protocol):
    """Turns JSON text into stored rows and back, for items and for session state."""

    state_columns: tuple[str, ...]

    def rows(self, key: SessionKey, payloads: list[str], first_seq: int) -> list[NewItem]: ...

    def item(self, key: SessionKey, stored: StoredItem) -> Any: ...

    def state_values(self, key: SessionKey, state: dict[str, Any]) -> dict[str, Any]: ...

    def state(self, key: SessionKey, row: Any) -> dict[str, Any]: ...


class PlainCodec:
    """Items as compact JSON text; state as a JSON column."""

    state_columns: tuple[str, ...] = ("state",)

    def rows(self, key: SessionKey, payloads: list[str], first_seq: int) -> list[NewItem]:
        return [NewItem(payload=payload) for payload in payloads]

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

    def rows(self, key: SessionKey, payloads: list[str], first_seq: int) -> list[NewItem]:
        rows = []
        for seq, payload in enumerate(payloads, first_seq):
            sealed = seal_item(self.kek, payload.encode(), Place(key.hash, seq))
            rows.append(
                NewItem(
                    ciphertext=sealed.ciphertext,
                    wrapped_key=sealed.wrapped_key,
                    kek_id=sealed.kek_id,
                )
            )
        return rows

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
