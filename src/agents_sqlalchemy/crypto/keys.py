"""Key-encryption keys: what the `key` option becomes, checked against the database's keyring.

The hierarchy, top down::

    key option: passphrase str | 32 raw bytes | KeyProvider
      root: scrypt(passphrase, salt) | HKDF(raw, salt) | the provider's own key
        keyring secrets, 64 random bytes sealed under the root in the row's `verifier`:
          KEK secret   (fresh per keyring row)       -> AES key-wrap key for item data keys
          index secret (carried over by rotations)  -> keyed hashes of search terms
            data keys, one per item (see `sealing`), stored wrapped: 40 bytes each

Opening the `verifier` is the key check, done once per store before anything is read or
written: an AES-256-GCM tag for a passphrase or raw key (compared in constant time by
OpenSSL), an HMAC compared with `hmac.compare_digest` for a provider. A provider is called
only then, never per item. The resulting `KeyEncryptionKey` does no I/O: cache it per store.

Example::

    kek = await create_kek("correct horse battery")  # ~0.5 s, off the loop
    if record_or_none is None:
        insert_keyring_row(kek.record.as_row())
    wrapped = kek.wrap(os.urandom(32))
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any, Literal, TypeAlias, cast

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.keywrap import InvalidUnwrap, aes_key_unwrap, aes_key_wrap

from ..errors import (
    DecryptionError,
    InvalidKeyError,
    KeyProviderError,
    KeyringError,
    WrongKeyError,
)
from ..validation import storable
from .kdf import (
    KEY_BYTES,
    LABEL_PREFIX,
    ScryptParams,
    derive_passphrase_key_async,
    hkdf,
    new_salt,
    passphrase_bytes,
)
from .providers import KeyProvider, call_unwrap, call_wrap, provider_name

Key: TypeAlias = str | bytes | KeyProvider
Kind = Literal["passphrase", "raw", "provider"]
KINDS: tuple[Kind, ...] = ("passphrase", "raw", "provider")

_SEALED_V1 = b"\x01"  # verifier = 0x01 | nonce | AES-GCM(root, secrets)
_PROVIDED_V1 = b"\x02"  # verifier = 0x02 | check (16) | provider.wrap(secrets)
_NONCE = 12
_CHECK = 16
_SECRETS = 2 * KEY_BYTES


@dataclass(frozen=True)
class KeyringRecord:
    """One keyring row, as the repository stores it (column names are the field names).

    `kek_id` is random (it says nothing about the key), `verifier` holds the sealed keyring
    secrets, `params` the KDF parameters or the provider's `kek_id`.

    Example::

        record = KeyringRecord.from_row(row._mapping)
        await conn.execute(keyring.insert(), kek.record.as_row())
    """

    kek_id: str
    kind: str
    salt: bytes | None
    params: dict[str, Any] | None
    verifier: bytes
    created_at: datetime
    retired_at: datetime | None = None

    def as_row(self) -> dict[str, Any]:
        """The column values to insert."""
        return asdict(self)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> KeyringRecord:
        """Read a row mapping (`row._mapping`); binary columns may come back as memoryview."""
        try:
            salt = row["salt"]
            return cls(
                kek_id=str(row["kek_id"]),
                kind=str(row["kind"]),
                salt=None if salt is None else bytes(salt),
                params=None if row["params"] is None else dict(row["params"]),
                verifier=bytes(row["verifier"]),
                created_at=row["created_at"],
                retired_at=row.get("retired_at"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise KeyringError(f"malformed keyring row: {exc!r}") from exc


class KeyEncryptionKey:
    """An opened keyring row: wraps and unwraps data keys locally; no I/O, thread-safe.

    Get one from `create_kek` or `open_kek` once per store and keep it.

    Example::

        kek = await create_kek(b"\\x07" * 32)
        wrapped = kek.wrap(data_key)          # 32 bytes -> 40 (RFC 3394 AES key wrap)
        assert kek.unwrap(wrapped) == data_key
    """

    __slots__ = ("_index_secret", "_wrap_key", "record")

    def __init__(self, record: KeyringRecord, keyring_secrets: bytes) -> None:
        if len(keyring_secrets) != _SECRETS:
            raise KeyringError(f"keyring {record.kek_id}: secrets have the wrong length")
        self.record = record
        self._wrap_key = hkdf(keyring_secrets[:KEY_BYTES], "data-key-wrap")
        self._index_secret = keyring_secrets[KEY_BYTES:]

    @property
    def kek_id(self) -> str:
        """The keyring row's id, stored beside every key this KEK wraps."""
        return self.record.kek_id

    @property
    def kind(self) -> str:
        """ "passphrase", "raw" or "provider"."""
        return self.record.kind

    def wrap(self, data_key: bytes) -> bytes:
        """Wrap a data key (AES key wrap, RFC 3394): 32 bytes in, 40 out, deterministic."""
        return aes_key_wrap(self._wrap_key, data_key)

    def unwrap(self, wrapped: bytes) -> bytes:
        """Unwrap what `wrap` made; altered bytes or another KEK raise `DecryptionError`."""
        return unwrap_with(self._wrap_key, wrapped, f"key-encryption key {self.kek_id}")

    def index_key(self, label: str) -> bytes:
        """A 32-byte key for a keyed index (`label` names it), the same across rotations."""
        return hkdf(self._index_secret, f"index/{label}")

    def __repr__(self) -> str:
        return f"KeyEncryptionKey(kek_id={self.kek_id!r}, kind={self.kind!r})"


