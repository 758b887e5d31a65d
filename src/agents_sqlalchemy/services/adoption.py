"""Sessions that the Agents SDK's own tables hold and ours do not: never split one.

A store opened on a database where the SDK's `SQLAlchemySession` kept conversations
(`agent_sessions`/`agent_messages`) looks at each session id on its first use. One with
SDK history and none of ours is imported then, in one transaction
(`import_sdk_history=True`), or refused with `SdkHistoryError` naming the command that
imports it: it is never read or written as a new, empty session. Where the SDK's tables do
not exist (the usual case) this costs one look at the schema per store.

A session is imported as the SDK reads it (of an `AdvancedSQLiteSession`, its main line;
what else it held is named in a `SdkHistoryWarning`), or not at all: an item the SDK reads
but this store cannot hold (NaN, a lone surrogate, nesting past `MAX_JSON_DEPTH`) refuses
the session (`SdkHistoryError`), never silently shortens it.

Example::

    adoption = Adoption(db, opener, Sessions(schema), Imports(schema), tables, import_on_use=True)
    await adoption.check(SessionKey.of("chat-1"))    # imported now, if the SDK had it
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

from ..codec import Codec, encode_item
from ..crypto import Wrapper
from ..database.units import Database, database_errors
from ..errors import ItemError, SdkHistoryError, SdkHistoryWarning, warn
from ..repository import Imports, SdkSource, Sessions
from ..repository.imports import Order
from ..tables import TableNames
from ..types import Beyond, SessionKey
from .opener import IMPORT_COMMAND, SDK_MESSAGES, SDK_SESSIONS, Opener
from .owners import Owners


class Adoption:
    """Checks each session id once: SDK history without ours is imported or refused."""

    def __init__(
        self,
        db: Database,
        opener: Opener,
        owners: Owners,
        sessions: Sessions,
        imports: Imports,
        tables: TableNames,
        *,
        import_on_use: bool,
        ttl: timedelta | None = None,
    ) -> None:
        self.import_on_use = import_on_use
        self.ttl = ttl
        self._db = db
        self._opener = opener
        self._owners = owners
        self._sessions = sessions
        self._imports = imports
        self._tables = tables
        self._source: tuple[SdkSource, Order] | None = None
        # None: not looked yet; False: the SDK's tables are not there (or are ours).
        self._present: bool | None = None

    async def check(self, key: SessionKey, ttl: timedelta | None = None) -> None:
        """Import or refuse `key`'s SDK history if it has no session of ours; else nothing.
        Imported items expire `ttl` from now (the session's, else the store's)."""
        if self._present is False:
            return
        codec = await self._opener.ready()
        source = await self._sdk_source()
        if source is None or await self._sessions.describe(key) is not None:
            return
        reader, order = source
        with database_errors(self._db.url, "reading the SDK's tables failed"):
            rows = await reader.rows(key.session_id, order)
        if not rows:
            return
        if not self.import_on_use:
            where = self._db.url.render_as_string(hide_password=True)
            command = self._tables.command_line(f"--from '{where}'", where, program=IMPORT_COMMAND)
            raise SdkHistoryError(
                f"session {key.session_id[:80]!r} has {len(rows)} items in the Agents SDK's own "
                f"tables ({SDK_SESSIONS}/{SDK_MESSAGES}) and none here: import them first with "
                f"`{command}`, or open the store with import_sdk_history=True to import each "
                "such session on first use; nothing was read or written"
            )
        with database_errors(self._db.url, "reading the SDK's tables failed"):
            beyond = await reader.beyond(key.session_id)
        sealer = await self._owners.sealer(key)
        try:
            await copy_session(self._imports, codec, key, rows, sealer=sealer, ttl=ttl or self.ttl)
        except ItemError as exc:
            where = self._db.url.render_as_string(hide_password=True)
            command = self._tables.command_line(f"--from '{where}'", where, program=IMPORT_COMMAND)
            raise SdkHistoryError(
                f"{exc}: nothing was read or written; `{command} --skip-unstorable` imports "
                "it without them (and names each)"
            ) from None
        if left_out := beyond_main(beyond):
            warn(
                f"session {key.session_id[:80]!r} was imported from the Agents SDK's tables "
                f"with its main line only: {'; '.join(left_out)}",
                SdkHistoryWarning,
            )

    async def _sdk_source(self) -> tuple[SdkSource, Order] | None:
        """A reader of the SDK's tables, where they hold history (looked at once)."""
        if self._source is None and self._present is None:
            ours = {self._tables.sessions_table, self._tables.items_table}
            self._present = not {SDK_SESSIONS, SDK_MESSAGES} & ours and (
                await self._imports.sdk_tables_hold_rows(SDK_MESSAGES)
            )
            if self._present:
                reader = SdkSource(self._db.engine, SDK_SESSIONS, SDK_MESSAGES)
                with database_errors(self._db.url, "reading the SDK's tables failed"):
                    self._source = (reader, await reader.order())
        return self._source


