"""Items to stored text and back: compact JSON, verbatim, readable by plain SQL."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from .errors import CorruptItemError, ItemError


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


def decode_item(text: str, where: str) -> Any:
    """Parse one stored item; a row that is not a JSON object raises `CorruptItemError`."""
    try:
        item = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise CorruptItemError(f"stored item {where} is not valid JSON: {exc}") from exc
    if not isinstance(item, dict):
        raise CorruptItemError(f"stored item {where} is not a JSON object")
    return item
