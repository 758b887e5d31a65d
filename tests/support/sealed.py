"""Encrypted content: items carrying distinctive plaintext that must never be stored in the
clear, and the sealed columns (ciphertexts, wrapped keys) they become."""

from __future__ import annotations

import json
from typing import Any

from .items import ALL, message
from .tables import ITEMS, SESSIONS, raw_rows

# Distinctive plaintext: none of it may appear in any column or on disk in encrypted mode.
ITEM_MARKER = "plaintext-marker-item-Mochi-4f1c"
ARGS_MARKER = "plaintext-marker-arguments-9b2e"
STATE_MARKER = "plaintext-marker-state-77d0"
MARKERS = (ITEM_MARKER, ARGS_MARKER, STATE_MARKER, "Zürich", "日本語も", "lookup_weather")


def secret_items(tag: str) -> list[dict[str, Any]]:
    """Items that carry the markers (and the realistic ones of `items.ALL`)."""
    call = {
        "type": "function_call",
        "call_id": f"call-{tag}",
        "name": "remember",
        "arguments": json.dumps({"note": ARGS_MARKER, "tag": tag}),
    }
    return [message(f"{ITEM_MARKER} {tag}"), call, *ALL]


def blob(value: object) -> bytes:
    """A binary column's value (drivers give bytes or a memoryview)."""
    assert isinstance(value, (bytes, memoryview)), type(value)
    return bytes(value)


def as_bytes(value: object) -> bytes:
    """A column value as the bytes to search: binary as is, anything else as UTF-8 text."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False).encode()
    return str(value).encode()


async def sealed_rows(url: str, session_id: str) -> list[tuple[int, bytes, bytes, str]]:
    """(seq, ciphertext, wrapped key, kek_id) of every item of one session, in order."""
    rows = await raw_rows(
        url,
        f"SELECT i.seq, i.ciphertext, i.wrapped_key, i.kek_id FROM {ITEMS} i "
        f"JOIN {SESSIONS} s ON s.id = i.session_pk "
        f"WHERE s.session_id = '{session_id}' ORDER BY i.seq",
    )
    return [(int(str(r[0])), blob(r[1]), blob(r[2]), str(r[3])) for r in rows]


def blobs_of(rows: list[tuple[int, bytes, bytes, str]]) -> list[bytes]:
    """The ciphertexts and wrapped keys of `sealed_rows`."""
    return [blob for _, ciphertext, wrapped, _ in rows for blob in (ciphertext, wrapped)]


async def sealed_state(url: str) -> bytes:
    ((blob,),) = await raw_rows(url, f"SELECT sealed_state FROM {SESSIONS}")
    return bytes(blob)  # type: ignore[arg-type]
