"""The terms of many texts at once: `term_counts` of each, as one table, in a few C passes.

Indexing spends its time turning items into terms. `term_counts` does that one text at a
time, a few Python steps per word. A `Vocabulary` takes a whole batch: the texts joined
into one string are normalised, case-folded and cut where no term can reach in single C
passes (as UTF-8 bytes: the cuts are all ASCII), and each piece is looked up in what the
vocabulary already knows of it. Only a piece never seen before goes through the tokeniser
(`chunk_terms`, the same function `term_counts` uses), so the terms are exactly those of
`term_counts`. Counting, packing and the hashing embedder's features then run in numpy
over the whole batch (`TermTable`).

The vocabulary remembers at most `MAX_PIECES` pieces, or `MAX_PIECE_BYTES` of them (a
piece can be a 16,000-character hash), then starts afresh.

Example::

    vocabulary = Vocabulary()
    table = vocabulary.table(["ERR-4411: the disk was full", "", "disk"])
    table.counts_of(0)        # {'err-4411': 1, 'err': 1, '4411': 1, 'disk': 1, 'full': 1}
    table.packed(term_id)     # [b'...', None, b'...']: one blob per text, as pack_terms
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .postings import TERM_DTYPE
from .text import _SPLIT, chunk_terms

Ints = npt.NDArray[np.intp]

#: Pieces a vocabulary remembers before it starts afresh (each holds its bytes and terms),
#: and their bytes in all.
MAX_PIECES = 200_000
MAX_PIECE_BYTES = 16 * 2**20

# Between two texts: a piece of its own (the texts' own copies of it are cut like spaces).
_GAP = "\x1e"
_JOIN = f" {_GAP} "
# The ASCII bytes no term holds become spaces, as `tokenize` does with `_SPLIT`.
_CUT = bytes(0x20 if code in _SPLIT and code != ord(_GAP) else code for code in range(256))
# What `str.split` cuts at beyond ASCII once text is NFKC-normalised; `bytes.split` would not.
_WIDE_SPACE = re.compile("[\x85\u1680\u2028\u2029]")


def spans(starts: Ints, lengths: Ints) -> Ints:
    """The positions `starts[i] .. starts[i] + lengths[i] - 1` of every `i`, in one array.

    >>> spans(np.array([5, 0]), np.array([2, 3])).tolist()
    [5, 6, 0, 1, 2]
    """
    ends = np.cumsum(lengths)
    total = int(ends[-1]) if len(ends) else 0
    return np.repeat(starts - (ends - lengths), lengths) + np.arange(total)


@dataclass(frozen=True)
class TermTable:
    """`{term: count}` of each of `size` texts, as parallel arrays sorted by text: text
    `rows[i]` holds `terms[term[i]]` `counts[i]` times."""

    size: int
    rows: Ints
    term: Ints
    counts: npt.NDArray[np.int64]
    terms: tuple[str, ...]  # the distinct terms of the batch

    @classmethod
    def of_counts(cls, counts: Sequence[Mapping[str, int]]) -> TermTable:
        """The table of counts already made (`term_counts` of each text)."""
        vocab: dict[str, int] = {}
        rows, term, values = [], [], []
        for row, mapping in enumerate(counts):
            for word, count in mapping.items():
                rows.append(row)
                term.append(vocab.setdefault(word, len(vocab)))
                values.append(count)
        return cls(
            len(counts),
            np.asarray(rows, dtype=np.intp),
            np.asarray(term, dtype=np.intp),
            np.asarray(values, dtype=np.int64),
            tuple(vocab),
        )

    def counts_of(self, row: int) -> dict[str, int]:
        """`term_counts` of text `row` (terms in the table's order)."""
        mine = self.rows == row
        return {
            self.terms[t]: int(c) for t, c in zip(self.term[mine], self.counts[mine], strict=True)
        }

    def packed(self, term_id: Callable[[str], int]) -> list[bytes | None]:
        """Each text's terms as `pack_terms` packs them, by id, with ids from `term_id`
        (None: no terms); terms whose ids coincide are counted together."""
        ids = np.fromiter(map(term_id, self.terms), np.uint64, len(self.terms))[self.term]
        order = np.lexsort((ids, self.rows))  # not in the order the words came
        rows, ids, counts = self.rows[order], ids[order], self.counts[order]
        if len(np.unique(ids)) < len(np.unique(self.term)):  # keyed ids that collide
            first = np.ones(len(ids), dtype=bool)
            first[1:] = (rows[1:] != rows[:-1]) | (ids[1:] != ids[:-1])
            counts = np.add.reduceat(counts, np.flatnonzero(first))
            rows, ids = rows[first], ids[first]
        packed = np.empty(len(ids), dtype=TERM_DTYPE)
        packed["id"], packed["count"] = ids, counts
        data, width = packed.tobytes(), TERM_DTYPE.itemsize
        sizes = np.bincount(rows, minlength=self.size) * width
        ends = np.cumsum(sizes)
        starts = (ends - sizes).tolist()
        return [data[a:b] or None for a, b in zip(starts, ends.tolist(), strict=True)]


class Vocabulary:
    """Turns batches of texts into `TermTable`s, remembering the pieces it has tokenised."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._pieces: dict[bytes, int] = {_GAP.encode(): 0}  # piece -> its number
        self._term_numbers: dict[str, int] = {}
        self._terms: list[str] = []
        self._starts = np.zeros(1024, dtype=np.intp)  # piece i's terms: starts[i]:starts[i+1]
        self._flat = np.zeros(4096, dtype=np.intp)  # term numbers, piece after piece
        self._starts_used, self._flat_used = 2, 0  # the gap piece has no terms
        self._piece_bytes = 0

    def table(self, texts: Sequence[str]) -> TermTable:
        """`term_counts` of every text, as one table.

        >>> Vocabulary().table(["user_42 and user_42", ""]).counts_of(0)
        {'user_42': 2, 'user': 2, '42': 2}
        """
        joined = _JOIN.join(texts)
        if joined.count(_GAP) != max(len(texts) - 1, 0):  # a text holds one
            joined = _JOIN.join(text.replace(_GAP, " ") for text in texts)
        text = unicodedata.normalize("NFKC", joined).casefold()
        if not text.isascii():
            text = _WIDE_SPACE.sub(" ", text)
        pieces = text.encode("utf-8", "surrogatepass").translate(_CUT).split()
        with self._lock:
            numbers = self._numbers(pieces)
            starts = self._starts[: self._starts_used]
            flat = self._flat[: self._flat_used]
            terms = self._terms
        row_of_piece = np.cumsum(numbers == 0)
        lengths = starts[numbers + 1] - starts[numbers]
        term_numbers = flat[spans(starts[numbers], lengths)]
        width = max(len(terms), 1)
        keys, counts = np.unique(
            np.repeat(row_of_piece, lengths) * width + term_numbers, return_counts=True
        )
        distinct, term = np.unique(keys % width, return_inverse=True)
        return TermTable(
            len(texts),
            keys // width,
            term.reshape(-1),
            counts.astype(np.int64),
            tuple(terms[i] for i in distinct.tolist()),
        )

    def _numbers(self, pieces: list[bytes]) -> Ints:
        """Each piece's number, tokenising the new ones (called with the lock held)."""
        try:
            return np.fromiter(map(self._pieces.__getitem__, pieces), np.intp, len(pieces))
        except KeyError:
            pass
        if len(self._pieces) + len(pieces) > MAX_PIECES or self._piece_bytes > MAX_PIECE_BYTES:
            self._reset()
        for piece in pieces:
            if piece not in self._pieces:
                self._learn(piece)
        return np.fromiter(map(self._pieces.__getitem__, pieces), np.intp, len(pieces))

    def _learn(self, piece: bytes) -> None:
        numbers, terms, new = self._term_numbers, self._terms, []
        for term in chunk_terms(piece.decode("utf-8", "surrogatepass")):
            number = numbers.get(term)
            if number is None:
                number = numbers[term] = len(terms)
                terms.append(term)
            new.append(number)
        used = self._flat_used
        self._flat = _room(self._flat, used + len(new))
        self._flat[used : used + len(new)] = new
        self._flat_used = used + len(new)
        self._starts = _room(self._starts, self._starts_used + 1)
        self._starts[self._starts_used] = self._flat_used
        self._starts_used += 1
        self._pieces[piece] = len(self._pieces)
        self._piece_bytes += len(piece)


def _room(array: Ints, size: int) -> Ints:
    """`array`, grown (doubled) to hold at least `size` entries."""
    if size <= len(array):
        return array
    grown = np.zeros(max(size, 2 * len(array)), dtype=array.dtype)
    grown[: len(array)] = array
    return grown
