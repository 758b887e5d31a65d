"""Key derivation: scrypt for passphrases at OWASP's parameters, HKDF for labelled subkeys.

A passphrase is stretched once per store (about 0.3-0.7 s and 128 MiB with the defaults),
so run `derive_passphrase_key_async` off the event loop and keep what it opens; HKDF
subkeys are cheap and derived once per opened keyring.

Example::

    salt = new_salt()
    root = await derive_passphrase_key_async("correct horse battery", salt, ScryptParams())
    wrap_key = hkdf(root, "data-key-wrap")
"""

from __future__ import annotations

import asyncio
import os
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from ..errors import InvalidKeyError, KeyringError

KEY_BYTES = 32
SALT_BYTES = 16
LABEL_PREFIX = b"agents-sqlalchemy/v1/"

# OWASP Password Storage Cheat Sheet: scrypt with N >= 2**17, r >= 8, p >= 1. The upper
# bounds keep a tampered keyring row from asking for unbounded memory or time.
MIN_N, MAX_N = 2**17, 2**20
MIN_R, MAX_R = 8, 32
MAX_P = 16
MAX_MEMORY = 2**30


@dataclass(frozen=True)
class ScryptParams:
    """scrypt cost parameters; the defaults are OWASP's recommendation (128 MiB, ~0.5 s).

    Example::

        ScryptParams().to_json()   # {"kdf": "scrypt", "n": 131072, "r": 8, "p": 1, "length": 32}
    """

    n: int = MIN_N
    r: int = MIN_R
    p: int = 1
    length: int = KEY_BYTES

    def __post_init__(self) -> None:
        problem = _scrypt_problem(self)
        if problem:
            raise InvalidKeyError(f"scrypt parameters {self}: {problem}")

    def to_json(self) -> dict[str, Any]:
        """The keyring row's `params`."""
        return {"kdf": "scrypt", "n": self.n, "r": self.r, "p": self.p, "length": self.length}

    @classmethod
    def from_json(cls, params: Mapping[str, Any] | None) -> ScryptParams:
        """Read and bound-check stored parameters; anything off raises `KeyringError`."""
        if not params or params.get("kdf") != "scrypt":
            raise KeyringError(f"keyring row has no scrypt parameters: {params!r}")
        try:
            values = {name: params[name] for name in ("n", "r", "p", "length")}
            if not all(type(value) is int for value in values.values()):
                raise TypeError("not integers")
            return cls(**values)
        except (KeyError, TypeError, InvalidKeyError) as exc:
            raise KeyringError(f"keyring row has invalid scrypt parameters {params!r}") from exc


def _scrypt_problem(params: ScryptParams) -> str | None:
    n, r, p = params.n, params.r, params.p
    if n < MIN_N or n > MAX_N or n & (n - 1):
        return f"n must be a power of two from 2**17 to 2**20, got {n}"
    if not MIN_R <= r <= MAX_R:
        return f"r must be from {MIN_R} to {MAX_R}, got {r}"
    if not 1 <= p <= MAX_P:
        return f"p must be from 1 to {MAX_P}, got {p}"
    if 128 * n * r > MAX_MEMORY:
        return "n * r asks for more than 1 GiB of memory"
    if params.length != KEY_BYTES:
        return f"length must be {KEY_BYTES}"
    return None


def new_salt() -> bytes:
    """A fresh random salt, one per keyring row."""
    return os.urandom(SALT_BYTES)


def passphrase_bytes(passphrase: str) -> bytes:
    """The bytes a passphrase stands for: NFKC-normalised (NIST SP 800-63B), then UTF-8.

    The same passphrase typed on any keyboard or platform gives the same key.
    """
    if not isinstance(passphrase, str) or not passphrase:
        raise InvalidKeyError("a passphrase must be a non-empty string")
    try:
        return unicodedata.normalize("NFKC", passphrase).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidKeyError(f"the passphrase is not valid Unicode text: {exc}") from exc


def derive_passphrase_key(passphrase: str, salt: bytes, params: ScryptParams) -> bytes:
    """scrypt(passphrase, salt): 32 bytes. Blocks for the whole derivation (releases the GIL)."""
    kdf = Scrypt(salt=salt, length=params.length, n=params.n, r=params.r, p=params.p)
    return kdf.derive(passphrase_bytes(passphrase))


async def derive_passphrase_key_async(passphrase: str, salt: bytes, params: ScryptParams) -> bytes:
    """`derive_passphrase_key` in a worker thread, so the event loop keeps running."""
    return await asyncio.to_thread(derive_passphrase_key, passphrase, salt, params)


def hkdf(key: bytes, label: str, *, salt: bytes | None = None, length: int = KEY_BYTES) -> bytes:
    """HKDF-SHA256 of `key` for one purpose; different labels give independent keys."""
    info = LABEL_PREFIX + label.encode("ascii")
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(key)
