"""One session's items, metadata and state: what `SQLAlchemySession` asks of the store.

Items go in as JSON text (or sealed, by the codec), are indexed for search when the store
searches, and come out in their per-session order. Removals destroy the items' keys.

Example::

    conversation = Conversation(Items(schema), Sessions(schema), Compaction(schema), opener,
                                indexer.written, ttl=None)
    await conversation.append(key, [{"role": "user", "content": "hi"}])
    await conversation.read(key, limit=10)
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from ..aio import off_loop
from ..codec import counted, encode_item, encode_items
from ..crypto import OwnerKey
from ..errors import AgentsSQLAlchemyError, ConfigurationError, SessionBusyError
from ..history_check import HistoryReport, check_history, repaired
from ..repository import Compaction, Items, Sessions, is_importing
from ..turns import is_user
from ..types import KEK_ID, SEQ, WHOLE, Appended, SessionKey, StoredItem, Tail, Written
from ..validation import check_range, check_user_id, item_list, json_object, state_name
from .opener import Opener
from .owners import Owners

#: Times `repair` reads again when a writer changed the history meanwhile.
REPAIR_ATTEMPTS = 5


class Conversation:
    """The SDK protocol's four operations, and a session's owner, metadata and state."""

    def __init__(
        self,
        items: Items,
        sessions: Sessions,
        compaction: Compaction,
        opener: Opener,
        owners: Owners,
        written: Written | None,
        *,
        ttl: timedelta | None,
    ) -> None:
        self._items = items
        self._sessions = sessions
        self._compaction = compaction
        self._opener = opener
        self._owners = owners
        self._written = written
        self.ttl = ttl

    async def read(self, key: SessionKey, limit: int | None) -> list[Any]:
        """Live items of a session in order; with a limit, the latest `limit`."""
        if limit is not None:
            check_range("limit", limit, 0)
            if limit == 0:
                return []
        codec = await self._opener.ready()
        if codec.kek_id is not None:
            return await self._owners.reading(key, lambda key: self._read(key, limit), look=False)
        return await self._read(key, limit)

    async def _read(self, key: SessionKey, limit: int | None) -> list[Any]:
        codec = await self._opener.ready()
        # The key most rows name, if known: the rows it wraps come without its id.
        usual = self._owners.known_key_id(key) or codec.kek_id
        since = codec.removals  # a removal after the fetch: what it opens is not kept
        key, rows = await self._items.read(key, limit, usual)
        decode = functools.partial(codec.items, key, rows, usual, whole=limit is None, since=since)
        items = await off_loop(len(rows), decode)
        if rows and codec.kek_id is not None and (named := rows[-1][KEK_ID]) is not None:
            self._owners.read_under(key, named)  # the newest row named another key
        return items

    async def append(
        self,
        key: SessionKey,
        items: list[Any],
        ttl: timedelta | None = None,
        idempotency_key: str | None = None,
    ) -> None:
        """Append a batch, all or nothing; items expire after `ttl` (else the store's). With
        an `idempotency_key`, a session that holds a batch of that key already is left as
        it is: a retry is stored once.

        Search indexes the items after the write, off the caller's path.
        """
        batch_key = None if idempotency_key is None else batch_key_of(idempotency_key)
        given = item_list(items)
        payloads = await off_loop(len(given), encode_items, given)
        if not payloads:
            return
        codec = await self._opener.ready()
        ttl = ttl or self.ttl

        async def write(key: SessionKey, sealer: OwnerKey | None) -> tuple[int, int] | None:
            build = functools.partial(codec.rows, key, payloads, sealer=sealer)
            if batch_key is None:
                return await self._items.append(key, len(payloads), build, ttl)
            return await self._items.append_once(key, len(payloads), build, ttl, batch_key)

        placed = await self._owners.writing(key, write)
        if placed is None:
            return  # a batch of this idempotency key is stored already
        counted(payloads)
        session_pk, first_seq = placed
        if self._written is not None:  # a sealed store keeps no plaintext past the call
            handed = codec.kek_id is None
            self._written(Appended(key, first_seq, session_pk, tuple(payloads) if handed else None))

    async def clear(self, key: SessionKey) -> int:
        """Delete every item of a session (and their keys); return how many."""
        await self._opener.ready()
        async with self._opener.scrubbing():
            return await self._items.clear(key)

    async def metadata(self, key: SessionKey) -> dict[str, Any]:
        """The session's metadata ({} when it has none or no row yet)."""
        await self._opener.ready()
        row = await self._sessions.read_session_columns(key, ("metadata",))
        return dict(row.metadata or {}) if row else {}

    async def update_metadata(self, key: SessionKey, values: dict[str, Any]) -> dict[str, Any]:
        """Merge `values` into the session's metadata (a None value removes a name)."""
        values = json_object(values) or {}
        merged: dict[str, Any] = {}

        def change(row: Any) -> dict[str, Any]:
            merged.update(row.metadata or {})
            merged.update(values)
            for name in [name for name, value in values.items() if value is None]:
                del merged[name]
            return {"metadata": merged}

        await self._opener.ready()
        await self._sessions.update_session(key, change, ("metadata",))
        return merged

    async def set_user_id(self, key: SessionKey, user_id: str | None) -> None:
        """Give the session to `user_id` (None: to nobody), scrubbed as a removal is: the
        keys wrapped anew leave no copy of their old wrapping in a SQLite write-ahead log,
        nor does the owner key a userless session loses."""
        user_id = check_user_id(user_id)
        async with self._opener.scrubbing():
            await self._owners.give(key, user_id)

    async def state(self, key: SessionKey) -> dict[str, Any]:
        """The session's whole state mapping ({} when empty)."""
        codec = await self._opener.ready()

        async def read(key: SessionKey) -> dict[str, Any]:
            columns = (*codec.state_columns, "user_id")
            row = await self._sessions.read_session_columns(key, columns)
            if row is None:
                return {}
            return codec.state(key.owned_by(row.user_id), row)

        return await self._owners.reading(key, read, look=False)

    async def change_state(
        self, key: SessionKey, name: str, value: Any = None, *, delete: bool = False
    ) -> None:
        """Set (or delete) one named state value, under the session's lock.

        A deletion or an overwrite is scrubbed like a removal of items: with a key, the
        sealed state it replaced leaves no copy in a SQLite write-ahead log.
        """
        name = state_name(name)
        if not delete:
            encode_item({"value": value}, f"state {name!r}")  # ItemError before any write
        codec = await self._opener.ready()

        async def write(key: SessionKey, sealer: OwnerKey | None) -> None:
            def change(row: Any) -> dict[str, Any]:
                self._owners.check(sealer, key, row.user_id)
                state = codec.state(key, row)
                if delete:
                    if name not in state:
                        return {}  # nothing to write: no row made, no activity
                    del state[name]
                else:
                    state[name] = value
                return codec.state_values(key, state, sealer)

            columns = (*codec.state_columns, "user_id")
            await self._sessions.update_session(key, change, columns)

        # The sealed state replaced leaves no copy in a SQLite WAL, deleted or overwritten.
        async with self._opener.scrubbing(forget=delete):
            await self._owners.writing(key, write, reads=True)

    async def import_state(self, key: SessionKey, state: dict[str, Any]) -> None:
        """Replace the whole state mapping of a session an import is writing, scrubbed as
        `change_state` is; nothing if the session is no longer marked as being imported
        (deleted meanwhile: the row the write made again is rolled back)."""
        encode_item(state, "state")  # ItemError before any write
        state = dict(state)
        codec = await self._opener.ready()

        async def write(key: SessionKey, sealer: OwnerKey | None) -> None:
            def change(row: Any) -> dict[str, Any]:
                if not is_importing(row.archived_at):
                    return {}
                self._owners.check(sealer, key, row.user_id)
                return codec.state_values(key, state, sealer)

            await self._sessions.update_session(key, change, ("user_id", "archived_at"))

        async with self._opener.scrubbing(forget=False):
            await self._owners.writing(key, write)

    # -- compaction: read a tail, replace it (or everything) in one transaction ---------------

    async def tail(self, key: SessionKey, limit: int) -> tuple[list[Any], Tail]:
        """The latest `limit` live items, decoded, and the rows they came from."""
        check_range("limit", limit, 0)
        codec = await self._opener.ready()

        async def read(key: SessionKey) -> tuple[list[Any], Tail]:
            since = codec.removals
            tail = await self._compaction.tail(key, limit)
            opened = await off_loop(len(tail.stored), codec.items, key, tail.stored, since=since)
            return opened, tail

        return await self._owners.reading(key, read)

    async def replace_tail(
        self,
        key: SessionKey,
        tail: Tail,
        start: int,
        output: list[Any],
        prune: Callable[[Any], bool] | None = None,
        origins: Sequence[int] | None = None,
        users: Sequence[int] = (),
    ) -> bool:
        """Replace `tail`'s items from `start` on by `output`, in one transaction; False (and
        nothing changed) if the session's tail is no longer those items.

        `prune(item)` also deletes the contiguous run of older items it is true for; an item
        that does not decode ends that run. Removed items' keys are destroyed. `origins`:
        for each output item, which replaced one (counted from `start`) it keeps the
        creation and expiry of (a repair's); without, the output takes the newest
        replaced item's creation and the last expiry (a compaction's summary). `users`: the
        places of the replaced user messages, which a repair's output holds again.
        """
        expected = [row[SEQ] for row in tail.stored[max(start, 0) :]]
        if not expected:
            return False
        payloads = await off_loop(len(output), encode_items, output)
        codec = await self._opener.ready()

        async def write(key: SessionKey, sealer: OwnerKey | None) -> bool:
            def prunable(stored: StoredItem) -> bool:
                try:
                    item = codec.item(key, stored)
                except AgentsSQLAlchemyError:
                    return False
                return prune is not None and bool(prune(item))

            build = functools.partial(codec.rows, key, payloads, sealer=sealer)
            return await self._compaction.replace_tail(
                key, expected, len(output), build, prunable if prune else None, origins, users
            )

        async with self._opener.scrubbing():
            replaced = await self._owners.writing(key, write, reads=prune is not None)
        if replaced:
            counted(payloads)
            if self._written is not None:
                self._written(Appended(key))
        return replaced

    async def replace_all(self, key: SessionKey, items: list[Any], ttl: timedelta | None) -> bool:
        """Replace every item of the session by `items`, in one transaction; False, and
        nothing changed, if the session has branches."""
        given = item_list(items, "a compaction's replacement")
        payloads = await off_loop(len(given), encode_items, given)
        codec = await self._opener.ready()

        async def write(key: SessionKey, sealer: OwnerKey | None) -> bool:
            build = functools.partial(codec.rows, key, payloads, sealer=sealer)
            return await self._compaction.replace_all(key, len(given), build, ttl or self.ttl)

        async with self._opener.scrubbing():
            replaced = await self._owners.writing(key, write)
        if replaced:
            counted(payloads)
            if self._written is not None:
                self._written(Appended(key))
        return replaced

    async def check(self, key: SessionKey) -> HistoryReport:
        """What in the session's history the model API would refuse (`history_check`)."""
        items = await self.read(key, None)
        return await off_loop(len(items), check_history, items)

    async def repair(self, key: SessionKey) -> HistoryReport:
        """Mend the session's history (`history_check.repaired`) in one transaction that
        fails, and is tried again on a fresh read, if a writer changed it meanwhile; return
        what was wrong. Items kept keep their place in time and their expiry (`created_at`,
        `expires_at`); an answer made up for a call takes the call's."""
        for _ in range(REPAIR_ATTEMPTS):
            items, tail = await self.tail(key, WHOLE)
            fix = await off_loop(len(items), repaired, items)
            users = [
                row[SEQ] for row, item in zip(tail.stored, items, strict=True) if is_user(item)
            ]
            if not fix.changed or await self.replace_tail(
                key, tail, 0, fix.items, origins=fix.origins, users=users
            ):
                return fix.report
        raise SessionBusyError(
            f"session {key.session_id[:80]!r} kept changing while it was being repaired: "
            "nothing was changed, try again",
            key.session_id,
        )


def batch_key_of(idempotency_key: str) -> str:
    """What an items row keeps of an idempotency key: its SHA-256, in hex.

    >>> len(batch_key_of("turn-7"))
    64
    """
    if not isinstance(idempotency_key, str) or not 0 < len(idempotency_key) <= 255:
        raise ConfigurationError(
            f"idempotency_key must be a string of 1 to 255 characters, got {idempotency_key!r}"
        )
    return hashlib.sha256(idempotency_key.encode("utf-8", "surrogatepass")).hexdigest()
