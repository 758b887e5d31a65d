"""Owner keys: one key per data subject, between the store's key and the items' data keys.

An owner is a user (every session with that `user_id`) or, for a session without a user,
the session itself. Each item's data key is wrapped under its owner's key, so destroying
one owner's key makes every copy of that owner's items unreadable (table files, WAL or
redo log, replicas, backups), whatever the database's own deletion leaves behind, and
nobody else's.

Where owner keys are kept is an `OwnerKeyStore`: deletion there is what erasure means.

- `InDatabase` (the default): wrapped under the store's key-encryption key, in the owner
  keys table. Real erasure on SQLite (the scrub); on a server, copies of the table keep
  the wrapped key, which the store's key still opens (rotate the store's key to finish).
- `KeyDirectory(path)`: one file per key on the application's host, deleted and the
  directory synced. Copies of the database hold nothing that opens an erased owner's items.
- A KMS or Vault transit engine: implement the three methods (see
  `examples/kms_owner_keys.py`); its `destroy` may schedule the deletion.

An owner key is bound to its owner: the wrapping key is derived from the key's material,
its id and the owner's id, so items whose session was handed to another owner outside the
library (its `user_id` column changed) do not open.

Example::

    keys = KeyDirectory("/var/lib/myapp/owner-keys")
    store = SessionStore(url, key=store_key, owner_keys=keys)
    receipt = await store.erase_user("alice")      # alice's key file is gone
"""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from cryptography.hazmat.primitives.keywrap import aes_key_wrap

from ..errors import ConfigurationError, DecryptionError, KeyProviderError
from .kdf import KEY_BYTES, hkdf
from .keys import KeyEncryptionKey, unwrap_with

_KEY_ID = re.compile(r"o[0-9a-f]{32}")


def new_key_id() -> str:
    """A fresh, random owner key id ("o" and 32 hex digits; it says nothing of the owner)."""
    return "o" + secrets.token_hex(16)


class OwnerKey:
    """An owner's key, opened: wraps and unwraps item data keys locally, bound to its owner.

    Example::

        key = OwnerKey(new_key_id(), owner_of("alice", ""), os.urandom(32))   # types.owner_of
        assert key.unwrap(key.wrap(data_key)) == data_key
    """

    __slots__ = ("_wrap_key", "kek_id", "owner")

    def __init__(self, key_id: str, owner: str, material: bytes) -> None:
        if len(material) != KEY_BYTES:
            raise DecryptionError(f"owner key {key_id}: its material has the wrong length")
        self.kek_id = key_id
        self.owner = owner
        self._wrap_key = hkdf(material, f"owner-key-wrap/{key_id}/{owner}")

    def wrap(self, data_key: bytes) -> bytes:
        """Wrap a data key (AES key wrap, RFC 3394): 32 bytes in, 40 out."""
        return aes_key_wrap(self._wrap_key, data_key)

    def unwrap(self, wrapped: bytes) -> bytes:
        """Unwrap what `wrap` made; anything else raises `DecryptionError`."""
        return unwrap_with(self._wrap_key, wrapped, f"owner key {self.kek_id}")

    def __repr__(self) -> str:
        return f"OwnerKey({self.kek_id!r})"


@dataclass(frozen=True)
class Destruction:
    """What a key store did with a key: `"destroyed"` now, or `"scheduled"` for `at`.

    Example::

        def destroy(self, key_id, owner, kept):            # of an `OwnerKeyStore`
            done = kms.schedule_key_deletion(KeyId=f"alias/{key_id}", PendingWindowInDays=7)
            return Destruction("scheduled", done["DeletionDate"])
        # erase_user's receipt then says so: owner_key_status, owner_key_gone_at
    """

    status: Literal["destroyed", "scheduled"]
    at: datetime


