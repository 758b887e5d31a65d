"""Changing a store's key: every owner key replaced by a fresh one, every data key
re-wrapped under its owner's new key, the old keys destroyed; resumably.

Example::

    rotation = KeyRotation(opener, KeyringRows(schema), owners)
    await rotation.rotate("new passphrase")
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..codec import SealedCodec
from ..crypto import (
    Key,
    KeyringRecord,
    OwnerKey,
    Wrapper,
    check_state_key,
    create_kek,
    open_kek,
    rewrap,
    rewrap_many,
    rewrap_state,
    state_kek_id,
    validate_key,
)
from ..errors import ConfigurationError, KeyringError, WrongKeyError
from ..repository import KeyringRows
from ..validation import check_range
from .opener import Opener
from .owners import Owners

ROTATE_BATCH = 1000


class KeyRotation:
    """Re-wraps a store's data keys under a new key; resumes an interrupted rotation."""

    def __init__(self, opener: Opener, keyring: KeyringRows, owners: Owners) -> None:
        self._opener = opener
        self._keyring = keyring
        self._owners = owners

    async def rotate(
        self,
        new_key: Key,
        *,
        batch_size: int = ROTATE_BATCH,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Re-wrap every data key under `new_key`; see `SessionStore.rotate_key`."""
        batch_size = check_range("batch_size", batch_size, 1)
        new_key = validate_key(new_key)
        opener = self._opener
        try:
            await opener.ready(rotating=True)
        except WrongKeyError:
            if not await self._rotated_to(new_key):
                raise
            # Run again after its last step stopped: the old owner keys it left go now.
            if not await self._owners.rotating():
                return 0
            return await self.rotate_owner_keys(batch_size=batch_size, progress=progress)
        old = opener.kek
        if old is None:
            raise ConfigurationError("rotate_key needs a store opened with its current key")
        await self._owners.finish_erasures()  # their retired keys are no rotation's
        keyring = self._keyring
        rows = await keyring.keyring_rows()
        pending = [row for row in rows if row["retired_at"] is None and row["kek_id"] != old.kek_id]
        opened: dict[str, OwnerKey] = {}
        if pending:  # a rotation was interrupted: `new_key` must open its new keyring row
            try:
                new = await open_kek(new_key, KeyringRecord.from_row(pending[-1]))
            except WrongKeyError:
                raise WrongKeyError(
                    "a key rotation to another key is unfinished: run rotate_key again with "
                    "the new key it was started with (the store's key opens this database); "
                    "nothing was changed"
                ) from None
        else:
            await self._refuse_to_start(
                new_key, [row for row in rows if row["kek_id"] == old.kek_id]
            )
            opened = await self._owners.in_use()
            await self._check({old.kek_id: old, **opened}, batch_size)
            new = await create_kek(new_key, previous=old)
            await keyring.add_keyring(new.record.as_row(), retire=old.kek_id)
        # This store's writes meanwhile: checked against the new key (the old one is
        # retired), they open the owner keys the rotation makes, and make new ones, under it.
        codec = await opener.ready()
        assert isinstance(codec, SealedCodec)
        codec.next_kek = new
        keyring.seal_with(new.kek_id)
        # Every owner key gets a fresh successor: what a removal left in copies of the
        # database is then wrapped by keys that are destroyed at the end.
        pairs = await self._owners.successors(old, new, opened=opened)
        moves: dict[str, tuple[Wrapper, Wrapper]] = {old.kek_id: (old, new)}
        done = await self._walk(moves | pairs, old.kek_id, pairs, batch_size, progress)
        opener.adopt(new_key, new)
        return done

    async def _refuse_to_start(self, new_key: Key, current: list[Any]) -> None:
        """Raise `ConfigurationError`, nothing changed, where a rotation to `new_key` could
        not end: one of the owner keys is unfinished (its successors are kept under the
        store's key, which this one retires), or `new_key` is the store's key already."""
        if await self._owners.rotating():
            raise ConfigurationError(
                "a rotation of the owner keys is unfinished: finish it first "
                "(rotate_owner_keys again), then rotate the store's key; nothing was changed"
            )
        try:
            await open_kek(new_key, KeyringRecord.from_row(current[-1]))
        except WrongKeyError:
            return
        raise ConfigurationError(
            "the new key is the store's key already: nothing was changed (rotate_owner_keys "
            "gives every owner a fresh key under it)"
        )

    async def _rotated_to(self, new_key: Key) -> bool:
        """Whether `new_key` is the store's only key (a rotation to it ended its walk and
        deleted the old keyring row); the store then holds it."""
        rows = await self._keyring.keyring_rows()
        if len(rows) != 1 or rows[0]["retired_at"] is not None:
            return False
        try:
            kek = await open_kek(new_key, KeyringRecord.from_row(rows[0]))
        except WrongKeyError:
            return False
        self._opener.adopt(new_key, kek)
        return True

    async def rotate_owner_keys(
        self, *, batch_size: int = ROTATE_BATCH, progress: Callable[[int, int], None] | None = None
    ) -> int:
        """Give every owner a fresh key, keeping the store's; see
        `SessionStore.rotate_owner_keys`."""
        batch_size = check_range("batch_size", batch_size, 1)
        await self._opener.ready(rotating=True)
        kek = self._opener.kek
        if kek is None:
            raise ConfigurationError("rotate_owner_keys needs a store opened with its key")
        await self._owners.finish_erasures()  # their retired keys are no rotation's
        rows = await self._keyring.keyring_rows()
        if any(row["retired_at"] is None and row["kek_id"] != kek.kek_id for row in rows):
            raise ConfigurationError(
                "a rotation of the store's key is unfinished: finish it first (rotate_key "
                "again with the same two keys)"
            )
        resuming = await self._owners.rotating()
        opened: dict[str, OwnerKey] = {}
        if not resuming:
            opened = await self._owners.in_use()
            await self._check({kek.kek_id: kek, **opened}, batch_size)
        pairs = await self._owners.successors(kek, kek, opened=opened)
        return await self._walk(dict(pairs), None, pairs, batch_size, progress)

    async def _check(self, wrappers: Mapping[str, Wrapper], batch_size: int) -> None:
        """Open every item's data key and every sealed state's with the key that wraps it,
        changing nothing, before a rotation starts: an item that one of `wrappers` does not
        open (its key id or its wrapped key altered) would stop the rotation halfway, or be
        left under a key it then destroys. Raises naming the item; ~3 us an item. What is
        written meanwhile is sealed under these same keys, or under a key made meanwhile for
        a new owner (looked up when met): the walk ends where the items and sessions ended
        when it started (one chasing busy writers would not end)."""
        keyring, known = self._keyring, dict(wrappers)

        async def wrapper_of(kek_id: str | None) -> Wrapper | None:
            if kek_id is not None and kek_id not in known:  # a new owner's, made meanwhile?
                known.update(await self._owners.in_use(live_only=True))
            return None if kek_id is None else known.get(kek_id)

        last_item, last_session = await keyring.last_item_id(), await keyring.last_session_id()
        after: int | None = 0
        while after is not None:
            found, after = await keyring.wrapped_keys(after, batch_size, last_item)
            for session_id, seq, kek_id, wrapped in found:
                where = f"item #{seq} of session {session_id[:80]!r}"
                wrapper = await wrapper_of(kek_id)
                if wrapper is None or wrapped is None:
                    raise KeyringError(
                        f"{where} names no key this store holds ({kek_id!r}"
                        f"{'' if wrapped else ', no wrapped key'}): it was altered; nothing "
                        "was changed, restore or delete it, then rotate"
                    )
                rewrap(wrapped, wrapper, wrapper, where=where)
        after = 0
        while after is not None:
            states, after = await keyring.sealed_states(after, batch_size, last_session)
            for session_id, state in states:
                where = f"the state of session {session_id[:80]!r}"
                wrapper = await wrapper_of(state_kek_id(state))
                if wrapper is None:
                    raise KeyringError(
                        f"{where} names no key this store holds: it was altered; nothing was "
                        "changed"
                    )
                check_state_key(state, wrapper, where=where)

    async def _walk(
        self,
        moves: Mapping[str, tuple[Wrapper, Wrapper]],
        old_kek: str | None,
        pairs: Mapping[str, Any],
        batch_size: int,
        progress: Callable[[int, int], None] | None,
    ) -> int:
        """Re-wrap every item key and sealed state wrapped by a key of `moves` (old id ->
        (old, new)), a batch at a time, until none is left; then retire keyring row
        `old_kek` and destroy the old owner keys of `pairs`. Returns how many item keys were
        re-wrapped.

        The old keys are retired before the walk, so items written after it started are
        sealed under the new ones: a pass ends at the last item there when it starts (a
        walk chasing busy writers would not end), and passes go on while one is left."""
        keyring = self._keyring

        def rewrap_keys(kek_id: str, wrapped: list[bytes]) -> tuple[str, list[bytes]]:
            before, after = moves[kek_id]
            return after.kek_id, rewrap_many(wrapped, before, after)

        def rewrap_blob(blob: bytes) -> bytes:
            move = moves.get(state_kek_id(blob))
            return blob if move is None else rewrap_state(blob, *move)

        done, total = 0, await keyring.count_keys(moves)
        if progress is not None:
            progress(done, total)
        finished = False
        while not finished:
            last: int | None = 0
            upto = await keyring.last_item_id()
            while last is not None:
                count, last = await keyring.rewrap_keys(moves, rewrap_keys, last, batch_size, upto)
                done += count
                if count and progress is not None:
                    progress(done, max(total, done))
            after: int | None = 0
            while after is not None:
                after = await keyring.rewrap_states(rewrap_blob, after, batch_size)
            finished = await keyring.finish_rotation(old_kek, pairs)
        # What searches kept holds the items' keys as wrapped before.
        (await self._opener.ready()).kept.forget()
        await self._owners.destroy_keys(pairs)
        await keyring.scrub()
        return done
