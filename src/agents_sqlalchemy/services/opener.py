"""Opening a store: its schema at head, the SDK's own history announced, its key verified.

Everything the store does starts with `ready()`, which returns the codec: plain JSON for a
store without a key, sealed items for one with a key. A wrong key fails here, before any
item is read or written, and is refused again without re-deriving it. Changing the key is
`keys.KeyRotation`'s.

Example::

    opener = Opener(db, KeyringRows(schema), Imports(schema), tables, key="passphrase",
                    create_tables=True, background=background)
    codec = await opener.ready()
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from sqlalchemy.engine import URL

from ..aio import FairLock, settle
from ..codec import Codec, PlainCodec, SealedCodec
from ..crypto import (
    Key,
    KeyEncryptionKey,
    KeyringRecord,
    create_kek,
    open_kek,
)
from ..database.units import Database
from ..errors import KeyringError, SdkHistoryWarning, WrongKeyError, warn
from ..migrations.api import ensure_schema
from ..repository import Imports, KeyringRows
from ..repository.imports import COUNT_CAP
from ..tables import TableNames
from .background import Background

UNFINISHED_WITH_NEW_KEY = (
    "a key rotation to this key is unfinished: open a store with the previous key and call "
    "rotate_key(new_key) again (or run `agents-sqlalchemy rotate-key`) to finish it"
)
UNFINISHED_WITH_OLD_KEY = (
    " A key rotation is unfinished: if this is the previous key, finish it with "
    "rotate_key(new_key) on a store opened with it (or `agents-sqlalchemy rotate-key`)"
)


class Opener:
    """The store's schema check and key: `ready()` once, then the codec it opened."""

    def __init__(
        self,
        db: Database,
        keyring: KeyringRows,
        imports: Imports,
        tables: TableNames,
        *,
        key: Key | None,
        create_tables: bool,
        background: Background,
        forget_sealed: Callable[[], None] = lambda: None,
    ) -> None:
        self.key = key  # validated by the caller
        # Drops the sealed copies of items that other parts of the store keep (the tails its
        # pops remember), at a removal that drops every plaintext.
        self._forget_sealed = forget_sealed
        self._db = db
        self.create_tables = create_tables
        # Whether a first open warns about the SDK's own tables' history (an import does not).
        self.announce_history = True
        self._keyring = keyring
        self._imports = imports
        self._tables = tables
        self._codec: Codec | None = None
        self._kek: KeyEncryptionKey | None = None
        self._opening = FairLock()
        self._refused: WrongKeyError | None = None
        self._background = background
        self._schema_checked = False

    @property
    def create_tables(self) -> bool:
        """Whether the store creates its tables (and its SQLite file) when they are not
        there; without, a SQLite file that is not there is an error, never created."""
        return self._db.create_file

    @create_tables.setter
    def create_tables(self, value: bool) -> None:
        self._db.create_file = value

    async def ready(self, *, rotating: bool = False) -> Codec:
        """Check the schema and open the keyring, once per store; then return the codec.

        A caller cancelled meanwhile waits for the opening to finish (a passphrase's key
        derivation takes a while): the next call finds the store open, instead of starting
        over, and a caller that retries on a timeout gets through.
        """
        if self._codec is not None:
            return self._codec
        return await settle(self._open_once(rotating))

    async def _open_once(self, rotating: bool) -> Codec:
        async with self._opening:
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
                self._keyring.seal_with(None if self._kek is None else self._kek.kek_id)
                await self._announce()  # the first read of a table: after the key is verified
        return self._codec

    async def schema_ready(self) -> None:
        """Check the schema only, for reads of what is never sealed (listing sessions).

        With a key, the key is verified too (`ready`): a wrong key is refused everywhere.
        """
        if self.key is not None:
            await self.ready()
            return
        async with self._opening:
            await self._check_schema()
            await self._announce()

    async def encrypted(self) -> bool:
        """Whether the database has a keyring (its items are sealed), read without a key."""
        async with self._opening:
            await self._check_schema()
        return bool(await self._keyring.keyring_rows())

    async def _check_schema(self) -> None:
        """The schema at head (the version table and the catalog only: no row of ours)."""
        if not self._schema_checked:
            await ensure_schema(self._db, self._tables, create=self.create_tables)
            self._schema_checked = True

    async def _announce(self) -> None:
        if self.announce_history:
            self.announce_history = False  # once per store
            await announce_sdk_history(self._imports, self._db.url, self._tables)

    @asynccontextmanager
    async def scrubbing(
        self, *, forget: bool = True, removed: list[bytes] | None = None
    ) -> AsyncIterator[None]:
        """Around a removal (or an overwrite) in encrypted mode: forget cached plaintexts
        at once, and just after, off the caller's path (`Background`), the rest of what
        the removal may have left in memory (`SealedCodec.forget_text`) and a SQLite file's
        WAL (checkpointed; a server keeps no WAL the store could scrub). `forget=False`
        keeps the caches (an overwritten state was never in them): only the WAL is
        checkpointed. `removed`, filled in by the removal (`noting_keys`): the wrapped keys
        of the only items it removed, whose plaintexts alone are dropped (else every
        plaintext, and every sealed copy other parts of the store keep)."""
        yield
        if forget and isinstance(self._codec, SealedCodec):
            self._codec.forget_keys(removed)
            if removed is None:
                self._forget_sealed()
            self._background.submit(("forget",), self._codec.forget_text)
        if self.key is not None and self._keyring.scrubs:
            self._background.submit(("scrub",), self._keyring.scrub)

    @property
    def kek(self) -> KeyEncryptionKey | None:
        """The key-encryption key `ready()` opened (None: no key, or not opened yet)."""
        return self._kek

    def adopt(self, key: Key, kek: KeyEncryptionKey) -> None:
        """A rotation finished: from now on `key` and its `kek` are the store's."""
        self.key, self._kek, self._codec = key, kek, SealedCodec(kek)
        self._keyring.seal_with(kek.kek_id)

    async def _open(self, rotating: bool) -> KeyEncryptionKey | None:
        """The store's key-encryption key; a wrong or missing key fails before any item I/O."""
        rows = await self._keyring.keyring_rows()
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
        keyless = await self._keyring.keyless_data()
        sealed = keyless != "items" and await self._keyring.has_sealed_data()
        if (keyless == "sessions" or sealed) and any(
            row["retired_at"] is None for row in await self._keyring.keyring_rows()
        ):
            # Another store made the keyring after this one looked, then wrote.
            return await open_kek(self.key, await self._active_record())
        if sealed:
            raise KeyringError(
                "this database holds sealed items, states or owner keys but no keyring row "
                "(deleted, or left out of a copy of the tables): nothing was written; restore "
                "the keyring table from a backup taken with the rest"
            )
        if keyless is not None:
            raise KeyringError(
                f"this database holds {keyless} stored without a key: open it without key= "
                "(nothing was read or written), or copy its sessions into a new database "
                "opened with the key"
            )
        kek = await create_kek(self.key)
        if not await self._keyring.add_keyring(kek.record.as_row()):
            kek = await open_kek(self.key, await self._active_record())  # another store won
        return kek

    async def _active_record(self) -> KeyringRecord:
        rows = await self._keyring.keyring_rows()
        return KeyringRecord.from_row([row for row in rows if row["retired_at"] is None][-1])


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


