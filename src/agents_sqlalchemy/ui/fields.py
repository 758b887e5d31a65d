"""What the session browser's pages read from their query strings, and how they write the
values they show: links, times, sizes (metadata as text is `metadata_text`'s).

>>> link("/sessions", user="a b", cursor=None, archived="")
'/sessions?user=a+b'
>>> metadata_filter("channel=web tier=2 vip=true")
{'channel': 'web', 'tier': 2, 'vip': True}
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request

from ..metadata_text import meta_pairs


class BadRequest(Exception):
    """A parameter the page cannot use; shown as a 400 page."""


def link(path: str, **params: Any) -> str:
    """`path?query` with the parameters that are set.

    >>> link("/sessions", user="a b", cursor=None, archived="")
    '/sessions?user=a+b'
    """
    query = urlencode({k: v for k, v in params.items() if v is not None and v != ""})
    return f"{path}?{query}" if query else path


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
    if end and len(raw) == 10:  # a day given as the end of a window counts whole
        if value.date() == date.max:
            raise BadRequest(f"{name} is past the last day there is")
        value += timedelta(days=1)
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def metadata_filter(raw: str) -> dict[str, Any] | None:
    """`channel=web code="7"` as a metadata filter: pairs as the Metadata column shows
    them (`metadata_text.meta_pairs`), values read as `--meta` reads them."""
    try:
        return meta_pairs(raw) or None
    except ValueError as exc:
        raise BadRequest(f"metadata filter: {exc}") from None


def archived_filter(raw: str | None) -> bool | None:
    return {"only": True, "with": None}.get(raw or "", False)
