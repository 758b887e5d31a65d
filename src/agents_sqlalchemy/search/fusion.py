"""Fusion of the search signals: evidence fusion, calibrated per embedder, recency for ties.

The method, for one query over its candidates:

1. Keyword evidence is *coverage*, capped at 1: `bm25_postings` scales BM25 so that an item
   holding each matched query term once scores 1 (0.5: it holds half the query's term
   weight), and `K = min(coverage, 1)`. An item that holds the whole query (an error code,
   a name, every word asked about) is strong evidence, and repeating the words adds
   nothing; words shared here and there ("which *drink* gives me headaches?" against
   "*Drink* more water") are weak evidence.
2. Vector evidence is how far an item stands out in this query's own cosine distribution: a
   robust z-score (median, MAD) turned into the log-likelihood ratio, in nats, of "this
   cosine is shifted above the query's typical cosines" against "it is typical":
   `z**2 / 2` for z > 0, else 0. No absolute cosine threshold, so it works for any model's
   scale; an average or below-average item counts nothing, a clear outlier counts far
   more than a slightly better than average one.
3. Items that tie exactly on keyword evidence (they hold the same query terms as often, or
   all of them: all the items naming an error code, say) share their mean vector evidence:
   the vector moves such a group as a whole, and inside it the newest item comes first.
4. `score = K + w * V`, where `w` is the embedder's measured weight (`fusion_weight`): how
   much its vectors add to keywords. Recency only breaks exact ties; it never outvotes.

Why: reciprocal rank fusion with fixed weights, tuned on a weak 64-dimension model, let word
overlaps and recency drown a strong model (all-MiniLM-L6-v2: vector-only MRR 0.82, hybrid
0.22 on the paraphrase set). Measured on tests/search_eval (182 questions, three sets), the
signals' worth differs by embedder: with the hashing and static embedders the keywords
win whenever the two disagree (89 to 10), with MiniLM it is about even (83 to 89). No
per-query statistic of the scores told those cases apart, so the weight is the embedder's
(measured on the evaluation, `tests/search_eval/tune.py`), and what is per query is the
evidence: coverage, how far an item stands out, and exact ties. Within exact keyword ties
the newest item is right more often than the most similar one (the most similar is often
the question or the tool call that merely repeats the identifier; the newest carries the
latest state): ordering them by vector cost 0.07 MRR with the hashing embedder. The
log-likelihood ratio replaced the Gaussian tail's surprisal `-ln P(Z >= z)` (0.69 nats
for a median item: average items counted), and the cap replaced a discount by the query's
best coverage: the static model's worst row went from 0.012 below its best signal to
0.007, and no row of any embedder fell by more than 0.002.

Example::

    hits = fuse(
        [101, 102, 103],
        vector=np.array([0.61, 0.12, 0.20]),        # cosines (NaN: no vector)
        keyword=np.array([0.0, 1.0, 0.5]),          # bm25_postings: coverage
        recency=np.array([0.0, 0.5, 1.0]),          # recency_scores
        vector_weight=fusion_weight(embedder),
        limit=2,
    )
    [(hit.key, round(hit.score, 3)) for hit in hits]
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

import numpy as np
import numpy.typing as npt

from ..errors import ConfigurationError
from .embedders import Embedder

K = TypeVar("K", bound=Hashable)
SearchMode = Literal["hybrid", "vector", "keyword"]
Scores = npt.NDArray[np.float64]
SEARCH_MODES: tuple[SearchMode, ...] = ("hybrid", "vector", "keyword")

#: The weight of an embedder that declares none: the static model's (see `fusion_weight`).
DEFAULT_VECTOR_WEIGHT = 0.064


@dataclass(frozen=True)
class Hit(Generic[K]):
    """One ranked candidate: its fused `score` and the signals behind it.

    `vector` is the cosine similarity (None without a vector), `keyword` the BM25 coverage
    (0 without a matching term), `recency` in [0, 1] with 1 for the newest candidate.
    """

    key: K
    score: float
    vector: float | None
    keyword: float
    recency: float


def fusion_weight(embedder: Embedder | None) -> float:
    """How much `fuse` weighs an embedder's vector evidence against keyword coverage.

    An embedder may declare it as a `fusion_weight` attribute (measure it with
    tests/search_eval/tune.py); the built-in ones do, any other gets
    `DEFAULT_VECTOR_WEIGHT`.

    >>> fusion_weight(None)
    0.064
    """
    declared = getattr(embedder, "fusion_weight", None)
    if isinstance(declared, (int, float)) and not isinstance(declared, bool):
        if not (math.isfinite(declared) and declared >= 0):
            raise ConfigurationError(f"fusion_weight must be >= 0, not {declared!r}")
        return float(declared)
    return DEFAULT_VECTOR_WEIGHT


def fuse(
    keys: Sequence[K],
    *,
    vector: Scores | None = None,
    keyword: Scores | None = None,
    recency: Scores | None = None,
    mode: SearchMode = "hybrid",
    limit: int | None = 10,
    vector_weight: float | None = None,
) -> list[Hit[K]]:
    """Rank candidates from their signals (arrays aligned with `keys`), best first.

    `vector` holds cosines (NaN: no vector), `keyword` coverage from `bm25_postings` (0: no
    match), `recency` values in [0, 1]. Mode "vector" ranks the candidates with a vector by
    cosine, "keyword" those with a match by coverage, "hybrid" all of them by evidence
    fusion with `vector_weight` (None: `DEFAULT_VECTOR_WEIGHT`). Ties go to the newer item.
    """
    n = len(keys)
    vec = np.full(n, np.nan) if vector is None else np.asarray(vector, dtype=np.float64)
    kw = np.zeros(n) if keyword is None else np.asarray(keyword, dtype=np.float64)
    rec = np.zeros(n) if recency is None else np.asarray(recency, dtype=np.float64)
    if not vec.shape == kw.shape == rec.shape == (n,):
        raise ConfigurationError("vector, keyword and recency must be aligned with keys")
    has_vec, has_kw = ~np.isnan(vec), kw > 0
    if mode == "vector":
        score, keep = np.where(has_vec, vec, -np.inf), has_vec
    elif mode == "keyword":
        score, keep = kw, has_kw
    elif mode == "hybrid":
        weight = DEFAULT_VECTOR_WEIGHT if vector_weight is None else vector_weight
        if not (math.isfinite(weight) and weight >= 0):
            raise ConfigurationError(f"vector_weight must be >= 0, not {weight!r}")
        score, keep = _evidence(vec, has_vec, kw, has_kw, weight), has_vec | has_kw
    else:
        raise ConfigurationError(f"mode must be one of {SEARCH_MODES}, not {mode!r}")
    index = np.flatnonzero(keep)
    order = index[np.lexsort((-rec[index], -score[index]))]
    if limit is not None:
        order = order[:limit]
    return [
        Hit(
            key=keys[i],
            score=float(score[i]),
            vector=float(vec[i]) if has_vec[i] else None,
            keyword=float(kw[i]),
            recency=float(rec[i]),
        )
        for i in order
    ]


def _evidence(
    vec: Scores,
    has_vec: npt.NDArray[np.bool_],
    kw: Scores,
    has_kw: npt.NDArray[np.bool_],
    weight: float,
) -> Scores:
    """`K + weight * V` (see the module docstring), V shared within exact keyword ties."""
    evidence = vector_evidence(vec, has_vec)
    keyword_part = np.zeros(kw.shape[0])
    if has_kw.any():
        keyword_part = np.minimum(kw, 1.0)  # holding the whole query twice is holding it
        _, group = np.unique(keyword_part[has_kw], return_inverse=True)
        sums = np.bincount(group, weights=evidence[has_kw])
        evidence[has_kw] = (sums / np.bincount(group))[group]
    return np.asarray(keyword_part + weight * evidence, dtype=np.float64)


def vector_evidence(cosines: Scores, present: npt.NDArray[np.bool_]) -> Scores:
    """How far each candidate stands out among the query's cosines, in nats (0: none).

    A robust z-score (median, 1.4826 * MAD; the standard deviation if the MAD is 0) turned
    into the log-likelihood ratio of a normal shifted to the item's cosine against the
    query's own: `z**2 / 2` above the median, 0 at or below it.

    >>> vector_evidence(np.array([0.1, 0.2, 0.3, 0.9]), np.ones(4, bool)).round(2).tolist()
    [0.0, 0.0, 0.06, 9.61]
    """
    out = np.zeros(cosines.shape[0])
    if int(present.sum()) < 2:
        return out
    values = cosines[present]
    median = float(np.median(values))
    spread = 1.4826 * float(np.median(np.abs(values - median))) or float(values.std())
    if spread > 1e-9:  # equal cosines (up to rounding) say nothing
        z = np.maximum((values - median) / spread, 0.0)
        out[present] = z * z / 2
    return out