@runtime_checkable
class OwnerKeyStore(Protocol):
    """Where owner keys are kept. Methods may be plain (run in a worker thread) or `async`.

    `keep` returns bytes for the database to hold beside the key's id (a wrapped key, a
    KMS ciphertext, or None when the store keeps everything itself); `fetch` gets them
    back. Ids and owners are hex strings, safe as file names. Keep each key apart, by its
    id: an owner holds two while a rotation replaces one, and `destroy` must take the old
    one alone (a vault key per owner would erase the owner at every rotation).

    Example::

        class Vault:
            async def keep(self, key_id, owner, material):
                await vault.create_key(f"owner-key-{key_id}")
                return await vault.encrypt(f"owner-key-{key_id}", material)  # in the database

            async def fetch(self, key_id, owner, kept):
                return await vault.decrypt(f"owner-key-{key_id}", kept)

            async def destroy(self, key_id, owner, kept):
                await vault.delete_key(f"owner-key-{key_id}")
                return Destruction("destroyed", datetime.now(timezone.utc))
    """

    def keep(self, key_id: str, owner: str, material: bytes) -> Any:
        """Keep a new key's 32 bytes; return bytes for the database to hold, or None."""
        ...

    def fetch(self, key_id: str, owner: str, kept: bytes | None) -> Any:
        """The key's 32 bytes, or None if it was destroyed."""
        ...

    def destroy(self, key_id: str, owner: str, kept: bytes | None) -> Any:
        """Destroy the key (or schedule it); return a `Destruction`."""
        ...


class InDatabase:
    """The default store: each owner key wrapped under the store's key-encryption key, in
    the database. Erasure is real where the database's deletion is (SQLite with the scrub).

    Example::

        store = SessionStore(url, key=store_key)          # owner keys in the database
    """

    def __init__(self, kek: KeyEncryptionKey) -> None:
        self.kek = kek

    def keep(self, key_id: str, owner: str, material: bytes) -> bytes:
        return self.kek.wrap(material)

    def fetch(self, key_id: str, owner: str, kept: bytes | None) -> bytes | None:
        return None if kept is None else self.kek.unwrap(kept)

    def destroy(self, key_id: str, owner: str, kept: bytes | None) -> Destruction:
        return Destruction("destroyed", datetime.now(timezone.utc))  # the row goes with it

    def __repr__(self) -> str:
        return "InDatabase()"


class KeyDirectory:
    """Owner keys as files in a directory of the application's host, one per key.

    The directory is made (mode 0700) if it does not exist, its parent must; one that
    other users may write to is refused (on POSIX systems, whose modes say so). A key is
    written to a new file (mode 0600, synced, renamed into place, the directory synced);
    destroying it notes its id in the directory's `destroyed` log, then unlinks the file
    and syncs the directory. Back the directory up apart from the database, or not at all:
    a backup of it keeps erased keys alive.

    A key that has no file and is not in the log was never destroyed here: reading it raises
    `KeyProviderError` (the directory is not the one the keys were written to, or a file
    was removed by hand), and so does destroying it; it never reads as erased. The log is
    made with the directory (or in an empty one); a directory made before it existed has
    none, and there a missing file reads as a destroyed key.

    Example::

        store = SessionStore(url, key=store_key, owner_keys=KeyDirectory("owner-keys"))
    """

    #: The log of destroyed key ids, one per line: nothing secret, a key id says nothing
    #: of its owner.
    LOG = "destroyed"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
            # "" (an unset variable, most often) would be the working directory.
            raise ConfigurationError(f"an owner key directory is a path, got {path!r:.80}")
        self.path = Path(path)
        self._log = self.path / self.LOG
        try:
            # Its parent must exist: a mistyped path or a volume not mounted (its mount point
            # gone) fails here, where a whole new tree would have taken new owners' keys.
            self.path.mkdir(mode=0o700, exist_ok=True)
            if os.name == "posix" and self.path.stat().st_mode & 0o022:
                raise ConfigurationError(
                    f"owner key directory {self.path} is writable by other users, who could "
                    f"delete or replace its keys: make it the app's own (chmod go-w {self.path})"
                )
            if not any(self.path.iterdir()):
                self._log.touch(mode=0o600)
                self._sync()
        except OSError as exc:
            raise ConfigurationError(f"owner key directory {self.path}: {exc}") from exc

    def _file(self, key_id: str) -> Path:
        if not _KEY_ID.fullmatch(key_id):
            raise KeyProviderError(f"{key_id!r} is not an owner key id")
        return self.path / f"{key_id}.key"

    def keep(self, key_id: str, owner: str, material: bytes) -> None:
        final = self._file(key_id)
        partial = final.with_suffix(".part")
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(descriptor, owner.encode("ascii") + b"\n" + material)
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(partial, final)
        self._sync()

    def fetch(self, key_id: str, owner: str, kept: bytes | None) -> bytes | None:
        try:
            content = self._file(key_id).read_bytes()
        except FileNotFoundError:
            if self._destroyed(key_id):
                return None
            unknown = self._unknown(key_id, "its items are not erased, and nothing was changed")
            raise unknown from None
        written = _written(content)
        if written is None:
            raise KeyProviderError(
                f"owner key file {self._file(key_id)} is damaged ({len(content)} bytes, not "
                f"its owner's line and {KEY_BYTES} bytes of key): restore it from where it "
                "was kept; the items it wraps are intact"
            )
        written_for, material = written
        if written_for != owner.encode("ascii"):
            raise KeyProviderError(f"owner key file {key_id} belongs to another owner")
        return material

    def holds_any(self, key_ids: Iterable[str]) -> bool:
        """Whether this directory keeps, or destroyed, any of these keys: where the database
        names keys kept outside it, one that holds none of them is not theirs (a volume not
        mounted, its mount point left empty)."""
        wanted = list(key_ids)
        return any(self._file(key_id).exists() for key_id in wanted) or self._destroyed(*wanted)

    def destroy(self, key_id: str, owner: str, kept: bytes | None) -> Destruction:
        file = self._file(key_id)
        try:
            written = _written(file.read_bytes())  # None: a damaged one holds no key, it goes
        except FileNotFoundError:
            written = None
        if written is not None and written[0] != owner.encode("ascii"):
            # Its row was changed outside the library: destroyed, another owner's data would
            # be gone from every copy of the database, backups too.
            raise KeyProviderError(
                f"owner key file {key_id} belongs to another owner than the one its row names: "
                "not destroyed (the row was changed outside the library)"
            )
        if self._log.exists() and not self._destroyed(key_id):
            if not file.exists():
                raise self._unknown(key_id, f"not destroyed: delete {file.name} where it is kept")
            descriptor = os.open(self._log, os.O_WRONLY | os.O_APPEND)
            try:  # one short write to a file opened to append: whole, whatever else writes
                os.write(descriptor, key_id.encode("ascii") + b"\n")
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
        file.unlink(missing_ok=True)
        self._sync()
        return Destruction("destroyed", datetime.now(timezone.utc))

    def _destroyed(self, *key_ids: str) -> bool:
        """Whether the log names any of `key_ids` (with no log, any key without a file is)."""
        try:
            logged = self._log.read_bytes()
        except FileNotFoundError:
            return True
        return any(key_id.encode("ascii") + b"\n" in logged for key_id in key_ids)

    def _unknown(self, key_id: str, so: str) -> KeyProviderError:
        return KeyProviderError(
            f"owner key {key_id} has no file in {self.path} and was never destroyed there: "
            "this is not the directory that keeps the database's owner keys, or the key's "
            f"file was removed by hand; {so}"
        )

    def _sync(self) -> None:
        descriptor = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)

    def __repr__(self) -> str:
        return f"KeyDirectory({str(self.path)!r})"