class Copied(NamedTuple):
    """One SDK session copied: items written (None: the target had the session already),
    rows that are not JSON (the SDK skips them too), and the items left out on request,
    each with where and why."""

    items: int | None
    unreadable: int
    left_out: tuple[str, ...] = ()


async def copy_session(
    imports: Imports,
    codec: Codec,
    key: SessionKey,
    rows: Sequence[Any],
    created: tuple[datetime | None, datetime | None] = (None, None),
    sealer: Wrapper | None = None,
    *,
    skip_unstorable: bool = False,
    ttl: timedelta | None = None,
) -> Copied:
    """Write one SDK session's rows (id, message_data, created_at; in the SDK's order) as a
    session of ours, in one transaction. A row that is not JSON is skipped, as the SDK skips
    it; an item the SDK reads but this store cannot hold raises `ItemError` naming each
    (nothing written), or is left out with `skip_unstorable`. A sealed store's `sealer` is
    the new session's owner key."""
    now = datetime.now(timezone.utc)
    known = [_utc(row.created_at, now) for row in rows if row.created_at is not None]
    first = _utc(created[0], min(known, default=now))
    last = _utc(created[1], max(known, default=now))
    payloads, written_at, unreadable, refused = [], [], 0, []
    position = 0  # the item's place in the SDK's reading of the session
    for row in rows:
        try:
            item = json.loads(row.message_data)
        except (TypeError, json.JSONDecodeError):
            unreadable += 1
            continue
        except ValueError as exc:  # an integer too long to read: the SDK fails on it too
            position += 1
            refused.append(f"item {position} (row id {row.id}) cannot be read: {exc}")
            continue
        position += 1
        try:
            payloads.append(encode_item(item, f"item {position} (row id {row.id})"))
        except ItemError as exc:
            refused.append(str(exc))
            continue
        written_at.append(_utc(row.created_at, first))
    if refused and not skip_unstorable:
        shown = "; ".join(refused[:5]) + (
            f"; and {len(refused) - 5} more" if len(refused) > 5 else ""
        )
        raise ItemError(
            f"session {key.session_id[:80]!r} holds {len(refused)} item(s) that the SDK reads "
            f"but this store cannot hold: {shown}"
        )
    items = list(zip(written_at, codec.rows(key, payloads, 1, sealer), strict=True))
    if not await imports.import_session(key, (first, last), items, ttl):
        return Copied(None, unreadable)
    return Copied(len(items), unreadable, tuple(refused))


def beyond_main(beyond: Beyond) -> list[str]:
    """What an import of an `AdvancedSQLiteSession`'s main line leaves out, in words."""
    left_out = [
        f"branch {name[:80]!r} ({items} items, {own} not on main) left out"
        for name, items, own in beyond.branches
    ]
    if beyond.turn_usage:
        left_out.append(f"token usage of {beyond.turn_usage} turn(s) (its turn_usage) left out")
    return left_out


def _utc(value: datetime | None, default: datetime) -> datetime:
    if value is None:
        return default
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value
