"""Metadata as text: the `key=value` pairs the command line's `--meta` and the session
browser's filter read, and how both show a session's metadata.

Example::

    meta_value("3"), meta_value('"7"')       # 3, '7'
    format_meta({"channel": "web"})          # 'channel=web'
    meta_pairs('channel=web code="7"')       # {'channel': 'web', 'code': '7'}
"""

from __future__ import annotations

import json
from typing import Any

from .shown_text import UNSAFE_LINE


def meta_value(raw: str) -> Any:
    """The metadata value `raw` stands for in a filter: a number or boolean if it reads as
    JSON one, else the text (quote it, `"7"`, for the string).

    >>> [meta_value(v) for v in ("3", "2.5", "true", "web", '"7"', "NaN")]
    [3, 2.5, True, 'web', '7', 'NaN']
    """
    try:  # NaN and Infinity are words, not JSON numbers
        value = json.loads(raw, parse_constant=_not_a_number)
    except ValueError:
        return raw
    return value if isinstance(value, (bool, int, float, str)) else raw


def _not_a_number(word: str) -> Any:
    raise ValueError(word)


def format_meta(metadata: dict[str, Any]) -> str:
    """Metadata as `key=value` pairs, in the syntax `--meta` reads (strings quoted if needed,
    keys too: one holding a space, `=` or `"`, or empty).

    >>> format_meta({"channel": "web", "tier": 1, "code": "7", "tags": ["a"]})
    'channel=web tier=1 code="7" tags=["a"]'
    >>> format_meta({"a=b": "c", "plan name": "pro"})
    '"a=b"=c "plan name"=pro'
    """
    pairs = []
    for name, value in metadata.items():
        plain = isinstance(value, str) and value and meta_value(value) == value
        plain = plain and not _needs_quotes(value, "=\"'")
        text = value if plain else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        quoted = not name or _needs_quotes(name, '="')
        pairs.append(f"{json.dumps(name, ensure_ascii=False) if quoted else name}={text}")
    return " ".join(pairs)


def _needs_quotes(text: str, special: str) -> bool:
    """Whether `text` is written as a JSON string: it holds a space, one of `special`, a
    backslash, or a character `one_line` escapes (shown escaped, it would read back as the
    escape's own text, and look like it)."""
    quoted = special + "\\"
    return any(c.isspace() or c in quoted for c in text) or bool(UNSAFE_LINE.search(text))


def meta_pair(text: str) -> tuple[str, Any]:
    """One `KEY=VALUE` (a `--meta` option): the key as `meta_pairs` reads it, the value all
    the rest, as `meta_value` reads it. `ValueError` says what is wrong.

    >>> meta_pair("note=a b"), meta_pair('"plan name"=pro')
    (('note', 'a b'), ('plan name', 'pro'))
    """
    if text.startswith('"'):
        try:
            name, equals = json.JSONDecoder().raw_decode(text)
        except ValueError as exc:
            raise ValueError(f"{text!r}: the key is not a closed JSON string") from exc
    else:
        equals = text.find("=")
        name = text[:equals] if equals > 0 else ""
    if not isinstance(name, str) or equals <= 0 or not text.startswith("=", equals):
        raise ValueError(f"{text!r} is not KEY=VALUE")
    return name, meta_value(text[equals + 1 :])


def meta_pairs(text: str) -> dict[str, Any]:
    """`key=value` pairs separated by spaces, as `format_meta` writes them, read back: a
    key or a value in double quotes is a JSON string (spaces, `=` and quotes inside), any
    other value runs to the next space and reads as `meta_value` reads it. `ValueError`
    names a bad pair.

    >>> meta_pairs('channel=web code="7" note="a b" tier=2 "a=b"=c')
    {'channel': 'web', 'code': '7', 'note': 'a b', 'tier': 2, 'a=b': 'c'}
    """
    found: dict[str, Any] = {}
    decoder, at = json.JSONDecoder(), 0
    while (at := _past_spaces(text, at)) < len(text):
        if text.startswith('"', at):
            try:
                name, equals = decoder.raw_decode(text, at)
            except ValueError as exc:
                raise ValueError(f"{text[at:].split()[0]!r} is not a closed JSON string") from exc
            if not isinstance(name, str) or not text.startswith("=", equals):
                raise ValueError(f"{text[at:].split()[0]!r} is not KEY=VALUE")
        else:
            equals = text.find("=", at)
            name = text[at:equals] if equals > at else ""
            if not name or any(c.isspace() for c in name):
                raise ValueError(f"{text[at:].split()[0]!r} is not KEY=VALUE")
        at = equals + 1
        if text.startswith('"', at):
            try:
                value, at = decoder.raw_decode(text, at)
            except ValueError as exc:
                raise ValueError(f"the value of {name!r} is not a closed JSON string") from exc
        else:
            end = next((i for i in range(at, len(text)) if text[i].isspace()), len(text))
            value, at = meta_value(text[at:end]), end
        found[name] = value
    return found


def _past_spaces(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at
