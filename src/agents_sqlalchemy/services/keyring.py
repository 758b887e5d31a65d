"""Opening a store (schema at head, then its key verified) and rotating that key.

Everything the store does starts with `ready()`, which returns the codec: plain JSON for a
store without a key, sealed items for one with a key. A wrong key fails here, before any
item is read or written, and is refused again without re-deriving it.

Example::

    keyring = Keyring(db, repository, tables, key="passphrase", create_tables=True)
    codec = await keyring.ready()
    await keyring.rotate("new passphrase")
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from ..aio import holding
from ..codec import Codec, PlainCodec, SealedCodec
from ..crypto import (
    Key,
    KeyEncryptionKey,
    KeyringRecord,
    create_kek,
    open_kek,
    rewrap_many,
    rewrap_state,
    validate_key,
)
from ..database.units import Database
from ..errors import ConfigurationError, KeyringError, WrongKeyError
from ..migrations.api import ensure_schema
from ..repository import Repository
from ..tables import TableNames
from .background import Background
from .history import announce_sdk_history

ROTATE_BATCH = 1000

UNFINISHED_WITH_NEW_KEY = (
    "a key rotation to this key is unfinished: open a store with the previous key and call "
    "rotate_key(new_key) again (or run `agents-sqlalchemy rotate-key`) to finish it"
)
UNFINISHED_WITH_OLD_KEY = (
    " A key rotation is unfinished: if this is the previous key, finish it with "
    "rotate_key(new_key) on a store opened with it (or `agents-sqlalchemy rotate-key`)"
)


class Keyring:
    """The store's schema check and key: `ready()` once, `rotate()` to change the key."""

    def __init__(
        self,
        db: Database,
        repository: Repository,
        tables: TableNames,
        *,
        key: Key | None,
        create_tables: bool,
        background: Background,
    ) -> None:
        self.key = key  # validated by the caller
        self.create_tables = create_tables
        # Whether a first open warns about the SDK's own tables' history (an import does not).
        self.announce_history = True
        self._db = db
        self._repository = repository
        self._tables = tables
        self._codec: Codec | None = None
        self._kek: KeyEncryptionKey | None = None
        self._opening = threading.Lock()
        self._refused: WrongKeyError | None = None
        self._background = background
        self._schema_checked = False

    async def ready(self, *, rotating: bool = False) -> Codec:
        """Check the schema and open the keyring, once per store; then return the codec."""
        if self._codec is not None:
            return self._codec
        async with holding(self._opening):
            # A wrong key is refused once, not re-derived per call; a rotation may try the
            # key again (the previous key resumes an unfinished rotation).
            if self._refused is not None and not rotating:
                raise WrongKeyError(str(self._refused))
            if self._codec is None:
                await self._check_schema()
                try:
                    self._kek = await self._open(rotating)
                except WrongKeyError as exc:
                    self._refused = exc
                    raise
                self._codec = PlainCodec() if self._kek is None else SealedCodec(self._kek)
        return self._codec

    async def schema_ready(self) -> None:
        """Check the schema only, for reads of what is never sealed (listing sessions).

        With a key, the key is verified too (`ready`): a wrong key is refused everywhere.
        """
        if self.key is not None:
            await self.ready()
            return
        async with holding(self._opening):
            await self._check_schema()

    async def _check_schema(self) -> None:
        if not self._schema_checked:
            await ensure_schema(self._db, self._tables, create=self.create_tables)
            if self.announce_history:
                await announce_sdk_history(self._repository, self._db.url, self._tables)
            self._schema_checked = True

    @asynccontextmanager
    async def scrubbing(self) -> AsyncIterator[None]:
        """Around a removal in encrypted mode: forget cached keys at once, and have the
        SQLite WAL checkpointed just after, off the caller's path (`Background`)."""
        yield
        if isinstance(self._codec, SealedCodec):
            self._codec.forget_keys()
        if self.key is not None:
            self._background.submit(("scrub",), self._repository.scrub)

    async def _open(self, rotating: bool) -> KeyEncryptionKey | None:
        """The store's key-encryption key; a wrong or missing key fails before any item I/O."""
        rows = await self._repository.keyring_rows()
        active = [KeyringRecord.from_row(row) for row in rows if row["retired_at"] is None]
        retired = [KeyringRecord.from_row(row) for row in rows if row["retired_at"] is not None]
        if self.key is None:
            if rows:
                raise WrongKeyError(
                    "this database is encrypted: open the store with its key (key=...); "
                    "nothing was read or written"
                )
            return None
        if not rows:
            return await self._create(rotating)
        try:
            kek = await open_kek(self.key, active[-1])
        except WrongKeyError as exc:
            if not retired:
                raise
            if rotating:  # an unfinished rotation is resumed with the previous key
                return await _open_any(self.key, retired, exc)
            raise WrongKeyError(f"{exc}{UNFINISHED_WITH_OLD_KEY}") from None
        if retired:
            raise KeyringError(UNFINISHED_WITH_NEW_KEY)
        return kek

    async def _create(self, rotating: bool) -> KeyEncryptionKey:
        """The first keyring row of a database, made from the store's key."""
        assert self.key is not None
        if rotating:
            raise KeyringError("this database is not encrypted (no keyring): nothing to rotate")
        if await self._repository.has_plaintext_items():
            raise KeyringError(
                "this database holds items stored without a key: open it without key=, "
                "or copy its sessions into a new database opened with the key"
            )
        kek = await create_kek(self.key)
        if not await self._repository.add_keyring(kek.record.as_row()):
            kek = await open_kek(self.key, await self._active_record())  # another store won
        return kek

    async def _active_record(self) -> KeyringRecord:
        rows = await self._repository.keyring_rows()
        return KeyringRecord.from_row([row for row in rows if row["retired_at"] is None][-1])

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
        await self.ready(rotating=True)
        old = self._kek
        if old is None:
            raise ConfigurationError("rotate_key needs a store opened with its current key")
        repository = self._repository
        rows = await repository.keyring_rows()
        pending = [row for row in rows if row["retired_at"] is None and row["kek_id"] != old.kek_id]
        if pending:  # a rotation was interrupted: `new_key` must open its new keyring row
            new = await open_kek(new_key, KeyringRecord.from_row(pending[-1]))
        else:
            new = await create_kek(new_key, previous=old)
            await repository.add_keyring(new.record.as_row(), retire=old.kek_id)
        done, total = 0, await repository.count_keys(old.kek_id)
        if progress is not None:
            progress(done, total)
        finished = False
        while not finished:  # until no key (from a writer racing the rotation) is left behind
            last: int | None = 0
            while last is not None:
                count, last = await repository.rewrap_keys(
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
                after = await repository.rewrap_states(
                    lambda blob: rewrap_state(blob, old, new), after, batch_size
                )
            finished = await repository.finish_rotation(old.kek_id)
        await repository.scrub()
        self.key, self._kek, self._codec = new_key, new, SealedCodec(new)
        return done


async def _open_any(
    key: Key, records: list[KeyringRecord], refused: WrongKeyError
) -> KeyEncryptionKey:
    """The newest of `records` that `key` opens; `refused` if none does."""
    for record in reversed(records):
        try:
            return await open_kek(key, record)
        except WrongKeyError:
            continue
    raise refused
