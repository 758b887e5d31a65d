"""The default embedder: feature hashing of words and character n-grams, no model at all.

It knows no synonyms ("release" and "deployment" are unrelated to it); shared words and
word pieces ("deploy", "deployments", "redeployed") bring its vectors closer, though a
piece within a longer text rarely clears its noise floor alone (a search finds the words
by keyword). It needs nothing beyond numpy and embeds a query in tens of microseconds.
For meaning, use `MiniLMEmbedder`.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from ..caches import add_bounded
from ..errors import ConfigurationError
from ..validation import check_finite, check_range
from .embedders import normalize
from .text import MAX_TERM_CHARS, tokenize
from .vocabulary import TermTable, spans

#: The most dimensions a `HashingEmbedder` takes: each vector is 4 bytes a dimension, stored
#: with every item, and a search holds thousands of them.
MAX_DIM = 4096


class HashingEmbedder:
    """Signed feature hashing of the tokeniser's terms and their character n-grams.

    Example::

        embedder = HashingEmbedder()           # 256 dims, model_id "hashing-v2-256-3-5-0.5"
        vectors = embedder.embed(["the disk was full", "lunch plans"])   # (2, 256) float32

    `dim`: 8 to `MAX_DIM` (4,096). `ngrams`: the shortest and longest character n-grams
    hashed beside each word; `ngram_weight`: their share against the word's (>= 0).
    """

    metric = "cosine"
    #: Fitted on tests/search_eval (cross-validated): its vectors are hashed words, so they
    #: add to keywords only where no query term matches (word pieces: "deploy" for
    #: "redeployed"), and keywords lead (see `fuse`).
    fusion_weight = 0.0001
    #: Its vectors are the words' own pieces: a cosine above its noise floor is shared word
    #: pieces, so the floor applies (`calibration.calibrate`).
    lexical = True

    def __init__(
        self, dim: int = 256, *, ngrams: tuple[int, int] = (3, 5), ngram_weight: float = 0.5
    ) -> None:
        dim = check_range("dim", dim, 8, MAX_DIM)
        if not isinstance(ngrams, (tuple, list)) or len(ngrams) != 2:
            raise ConfigurationError(f"ngrams must be a (min, max) pair, got {ngrams!r:.80}")
        low = check_range("ngrams' min", ngrams[0], 1, MAX_TERM_CHARS)
        high = check_range("ngrams' max", ngrams[1], low, MAX_TERM_CHARS)
        ngram_weight = check_finite("ngram_weight", ngram_weight)
        if ngram_weight < 0:
            raise ConfigurationError(f"ngram_weight must be >= 0, got {ngram_weight}")
        self.dim = dim
        self.ngrams = (low, high)
        self.ngram_weight = ngram_weight
        self.model_id = f"hashing-v2-{dim}-{ngrams[0]}-{ngrams[1]}-{ngram_weight:g}"

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """One unit vector per text (all zeros for a text without terms)."""
        return self.embed_counts([Counter(tokenize(text)) for text in texts])

    def embed_counts(self, counts: Sequence[Mapping[str, int]]) -> npt.NDArray[np.float32]:
        """`embed` from each text's `{term: count}` (`term_counts`), without tokenising again."""
        return self.embed_table(TermTable.of_counts(counts))

    def embed_table(self, table: TermTable) -> npt.NDArray[np.float32]:
        """`embed` of the texts of a `TermTable` (`Vocabulary.table`).

        Each distinct term's features are hashed once (and cached); every feature of every
        term of every text is then summed into its row in one `bincount`.
        """
        settings = (self.dim, self.ngrams, self.ngram_weight)
        features = [_features(term, *settings) for term in table.terms]
        if not features:
            return normalize(np.zeros((table.size, self.dim)))
        lengths = np.fromiter((len(idx) >> 3 for idx, _ in features), np.intp, len(features))
        indices = np.frombuffer(b"".join([idx for idx, _ in features]), np.int64)
        values = np.frombuffer(b"".join([val for _, val in features]), np.float64)
        spans_of_entries = lengths[table.term]  # features per (text, term)
        at = spans(np.cumsum(lengths)[table.term] - spans_of_entries, spans_of_entries)
        counts = table.counts
        scales = np.where(counts == 1, 1.0, 1.0 + np.log(counts))  # counts are >= 1
        flat = np.repeat(table.rows * self.dim, spans_of_entries) + indices[at]
        weights = values[at] * np.repeat(scales, spans_of_entries)
        sums = np.bincount(flat, weights, minlength=table.size * self.dim)
        return normalize(sums.reshape(table.size, self.dim))

    def embed_queries(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Queries are embedded like documents."""
        return self.embed(texts)


def _ngrams(term: str, bounds: tuple[int, int]) -> Sequence[str]:
    padded = f"<{term}>"
    return [
        padded[i : i + n]
        for n in range(bounds[0], bounds[1] + 1)
        for i in range(len(padded) - n + 1)
    ]


#: The hashed features of the terms seen lately, by term and embedder settings: at most
#: `FEATURES_CACHED`, oldest first (`caches`); `forget_features` empties it.
FEATURES_CACHED = 65536
FeaturesKey = tuple[str, int, tuple[int, int], float]  # a term and the embedder settings
_cached: dict[FeaturesKey, tuple[bytes, bytes]] = {}


def _features(
    term: str, dim: int, ngrams: tuple[int, int], ngram_weight: float
) -> tuple[bytes, bytes]:
    """The hashed features of one term: the term itself (weight 1) and its n-grams (together
    of norm about `ngram_weight`), duplicates merged; as the bytes of their int64 indices
    and float64 weights (joined for a batch at once, and freed fast: see `caches`)."""
    key = (term, dim, ngrams, ngram_weight)
    found = _cached.get(key)
    if found is None:
        found = _hashed(term, dim, ngrams, ngram_weight)
        add_bounded(_cached, {key: found}, FEATURES_CACHED)
    return found


def forget_features() -> dict[FeaturesKey, tuple[bytes, bytes]]:
    """Empty the cache of hashed features at once; what it held, to free (`caches.release`)."""
    global _cached
    held, _cached = _cached, {}
    return held


def _hashed(
    term: str, dim: int, ngrams: tuple[int, int], ngram_weight: float
) -> tuple[bytes, bytes]:
    grams = _ngrams(term, ngrams) if ngram_weight else []
    features = {f"w:{term}": 1.0}
    for gram in grams:
        key = f"g:{gram}"
        features[key] = features.get(key, 0.0) + ngram_weight / math.sqrt(len(grams))
    acc: dict[int, float] = {}
    for feature, weight in features.items():
        h = zlib.crc32(feature.encode("utf-8"))
        sign = 1.0 if h & 0x80000000 else -1.0
        acc[h % dim] = acc.get(h % dim, 0.0) + sign * weight
    indices = np.fromiter(acc.keys(), np.int64, len(acc))
    return indices.tobytes(), np.fromiter(acc.values(), np.float64, len(acc)).tobytes()
