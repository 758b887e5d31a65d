"""Keyed hashes of search terms, so the keyword index of an encrypted store holds no words.

The key comes from the keyring's index secret, which key rotation carries over: the hashes
already stored stay valid after `rotate_key`, and no index rebuild is needed. Equal terms
hash equally across the whole database (store-wide search works), so the index still
shows how often an unknown term occurs; it does not show which term it is.

Example::

    hasher = term_hasher(kek)
    hasher("Mochi") == hasher("mochi")        # True: terms are NFKC-normalised, case-folded
    hasher("mochi") < 2**64                   # a 64-bit term id, as the index packs it
"""

from __future__ import annotations

import hmac
import unicodedata

from .keys import KeyEncryptionKey


def normalise_term(term: str) -> str:
    """NFKC, case-folded, NFKC again: one spelling per term whatever the input's form."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", term).casefold())


class TermHasher:
    """HMAC-SHA256 of a normalised term under a dedicated key, cut to a 64-bit term id.

    Example::

        hasher = term_hasher(kek)
        counts = {hasher(term): n for term, n in term_counts(text).items()}
    """

    __slots__ = ("_key",)

    def __init__(self, key: bytes) -> None:
        self._key = key

    def __call__(self, term: str) -> int:
        digest = hmac.digest(self._key, normalise_term(term).encode("utf-8"), "sha256")
        return int.from_bytes(digest[:8], "little")

    def __repr__(self) -> str:
        return "TermHasher()"


def term_hasher(kek: KeyEncryptionKey) -> TermHasher:
    """The term hasher of a database, from its keyring's rotation-stable index secret."""
    return TermHasher(kek.index_key("terms"))