def unwrap_with(wrap_key: bytes, wrapped: bytes, named: str) -> bytes:
    """AES key unwrap under `wrap_key`; altered bytes or another key raise
    `DecryptionError`, naming the key (`named`)."""
    try:
        return aes_key_unwrap(wrap_key, wrapped)
    except (InvalidUnwrap, ValueError) as exc:
        raise DecryptionError(f"a data key does not unwrap under {named}") from exc


def validate_key(key: object) -> Key:
    """Check a `key` option without touching the database; bad forms raise `InvalidKeyError`.

    A `str` is always a passphrase (even if it looks like hex), `bytes` must be exactly 32
    raw bytes (`os.urandom(32)`), anything else must implement `KeyProvider`.
    """
    if isinstance(key, str):
        passphrase_bytes(key)
        return key
    if isinstance(key, (bytes, bytearray, memoryview)):
        raw = bytes(key)
        if len(raw) != KEY_BYTES:
            raise InvalidKeyError(
                f"a raw key must be exactly {KEY_BYTES} bytes, got {len(raw)}: make one with "
                "os.urandom(32), or pass a passphrase as a str"
            )
        return raw
    try:  # a provider's own properties may fail: its failure, ours to name
        provider = isinstance(key, KeyProvider)
        kek_id = getattr(key, "kek_id", None) if provider else None
    except Exception as exc:
        raise KeyProviderError(
            f"key provider {type(key).__name__} failed to give its kek_id: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if provider:
        if not kek_id or not storable(kek_id):
            raise InvalidKeyError(
                f"key provider {type(key).__name__}.kek_id must be a non-empty str "
                "(no NUL, no lone surrogate: the keyring stores it)"
            )
        return cast(KeyProvider, key)
    raise InvalidKeyError(
        f"key must be a passphrase (str), 32 raw bytes, or a KeyProvider; got {type(key).__name__}"
    )


def same_key(a: Key | None, b: Key | None) -> bool:
    """Whether two key options are the same key (constant-time for passphrases and bytes).

    >>> same_key("s3cret", "s3cret"), same_key(b"k" * 32, None)
    (True, False)
    """
    if isinstance(a, str) and isinstance(b, str):
        return hmac.compare_digest(a.encode(), b.encode())
    if isinstance(a, bytes) and isinstance(b, bytes):
        return hmac.compare_digest(a, b)
    return a is b


def kind_of(key: Key) -> Kind:
    """The keyring `kind` a validated key makes."""
    if isinstance(key, str):
        return "passphrase"
    return "raw" if isinstance(key, bytes) else "provider"


async def create_kek(key: object, *, previous: KeyEncryptionKey | None = None) -> KeyEncryptionKey:
    """A new keyring row for `key`: fresh id, salt and KEK secret; insert `result.record`.

    With `previous` (a rotation), the index secret is carried over so search-term hashes
    stay valid; item data keys must then be re-wrapped (`sealing.rewrap_many`).
    """
    key = validate_key(key)
    kind, kek_id = kind_of(key), secrets.token_hex(16)
    index_secret = os.urandom(KEY_BYTES) if previous is None else previous._index_secret
    bundle = os.urandom(KEY_BYTES) + index_secret
    salt: bytes | None = None
    if isinstance(key, str):
        salt, scrypt = new_salt(), ScryptParams()
        params: dict[str, Any] = scrypt.to_json()
        root = await derive_passphrase_key_async(key, salt, scrypt)
        verifier = _seal(root, kind, kek_id, bundle)
    elif isinstance(key, bytes):
        salt, params = new_salt(), {"kdf": "hkdf-sha256"}
        verifier = _seal(_raw_root(key, salt), kind, kek_id, bundle)
    else:
        params = {"provider": key.kek_id}
        wrapped = await call_wrap(key, bundle)
        if await call_unwrap(key, wrapped) != bundle:  # a provider that cannot unwrap bricks a db
            raise InvalidKeyError(f"key provider {provider_name(key)} does not round-trip")
        if bundle[:KEY_BYTES] in wrapped or bundle[KEY_BYTES:] in wrapped:
            raise InvalidKeyError(  # the database would hold its secrets in the clear
                f"key provider {provider_name(key)} wraps nothing: its output holds the key"
            )
        verifier = _PROVIDED_V1 + _check(bundle, kek_id) + wrapped
    now = datetime.now(timezone.utc)
    record = KeyringRecord(kek_id, kind, salt, params, verifier, created_at=now)
    return KeyEncryptionKey(record, bundle)


async def open_kek(key: object, record: KeyringRecord) -> KeyEncryptionKey:
    """Check `key` against a stored keyring row; a wrong key raises `WrongKeyError`."""
    key = validate_key(key)
    given = kind_of(key)
    if record.kind not in KINDS:
        raise KeyringError(f"keyring {record.kek_id} has unknown kind {record.kind!r}")
    if record.kind != given:
        raise WrongKeyError(
            f"wrong key: this database was encrypted with a {_describe(record.kind)} "
            f"(keyring {record.kek_id}), but a {_describe(given)} was given. {_ADVICE}"
        )
    if isinstance(key, str):
        params = ScryptParams.from_json(record.params)
        root = await derive_passphrase_key_async(key, _salt(record), params)
        return KeyEncryptionKey(record, _open(root, record))
    if isinstance(key, bytes):
        return KeyEncryptionKey(record, _open(_raw_root(key, _salt(record)), record))
    return KeyEncryptionKey(record, await _open_provided(key, record))


_ADVICE = (
    "Pass the key the database was created with (after a rotation, the new key); "
    "nothing was read or written"
)


def _describe(kind: str) -> str:
    return {"raw": "raw 32-byte key", "provider": "key provider"}.get(kind, kind)


def _salt(record: KeyringRecord) -> bytes:
    if not record.salt:
        raise KeyringError(f"keyring {record.kek_id} has no salt")
    return record.salt


def _raw_root(raw: bytes, salt: bytes) -> bytes:
    return hkdf(raw, "keyring-root", salt=salt)


def _aad(kind: str, kek_id: str) -> bytes:
    return LABEL_PREFIX + b"keyring\x00" + kind.encode() + b"\x00" + kek_id.encode()


def _seal(root: bytes, kind: str, kek_id: str, bundle: bytes) -> bytes:
    nonce = os.urandom(_NONCE)
    return _SEALED_V1 + nonce + AESGCM(root).encrypt(nonce, bundle, _aad(kind, kek_id))


def _open(root: bytes, record: KeyringRecord) -> bytes:
    verifier = record.verifier
    if verifier[:1] != _SEALED_V1:
        raise KeyringError(f"keyring {record.kek_id} has a verifier of an unknown format")
    nonce, sealed = verifier[1 : 1 + _NONCE], verifier[1 + _NONCE :]
    try:
        return AESGCM(root).decrypt(nonce, sealed, _aad(record.kind, record.kek_id))
    except InvalidTag:
        raise WrongKeyError(
            f"wrong key: the {_describe(record.kind)} given does not open this database "
            f"(keyring {record.kek_id}). {_ADVICE}"
        ) from None


def _check(bundle: bytes, kek_id: str) -> bytes:
    message = LABEL_PREFIX + b"keyring-check\x00" + kek_id.encode()
    return hmac.digest(bundle, message, "sha256")[:_CHECK]


async def _open_provided(provider: KeyProvider, record: KeyringRecord) -> bytes:
    stored = (record.params or {}).get("provider")
    if stored != provider.kek_id:
        raise WrongKeyError(
            f"wrong key: this database's keyring {record.kek_id} is wrapped by provider key "
            f"{stored!r}, but {provider_name(provider)} was given. {_ADVICE}"
        )
    verifier = record.verifier
    if verifier[:1] != _PROVIDED_V1 or len(verifier) <= 1 + _CHECK:
        raise KeyringError(f"keyring {record.kek_id} has a verifier of an unknown format")
    check, wrapped = verifier[1 : 1 + _CHECK], verifier[1 + _CHECK :]
    bundle = await call_unwrap(provider, wrapped)
    if len(bundle) != _SECRETS or not hmac.compare_digest(check, _check(bundle, record.kek_id)):
        raise WrongKeyError(
            f"wrong key: {provider_name(provider)} unwrapped keyring {record.kek_id} to bytes "
            f"that fail its check. {_ADVICE}"
        )
    return bundle
