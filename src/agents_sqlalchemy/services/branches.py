"""Turns, token usage and branches of a session, as its session object asks for them.

Items come out decoded (opened with their keys in encrypted mode), so that what a turn says
is matched and shown in memory and never stored beside the items in plaintext. Removals
destroy the keys of the items no line holds any more.

Example::

    lines = Lines(schema)
    stored = repository.Branches(schema, lines)
    branches = Branches(stored, Usage(schema, Items(schema), lines, stored), opener, owners,
                        written=None, ttl=None)
    name, source = await branches.create(key, "main", 2, None)
    await branches.read(key, name, limit=None)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from .. import repository
from ..aio import off_loop
from ..caches import let_go
from ..codec import Codec, counted, encode_items, noting_keys
from ..crypto import OwnerKey
from ..errors import BranchError
from ..records import DailyUsage, TokenUsage, UsageReport
from ..repository import GONE, Gone, Opened, Usage
from ..telemetry import current
from ..turns import MAIN, Turn, is_user
from ..types import Appended, BranchSummary, SessionKey, Written
from ..validation import check_moment, check_range, check_user_id, item_list, storable
from .opener import Opener
from .owners import Owners

MAX_NAME = 255

__all__ = ["GONE", "Branches", "Turn", "check_branch_name"]


#: Items `Branches.turns` decodes at a time (and an opener, to tell user messages).
TURN_SLICE = 1000


def _opener(codec: Codec, key: SessionKey) -> Opened:
    since = codec.removals  # before the rows are fetched (`Codec.items`)

    def opened(stored: Sequence[Sequence[Any]]) -> list[bool]:  # a slice at a time, as `turns`
        return [
            is_user(item)
            for start in range(0, len(stored), TURN_SLICE)
            for item in codec.items(
                key, stored[start : start + TURN_SLICE], since=since, counted=False
            )
        ]

    return opened


class Branches:
    """A session's lines of history: appends, reads and removals on any branch; branches
    made, listed and deleted; token usage per turn and across the store."""

    def __init__(
        self,
        branches: repository.Branches,
        usage: Usage,
        opener: Opener,
        owners: Owners,
        written: Written | None,
        *,
        ttl: timedelta | None,
    ) -> None:
        self._branches = branches
        self._usage = usage
        self._opener = opener
        self._owners = owners
        self._written = written
        self.ttl = ttl

    async def _codec(self, key: SessionKey) -> tuple[Codec, Opened]:
        codec = await self._opener.ready()
        return codec, _opener(codec, key)

    async def read(self, key: SessionKey, branch: str, limit: int | None) -> list[Any] | Gone:
        """A branch's live items in order (the latest `limit`); `GONE` if it is dead."""
        if limit is not None:
            check_range("limit", limit, 0)
            if limit == 0:
                return []

        async def read(key: SessionKey) -> list[Any] | Gone:
            codec, _ = await self._codec(key)
            since = codec.removals
            found = await self._branches.read_branch(key, branch, limit)
            if isinstance(found, Gone):
                return found
            return await off_loop(len(found), codec.items, key, found, since=since)

        return await self._owners.reading(key, read)

    async def append(
        self,
        key: SessionKey,
        branch: str,
        items: list[Any],
        ttl: timedelta | None,
        usage: dict[str, Any] | None,
        *,
        importing: bool = False,
    ) -> bool:
        """Append to a branch, all or nothing, with the run's usage if given; False (nothing
        written) when the branch is dead, or, `importing`, when the session is no longer
        marked as being imported. Only the main line is indexed for search."""
        given = item_list(items)  # as the main line's appends check it: not an iterator
        payloads = await off_loop(len(given), encode_items, given)
        if not payloads:
            return True

        async def write(key: SessionKey, sealer: OwnerKey | None) -> bool:
            codec, opened = await self._codec(key)
            return await self._usage.append_with_usage(
                key,
                branch,
                lambda first_seq: codec.rows(key, payloads, first_seq, sealer),
                [is_user(item) for item in given],
                ttl or self.ttl,
                usage,
                opened,
                importing=importing,
            )

        done = await self._owners.writing(key, write, reads=True)
        if done:
            counted(payloads)
            if branch == MAIN and self._written is not None:
                self._written(Appended(key))
        return done

    async def pop(self, key: SessionKey, branch: str) -> Any | Gone | None:
        """Remove and return a branch's latest live item; `GONE` if the branch is dead."""

        removed = list[bytes]()

        async def pop(key: SessionKey) -> Any | Gone | None:
            codec, opened = await self._codec(key)
            decode = noting_keys(codec.item, removed)
            return await self._branches.pop_line(key, branch, decode, opened)

        async with self._opener.scrubbing(removed=removed):  # the others stay in memory
            return await self._owners.reading(key, pop, look=False)

    async def clear(self, key: SessionKey) -> int:
        """Delete the items of every branch and the usage; return how many main items."""
        await self._opener.ready()
        async with self._opener.scrubbing():
            return await self._branches.clear_lines(key)

    async def create(
        self, key: SessionKey, source: str, turn: int, name: str | None
    ) -> tuple[str, str]:
        """Branch off `source` before user turn `turn`: (the new branch, the source used)."""
        check_range("turn_number", turn, 1)
        if name is not None:
            check_branch_name(name, "Branch name")
        base = f"branch_from_turn_{turn}_{int(time.time())}"

        async def create(key: SessionKey) -> tuple[str, str]:
            _, opened = await self._codec(key)
            return await self._branches.create_branch(key, source, turn, name, base, opened)

        return await self._owners.reading(key, create)

    async def exists(self, key: SessionKey, name: str) -> bool:
        """Whether a branch other than main is live and holds items."""
        if not storable(name):  # no branch has such a name
            return False
        await self._opener.ready()
        return await self._branches.branch_state(key, name) is True

    async def alive(self, key: SessionKey, name: str) -> bool:
        """Whether a branch other than main is live (made, and neither deleted nor cleared),
        whether or not it holds items yet."""
        await self._opener.ready()
        return not isinstance(await self._branches.branch_state(key, name), Gone)

    async def branched(self, key: SessionKey) -> bool:
        """Whether the session has a live branch besides main."""
        await self._opener.ready()
        return await self._branches.has_branches(key)

    async def delete(self, key: SessionKey, name: str) -> bool:
        """Delete a branch that holds items (not main); False if there is none such."""
        if not storable(name):  # no branch has such a name
            return False
        await self._opener.ready()
        async with self._opener.scrubbing():
            removed = await self._branches.delete_branch(key, name)
        if removed is not None and (operation := current()) is not None:
            operation.removed(removed)
        return removed is not None

    async def summaries(self, key: SessionKey) -> list[BranchSummary]:
        """The branches that hold live items."""

        async def summaries(key: SessionKey) -> list[BranchSummary]:
            _, opened = await self._codec(key)
            return await self._branches.branch_summaries(key, opened)

        return await self._owners.reading(key, summaries)

    async def others(self, key: SessionKey) -> list[BranchSummary]:
        """The branches besides main that hold live items, oldest first (none decoded)."""
        await self._opener.ready()
        return await self._branches.other_summaries(key)

    async def turns(
        self,
        key: SessionKey,
        branch: str,
        *,
        users_only: bool,
        shape: Callable[[list[Turn]], list[Any]] | None = None,
    ) -> list[Any] | Gone:
        """A branch's live items, decoded, with their user turns; with `shape`, what it
        makes of them, `TURN_SLICE` at a time: the decoded items of a slice are dropped
        before the next is decoded (the garbage collector's full collections, which hold
        every thread, walk only what is kept)."""

        async def turns(key: SessionKey) -> list[Any] | Gone:
            codec, opened = await self._codec(key)
            since = codec.removals
            found = await self._branches.line_items(key, branch, opened, users_only=users_only)
            if isinstance(found, Gone):
                return found

            def decoded() -> list[Any]:
                out: list[Any] = []
                rows, turns, users, created = found
                for start in range(0, len(rows), TURN_SLICE):
                    part = slice(start, start + TURN_SLICE)
                    items = codec.items(key, rows[part], since=since)
                    made = list(zip(turns[part], users[part], created[part], items, strict=True))
                    out.extend(made if shape is None else shape(made))
                for column in found:  # here, in the worker thread
                    let_go(column)
                return out

            return await off_loop(len(found.rows), decoded)

        return await self._owners.reading(key, turns)

    async def begin_after(
        self, key: SessionKey, turns: int, usage: dict[int, dict[str, Any]], name: str = MAIN
    ) -> bool:
        """A line of a session being imported, which holds no item yet, numbered after
        `turns` turns it does not hold, with their usage; False if the session is no longer
        marked as being imported."""
        await self._opener.ready()
        return await self._usage.begin_after(key, turns, usage, name)

    async def record(self, key: SessionKey, branch: str, usage: dict[str, Any]) -> bool | Gone:
        """Record a run's usage on a branch's current turn (False: the branch has none)."""

        async def record(key: SessionKey) -> bool | Gone:
            _, opened = await self._codec(key)
            return await self._usage.record_usage(key, branch, usage, opened)

        return await self._owners.reading(key, record)

    async def turn_usage(
        self, key: SessionKey, branch: str, turn: int | None
    ) -> list[dict[str, Any]] | Gone:
        """Usage rows of a branch by turn."""
        if turn is not None:  # 0: what came before the first user message
            check_range("user_turn_number", turn, 0)
        await self._opener.ready()
        return await self._usage.turn_usage(key, branch, turn)

    async def session_usage(self, key: SessionKey, branch: str | None) -> TokenUsage | None:
        """Usage of one branch, or of all (None when nothing was recorded)."""
        if branch is not None and not storable(branch):
            return None
        await self._opener.ready()
        found = await self._usage.session_usage(key, branch)
        if isinstance(found, Gone) or not found["turns"]:
            return None
        return TokenUsage(**found)

    async def report(
        self, *, user_id: str | None, since: datetime | None, until: datetime | None
    ) -> UsageReport:
        """Usage summed per owner and day by the database."""
        user_id = check_user_id(user_id)
        check_moment("since", since)
        check_moment("until", until)
        await self._opener.ready()
        rows = await self._usage.usage_by_day(user_id=user_id, since=since, until=until)
        return UsageReport([DailyUsage(user, day, TokenUsage(**sums)) for user, day, sums in rows])


def check_branch_name(name: Any, what: str) -> str:
    """A branch name: non-blank text of at most 255 characters that every database stores
    as it is, else `BranchError`."""
    if not isinstance(name, str):
        raise BranchError(f"{what} must be a string, got {name!r:.100}")
    if not name.strip():
        raise BranchError(f"{what} cannot be empty")
    if len(name) > MAX_NAME:
        raise BranchError(f"{what} is longer than {MAX_NAME} characters")
    if not storable(name):
        raise BranchError(f"{what} must not hold NUL characters or lone surrogates")
    return name
