"""Checks of what callers pass in, each raising the library's own error before any I/O.

The same input gets the same error on every database: nothing here depends on a dialect.

Example::

    key = session_key("chat-1", user_id="alice")       # InvalidSessionIdError if unusable
    ttl = ttl_delta(3600)                              # timedelta(hours=1)
    limit = check_range("limit", 20, 1, 1000)          # ConfigurationError for 2.5, True, "20"
    check_json({"role": "user"}, "item")               # ItemError for {1: "a"} or deep nesting
"""

from __future__ import annotations

import contextlib
import json
import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

from .errors import ConfigurationError, InvalidSessionIdError, ItemError
from .types import SessionKey

T = TypeVar("T")

#: Containers (objects, arrays) an item, metadata or state may nest; deeper is `ItemError`.
#: Within what every reader takes back: pydantic-core's JSON parser (reads) stops at 200.
MAX_JSON_DEPTH = 128
#: The `user_id` column's length, in characters.
MAX_USER_ID_LENGTH = 255
#: Integers the databases store and compare (signed 64-bit).
INT64_MAX = 2**63 - 1
#: Digits an integer in an item may have: JSON readers (pydantic-core's, Python's `int` from
#: text) refuse longer ones, so such an item could be written but never read back.
MAX_INT_DIGITS = 4300
_INT_TOO_BIG = 10**MAX_INT_DIGITS
# Below this bit length an integer cannot reach `_INT_TOO_BIG` (a cheap first test).
_INT_SAFE_BITS = 14_000


def session_key(session_id: object, user_id: object = None, metadata: object = None) -> SessionKey:
    """Validate an SDK session id (any non-empty Unicode text, NUL included) and key it."""
    if not isinstance(session_id, str) or not session_id:
        raise InvalidSessionIdError(
            f"session id must be a non-empty string, got {session_id!r:.100}"
        )
    if not _is_utf8(session_id):
        raise InvalidSessionIdError("session id is not valid Unicode text (a lone surrogate)")
    return SessionKey.of(session_id, user_id=check_user_id(user_id), metadata=json_object(metadata))


def check_flag(name: str, value: object) -> bool:
    """`value` if it is True or False, else a `ConfigurationError`."""
    if not isinstance(value, bool):
        raise ConfigurationError(f"{name} must be True or False, got {value!r:.100}")
    return value


def check_moment(name: str, value: object) -> datetime | None:
    """`value` if it is None or a timezone-aware datetime that UTC can express (the
    databases compare times in UTC), else a `ConfigurationError`."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise ConfigurationError(f"{name} must be a datetime, got {value!r:.100}")
    if value.utcoffset() is None:
        raise ConfigurationError(f"{name} must be timezone-aware, got the naive {value!r}")
    try:
        value.astimezone(timezone.utc)
    except OverflowError:  # year 1 east of UTC, year 9999 west of it
        raise ConfigurationError(f"{name} is out of range in UTC: {value!r}") from None
    return value


def state_name(name: object) -> str:
    """A state value's name: non-empty text that every database stores (valid Unicode)."""
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"state names are non-empty strings, got {name!r:.100}")
    if not _is_utf8(name):
        raise ConfigurationError("a state name must be valid Unicode text (a lone surrogate)")
    return name


def check_user_id(user_id: object) -> str | None:
    """A user id: None, or non-empty text of at most 255 characters, without NUL."""
    if user_id is None:
        return None
    if not isinstance(user_id, str) or not user_id:
        raise ConfigurationError(f"a user id is a non-empty string, got {user_id!r}")
    if len(user_id) > MAX_USER_ID_LENGTH:
        raise ConfigurationError(
            f"a user id has at most {MAX_USER_ID_LENGTH} characters, got {len(user_id)}"
        )
    if "\x00" in user_id:
        raise ConfigurationError("a user id must not contain NUL characters")
    if not _is_utf8(user_id):
        raise ConfigurationError("a user id must be valid Unicode text (a lone surrogate)")
    return user_id


#: The longest ttl or older_than: a date that far ahead or back stays a date on every
#: dialect (and in Python, up to year 9999). No ttl keeps items for ever.
LONGEST = timedelta(days=365_000)


