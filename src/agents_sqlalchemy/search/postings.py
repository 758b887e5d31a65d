"""An item's terms packed into one blob, and a query's postings read back from such blobs.

The keyword index keeps one blob per item: its distinct terms as 64-bit ids (a plain
term's BLAKE2b, or a keyed hash in an encrypted store) with their counts. Writing one row
per item instead of one per term is what keeps indexing cheap, and a search reads every
candidate's index row anyway (for its vector): the postings of a query come from those
blobs, in numpy, with document frequencies exact over the scope.

Example::

    blob = pack_terms({term_id("disk"): 2, term_id("full"): 1})
    rows, terms, counts = postings([blob, None], [term_id("full")])
    # rows [0], terms [0], counts [1]: ready for bm25_postings(rows, terms, counts, ...)
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from ..errors import CorruptItemError

#: One packed term: its id and how often the item holds it.
TERM_DTYPE = np.dtype([("id", "<u8"), ("count", "<u4")])
_TERM = struct.Struct("<QI")  # the same layout, for packing an item's few terms

Indexes = npt.NDArray[np.intp]


@lru_cache(maxsize=65536)
def term_id(term: str) -> int:
    """The 64-bit id of a plain term (BLAKE2b): what a plaintext store packs.

    >>> term_id("disk") == term_id("disk") != term_id("disks")
    True
    """
    return int.from_bytes(hashlib.blake2b(term.encode(), digest_size=8).digest(), "little")


def pack_terms(counts: Mapping[int, int]) -> bytes | None:
    """`{term id: count}` as one blob (None: no terms), by term id: the order the words came
    in is not kept (an encrypted store's ids are keyed hashes; in text order they would give
    its sentences' word order away).

    >>> len(pack_terms({1: 2, 3: 4}))
    24
    """
    if not counts:
        return None
    return b"".join([_TERM.pack(term, count) for term, count in sorted(counts.items())])


def unpack_terms(blob: bytes | None) -> dict[int, int]:
    """A packed blob back into `{term id: count}` (the order of packing is not kept).

    >>> unpack_terms(pack_terms({3: 4, 1: 2})) == {1: 2, 3: 4}
    True
    """
    if not blob:
        return {}
    _check_lengths(np.array([len(blob)]))
    return dict(_TERM.iter_unpack(blob))


def postings(
    blobs: Sequence[bytes | None], query: Sequence[int]
) -> tuple[Indexes, Indexes, npt.NDArray[np.float64]]:
    """Which blob holds which query term (`query`: distinct ids) how often, as
    `(rows, terms, counts)`: indexes into `blobs` and `query`, for `bm25_postings`.

    >>> blob = pack_terms({7: 2, 9: 1})
    >>> [a.tolist() for a in postings([None, blob, blob], [9, 8, 7])]
    [[1, 1, 2, 2], [2, 0, 2, 0], [2.0, 1.0, 2.0, 1.0]]
    """
    lengths = np.fromiter(map(len, [b or b"" for b in blobs]), np.intp, count=len(blobs))
    _check_lengths(lengths)
    packed = np.frombuffer(b"".join([b for b in blobs if b]), dtype=TERM_DTYPE)
    ids = np.ascontiguousarray(packed["id"])
    wanted = np.asarray(query, dtype=np.uint64)  # distinct ids
    found = np.isin(ids, wanted)
    rows = np.repeat(np.arange(len(blobs)), lengths // TERM_DTYPE.itemsize)[found]
    order = np.argsort(wanted)
    terms = order[np.searchsorted(wanted[order], ids[found])]
    return rows, terms, packed["count"][found].astype(np.float64)


def _check_lengths(lengths: npt.NDArray[np.intp]) -> None:
    """Packed blobs hold whole terms; any other length was altered."""
    if (lengths % TERM_DTYPE.itemsize).any():
        raise CorruptItemError("a search index row holds terms of a bad length: it was altered")
