"""Changing a store's key: every owner key replaced by a fresh one, every data key
re-wrapped under its owner's new key, the old keys destroyed; resumably.

Example::

    rotation = KeyRotation(opener, KeyringRows(schema), owners)
    await rotation.rotate("new passphrase")
"""

from __future__ import annotations

from collections.abc import Callable

from ..crypto import (
    Key,
    KeyringRecord,
    Wrapper,
    create_kek,
    open_kek,
    rewrap_many,
    rewrap_state,
    state_kek_id,
    validate_key,
)
from ..errors import ConfigurationError
from ..repository import KeyringRows
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
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be >= 1, got {batch_size}")
        new_key = validate_key(new_key)
        opener = self._opener
        await opener.ready(rotating=True)
        old = opener.kek
        if old is None:
            raise ConfigurationError("rotate_key needs a store opened with its current key")
        keyring = self._keyring
        rows = await keyring.keyring_rows()
        pending = [row for row in rows if row["retired_at"] is None and row["kek_id"] != old.kek_id]
        if pending:  # a rotation was interrupted: `new_key` must open its new keyring row
            new = await open_kek(new_key, KeyringRecord.from_row(pending[-1]))
        else:
            new = await create_kek(new_key, previous=old)
            await keyring.add_keyring(new.record.as_row(), retire=old.kek_id)
        # Every owner key gets a fresh successor: what a removal left in copies of the
        # database is then wrapped by keys that are destroyed at the end.
        pairs = await self._owners.successors(old, new, resuming=bool(pending))
        moves: dict[str, tuple[Wrapper, Wrapper]] = {old.kek_id: (old, new)}
        moves |= {key_id: pair for key_id, pair in pairs.items()}

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
        while not finished:  # until no key (from a writer racing the rotation) is left behind
            last: int | None = 0
            while last is not None:
                count, last = await keyring.rewrap_keys(moves, rewrap_keys, last, batch_size)
                done += count
                if count and progress is not None:
                    progress(done, max(total, done))
            after: int | None = 0
            while after is not None:
                after = await keyring.rewrap_states(rewrap_blob, after, batch_size)
            finished = await keyring.finish_rotation(old.kek_id, pairs)
        await self._owners.destroy_keys(pairs)
        await keyring.scrub()
        opener.adopt(new_key, new)
        return done
