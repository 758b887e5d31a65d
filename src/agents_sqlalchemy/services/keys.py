"""Changing a store's key: every data key re-wrapped under the new one, resumably.

Example::

    rotation = KeyRotation(opener, KeyringRows(schema))
    await rotation.rotate("new passphrase")
"""

from __future__ import annotations

from collections.abc import Callable

from ..crypto import (
    Key,
    KeyringRecord,
    create_kek,
    open_kek,
    rewrap_many,
    rewrap_state,
    validate_key,
)
from ..errors import ConfigurationError
from ..repository import KeyringRows
from .opener import Opener

ROTATE_BATCH = 1000


class KeyRotation:
    """Re-wraps a store's data keys under a new key; resumes an interrupted rotation."""

    def __init__(self, opener: Opener, keyring: KeyringRows) -> None:
        self._opener = opener
        self._keyring = keyring

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
        done, total = 0, await keyring.count_keys(old.kek_id)
        if progress is not None:
            progress(done, total)
        finished = False
        while not finished:  # until no key (from a writer racing the rotation) is left behind
            last: int | None = 0
            while last is not None:
                count, last = await keyring.rewrap_keys(
                    old.kek_id,
                    new.kek_id,
                    lambda wrapped: rewrap_many(wrapped, old, new),
                    last,
                    batch_size,
                )
                done += count
                if count and progress is not None:
                    progress(done, max(total, done))
            after: int | None = 0
            while after is not None:
                after = await keyring.rewrap_states(
                    lambda blob: rewrap_state(blob, old, new), after, batch_size
                )
            finished = await keyring.finish_rotation(old.kek_id)
        await keyring.scrub()
        opener.adopt(new_key, new)
        return done
