"""A user's data carried out and back in: export, import, and erasure with its receipt.

The export is JSON Lines, one JSON object a line, UTF-8, in this order::

    {"format": "agents-sqlalchemy/user-export", "version": 1, "user_id": "alice",
     "exported_at": "2026-12-03T09:00:00+00:00"}
    {"type": "session", "session_id": "chat-1", "user_id": "alice", "metadata": {...},
     "state": {...}, "created_at": "...", "updated_at": "...", "archived_at": null}
    {"type": "line", "name": "main", "created_at": null, "items": 2,
     "usage": [{"turn": 1, "requests": 1, "input_tokens": 9, "output_tokens": 4,
                "total_tokens": 13, "input_details": null, "output_details": null}]}
    {"type": "item", "turn": 1, "user": true, "item": {"role": "user", "content": "hi"}}
    {"type": "item", "turn": 1, "user": false, "item": {...}}
    {"type": "line", "name": "draft", "created_at": "...", "items": 1, "usage": []}
    {"type": "item", "turn": 1, "user": true, "item": {...}}
    {"type": "end", "session_id": "chat-1", "lines": 2, "items": 3}
    ...                                    (the next session, from its "session" line on)
    {"type": "done", "sessions": 1, "items": 3}

A session's lines of history come main first, then its other branches oldest first; each
line lists every live item it holds, in order and verbatim (a branch repeats the items it
shares with the line it was made from), with the user turn each opens or belongs to. Times
are ISO 8601 in UTC and informative: an import stamps its own. Items keep no expiry: an
import gives them the target store's `ttl`. Idempotency keys are not carried: a batch
retried with one after the import is stored again in the target.

The export reads a page of sessions at a time and one session at a time (its items are
read whole, as the session itself reads them); the import holds one session at a time, and
writes it through the target store (sealed under that store's key if it has one). The
stream is checked as it is read: a truncated one raises after the sessions it held whole.
Each session is checked whole (its records, and its "end" line's counts) before anything of
it is written, and what was written of one whose write fails is deleted again.

Example::

    portability = Portability(conversation, branches, management)
    async for line in portability.export_user("alice"):
        out.write(line)
    report = await portability.import_user(open("alice.jsonl", encoding="utf-8"))
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pydantic_core import from_json, to_json

from ..codec import MAX_BATCH_BYTES, encode_item, utf8_size
from ..errors import (
    AgentsSQLAlchemyError,
    BranchError,
    ConfigurationError,
    ItemError,
    partly_done,
    plural,
)
from ..records import ErasureReceipt, ImportedUser, SessionInfo
from ..repository import GONE, IMPORTING, is_importing
from ..tables import ROLES, TableNames
from ..turns import MAIN, Turn, is_user
from ..types import SessionKey
from ..validation import (
    INT64_MAX,
    check_flag,
    check_range,
    check_user_id,
    session_key,
    state_name,
)
from .branches import Branches, check_branch_name
from .conversation import Conversation
from .management import Management

FORMAT = "agents-sqlalchemy/user-export"
VERSION = 1
#: Items appended per transaction while importing.
BATCH = 500
#: Lines of an export read and checked between two turns of the event loop's other tasks
#: (a 200,000-item session, read at once, held it over a second).
RECORD_SLICE = 1000
USAGE_FIELDS = (
    "requests",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "input_details",
    "output_details",
)
#: The turn numbers the databases store (a 32-bit column).
MAX_TURN = 2**31 - 1
#: What main holds for a moment to make a branch off it when it holds no user message.
ANCHOR = {"role": "user", "content": ""}
#: The tables an erasure deletes from (the keyring holds no user's data).
ERASED_ROLES = tuple(role for role in ROLES if role not in ("keyring", "version"))

Lines = Iterable[str | bytes] | AsyncIterable[str | bytes]


class _Deleted(Exception):
    """The session an import writes was deleted meanwhile."""


def _line(record: dict[str, Any]) -> str:
    return to_json(record).decode() + "\n"


def _item_lines(turns: list[Turn]) -> list[str]:
    return [_line({"type": "item", "turn": t, "user": u, "item": item}) for t, u, _, item in turns]


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


@dataclass
class _Line:
    """One line of history of a session being imported: its items with their turns, the
    length of each as JSON, and its usage by turn (each checked as it was read)."""

    name: str
    usage: dict[int, dict[str, Any]]
    expected: int
    items: list[tuple[int, Any]] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)


@dataclass
class _Session:
    """A session being imported, held until its "end" line."""

    key: SessionKey
    state: dict[str, Any]
    archived: bool
    lines: list[_Line] = field(default_factory=list)

    @property
    def items(self) -> int:
        return sum(len(line.items) for line in self.lines)


@dataclass(frozen=True)
class _Branching:
    """How a branch is rebuilt: made off line `source` before its user turn `turn` (so that
    it holds the source's `start` first items), cut back to the `kept` first ones it
    shares, then filled. With `anchor`, `source` (main) holds no user message: one is
    appended to it for the branch to be made before, and popped once it is."""

    source: str
    turn: int
    start: int
    kept: int
    anchor: bool = False


class Portability:
    """Exports a user's sessions as a JSON Lines stream, and imports such a stream."""

    def __init__(self, conversation: Conversation, branches: Branches, management: Management):
        self._conversation = conversation
        self._branches = branches
        self._management = management

    # -- export -------------------------------------------------------------------------------

    async def export_user(
        self, user_id: str, progress: Callable[[int, int], None] | None = None
    ) -> AsyncIterator[str]:
        """The lines of the export of every session of `user_id`, archived ones too.

        The sessions are those the user has when the export starts, their ids listed first
        (sessions are listed by activity: one written to while the pages went by would jump
        ahead of them, and be missed); each is then read as it stands. One deleted or given
        to another user meanwhile is left out; one made after the start is not in it.
        `progress(done, total)` counts sessions: before the first and after each one.
        """
        if check_user_id(user_id) is None:
            raise ConfigurationError("export_user needs a user id, got None")
        session_ids = await self._session_ids(user_id)
        now = datetime.now(timezone.utc).isoformat()
        yield _line({"format": FORMAT, "version": VERSION, "user_id": user_id, "exported_at": now})
        if progress is not None:
            progress(0, len(session_ids))
        sessions = items = 0
        # Least recently active first: an import, which stamps each session as it writes it,
        # then leaves them in the same order of activity.
        for done, session_id in enumerate(reversed(session_ids), 1):
            info = await self._management.info(session_key(session_id))
            # Not a session an import is writing (or left half-written): it is not whole.
            if info is not None and info.user_id == user_id and not is_importing(info.archived_at):
                async for line, count in self._session(info):
                    items += count
                    yield line
                sessions += 1
            if progress is not None:
                progress(done, len(session_ids))
        yield _line({"type": "done", "sessions": sessions, "items": items})

    async def _session_ids(self, user_id: str) -> list[str]:
        found: list[str] = []
        cursor: str | None = None
        while True:
            page = await self._management.list_sessions(
                user_id=user_id, limit=1000, cursor=cursor, archived=None
            )
            found.extend(info.session_id for info in page)
            if page.next_cursor is None:
                return found
            cursor = page.next_cursor

    async def _session(self, info: SessionInfo) -> AsyncIterator[tuple[str, int]]:
        """One session's lines, each with how many items it carries."""
        key = session_key(info.session_id)
        yield (
            _line(
                {
                    "type": "session",
                    "session_id": info.session_id,
                    "user_id": info.user_id,
                    "metadata": info.metadata,
                    "state": await self._conversation.state(key),
                    "created_at": _time(info.created_at),
                    "updated_at": _time(info.updated_at),
                    "archived_at": _time(info.archived_at),
                }
            ),
            0,
        )
        others = await self._branches.others(key)  # oldest first
        names = [(MAIN, None), *((s.name, s.created_at) for s in others)]
        lines = items = 0
        for name, created_at in names:
            # Encoded as the items are decoded, a slice at a time: only their lines are kept.
            found = await self._branches.turns(key, name, users_only=False, shape=_item_lines)
            usage = await self._branches.turn_usage(key, name, None)
            if found is GONE or usage is GONE:  # deleted while exporting
                continue
            assert isinstance(found, list) and isinstance(usage, list)
            header: dict[str, Any] = {"type": "line", "name": name}
            header["created_at"] = _time(created_at)
            header |= {"items": len(found), "usage": usage}
            yield _line(header), 0
            for line in found:
                yield line, 1
            lines, items = lines + 1, items + len(found)
        end = {"type": "end", "session_id": info.session_id, "lines": lines, "items": items}
        yield _line(end), 0

    # -- import -------------------------------------------------------------------------------

    async def import_user(
        self, lines: Lines | str | bytes, *, skip_existing: bool = False
    ) -> ImportedUser:
        """Write the sessions of an export into this store; see `SessionStore.import_user`."""
        skip_existing = check_flag("skip_existing", skip_existing)
        report = ImportedUser()
        try:
            number = total = 0  # items of the sessions read whole, skipped ones too
            session: _Session | None = None
            done = header = False
            user_id = None  # the header's
            seen: set[str] = set()  # the sessions' hashes
            async for number, record in _records(lines):
                kind = record.get("type") if header else "header"
                header = True
                if done:
                    raise _bad(number, "a line after the final 'done' line")
                if kind == "header":
                    user_id = _check_header(record, number)
                elif kind == "session":
                    if session is not None:
                        raise _bad(number, "a session starts before the previous one ended")
                    session = _new_session(record, number, user_id)
                    if session.key.hash in seen:
                        raise _bad(number, "a second session of the same id in the export")
                    seen.add(session.key.hash)
                elif kind == "line" and session is not None:
                    _check_complete(session, number)
                    session.lines.append(_new_line(record, number, session))
                elif kind == "item" and session is not None and session.lines:
                    _add_item(session.lines[-1], record, number)
                elif kind == "end" and session is not None:
                    _check_end(session, record, number)
                    total += session.items
                    report = _add(report, await self._write(session, skip_existing))
                    session = None
                elif kind == "done" and session is None:
                    if not _same(record.get("sessions"), report.sessions + report.skipped_sessions):
                        raise _bad(number, "the export announces another number of sessions")
                    if not _same(record.get("items"), total):
                        raise _bad(number, f"the export announces other than its {total} items")
                    done = True
                else:
                    raise _bad(number, f"an unexpected {kind!r} line here")
            if number == 0:
                raise ConfigurationError("the export is empty: not an export of agents-sqlalchemy")
            if not done:
                raise ConfigurationError(
                    "the export ends before its final 'done' line (truncated?): the rest of the "
                    "export was not imported"
                )
        except AgentsSQLAlchemyError as exc:
            if report.sessions:  # written for good, each session whole
                then = "Import the export again, corrected, with skip_existing=True"
                partly_done(exc, f"{plural(report.sessions, 'session')} imported", then=then)
            raise
        return report

    async def _write(self, session: _Session, skip_existing: bool) -> ImportedUser:
        """Write one session whole, or nothing of it: what it holds was checked as it was
        read, how its branches are rebuilt is settled before the first write, and what was
        written is deleted again if a write fails (so that importing it again works)."""
        key = session.key
        plans = [_plan(session, index) for index in range(len(session.lines))]
        if not await self._make(key):  # it is there already: read once, for all three
            info = await self._management.info(key)
            if info is not None and is_importing(info.archived_at):
                raise ConfigurationError(
                    f"session {key.session_id[:80]!r} is marked as being imported: an import "
                    "of it runs now, or one stopped part-way (the database went away); if "
                    "none runs, delete the session and import the export again"
                )
            owner = None if info is None else info.user_id
            if owner != key.user_id:
                raise ConfigurationError(
                    f"session {key.session_id[:80]!r} is already in this store and belongs "
                    f"to {'no user' if owner is None else 'another user'}: nothing of it was "
                    "imported, skip_existing or not (import into another store, or delete "
                    "that session first)"
                )
            if skip_existing:
                return ImportedUser(skipped_sessions=1)
            raise ConfigurationError(
                f"session {key.session_id[:80]!r} is already in this store: nothing of it was "
                "imported (skip_existing=True, or --skip-existing, skips such sessions)"
            )
        try:
            written = await self._write_lines(session, plans)
            if not await self._management.archive_if(key, IMPORTING, archive=session.archived):
                raise _Deleted
            return written
        except BaseException as exc:
            if isinstance(exc, Exception) and not await self._marked(key):
                raise ConfigurationError(
                    f"session {key.session_id[:80]!r} was deleted while it was imported "
                    "(delete_session, delete_user or erase_user ran meanwhile): nothing of it "
                    "was kept"
                ) from None if isinstance(exc, _Deleted) else exc
            await self._undo(key)
            # A branch the export holds that cannot be made again is this session's fault.
            said = isinstance(exc, AgentsSQLAlchemyError) and not isinstance(exc, BranchError)
            if said or not isinstance(exc, Exception):
                raise
            raise ConfigurationError(
                f"session {key.session_id[:80]!r} could not be imported "
                f"({type(exc).__name__}: {exc}); nothing of it was kept"
            ) from exc

    async def _make(self, key: SessionKey) -> bool:
        """Make the session's row, marked as an import under way (`IMPORTING`); False if
        the session exists. Shielded: a cancel that came while the row was being made would
        leave it made and empty (a write ends whole)."""
        making = asyncio.ensure_future(self._management.create_as(key, archived_at=IMPORTING))
        try:
            return await asyncio.shield(making)
        except asyncio.CancelledError:
            if await making:
                await self._undo(key)
            raise

    async def _marked(self, key: SessionKey) -> bool:
        """Whether the session is marked `IMPORTING`: an import writes it now, or stopped
        part-way (the database went away, the process was killed)."""
        info = await self._management.info(key)
        return info is not None and is_importing(info.archived_at)

    async def _write_lines(self, session: _Session, plans: list[_Branching | None]) -> ImportedUser:
        key = session.key
        if session.state:
            await self._conversation.import_state(key, session.state)
        left_out = items = 0
        for line, plan in zip(session.lines, plans, strict=True):
            usage = dict(line.usage)
            if plan is None:
                if purged := _purged_turns(line):  # numbered after them, with their usage
                    first = line.items[0][0]
                    before = {turn: usage.pop(turn) for turn in list(usage) if turn < first}
                    if not await self._branches.begin_after(key, purged, before):
                        raise _Deleted
                await self._fill(key, MAIN, line, usage, 0)
            else:
                await self._rebuild(key, line, usage, plan)
            left_out, items = left_out + len(usage), items + len(line.items)
        return ImportedUser(sessions=1, items=items, usage_left_out=left_out)

    async def _undo(self, key: SessionKey) -> None:
        """Delete what was written of session `key` after a failure; what cannot be (the
        database went away) stays marked `IMPORTING`, which an import again refuses."""
        with contextlib.suppress(AgentsSQLAlchemyError):
            if await self._marked(key):  # not one made again by another writer meanwhile
                await self._management.delete(session_hash=key.hash)

    async def _fill(
        self,
        key: SessionKey,
        name: str,
        line: _Line,
        usage: dict[int, dict[str, Any]],
        start: int,
    ) -> None:
        """Append `line.items[start:]` to line `name`, each turn's usage once its last item
        is in (the line's current turn is the one usage is recorded on). Takes what it
        places out of `usage`."""
        items = line.items
        if start and (start == len(items) or items[start][0] != items[start - 1][0]):
            values = usage.pop(items[start - 1][0], None)  # the kept part's last turn ended
            if values is not None:
                await self._branches.record(key, name, values)
        batch: list[Any] = []
        size = 0
        for index in range(start, len(items)):
            turn, item = items[index]
            batch.append(item)
            size += line.sizes[index]
            ends_turn = index + 1 == len(items) or items[index + 1][0] != turn
            values = usage.pop(turn, None) if ends_turn else None
            following = line.sizes[index + 1] if index + 1 < len(items) else 0
            full = len(batch) >= BATCH or size + following > MAX_BATCH_BYTES
            if values is not None or full or index + 1 == len(items):
                await self._append(key, name, batch, values)
                batch, size = [], 0

    async def _append(
        self, key: SessionKey, name: str, items: list[Any], usage: dict[str, Any] | None
    ) -> None:
        """Append to line `name` of the session being imported, or raise `_Deleted`: the
        session was deleted meanwhile (an append would make it again)."""
        if not await self._branches.append(key, name, items, None, usage, importing=True):
            raise _Deleted

    async def _rebuild(
        self, key: SessionKey, line: _Line, usage: dict[int, dict[str, Any]], plan: _Branching
    ) -> None:
        """Make branch `line.name` as `plan` says, then append the rest of its items."""
        if plan.anchor:
            await self._append(key, MAIN, [ANCHOR], None)
        name, _ = await self._branches.create(key, plan.source, plan.turn, line.name)
        if plan.anchor:
            await self._branches.pop(key, MAIN)
        for _ in range(plan.start - plan.kept):  # the branch holds the source's `start` first
            await self._branches.pop(key, name)
        # Emptied, it numbers its items after the turn it was made after; the export's may
        # come later (the original was emptied by pops, then written again).
        after = _purged_turns(line)
        emptied = not plan.kept and line.items and after != plan.turn - 1
        if emptied and not await self._branches.begin_after(key, after, {}, name):
            raise _Deleted
        await self._fill(key, name, line, usage, plan.kept)


async def erase(
    management: Management,
    user_id: str,
    *,
    dialect: str,
    tables: TableNames,
    encrypted: bool,
    keeper: str | None,
) -> ErasureReceipt:
    """Delete every session of `user_id` (items, their keys, state, branches, usage) and
    return the receipt of what was destroyed; see `SessionStore.erase_user`."""
    if check_user_id(user_id) is None:
        raise ConfigurationError("erase_user needs a user id, got None")
    removed, destroyed = await management.delete_with_keys(user_id=user_id)
    prefix = f"{tables.schema}." if tables.schema else ""
    return ErasureReceipt(
        user_sha256=ErasureReceipt.hash_user(user_id),
        sessions=removed.sessions,
        items=removed.items,
        item_keys_deleted=removed.items if encrypted else 0,
        erased_at=datetime.now(timezone.utc),
        dialect=dialect,
        tables=tuple(prefix + tables.name(role) for role in ERASED_ROLES),
        encrypted=encrypted,
        owner_keys_destroyed=destroyed.keys,
        owner_keys_kept=keeper,
        owner_key_status=destroyed.status,
        owner_key_gone_at=destroyed.at,
    )


def _common(a: list[Any], b: list[Any]) -> int:
    """How many first items `a` and `b` share."""
    count = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        count += 1
    return count


def _add(report: ImportedUser, more: ImportedUser) -> ImportedUser:
    return ImportedUser(
        sessions=report.sessions + more.sessions,
        items=report.items + more.items,
        skipped_sessions=report.skipped_sessions + more.skipped_sessions,
        usage_left_out=report.usage_left_out + more.usage_left_out,
    )


def _bad(number: int, what: str) -> ConfigurationError:
    return ConfigurationError(f"line {number} of the export: {what}")


def _same(value: Any, count: int) -> bool:
    """Whether `value` is the integer `count` (not True for 1, nor 1.0)."""
    return type(value) is int and value == count


def _int(value: Any, what: str, number: int, high: int) -> int:
    """`value` if it is an integer from 0 to `high`, else the error naming line `number`."""
    try:
        return check_range(what, value, 0, high)
    except ConfigurationError as exc:
        raise _bad(number, str(exc)) from exc


def _json(value: Any, what: str, number: int) -> int:
    """The bytes of `value` (an object) as the JSON stored, or the error naming its line."""
    try:
        return utf8_size(encode_item(value, what))
    except ItemError as exc:
        raise _bad(number, str(exc)) from exc


def _check_header(record: dict[str, Any], number: int) -> str:
    """The user the export is of, from its first line (line `number`)."""
    if record.get("format") != FORMAT:
        raise ConfigurationError(
            f"not an export of agents-sqlalchemy: its first line names no format {FORMAT!r}"
        )
    if not _same(record.get("version"), VERSION):
        raise ConfigurationError(
            f"an export of version {record.get('version')!r:.40}: this version of the library "
            f"reads version {VERSION}"
        )
    try:
        user_id = check_user_id(record.get("user_id"))
    except ConfigurationError as exc:
        raise _bad(number, str(exc)) from exc
    if user_id is None:
        raise _bad(number, "the export names no user")
    return user_id


def _new_session(record: dict[str, Any], number: int, user_id: str | None) -> _Session:
    """A session line of the export of `user_id`'s sessions (none of another user)."""
    state = record.get("state")
    if state is None:
        state = {}
    if not isinstance(state, dict):
        raise _bad(number, "a session's state is not an object")
    for name in state:
        try:
            state_name(name)
        except ConfigurationError as exc:
            raise _bad(number, str(exc)) from exc
    _json(state, "its state", number)
    archived_at = record.get("archived_at")
    if archived_at is not None:
        try:
            datetime.fromisoformat(archived_at)
        except (TypeError, ValueError):
            raise _bad(number, f"archived_at is not a time: {archived_at!r:.80}") from None
    try:
        key = session_key(record.get("session_id"), record.get("user_id"), record.get("metadata"))
    except (ConfigurationError, ItemError) as exc:
        raise _bad(number, str(exc)) from exc
    if key.user_id != user_id:
        raise _bad(number, f"a session of {key.user_id!r} in the export of {user_id!r}")
    return _Session(key, state, archived_at is not None)


def _new_line(record: dict[str, Any], number: int, session: _Session) -> _Line:
    """A "line" line of `session`: main first, then branches of names not used before."""
    name, usage = record.get("name"), record.get("usage")
    if not isinstance(name, str) or not isinstance(usage, list):
        raise _bad(number, "a line of history needs a name and a usage list")
    if not session.lines and name != MAIN:
        raise _bad(number, f"a session's first line of history is {MAIN!r}, not {name!r:.80}")
    if session.lines and (name == MAIN or any(line.name == name for line in session.lines)):
        raise _bad(number, f"a second line of history named {name!r:.80}")
    if session.lines:
        try:
            check_branch_name(name, "a branch's name")
        except BranchError as exc:
            raise _bad(number, str(exc)) from exc
    line = _Line(name, {}, _int(record.get("items"), "its item count", number, INT64_MAX))
    for row in usage:
        if not isinstance(row, dict):
            raise _bad(number, f"a usage row is not an object: {row!r:.80}")
        turn = _int(row.get("turn"), "usage.turn", number, MAX_TURN)
        if turn in line.usage:
            raise _bad(number, f"two usage rows of turn {turn}")
        values: dict[str, Any] = {
            name: _int(row.get(name), f"usage.{name}", number, INT64_MAX)
            for name in USAGE_FIELDS[:4]
        }
        for name in USAGE_FIELDS[4:]:
            if (details := row.get(name)) is not None:
                _json(details, f"usage.{name}", number)
            values[name] = details
        line.usage[turn] = values
    return line


def _add_item(line: _Line, record: dict[str, Any], number: int) -> None:
    """An "item" line of `line`: its turn (none before the previous item's) and its item."""
    turn, item = record.get("turn"), record.get("item")
    if not isinstance(turn, int) or not isinstance(item, dict):
        raise _bad(number, "an item line needs a turn number and an item object")
    turn = _int(turn, "an item's turn", number, MAX_TURN)
    last = line.items[-1][0] if line.items else None
    if last is not None and turn < last:
        raise _bad(number, f"an item of turn {turn} after one of turn {last}")
    if last is not None and turn == last and is_user(item):
        raise _bad(number, f"a user message in turn {turn}, which it does not open")
    if len(line.items) == line.expected:
        raise _bad(
            number, f"line {line.name!r:.80} holds more than the {line.expected} items it announced"
        )
    size = _json(item, "the item", number)
    if size > MAX_BATCH_BYTES:
        raise _bad(number, f"an item of over {MAX_BATCH_BYTES // 2**20} MiB of JSON")
    line.items.append((turn, item))
    line.sizes.append(size)


def _check_complete(session: _Session, number: int) -> None:
    """Refuse (at line `number`) a last line of history with fewer items than announced."""
    if session.lines and len(last := session.lines[-1].items) != session.lines[-1].expected:
        line = session.lines[-1]
        raise _bad(
            number,
            f"line {line.name!r:.80} holds {len(last)} items, fewer than the {line.expected} "
            "it announced",
        )


def _check_end(session: _Session, record: dict[str, Any], number: int) -> None:
    """Refuse an "end" line of another session, or other counts than the session holds."""
    _check_complete(session, number)
    session_id = session.key.session_id
    if record.get("session_id") != session_id:
        raise _bad(number, f"the end of another session than {session_id[:80]!r}")
    lines, items = len(session.lines), session.items
    if not _same(record.get("lines"), lines) or not _same(record.get("items"), items):
        raise _bad(
            number,
            f"session {session_id[:80]!r} holds {lines} lines of history and {items} items, "
            f"its end line says {record.get('lines')!r:.20} and {record.get('items')!r:.20} "
            "(a part cut out?): nothing of it was imported",
        )


def _purged_turns(line: _Line) -> int:
    """The turns a line's first item comes after: those purged before the export, or a
    branch's emptied by pops before it was written again (its first item's turn, less one
    if a user message opens it there)."""
    if not line.items:
        return 0
    turn, item = line.items[0]
    return max(0, turn - is_user(item))


def _plan(session: _Session, index: int) -> _Branching | None:
    """How line `index` of `session` is rebuilt from the lines before it (None: main, which
    is filled): a branch off the line that shares the longest run of its first items (by
    reference, as the original did). The turns are counted in the items after the line's
    purged ones, as the store counts them in the lines it writes."""
    line = session.lines[index]
    if line.name == MAIN:
        return None
    wanted = line.items  # (turn, item): a run is shared only if numbered alike
    best: tuple[int, int, str, int, int] | None = None  # (-pops, kept, source, turn, start)
    for source in session.lines[:index]:
        same = _common(wanted, source.items)
        for start, (turn, item) in enumerate(source.items):
            if not is_user(item):
                continue
            pops = max(start - same, 0)
            kept = min(start, same)
            ends = line.items[kept - 1][0] if kept else None
            if ends is not None and any(used < ends for used in line.usage):
                pops += len(wanted)  # would leave usage of the shared turns out: worse
            choice = (-pops, kept, source.name, turn, start)
            if best is None or choice[:2] > best[:2]:
                best = choice
    if best is None:  # no user message in any line before it: main takes one for a while
        main = session.lines[0].items
        after = _purged_turns(session.lines[0]) + 1
        return _Branching(MAIN, after, len(main), _common(wanted, main), anchor=True)
    _, kept, source_name, turn, start = best
    return _Branching(source_name, turn, start, kept)


async def _records(lines: Lines | str | bytes) -> AsyncIterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each non-blank line, from lines of text or bytes (or a
    whole export as one text)."""
    number = 0
    source: Lines  # a whole text is split at "\n" only: JSON strings may hold U+2028 and such
    if isinstance(lines, str):
        source = lines.split("\n")
    elif isinstance(lines, bytes):
        source = lines.split(b"\n")
    else:
        source = lines
    if not isinstance(source, (Iterable, AsyncIterable)):
        raise ConfigurationError(
            f"an export is read from lines of text or bytes (an open file, a list, "
            f"export_user(...)), got {type(source).__name__}"
        )

    def parsed(raw: object) -> dict[str, Any] | None:
        if not isinstance(raw, (str, bytes)):
            raise _bad(number, f"not a line of text but a {type(raw).__name__}")
        if not raw.strip():
            return None
        if number == 1:  # a byte order mark, as some editors save a file: not JSON's
            raw = (
                raw.removeprefix(b"\xef\xbb\xbf")
                if isinstance(raw, bytes)
                else raw.removeprefix("\ufeff")
            )
        try:
            record = from_json(raw)
        except ValueError as exc:
            raise _bad(number, f"not JSON ({exc})") from exc
        if not isinstance(record, dict):
            raise _bad(number, "not a JSON object")
        return record

    async for raw in source if isinstance(source, AsyncIterable) else _each(source):
        number += 1
        if number % RECORD_SLICE == 0:  # a source that never waits: the loop's tasks run
            await asyncio.sleep(0)
        if (record := parsed(raw)) is not None:
            yield number, record


async def _each(lines: Iterable[Any]) -> AsyncIterator[Any]:
    """The lines of a plain iterable, one by one, as an async one gives them."""
    for line in lines:
        yield line