def _duration(value: object, what: str) -> timedelta:
    """`value` (seconds or a timedelta) as a timedelta of at most `LONGEST`; positive is
    left to the caller, whose message says what zero or less would mean."""
    if isinstance(value, bool) or not isinstance(value, (int, float, timedelta)):
        raise ConfigurationError(f"{what} is seconds or a timedelta, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigurationError(f"{what} is a finite number of seconds, got {value!r}")
    try:
        delta = value if isinstance(value, timedelta) else timedelta(seconds=value)
    except (OverflowError, ValueError):  # past timedelta's range
        delta = None
    if delta is None or delta > LONGEST:
        raise ConfigurationError(f"{what} is at most {LONGEST.days:,} days, got {value!r}")
    return delta


def ttl_delta(ttl: float | timedelta | None) -> timedelta | None:
    """A ttl option as a positive timedelta of at most `LONGEST` (or None: no expiry)."""
    if ttl is None:
        return None
    delta = _duration(ttl, "ttl")
    if delta <= timedelta(0):
        raise ConfigurationError(f"ttl must be at least one microsecond, got {ttl!r}")
    return delta


def older_than(value: object) -> timedelta:
    """How long sessions must have been inactive for a purge or an archive: seconds or a
    timedelta, positive, at most `LONGEST`. None, zero and negatives would reach every
    session, so they are refused (`delete_all(confirm=True)` deletes them all).

    >>> older_than(3600)
    datetime.timedelta(seconds=3600)
    """
    hint = ": to remove every session, use delete_all(confirm=True)"
    if value is None:
        raise ConfigurationError(f"older_than is seconds or a timedelta, got None{hint}")
    delta = _duration(value, "older_than")
    if delta <= timedelta(0):
        raise ConfigurationError(
            f"older_than must be at least one microsecond, got {value!r}{hint}"
        )
    return delta


def check_json(value: Any, what: str, *, allow_nul: bool = True) -> None:
    """Raise `ItemError` unless `value` can be stored as JSON and read back unchanged.

    Object keys must be strings (JSON would turn `1` into `"1"`), leaves strings, integers
    of at most `MAX_INT_DIGITS` digits, finite floats, booleans or None, and containers
    (dicts, lists, tuples) may nest at most `MAX_JSON_DEPTH` deep. With `allow_nul=False`
    (metadata, which PostgreSQL filters as jsonb), no key or string may hold a NUL character.
    """
    pending = [(value, 0)]
    while pending:
        node, depth = pending.pop()
        if isinstance(node, dict):
            for key in node:
                if type(key) is not str and not isinstance(key, str):
                    raise ItemError(
                        f"{what} has a {type(key).__name__} among its keys: "
                        "JSON object keys are strings"
                    )
                if not allow_nul and "\x00" in key:
                    raise ItemError(f"{what} has a key with a NUL character")
            children: Iterable[Any] = node.values()
        elif isinstance(node, (list, tuple)):
            children = node
        else:
            _check_leaf(node, what, allow_nul)
            continue
        if depth >= MAX_JSON_DEPTH:
            raise ItemError(f"{what} is nested more than {MAX_JSON_DEPTH} levels deep")
        for child in children:
            kind = type(child)
            if kind is str:  # the common leaves first, without a call
                if not allow_nul and "\x00" in child:
                    raise ItemError(f"{what} has a string with a NUL character")
            elif child is None or kind is bool:
                continue
            elif kind is int:
                if child.bit_length() > _INT_SAFE_BITS:
                    _check_int(child, what)
            else:
                pending.append((child, depth + 1))


def _check_leaf(value: Any, what: str, allow_nul: bool) -> None:
    if isinstance(value, str):
        if not allow_nul and "\x00" in value:
            raise ItemError(f"{what} has a string with a NUL character")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ItemError(f"{what} holds {value!r}, which JSON cannot represent")
    elif isinstance(value, int):
        if not isinstance(value, bool) and value.bit_length() > _INT_SAFE_BITS:
            _check_int(value, what)
    elif value is not None:
        raise ItemError(
            f"{what} is not JSON-serialisable: it holds a {type(value).__name__} (its value is "
            "left out of this message, which logs may keep)"
        )


def _check_int(value: int, what: str) -> None:
    if abs(value) >= _INT_TOO_BIG:
        raise ItemError(
            f"{what} holds an integer of more than {MAX_INT_DIGITS} digits, which JSON readers "
            "refuse: store it as a string"
        )


def json_object(value: object, what: str = "metadata") -> dict[str, Any] | None:
    """Check that metadata is a JSON object without NUL characters; raise `ItemError` if not."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ItemError(f"{what} is a {type(value).__name__}, not a JSON object (a dict)")
    check_json(value, what, allow_nul=False)
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
        raise ItemError(f"{what} is not JSON-serialisable: {exc}") from exc
    return dict(value)


#: Items one `add_items` call takes at most: a call is one transaction, held whole in memory;
#: more is refused before anything is written (split it: each call is all-or-nothing).
MAX_BATCH_ITEMS = 100_000


def item_list(items: object, call: str = "add_items") -> Sequence[Any]:
    """The items given to `add_items` (or another `call` that writes them): a list (or
    tuple) of items, never one item alone, at most `MAX_BATCH_ITEMS` of them."""
    if isinstance(items, (list, tuple)):
        if len(items) > MAX_BATCH_ITEMS:
            raise ItemError(
                f"{call} takes at most {MAX_BATCH_ITEMS:,} items a call, got {len(items):,}: "
                "split them into several calls (each is all-or-nothing); nothing was written"
            )
        return items
    raise ItemError(
        f"{call} takes a list of items, got {type(items).__name__}"
        + (": wrap one item in a list" if isinstance(items, Mapping) else "")
    )


def check_range(name: str, value: object, low: int, high: int | None = None) -> int:
    """`value` as an int if it is one and `low <= value <= high` (default: 64-bit max).

    Booleans, floats and strings are refused, however they would convert.
    """
    if isinstance(value, bool):
        raise ConfigurationError(f"{name} must be an integer, got {value!r}")
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ConfigurationError(f"{name} must be an integer, got {value!r}") from None
    top = INT64_MAX if high is None else high
    if number < low or number > top:
        raise ConfigurationError(f"{name} must be between {low} and {top}, got {number}")
    return number


def check_progress(progress: T) -> T:
    """`progress` if it is None or callable (it is called as `progress(done, total)`).

    Checked before a long operation starts, so that it does not fail after its first step.
    """
    if progress is None or callable(progress):
        return progress
    raise ConfigurationError(f"progress must be a function of (done, total), got {progress!r:.80}")


def check_finite(name: str, value: object) -> float:
    """`value` as a float if it is a finite int or float (not a boolean, not a string).

    >>> check_finite("min_score", 0.5)
    0.5
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        with contextlib.suppress(OverflowError):  # an int past a float's range
            if math.isfinite(number := float(value)):
                return number
    raise ConfigurationError(f"{name} must be a finite number, not {value!r:.80}")


FilterValue = str | int | float | bool


def metadata_filter(filters: object) -> dict[str, FilterValue] | None:
    """Metadata filters: names (strings) to strings, 64-bit integers, finite floats, booleans."""
    if filters is None:
        return None
    if not isinstance(filters, Mapping):
        raise ConfigurationError(f"metadata filters are a dict, got {type(filters).__name__}")
    checked: dict[str, FilterValue] = {}
    for name, value in filters.items():
        if not storable(name):
            raise ConfigurationError(
                f"metadata filter names are strings without NUL characters, got {name!r}"
            )
        checked[name] = _filter_value(name, value)
    return checked


def _filter_value(name: str, value: object) -> FilterValue:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not -INT64_MAX - 1 <= value <= INT64_MAX:
            raise ConfigurationError(f"metadata filter {name!r}: {value} is beyond 64 bits")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigurationError(f"metadata filter {name!r}: {value} is not a JSON number")
        return value
    if isinstance(value, str):
        if not storable(value):
            raise ConfigurationError(
                f"metadata filter {name!r}: a NUL character or a lone surrogate cannot match"
            )
        return value
    raise ConfigurationError(
        f"metadata filters compare strings, numbers and booleans, got {type(value).__name__} "
        f"for {name!r}"
    )


def storable(text: object) -> bool:
    """Whether `text` is text every database stores as it is: no NUL (PostgreSQL's text
    refuses it) and no lone surrogate (not UTF-8)."""
    return isinstance(text, str) and "\x00" not in text and _is_utf8(text)


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