def _written(content: bytes) -> tuple[bytes, bytes] | None:
    """A key file's owner line and key, as `KeyDirectory.keep` writes them; None if it is
    not so (damaged)."""
    written_for, newline, material = content.partition(b"\n")
    return (written_for, material) if newline and len(material) == KEY_BYTES else None


#: A `fetch` that fails is tried again after each of these pauses (s): one passing failure
#: of a KMS (a throttled or dropped request) failed the operation, and a rotation, which
#: fetches every owner's key, rarely ended where 1 fetch in 25 failed (30 owners). `keep`
#: and `destroy` are not: a lost reply to either may have done its work.
FETCH_PAUSES = (0.05, 0.25)


async def call_store(store: OwnerKeyStore, verb: str, *args: Any) -> Any:
    """`store.<verb>(*args)`, plain (in a worker thread) or async; failures raise
    `KeyProviderError`, except the library's own errors, which pass as they are. A fetch
    is tried again (`FETCH_PAUSES`) before its failure is raised."""
    for pause in (*FETCH_PAUSES, None) if verb == "fetch" else (None,):
        try:
            return await _called(store, verb, *args)
        except KeyProviderError:
            if pause is None:
                raise
        await asyncio.sleep(pause)


async def _called(store: OwnerKeyStore, verb: str, *args: Any) -> Any:
    method = getattr(store, verb)
    try:
        if inspect.iscoroutinefunction(method):
            return await method(*args)
        result = await asyncio.to_thread(method, *args)
        return await result if inspect.isawaitable(result) else result
    except (KeyProviderError, DecryptionError):
        raise
    except Exception as exc:
        raise KeyProviderError(
            f"owner key store {type(store).__name__} failed to {verb} owner key {args[0]}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