#: The SDK's `SQLAlchemySession` tables, by default.
SDK_SESSIONS, SDK_MESSAGES = "agent_sessions", "agent_messages"
IMPORT_COMMAND = "agents-sqlalchemy import-sdk"


async def announce_sdk_history(imports: Imports, url: URL, tables: TableNames) -> None:
    """Warn (`SdkHistoryWarning`) if the SDK's tables hold rows and ours hold no session."""
    if {SDK_SESSIONS, SDK_MESSAGES} & {tables.sessions_table, tables.items_table}:
        return  # these names are ours
    rows = await imports.sdk_history(SDK_MESSAGES)
    if not rows:
        return
    where = url.render_as_string(hide_password=True)
    count = f"{COUNT_CAP:,}+" if rows >= COUNT_CAP else f"{rows:,}"
    command = tables.command_line(f"--from '{where}'", where, program=IMPORT_COMMAND)
    option = "" if not tables.overrides() else f", tables={tables!r}"
    warn(
        f"{where} holds {count} message rows of the Agents SDK's own SQLAlchemySession "
        f"({SDK_SESSIONS}/{SDK_MESSAGES}) and this library's tables hold no session: that "
        f"history is not shown until it is copied once, with `{command}` or "
        f"`await agents_sqlalchemy.import_sdk('{where}', '{where}'{option})`",
        SdkHistoryWarning,
    )
