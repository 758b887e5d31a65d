"""What the session browser's pages read from their query strings, and how they write the
values they show: links (under the path the app is mounted at), form fields, times, sizes
(metadata as text is `metadata_text`'s).

>>> link("/sessions", user="a b", cursor=None, archived="")
'/sessions?user=a+b'
>>> metadata_filter("channel=web tier=2 vip=true")
{'channel': 'web', 'tier': 2, 'vip': True}
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone
from typing import Any
from urllib.parse import unquote, urlencode

from starlette.requests import Request

from ..metadata_text import meta_pairs

#: What a browser changes in a form's value: NUL (to U+FFFD), CR and LF (to CRLF).
_CHANGED_IN_FORMS = re.compile("[\x00\r\n]")
#: The suffix of a parameter whose value a form carries percent-encoded (`form_field`).
ENCODED = ".pct"


class BadRequest(Exception):
    """A parameter the page cannot use; shown as a 400 page."""


def link(path: str, **params: Any) -> str:
    """`path?query` with the parameters that are set.

    >>> link("/sessions", user="a b", cursor=None, archived="")
    '/sessions?user=a+b'
    """
    query = urlencode({k: v for k, v in params.items() if v is not None and v != ""})
    return f"{path}?{query}" if query else path


def root(request: Request) -> str:
    """The path the app is mounted at (`root_path`; "" at the top): every path it writes
    starts with it."""
    return str(request.scope.get("root_path") or "").rstrip("/")


def route(request: Request) -> str:
    """The request's path within the app (its `root_path` left out)."""
    path, at = str(request.scope["path"]), root(request)
    if at and (path == at or path.startswith(f"{at}/")):
        return path[len(at) :] or "/"
    return path


def address(request: Request, path: str, **params: Any) -> str:
    """`link(path, **params)` under the path the app is mounted at."""
    return root(request) + link(path, **params)


def form_field(name: str, value: str) -> tuple[str, str]:
    """The name and value a GET form carries `value` under, so that it comes back as it is:
    as they are, or, where it holds a character a browser changes in a form (NUL, CR, LF),
    `name` + `.pct` and the value with those and `%` percent-encoded (`param` decodes it).

    >>> form_field("user", "alice"), form_field("user", "50%\\x00")
    (('user', 'alice'), ('user.pct', '50%25%00'))
    """
    if not _CHANGED_IN_FORMS.search(value):
        return name, value
    encoded = re.sub("[%\x00\r\n]", lambda m: f"%{ord(m.group()):02X}", value)
    return name + ENCODED, encoded


def param(request: Request, name: str) -> str:
    """The query's `name`, or its `name.pct` decoded (`form_field`); "" if neither."""
    encoded = request.query_params.get(name + ENCODED)
    if encoded is None:
        return request.query_params.get(name, "")
    try:
        return unquote(encoded, errors="strict")
    except UnicodeDecodeError:
        raise BadRequest(f"{name}{ENCODED} is not percent-encoded UTF-8") from None


def when(value: datetime | None) -> str:
    """A time as the pages show it: UTC to the second."""
    return "-" if value is None else value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def size(value: int | None) -> str:
    """Bytes for a person: 980 B, 12.3 kB, 4.5 MB.

    >>> size(980), size(12_300), size(None)
    ('980 B', '12.3 kB', '-')
    """
    if value is None:
        return "-"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value} B"


def whole(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a whole number") from None
    if not low <= value <= high:
        raise BadRequest(f"{name} must be between {low} and {high}")
    return value


def day(request: Request, name: str, *, end: bool = False) -> datetime | None:
    raw = (request.query_params.get(name) or "").strip()
    if not raw:
        return None
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise BadRequest(f"{name} is not a date such as 2026-11-29") from None
    if end and _date_only(raw):  # a day given as the end of a window counts whole
        if value.date() == date.max:
            raise BadRequest(f"{name} is past the last day there is")
        value += timedelta(days=1)
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def _date_only(raw: str) -> bool:
    """Whether `raw` is a date without a time (`2026-12-08`, `20261208`, ...)."""
    try:
        date.fromisoformat(raw)
    except ValueError:
        return False
    return True


def metadata_filter(raw: str) -> dict[str, Any] | None:
    """`channel=web code="7"` as a metadata filter: pairs as the Metadata column shows
    them (`metadata_text.meta_pairs`), values read as `--meta` reads them."""
    try:
        return meta_pairs(raw) or None
    except ValueError as exc:
        raise BadRequest(f"metadata filter: {exc}") from None


def archived_filter(raw: str | None) -> bool | None:
    return {"only": True, "with": None}.get(raw or "", False)
