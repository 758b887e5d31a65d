"""Keyed hashes of search terms, so the keyword index of an encrypted store holds no words.

The key comes from the keyring's index secret, which key rotation carries over: the hashes
already stored stay valid after `rotate_key`, and no index rebuild is needed. Equal terms
hash equally across the whole database (store-wide search works), so the index still
shows how often an unknown term occurs; it does not show which term it is.

Example::

    hasher = term_hasher(kek)
    hasher("Mochi") == hasher("mochi")        # True: terms are NFKC-normalised, case-folded
    len(hasher("mochi"))                      # 32 hex characters, fits terms.term (64)
"""

from __future__ import annotations

import hmac
import unicodedata

from ..errors import ConfigurationError
from .keys import KeyEncryptionKey

DEFAULT_HEX_CHARS = 32  # 128 bits: collisions are negligible, the index stays small
MAX_HEX_CHARS = 64


def normalise_term(term: str) -> str:
    """NFKC, case-folded, NFKC again: one spelling per term whatever the input's form."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", term).casefold())


class TermHasher:
    """HMAC-SHA256 of a normalised term under a dedicated key, as truncated hex.

    Example::

        hasher = term_hasher(kek)
        rows = [{"term": hasher(token), "frequency": n} for token, n in counts.items()]
        query = [hasher(token) for token in tokens]
    """

    __slots__ = ("_key", "hex_chars")

    def __init__(self, key: bytes, *, hex_chars: int = DEFAULT_HEX_CHARS) -> None:
        if not 16 <= hex_chars <= MAX_HEX_CHARS:
            raise ConfigurationError(
                f"hex_chars must be from 16 to {MAX_HEX_CHARS}, got {hex_chars}"
            )
        self._key = key
        self.hex_chars = hex_chars

    def __call__(self, term: str) -> str:
        digest = hmac.digest(self._key, normalise_term(term).encode("utf-8"), "sha256")
        return digest.hex()[: self.hex_chars]

    def __repr__(self) -> str:
        return f"TermHasher(hex_chars={self.hex_chars})"


def term_hasher(kek: KeyEncryptionKey, *, hex_chars: int = DEFAULT_HEX_CHARS) -> TermHasher:
    """The term hasher of a database, from its keyring's rotation-stable index secret."""
    return TermHasher(kek.index_key("terms"), hex_chars=hex_chars)
