"""A sealed store's owner keys: made on an owner's first write, opened once, destroyed
with their owner.

Every item's data key is wrapped under its session owner's key (see `crypto.owner_keys`).
Writes seal under the key of the owner the session's row names (checked again in the write's
own transaction); reads open each row with the owner key its `kek_id` names, and refuse one
that belongs to another owner than the session's row names now. A plaintext store has no
owner keys: every method is then a no-op.

Example::

    owners = Owners(opener.ready, OwnerKeyRows(schema), sessions, None, sealed=True)
    sealer = await owners.sealer(key)                # the key a write to `key` seals under
    key = await owners.owned(key)                    # the owner a read must find
    await owners.load(kek_ids)                       # open what rows refer to, before decoding
    destroyed = await owners.destroy([owner_of("alice", "")])
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from ..aio import FairLock
from ..caches import add_bounded
from ..codec import Codec, MissingOwnerKeys, SealedCodec
from ..crypto import (
    Destruction,
    InDatabase,
    KeyDirectory,
    KeyEncryptionKey,
    OwnerKey,
    OwnerKeyStore,
    call_store,
    new_key_id,
    state_kek_id,
)
from ..crypto import rewrap_state as rewrap_state_blob
from ..crypto.kdf import KEY_BYTES
from ..errors import (
    AgentsSQLAlchemyError,
    ConfigurationError,
    DecryptionError,
    KeyProviderError,
    KeyringError,
    OwnerKeyError,
    TamperedItemError,
    WrongKeyError,
    partly_done,
    plural,
)
from ..repository import OwnerKeyRows, Sessions
from ..types import SessionKey, is_owner_key_id, owner_of

logger = logging.getLogger("agents_sqlalchemy")

T = TypeVar("T")
# Sessions whose owner a store remembers for its writes (a write checks it again anyway).
OWNERS_REMEMBERED = 10_000
# Tries of an operation that meets owner keys not opened yet, or an owner (or its key)
# that changed meanwhile: a session deleted and written again by others between its tries.
ATTEMPTS = 10
# Seconds an operation waits, try after try, for the rows of a destroyed owner key to go
# (an erasure destroys the keys first): 3.2 s in all, within `ATTEMPTS` (0.8 s was too
# short for an erasure on a busy server: a write for the user failed with OwnerKeyError).
ERASURE_PAUSES = (0.02, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6)
# The database's newest keys kept outside it, of which a key directory must hold one.
DIRECTORY_SAMPLE = 16


@dataclass(frozen=True)
class Destroyed:
    """What destroying owners' keys did: how many keys, and when the last is gone for good
    (a KMS may only schedule it)."""

    keys: int
    status: str | None
    at: datetime | None

    def and_then(self, later: Destroyed) -> Destroyed:
        """Both destructions as one: the keys of both, the status and time of the last."""
        last = later if later.at is not None else self
        return Destroyed(self.keys + later.keys, last.status, last.at)


def note_keys_destroyed(exc: BaseException, count: int, *, first: bool = False) -> None:
    """Note in `exc`, one of ours, that an erasure destroyed `count` owner keys for good
    before it (`errors.partly_done`, `first`: before what is noted already): their items
    cannot be read, whatever else failed."""
    if count and isinstance(exc, AgentsSQLAlchemyError):
        keys = plural(count, "owner key")
        partly_done(exc, f"{keys} destroyed, whose items cannot be read", first=first)


class Owners:
    """The owner keys of one store, by owner and by id; see the module's docstring."""

    def __init__(
        self,
        ready: Callable[[], Awaitable[Codec]],
        rows: OwnerKeyRows,
        sessions: Sessions,
        store: OwnerKeyStore | None,
        *,
        sealed: bool,
    ) -> None:
        # The store's codec, once its keyring is open (`Opener.ready`); whether it has a key.
        self._ready = ready
        self._sealed = sealed
        self._rows = rows
        self._sessions = sessions
        self._given = store
        # The key each owner's new items are sealed under, by owner.
        self._current: dict[str, OwnerKey] = {}
        # The user each session's row named when this store last looked, by session hash.
        self._users: dict[str, str | None] = {}
        # The key each session's newest item was wrapped under when this store last read
        # it without knowing that key, by session hash.
        self._read_under: dict[str, str] = {}
        self._making = FairLock()  # from every event loop the store is used on
        # Whether a key directory given was found to hold the database's keys (`_make`).
        self._directory_checked = False
        # Whether keys a deletion retired may be left undestroyed (None: not looked yet);
        # see `finish_erasures`.
        self._leftovers: bool | None = None

    @property
    def kept_in(self) -> str | None:
        """Where owner keys are kept: "database" (the default), the given key store's class
        name, or None for a plaintext store (which has none)."""
        if not self._sealed:
            return None
        return "database" if self._given is None else type(self._given).__name__

    async def _codec(self) -> SealedCodec | None:
        codec = await self._ready()
        return codec if isinstance(codec, SealedCodec) else None

    def _keeper(self, codec: SealedCodec) -> OwnerKeyStore:
        return self._given if self._given is not None else InDatabase(codec.kek)

    async def sealer(self, key: SessionKey) -> OwnerKey | None:
        """The key a write to the session seals under: its owner's newest (made if none)."""
        codec = await self._codec()
        if codec is None:
            return None
        if key.hash in self._users:
            user = self._users[key.hash]
        else:
            row = await self._sessions.read_session_columns(key, ("user_id",))
            user = row.user_id if row is not None else key.user_id
            add_bounded(self._users, {key.hash: user}, OWNERS_REMEMBERED)
        return await self.current(codec, owner_of(user, key.hash))

    def known_key_id(self, key: SessionKey) -> str | None:
        """The id of the key the session's items are wrapped under, if this store knows it
        without asking: it wrote to the session, or read it (`read_under`). A read names
        that key once, not per row."""
        if key.hash in self._users:
            found = self._current.get(owner_of(self._users[key.hash], key.hash))
            if found is not None:
                return found.kek_id
        return self._read_under.get(key.hash)

    def read_under(self, key: SessionKey, kek_id: str) -> None:
        """Note the key a read found the session's newest item wrapped under, when its row
        named one (not the key the read expected): the session's next read expects it.

        A store that only reads (a web backend showing what workers wrote) expected its own
        key-encryption key, and every row named its owner's key instead: a 1,200-item read
        on SQLite took 826 us, against 730 us once the read expected the owner's key."""
        add_bounded(self._read_under, {key.hash: kek_id}, OWNERS_REMEMBERED)

    def forget(self, key: SessionKey) -> None:
        """Look the session's owner, and owners' newest keys, up again (its owner changed,
        or a rotation retired the key it was sealed under)."""
        self._users.pop(key.hash, None)
        self._read_under.pop(key.hash, None)
        self._current.clear()

    @staticmethod
    def check(sealer: OwnerKey | None, key: SessionKey, user_id: str | None) -> None:
        """Inside a write: refuse to seal under `sealer` unless the session's row (its
        `user_id` read under the session's lock) still names that key's owner."""
        if sealer is not None and owner_of(user_id, key.hash) != sealer.owner:
            raise OwnerKeyError(
                "the session's owner changed since this store looked: nothing was written"
            )

    async def current(self, codec: SealedCodec, owner: str) -> OwnerKey:
        """The owner's newest live key, opened; made (and kept) if the owner has none."""
        found = self._current.get(owner)
        if found is not None:
            return found
        async with self._making:  # one store makes one key per owner at a time
            found = self._current.get(owner)
            if found is None:
                live = await self._rows.live_of(owner)
                found = await self._open(codec, live[0]) if live else await self._make(codec, owner)
                self._current[owner] = found
        return found

    async def _make(
        self,
        codec: SealedCodec,
        owner: str,
        *,
        sealing: KeyEncryptionKey | None = None,
        replaces: str | None = None,
    ) -> OwnerKey:
        """A new key for `owner`, kept by the store (in the database: under `sealing`,
        the store's key by default, or the new one while this store rotates it; a
        rotation's successor of `replaces`)."""
        sealing = sealing or codec.next_kek or codec.kek
        keeper = self._given if self._given is not None else InDatabase(sealing)
        if isinstance(keeper, KeyDirectory) and not self._directory_checked:
            await self._refuse_another_directory(keeper)
        key_id, material = new_key_id(), os.urandom(KEY_BYTES)
        kept = await call_store(keeper, "keep", key_id, owner, material)
        if kept is not None and not isinstance(kept, (bytes, bytearray, memoryview)):
            raise KeyProviderError(f"owner key store {keeper!r}.keep returned {type(kept)}")
        in_database = isinstance(keeper, InDatabase)
        row = {
            "key_id": key_id,
            "owner": owner,
            "kept": None if kept is None else bytes(kept),
            "kek_id": sealing.kek_id if in_database else None,
            "replaces": replaces,
        }
        try:
            await self._rows.add(row, sealing_kek=sealing.kek_id if in_database else None)
        except KeyringError:  # refused, nothing written: no row names the key, so it goes
            await call_store(keeper, "destroy", key_id, owner, row["kept"])
            raise
        opened = OwnerKey(key_id, owner, material)
        codec.owner_keys[key_id] = opened
        return opened

    async def _refuse_another_directory(self, directory: KeyDirectory) -> None:
        """Refuse to keep a new key in a key directory that holds none of the keys the
        database names as kept outside it (nor their destruction): it is not theirs (a
        volume not mounted, its mount point left empty), and a key kept there would be lost
        when the volume comes back. Once it passes, this store looks no more."""
        sample = await self._rows.kept_outside(DIRECTORY_SAMPLE)
        if sample and not directory.holds_any(sample):
            raise ConfigurationError(
                f"owner key directory {directory.path} holds none of the owner keys the "
                "database names as kept outside it: it is not the directory that keeps them "
                "(is its volume mounted?); no key was made, nothing written"
            )
        self._directory_checked = True

    async def _open(
        self, codec: SealedCodec, row: Any, keeper: OwnerKeyStore | None = None
    ) -> OwnerKey:
        opened = await self._opened(codec, row, keeper)
        if opened is None:
            raise OwnerKeyError(
                f"owner key {row.key_id} was destroyed: the items it wrapped are erased"
            )
        return opened

    async def _opened(
        self, codec: SealedCodec, row: Any, keeper: OwnerKeyStore | None = None
    ) -> OwnerKey | None:
        """The owner key of `row`, opened and kept; None if its store destroyed it."""
        kept = None if row.kept is None else bytes(row.kept)
        if keeper is None:
            self._refuse_kept_elsewhere([row])
        rotating = codec.next_kek
        if keeper is None and self._given is None and rotating and row.kek_id == rotating.kek_id:
            keeper = InDatabase(rotating)  # made by this store's rotation, which runs now
        if keeper is None and self._given is None and row.kek_id != codec.kek_id:
            raise WrongKeyError(
                f"owner key {row.key_id} is kept under key-encryption key {row.kek_id!r}, not "
                f"the store's {codec.kek_id!r}: this store holds a key that was rotated away "
                "(open it again with the new key), or a key rotation is unfinished (run it "
                "again with the previous key to finish it); nothing was written"
            )
        keeper = keeper or self._keeper(codec)
        try:
            material = await call_store(keeper, "fetch", row.key_id, row.owner, kept)
        except DecryptionError:
            raise WrongKeyError(
                f"owner key {row.key_id} does not open under the store's key: that key was "
                "rotated away (rotate_key or `agents-sqlalchemy rotate-key`, perhaps in "
                "another process; open the store again with the new key), or the owner key's "
                "stored bytes were altered; nothing was written"
            ) from None
        if material is None:
            return None
        opened = OwnerKey(row.key_id, row.owner, bytes(material))
        codec.owner_keys[row.key_id] = opened
        return opened

    async def load(
        self, kek_ids: Iterable[str | None], *, erased_too: bool = False
    ) -> frozenset[str]:
        """Open the owner keys among `kek_ids` that this store has not opened yet; return
        those that are destroyed (their owner erased, or the session deleted, maybe while
        the rows that name them were read). `erased_too`: those too whose row is there but
        whose key the owner key store destroyed (a copy of the database made before an
        erasure: a search then passes over their items), else `OwnerKeyError`."""
        codec = await self._codec()
        if codec is None:
            return frozenset()
        wanted = {
            k for k in kek_ids if k is not None and is_owner_key_id(k) and k not in codec.owner_keys
        }
        if not wanted:
            return frozenset()
        rows = await self._rows.by_ids(wanted)
        opened = set()
        for row in rows:
            if await (self._opened if erased_too else self._open)(codec, row) is not None:
                opened.add(row.key_id)
        return frozenset(wanted - opened)

    async def _load_or_refuse(self, key_ids: Iterable[str], seen: dict[str, int]) -> None:
        """`load`, before an operation is tried again: a key destroyed while its rows were
        being read is no reason to fail (they are gone too, read again). Rows that still
        name a destroyed key are waited for a while (`ERASURE_PAUSES`): an erasure destroys
        its owner's keys before it deletes their rows. After that they are refused. `seen`
        counts the tries that met each destroyed key."""
        gone = await self.load(key_ids)
        again = [seen[key_id] for key_id in gone if key_id in seen]
        if again and max(again) > len(ERASURE_PAUSES):
            raise OwnerKeyError(
                f"owner key {sorted(gone)[0]} is not in this store, yet item rows still name "
                "it: its owner is being erased (its keys go before its rows: read again once "
                "erase_user or delete_user finishes), or its row was deleted outside the "
                "library, or theirs were altered; their items cannot be opened"
            )
        if again:
            await asyncio.sleep(ERASURE_PAUSES[max(again) - 1])
        for key_id in gone:
            seen[key_id] = seen.get(key_id, 0) + 1

    async def owned(self, key: SessionKey) -> SessionKey:
        """`key`, with the owner its session's row names now (a sealed store's reads check
        that every item belongs to that owner); unchanged if plaintext or no row."""
        if await self._codec() is None:
            return key
        row = await self._sessions.read_session_columns(key, ("user_id",))
        return key if row is None else key.owned_by(row.user_id)

    async def reading(
        self, key: SessionKey, read: Callable[[SessionKey], Awaitable[T]], *, look: bool = True
    ) -> T:
        """`read(key)` with the owner of `owned(key)` (`look=False`: the read looks it up
        itself, in its own transaction), again once more owner keys it met are opened (the
        first time this store reads under them)."""
        seen: dict[str, int] = {}
        if look:
            key = await self.owned(key)
        for _ in range(ATTEMPTS - 1):
            try:
                return await read(key)
            except MissingOwnerKeys as missing:
                await self._load_or_refuse(missing.key_ids, seen)
            except TamperedItemError:
                # The owner was looked up in a transaction of its own: the session may
                # have been given to another since (`give`), its items re-wrapped.
                if not look:
                    raise
                again = await self.owned(key)
                if again.owner == key.owner:
                    raise
                key = again
        return await read(key)

    async def writing(
        self,
        key: SessionKey,
        write: Callable[[SessionKey, OwnerKey | None], Awaitable[T]],
        *,
        reads: bool = False,
    ) -> T:
        """`write(key, sealer)`: sealed under the key of the session's owner, again after
        looking once more if the owner changed meanwhile (the write's transaction checks
        it), or once the owner keys it read under are opened. `key` names the sealer's key
        (`SessionKey.sealing`); with `reads`, it comes with its owner too, for a write that
        opens what is stored: the sealer's, which the write's claim checks the session's
        row names under its lock (an owner looked up before, in a transaction of its own,
        could be older than the sealer, and the items were refused as another owner's)."""
        seen: dict[str, int] = {}
        for attempt in range(ATTEMPTS):
            sealer = await self.sealer(key)
            if sealer is not None:
                key = key.sealed_under(sealer.kek_id, sealer.owner if reads else None)
            try:
                return await write(key, sealer)
            except MissingOwnerKeys as missing:
                await self._load_or_refuse(missing.key_ids, seen)
            except OwnerKeyError:
                if sealer is None or attempt == ATTEMPTS - 1:
                    raise
                self.forget(key)
        raise OwnerKeyError("the session's owner kept changing: nothing was written")

    async def successors(
        self,
        old: KeyEncryptionKey,
        new: KeyEncryptionKey,
        *,
        opened: Mapping[str, OwnerKey] | None = None,
    ) -> dict[str, tuple[OwnerKey, OwnerKey]]:
        """A rotation's owner keys, by old id: each old key opened (or taken from `opened`,
        `in_use`'s), with its successor (a fresh key for the same owner, kept under `new`),
        the old ones retired.

        A key that replaces one still there was made by this rotation, which was
        interrupted (before its old keys were retired, or after): it is found again, never
        rotated itself; so is a key kept under `new` already (made for a new owner while
        the rotation ran); every other key is an old one. So a rotation resumed from any
        point re-wraps each owner's items once, under the key it made for them. A retired
        key that nothing can open any more (its key store destroyed it, or the keyring no
        longer holds the key it was kept under: a rotation stopped after its walk) has only
        its row left, which goes first."""
        codec = await self._codec()
        if codec is None:
            return {}
        rows = await self._rows.every()
        lost = [row for row in rows if row.retired_at is not None and await self._lost(row, old)]
        if needed := await self._needed({row.key_id for row in lost}):
            raise KeyProviderError(
                f"owner key {sorted(needed)[0]} is retired and cannot be opened, yet items "
                "or sessions' states still need it: a rotation stopped part-way, and the "
                "owner key store "
                f"({self._given!r}) gives nothing for it (another region, account or "
                "directory than the one that keeps it, or a failure); nothing was changed: "
                "run the rotation again with the store that keeps it"
            )
        if lost:
            await self._rows.delete(row.key_id for row in lost)
            rows = [row for row in rows if row not in lost]
        present = {row.key_id for row in rows}
        made = {row.replaces: row for row in rows if row.replaces in present}
        successors = {row.key_id for row in made.values()}
        # A key kept under the new store key already, not made to replace another: made
        # for a new owner by this rotation's store while it ran (`_make`); no old key.
        fresh = {
            row.key_id
            for row in rows
            if self._given is None and old.kek_id != new.kek_id and row.kek_id == new.kek_id
        }
        olds = [row for row in rows if row.key_id not in successors | fresh]
        old_keeper = self._given if self._given is not None else InDatabase(old)
        new_keeper = self._given if self._given is not None else InDatabase(new)
        pairs: dict[str, tuple[OwnerKey, OwnerKey]] = {}
        for row in olds:
            before = (opened or {}).get(row.key_id) or await self._open(codec, row, old_keeper)
            found = made.get(row.key_id)
            if found is not None:
                after = await self._open(codec, found, new_keeper)
            else:
                after = await self._make(codec, row.owner, sealing=new, replaces=row.key_id)
            pairs[row.key_id] = (before, after)
        await self._rows.retire(pairs)
        self._current.clear()
        return pairs

    async def _needed(self, key_ids: set[str]) -> set[str]:
        """Which of these keys items or sessions' states are still wrapped by."""
        if not key_ids:
            return set()
        needed = await self._rows.named(key_ids)
        if needed:
            return needed
        async for blob in self._rows.sealed_states():
            with contextlib.suppress(AgentsSQLAlchemyError, ValueError):  # altered: not ours
                if (kek_id := state_kek_id(blob)) in key_ids:
                    needed.add(kek_id)
        return needed

    async def _lost(self, row: Any, old: KeyEncryptionKey) -> bool:
        """Whether retired owner key `row` can never be opened again: kept under a store key
        the keyring no longer holds (a retired key is kept under the rotation's old key), or
        destroyed by the owner key store that keeps it."""
        if self._given is None:
            return row.kek_id is not None and row.kek_id != old.kek_id
        kept = None if row.kept is None else bytes(row.kept)
        return await call_store(self._given, "fetch", row.key_id, row.owner, kept) is None

    async def in_use(self, *, live_only: bool = False) -> dict[str, OwnerKey]:
        """Every owner key in use, opened, by id (nothing is changed): what a rotation
        checks the items' keys against before it starts. A key an erasure destroyed (its
        rows not deleted yet) is refused, or with `live_only` left out."""
        codec = await self._codec()
        if codec is None:
            return {}
        found = {}
        for row in await self._rows.every():
            if row.retired_at is None:
                opened = await self._opened(codec, row)
                if opened is None and live_only:
                    continue
                if opened is None:  # an erasure destroyed it, its rows not deleted yet
                    raise OwnerKeyError(
                        f"owner key {row.key_id} was destroyed by an erasure that runs now, or "
                        "stopped part-way (run it again): nothing was changed; rotate once it "
                        "has ended"
                    )
                found[row.key_id] = opened
        return found

    async def rotating(self) -> bool:
        """Whether a rotation of the owner keys was interrupted: retired keys are left that
        a live key replaces (those that none does a deletion left: `finish_erasures`)."""
        if await self._codec() is None:
            return False
        return bool(await self._rows.retired(replaced=True))

    async def destroy_keys(self, key_ids: Iterable[str]) -> None:
        """Destroy these keys (a finished rotation's old ones): in the store, then rows."""
        codec = await self._codec()
        if codec is None:
            return
        rows = await self._rows.by_ids(key_ids)
        await self._destroy_rows(codec, rows)

    def _refuse_kept_elsewhere(self, rows: Iterable[Any]) -> None:
        """`OwnerKeyError` if this store meets a key it could neither open nor destroy:
        given no owner key store, one kept in one (its row holds no wrapped key); given
        one, a key kept in the database (wrapped under the store's key)."""
        elsewhere = [row.key_id for row in rows if (row.kek_id is None) == (self._given is None)]
        if elsewhere and self._given is None:
            raise OwnerKeyError(
                f"owner key {elsewhere[0]} is kept outside the database: open the store with "
                "the owner key store that keeps it (owner_keys=KeyDirectory(...), or your "
                "KMS); nothing was opened, destroyed or deleted"
            )
        if elsewhere:
            raise OwnerKeyError(
                f"owner key {elsewhere[0]} is kept in the database, under the store's key, "
                f"not in {self._given!r}: open the store without owner_keys=; nothing was "
                "opened, destroyed or deleted"
            )

    @property
    def kept_outside(self) -> bool:
        """Whether owner keys are kept in an app's key store, where destroying one is for
        good at once; in the database a key goes with its row."""
        return self._given is not None

    async def _destroy_rows(
        self, codec: SealedCodec, rows: list[Any], *, delete: bool = True, erasing: bool = False
    ) -> Destruction | None:
        """Destroy the keys of `rows` in the key store (all or none: a key kept where this
        store cannot reach is refused first), then, with `delete`, their rows. An erasure's
        failure midway says how many keys it destroyed for good (`note_keys_destroyed`)."""
        self._refuse_kept_elsewhere(rows)
        keeper, last, destroyed = self._keeper(codec), None, 0
        try:
            for row in rows:
                kept = None if row.kept is None else bytes(row.kept)
                done = await call_store(keeper, "destroy", row.key_id, row.owner, kept)
                if not isinstance(done, Destruction):
                    raise KeyProviderError(f"owner key store {keeper!r}.destroy returned {done!r}")
                destroyed += 1 if self.kept_outside else 0  # in the database: with its row
                # Forgotten at once: a key store failing on a later key leaves this store
                # sealing nothing under a key no other store, nor a restart, can open.
                codec.owner_keys.pop(row.key_id, None)
                self._current.pop(row.owner, None)
                last = done if last is None or done.at >= last.at else last
            if delete:
                await self._rows.delete(row.key_id for row in rows)
        except BaseException as exc:
            if erasing:
                note_keys_destroyed(exc, destroyed)
            raise
        return last

    async def give(self, key: SessionKey, user_id: str | None) -> None:
        """Give the session to `user_id` (None: to nobody): in one transaction, its items'
        keys and its state re-wrapped from its owner's key to the new owner's, which the
        transaction checks is live (looked up again if it was destroyed meanwhile: the new
        owner erased). A session without a user was its own owner: its key is destroyed
        after."""
        codec = await self._codec()
        owner = owner_of(user_id, key.hash)
        sealer: OwnerKey | None = None

        def rewrap(old: str | None, rows: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
            assert codec is not None and sealer is not None
            old_owner = owner_of(old, key.hash)
            moved = []
            for kek_id, wrapped in rows:
                before = codec.wrapper(kek_id, old_owner, "an item")
                moved.append((sealer.kek_id, sealer.wrap(before.unwrap(wrapped))))
            return moved

        def rewrap_state(old: str | None, blob: bytes) -> bytes:
            assert codec is not None and sealer is not None
            before = codec.wrapper(state_kek_id(blob), owner_of(old, key.hash), "the state")
            return rewrap_state_blob(blob, before, sealer)

        seen: dict[str, int] = {}
        for attempt in range(ATTEMPTS):
            sealer = None if codec is None else await self.current(codec, owner)
            sealing = None if sealer is None else sealer.kek_id
            try:
                old = await self._sessions.give(key, user_id, rewrap, rewrap_state, sealing)
                break
            except MissingOwnerKeys as missing:
                if attempt == ATTEMPTS - 1:
                    raise
                await self._load_or_refuse(missing.key_ids, seen)
            except OwnerKeyError:
                if attempt == ATTEMPTS - 1:
                    raise
                self._current.pop(owner, None)
        self.forget(key)
        if codec is not None:  # what searches kept holds the items' keys as wrapped before
            codec.kept.forget()
        if codec is not None and old is None and user_id is not None:
            await self.destroy([owner_of(None, key.hash)])

    async def destroyed(self, rows: list[Any], done: Collection[str] = ()) -> Destroyed:
        """Destroy, in the key store, the keys whose rows a deletion just retired (their
        owner's last session went with them), then delete their rows and forget them here;
        those of `done` (their ids) were destroyed before it (`destroy_first`)."""
        codec = await self._codec()
        if codec is None or not rows:
            return Destroyed(0, None, None)
        left = [row for row in rows if row.key_id not in done]
        try:
            last = await self._destroy_rows(codec, left, delete=False, erasing=True)
        except BaseException:
            self.left_some()  # retired, not destroyed
            raise
        try:
            await self._rows.delete(row.key_id for row in rows)
        except BaseException as exc:
            note_keys_destroyed(exc, len(left) if self.kept_outside else 0)
            raise
        self._current.clear()
        if last is None:
            return Destroyed(len(left), None, None)
        return Destroyed(len(left), last.status, last.at)

    def left_some(self) -> None:
        """A deletion stopped part-way: keys its committed batches retired may be left
        undestroyed; this store's next deletion looks (`finish_erasures`)."""
        self._leftovers = True

    async def finish_erasures(self, *, strict: bool = True) -> None:
        """Destroy the keys a deletion retired with their owner's last session and left (its
        key store failed, or its process ended, before it destroyed them), then delete their
        rows: retired keys that no live key replaces (a rotation's old keys have one).
        Without a row, nothing would name these keys again, and every copy of the database
        taken before would still open. Run before each rotation (`strict`: a key its key
        store refuses raises), and not `strict` before a store's deletions: its first, and
        one after its own left some (the look scans the owner keys table); a key its key
        store refuses is then logged (its id) and left for the next, so that it stops no
        erasure of others."""
        codec = await self._codec()
        if codec is None or (not strict and self._leftovers is False):
            return
        self._leftovers = False
        for row in await self._rows.retired(replaced=False):
            try:
                await self._destroy_rows(codec, [row])
            except (KeyProviderError, OwnerKeyError):
                self._leftovers = True
                if strict:
                    raise
                logger.warning(
                    "owner key %s, retired by an earlier deletion, could not be destroyed yet "
                    "(its key store refused): left for the next deletion or rotation",
                    row.key_id,
                )

    async def destroy_first(
        self, owners: Collection[str] | None
    ) -> tuple[Destroyed, frozenset[str]]:
        """Destroy in the key store the keys of these owners (None: of every owner) before
        a deletion takes their rows with their sessions: a key store that fails then leaves
        everything to run again (after the deletion, nothing would name the keys). What
        was destroyed, and the keys' ids, for `destroyed`."""
        codec = await self._codec()
        if codec is None or (owners is not None and not owners):
            return Destroyed(0, None, None), frozenset()
        rows = await (self._rows.every() if owners is None else self._rows.of_owners(owners))
        last = await self._destroy_rows(codec, rows, delete=False, erasing=True)
        at = (None, None) if last is None else (last.status, last.at)
        return Destroyed(len(rows), *at), frozenset(row.key_id for row in rows)

    async def destroy(self, owners: Iterable[str], *, erasing: bool = False) -> Destroyed:
        """Destroy every key of these owners (their items, everywhere, can no longer be
        opened): in the key store first, then their rows. `erasing`: the owners' erasure,
        whose error says what it destroyed for good."""
        codec = await self._codec()
        wanted = set(owners)
        if codec is None or not wanted:
            return Destroyed(0, None, None)
        rows = await self._rows.of_owners(wanted)
        last = await self._destroy_rows(codec, rows, erasing=erasing)
        for owner in wanted:
            self._current.pop(owner, None)
        if last is None:
            return Destroyed(len(rows), None, None)
        return Destroyed(len(rows), last.status, last.at)
