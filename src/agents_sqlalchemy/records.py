"""What the management API returns: session descriptions, pages of them, removal counts,
search hits, token usage, erasure receipts and what an import of a user's export wrote."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field, fields
from datetime import date, datetime, timezone
from typing import Any

from .errors import ConfigurationError

# A cursor is a few dozen characters; anything much longer is not one of ours.
MAX_CURSOR_LENGTH = 200
INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class SessionInfo:
    """A session as `store.list_sessions()` describes it; `item_count` counts live items,
    `archived_at` is when it was archived (None: it is not).

    Example::

        info = await store.session_info("chat-1")       # None: no such session
        info.user_id, info.metadata, info.item_count, info.updated_at
        for info in await store.list_sessions(user_id="alice"):
            print(info.session_id, info.item_count, info.archived_at)
    """

    session_id: str
    user_id: str | None
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    item_count: int
    archived_at: datetime | None = None


class SessionPage(list[SessionInfo]):
    """One page of `SessionInfo`, most recently active first.

    Example::

        page = await store.list_sessions(user_id="alice", limit=20)
        show(page)
        while page.next_cursor is not None:  # None: the last page (a cursor of None: the first)
            page = await store.list_sessions(user_id="alice", cursor=page.next_cursor)
            show(page)
    """

    def __init__(self, infos: list[SessionInfo], next_cursor: str | None) -> None:
        super().__init__(infos)
        self.next_cursor = next_cursor
        """Pass to `list_sessions(cursor=...)` for the next page; None on the last page."""


@dataclass(frozen=True)
class Removed:
    """How much a removal deleted.

    Example::

        removed = await store.delete_user("alice")
        removed += await store.purge_inactive(timedelta(days=90))   # Removed values add up
        print(removed.sessions, removed.items)
    """

    sessions: int = 0
    items: int = 0

    def __add__(self, other: Removed) -> Removed:
        return Removed(self.sessions + other.sessions, self.items + other.items)


def encode_cursor(updated_at: datetime, row_id: int) -> str:
    """An opaque cursor for the position after (updated_at, row_id)."""
    raw = json.dumps([updated_at.isoformat(), row_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, int]:
    """The position a cursor of `encode_cursor` stands for.

    Anything else, forged or damaged, is a `ConfigurationError` before any query runs.
    """
    if not isinstance(cursor, str) or len(cursor) > MAX_CURSOR_LENGTH:
        raise ConfigurationError(f"not a cursor of list_sessions: {cursor!r:.100}")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        stamp, row_id = json.loads(raw)
        if not isinstance(stamp, str) or type(row_id) is not int or not 0 <= row_id <= INT64_MAX:
            raise ValueError("not a time and a row id")
        moment = datetime.fromisoformat(stamp)
        if moment.tzinfo is None:
            raise ValueError("a time without its zone")
        return moment.astimezone(timezone.utc), row_id
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise ConfigurationError(f"not a cursor of list_sessions: {cursor!r:.100}") from exc


@dataclass(frozen=True)
class SearchHit:
    """One result of `session.search()` or `store.search()`: the item and why it ranked.

    `score` is the fused rank score; `vector` the cosine similarity (None in keyword mode),
    `keyword` the BM25 score as coverage of the query (1: holds every matched query term
    once; 0 when no query term matched), `recency` how new the item is among the items
    ranked (1: the newest, 0: the oldest), which breaks exact ties.

    Example::

        for hit in await store.search("refund policy", user_id="alice", limit=3):
            print(hit.session_id, hit.seq, hit.score, hit.keyword, hit.vector, hit.item)
        hits = await session.search_hits("refund policy")    # one session's
    """

    session_id: str
    seq: int
    item: dict[str, Any]
    score: float
    vector: float | None
    keyword: float
    recency: float


@dataclass(frozen=True)
class TokenUsage:
    """Token usage summed over user turns (of a branch, a session, a user, a day).

    Example::

        report = await store.usage(user_id="alice")
        total = report.total                    # a TokenUsage; so is each row's `usage`
        print(total.turns, total.requests, total.input_tokens, total.output_tokens)
    """

    turns: int = 0
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


@dataclass(frozen=True)
class DailyUsage:
    """One owner's usage on one UTC day (the day each turn's usage was first recorded).

    Example::

        report = await store.usage()
        for row in report.days:                 # one per owner and day, oldest first
            print(row.day.isoformat(), row.user_id or "-", row.usage.total_tokens)
    """

    user_id: str | None
    day: date
    usage: TokenUsage


@dataclass(frozen=True)
class UsageReport:
    """What `store.usage()` returns: per owner and day, oldest day first, and the total.

    Example::

        from datetime import datetime, timezone

        since = datetime(2026, 11, 1, tzinfo=timezone.utc)
        report = await store.usage(user_id="alice", since=since)
        report.total.total_tokens
        for row in report.days:
            print(row.day, row.user_id, row.usage.total_tokens)
    """

    days: list[DailyUsage] = field(default_factory=list)

    @property
    def total(self) -> TokenUsage:
        """The sums over every row."""
        return sum((row.usage for row in self.days), TokenUsage())


@dataclass(frozen=True)
class ErasureReceipt:
    """What `store.erase_user()` destroyed, and when: a record an operator can keep.

    It holds no content and not the user id itself: `user_sha256` is the SHA-256 (hex) of
    the id as given, which proves which request it answers to whoever holds the id, and
    names nobody to whoever does not. `item_keys_deleted` counts the item data keys
    deleted with their rows (0 in a store without a key: nothing was sealed). On SQLite an
    encrypted store scrubs them from the file and its WAL; a server may keep copies of
    deleted rows in its WAL, free space and backups, which only destroying the user's own
    key makes unreadable: `owner_keys_destroyed` counts the user's keys destroyed,
    `owner_keys_kept` says where they were kept ("database": copies of the database still
    hold them, wrapped under the store's key; else the key store's class, e.g.
    "KeyDirectory"), `owner_key_status` is "destroyed", or "scheduled" where a KMS only
    schedules a key's deletion, for `owner_key_gone_at`. Fields added later come with
    defaults, so a receipt kept as `as_dict()` reads back with `from_dict()` whatever
    version wrote it.

    Example::

        receipt = await store.erase_user("alice")
        json.dump(receipt.as_dict(), open("erasure-alice.json", "w"))
        receipt.user_sha256 == ErasureReceipt.hash_user("alice")   # True
    """

    user_sha256: str
    sessions: int
    items: int
    item_keys_deleted: int
    erased_at: datetime
    dialect: str
    tables: tuple[str, ...]
    encrypted: bool
    owner_keys_destroyed: int = 0
    owner_keys_kept: str | None = None
    owner_key_status: str | None = None
    owner_key_gone_at: datetime | None = None
    format: str = "agents-sqlalchemy/erasure-receipt"
    version: int = 1

    @staticmethod
    def hash_user(user_id: str) -> str:
        """The SHA-256 (hex) a receipt names a user by."""
        return hashlib.sha256(user_id.encode("utf-8")).hexdigest()

    def as_dict(self) -> dict[str, Any]:
        """The receipt as JSON values (the time in ISO 8601, UTC)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["erased_at"] = self.erased_at.isoformat()
        if self.owner_key_gone_at is not None:
            values["owner_key_gone_at"] = self.owner_key_gone_at.isoformat()
        values["tables"] = list(self.tables)
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ErasureReceipt:
        """A receipt back from `as_dict()` (names it does not know are left out)."""
        known = {f.name for f in fields(cls)}
        kept = {name: value for name, value in values.items() if name in known}
        kept["erased_at"] = datetime.fromisoformat(kept["erased_at"])
        if kept.get("owner_key_gone_at") is not None:
            kept["owner_key_gone_at"] = datetime.fromisoformat(kept["owner_key_gone_at"])
        kept["tables"] = tuple(kept["tables"])
        return cls(**kept)


@dataclass(frozen=True)
class ImportedUser:
    """What `store.import_user()` wrote: sessions and items, sessions skipped because their
    id was already in the store (with `skip_existing=True`), and usage rows of a branch's
    turns that no longer hold an item in the export (kept nowhere: there is no turn to put
    them on; the main line keeps those of its purged turns). `items` counts each line's
    items as the export holds them: those a branch shares with its source count on both
    lines, though they are stored once (`erase_user` counts stored rows).

    Example::

        with open("alice.jsonl", encoding="utf-8") as export:
            imported = await store.import_user(export, skip_existing=True)
        print(imported.sessions, imported.items, imported.skipped_sessions)
    """

    sessions: int = 0
    items: int = 0
    skipped_sessions: int = 0
    usage_left_out: int = 0
