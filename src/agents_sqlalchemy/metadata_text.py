"""Metadata as text: the `key=value` pairs the command line's `--meta` and the session
browser's filter read, and how both show a session's metadata.

Example::

    meta_value("3"), meta_value('"7"')       # 3, '7'
    format_meta({"channel": "web"})          # 'channel=web'
"""

from __future__ import annotations

import json
from typing import Any


def meta_value(raw: str) -> Any:
    """The metadata value `raw` stands for in a filter: a number or boolean if it reads as
    JSON one, else the text (quote it, `"7"`, for the string).

    >>> [meta_value(v) for v in ("3", "2.5", "true", "web", '"7"')]
    [3, 2.5, True, 'web', '7']
    """
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    return value if isinstance(value, (bool, int, float, str)) else raw


def format_meta(metadata: dict[str, Any]) -> str:
    """Metadata as `key=value` pairs, in the syntax `--meta` reads (strings quoted if needed).

    >>> format_meta({"channel": "web", "tier": 1, "code": "7", "tags": ["a"]})
    'channel=web tier=1 code="7" tags=["a"]'
    """
    pairs = []
    for name, value in metadata.items():
        plain = isinstance(value, str) and value and meta_value(value) == value
        plain = plain and not any(c.isspace() or c in "=\"'" for c in value)
        text = value if plain else json.dumps(value, ensure_ascii=False)
        pairs.append(f"{name}={text}")
    return " ".join(pairs)
