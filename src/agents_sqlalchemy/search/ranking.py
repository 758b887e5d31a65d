"""Scores and their fusion: BM25 over term counts, cosine over stored vectors, recency.

Everything here is pure: the caller fetches the numbers (from SQL or memory) and gets a
ranking back. Terms are opaque strings, so keyed hashes of terms work the same as terms.

What the caller supplies for one query over one scope (a session, or a user's sessions):

- `keys`: the candidates, e.g. item primary keys: every item with a vector of this model in
  the scope (for vector and hybrid modes) plus every item with at least one query term.
- `positions`: per candidate, larger is newer: the per-session `seq` in a session,
  `created_at` as epoch seconds across sessions.
- `vectors`: per candidate, its stored vector bytes for the embedder's `model_id`, or None.
- `term_freqs`: for candidates that contain query terms, `{term: count}` of those terms.
- `stats`: the number of items in the scope, and optionally per query term the number of
  items holding it; left out, those are counted in `term_freqs`, which is exact when
  `term_freqs` holds every item of the scope with a query term (one SQL query:
  `SELECT item_pk, term, frequency FROM terms WHERE session_pk = ? AND term IN (...)`).
- `lengths` (optional): per candidate, its total term count; only used with `bm25_b > 0`,
  which is off by default, so the terms table needs no length column.

Example::

    hits = rank(
        [101, 102], positions=[1, 2], mode="hybrid",
        query_vector=await embed_query(embedder, "why did the release break?"),
        vectors=[blob_101, blob_102],
        query_terms=term_counts("why did the release break?"),
        term_freqs={101: {"releas": 1}},
        stats=CorpusStats(doc_count=2),
        limit=1,
    )
    hits[0].key    # 101
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

import numpy as np
import numpy.typing as npt

from ..errors import ConfigurationError
from .embedders import VECTOR_DTYPE, unpack_vectors

K = TypeVar("K", bound=Hashable)
SearchMode = Literal["hybrid", "vector", "keyword"]
Fusion = Literal["rrf", "blend"]
Scores = npt.NDArray[np.float64]
SEARCH_MODES: tuple[SearchMode, ...] = ("hybrid", "vector", "keyword")


@dataclass(frozen=True)
class CorpusStats:
    """Keyword statistics of the searched scope, for BM25's inverse document frequency.

    `doc_count`: items in the scope (those with terms; the item count is close enough).
    `doc_freq`: per query term, how many of them contain it (missing terms count as 0);
    None counts them in the `term_freqs` given, right when those cover every item of the
    scope holding a query term. `avg_length`: the mean total term count, only used with
    length normalisation; None uses the mean over the candidates.

    Example::

        CorpusStats(doc_count=10_000)                       # df from the candidates' rows
        CorpusStats(doc_count=10_000, doc_freq={"disk": 12, "full": 40})
    """

    doc_count: int
    doc_freq: Mapping[str, int] | None = None
    avg_length: float | None = None


@dataclass(frozen=True)
class RankParams:
    """The knobs of ranking; the defaults won a grid search on tests/search_eval.

    "rrf" (weighted reciprocal rank fusion) adds `weight / (rrf_k + rank)` over three
    rankings: by cosine, by BM25 and by recency; "blend" adds min-max-normalised cosine,
    BM25 divided by its maximum, and recency in [0, 1], each times its weight. With a
    stronger embedder than the small static model, raise `vector_weight`.

    Example::

        RankParams(fusion="rrf", rrf_k=10, recency_weight=0.0)
    """

    fusion: Fusion = "rrf"
    vector_weight: float = 0.5
    keyword_weight: float = 1.0
    recency_weight: float = 0.2
    rrf_k: float = 30.0
    bm25_k1: float = 1.2
    #: Length normalisation, off by default (the usual 0.75 lost on the evaluation set):
    #: it favours short items, and in a transcript those are tool calls and questions, not
    #: answers. At 0, `lengths` are not needed.
    bm25_b: float = 0.0
    #: In position units: a candidate this much older than the newest scores half its
    #: recency. None: recency is linear in the candidates' rank by position.
    recency_half_life: float | None = None


DEFAULT_PARAMS = RankParams()


@dataclass(frozen=True)
class Hit(Generic[K]):
    """One ranked candidate: its fused `score` and the signals behind it.

    `vector` is the cosine similarity (None without a vector), `keyword` the BM25 score
    (0 without a matching term), `recency` in [0, 1] with 1 for the newest candidate.
    """

    key: K
    score: float
    vector: float | None
    keyword: float
    recency: float


def bm25_scores(
    query_terms: Collection[str],
    term_freqs: Sequence[Mapping[str, int] | None],
    stats: CorpusStats,
    lengths: Sequence[float | None] | None = None,
    *,
    k1: float = DEFAULT_PARAMS.bm25_k1,
    b: float = DEFAULT_PARAMS.bm25_b,
) -> Scores:
    """BM25 of each candidate from its counts of the query terms (0 where none match).

    Without `lengths` (or where a length is None) no length normalisation is applied.

    >>> bm25_scores(["disk"], [{"disk": 2}, None], CorpusStats(10, {"disk": 1})).round(2)
    array([2.74, 0.  ])
    """
    terms = list(dict.fromkeys(query_terms))
    n = max(stats.doc_count, 1)
    doc_freq = stats.doc_freq
    if doc_freq is None:
        doc_freq = {t: sum(1 for f in term_freqs if f and f.get(t, 0) > 0) for t in terms}
    idf = {t: math.log(1.0 + (n - (df := doc_freq.get(t, 0)) + 0.5) / (df + 0.5)) for t in terms}
    known = [float(x) for x in lengths or () if x is not None]
    avg = stats.avg_length or (sum(known) / len(known) if known else 1.0)
    out = np.zeros(len(term_freqs))
    for i, freqs in enumerate(term_freqs):
        if not freqs:
            continue
        length = lengths[i] if lengths is not None else None
        norm = k1 * (1.0 - b + b * float(length) / avg) if length else k1
        score = 0.0
        for term in terms:
            tf = freqs.get(term, 0)
            if tf > 0:
                score += idf[term] * tf * (k1 + 1.0) / (tf + norm)
        out[i] = score
    return out


def bm25_postings(
    rows: npt.ArrayLike,
    terms: npt.ArrayLike,
    frequencies: npt.ArrayLike,
    *,
    size: int,
    doc_count: int,
    k1: float = DEFAULT_PARAMS.bm25_k1,
) -> Scores:
    """`bm25_scores` without length normalisation, vectorised over postings.

    Posting `j` says that candidate `rows[j]` (an index below `size`) holds query term
    `terms[j]` (an index) `frequencies[j]` times, each pair once. Document frequencies are
    counted in the postings: exact when they hold every item of the scope with a query term.

    >>> bm25_postings([0, 1], [0, 0], [2, 1], size=3, doc_count=10).round(2)
    array([2.04, 1.48, 0.  ])
    """
    row = np.asarray(rows, dtype=np.intp)
    term = np.asarray(terms, dtype=np.intp)
    tf = np.asarray(frequencies, dtype=np.float64)
    if row.size == 0:
        return np.zeros(size)
    df = np.bincount(term)
    n = max(doc_count, 1)
    idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5))
    weights = idf[term] * tf * (k1 + 1.0) / (tf + k1)
    # Summed term by term, so that equal matches score exactly equal whatever the order of
    # the postings (ties then go to the newer item, as in `bm25_scores`).
    out = np.zeros(size)
    for t in range(df.size):
        chosen = term == t
        out += np.bincount(row[chosen], weights=weights[chosen], minlength=size)
    return out


def cosine_scores(
    query: npt.NDArray[Any] | bytes,
    vectors: Sequence[bytes | None] | npt.NDArray[Any],
) -> Scores:
    """Cosine similarity of the query to each vector; NaN where a candidate has none.

    Vectors are the stored bytes (or a matrix of unit rows); the query is a unit vector.
    """
    q = (
        np.frombuffer(query, dtype=VECTOR_DTYPE)
        if isinstance(query, bytes)
        else np.asarray(query, dtype=np.float32)
    )
    if isinstance(vectors, np.ndarray):
        return _dot(np.asarray(vectors, dtype=np.float32), q)
    blobs = [v for v in vectors if v is not None]
    if len(blobs) == len(vectors):
        return _dot(unpack_vectors(blobs, q.shape[0]), q)
    out = np.full(len(vectors), np.nan)
    if blobs:
        present = np.fromiter((v is not None for v in vectors), dtype=bool, count=len(vectors))
        out[present] = _dot(unpack_vectors(blobs, q.shape[0]), q)
    return out


def _dot(matrix: npt.NDArray[np.float32], q: npt.NDArray[np.float32]) -> Scores:
    # einsum, not `@`: BLAS spreads a matrix-vector product over threads, and on a busy
    # machine waiting for a second core costs milliseconds; one core does 10,000 x 256 in
    # well under a millisecond.
    return np.asarray(np.einsum("ij,j->i", matrix, q), dtype=np.float64)


def recency_scores(positions: Sequence[float], *, half_life: float | None = None) -> Scores:
    """Recency in [0, 1], 1 for the newest candidate.

    With `half_life`, exponential decay by distance from the newest; without it, linear in
    the candidates' rank by position (ties share a score).

    >>> recency_scores([3, 1, 2]).tolist()
    [1.0, 0.0, 0.5]
    """
    pos = np.asarray(positions, dtype=np.float64)
    if pos.size == 0:
        return pos
    if half_life is not None:
        return np.asarray(0.5 ** ((pos.max() - pos) / half_life), dtype=np.float64)
    distinct, rank = np.unique(pos, return_inverse=True)
    if distinct.size == 1:
        return np.ones_like(pos)
    return np.asarray(rank / (distinct.size - 1), dtype=np.float64)


def fuse(
    keys: Sequence[K],
    *,
    vector: Scores | None = None,
    keyword: Scores | None = None,
    recency: Scores | None = None,
    mode: SearchMode = "hybrid",
    params: RankParams = DEFAULT_PARAMS,
    limit: int | None = 10,
) -> list[Hit[K]]:
    """Rank candidates from their signals (arrays aligned with `keys`).

    `vector` holds cosines (NaN: no vector), `keyword` BM25 scores (0: no match), `recency`
    values in [0, 1]. Mode "vector" ranks the candidates with a vector by cosine, "keyword"
    those with a match by BM25; "hybrid" fuses both and recency. Ties go to the newer item.
    """
    n = len(keys)
    vec = np.full(n, np.nan) if vector is None else np.asarray(vector, dtype=np.float64)
    kw = np.zeros(n) if keyword is None else np.asarray(keyword, dtype=np.float64)
    rec = np.zeros(n) if recency is None else np.asarray(recency, dtype=np.float64)
    has_vec = ~np.isnan(vec)
    has_kw = kw > 0
    if mode == "vector":
        score, keep = np.where(has_vec, vec, -np.inf), has_vec
    elif mode == "keyword":
        score, keep = kw, has_kw
    elif mode == "hybrid":
        score, keep = _hybrid(vec, has_vec, kw, has_kw, rec, params), has_vec | has_kw
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


def _hybrid(
    vec: Scores,
    has_vec: npt.NDArray[np.bool_],
    kw: Scores,
    has_kw: npt.NDArray[np.bool_],
    rec: Scores,
    params: RankParams,
) -> Scores:
    if params.fusion == "rrf":
        k = params.rrf_k
        score = params.vector_weight * _rrf(vec, has_vec, rec, k)
        score += params.keyword_weight * _rrf(kw, has_kw, rec, k)
        return score + params.recency_weight * _rrf(rec, has_vec | has_kw, rec, k)
    if params.fusion == "blend":
        score = params.vector_weight * _minmax(vec, has_vec)
        if has_kw.any():
            score += params.keyword_weight * kw / kw.max()
        return score + params.recency_weight * rec
    raise ConfigurationError(f"fusion must be 'rrf' or 'blend', not {params.fusion!r}")


def _rrf(values: Scores, present: npt.NDArray[np.bool_], rec: Scores, k: float) -> Scores:
    """1 / (k + rank) of each present candidate by `values` (ties: newer first), else 0."""
    out = np.zeros(values.shape[0])
    index = np.flatnonzero(present)
    order = index[np.lexsort((-rec[index], -values[index]))]
    out[order] = 1.0 / (k + np.arange(1, order.size + 1))
    return out


def _minmax(values: Scores, present: npt.NDArray[np.bool_]) -> Scores:
    out = np.zeros(values.shape[0])
    if present.any():
        v = values[present]
        span = v.max() - v.min()
        out[present] = (v - v.min()) / span if span > 0 else 1.0
    return out


def rank(
    keys: Sequence[K],
    *,
    positions: Sequence[float],
    mode: SearchMode = "hybrid",
    query_vector: npt.NDArray[Any] | bytes | None = None,
    vectors: Sequence[bytes | None] | npt.NDArray[Any] | None = None,
    query_terms: Collection[str] = (),
    term_freqs: Mapping[K, Mapping[str, int]] | None = None,
    lengths: Mapping[K, float] | None = None,
    stats: CorpusStats | None = None,
    params: RankParams = DEFAULT_PARAMS,
    limit: int | None = 10,
) -> list[Hit[K]]:
    """Score and fuse in one call: `cosine_scores`, `bm25_scores`, `recency_scores`, `fuse`.

    `positions` and `vectors` are aligned with `keys`; `term_freqs` and `lengths` are keyed
    by candidate and may leave out candidates without a matching term, but every key of
    `term_freqs` must be in `keys`. Without `stats`, `doc_count` is `len(keys)` and document
    frequencies are counted in `term_freqs`. Without a query vector (or vectors) the vector
    signal is absent, without terms the keyword signal.
    """
    if len(positions) != len(keys) or (vectors is not None and len(vectors) != len(keys)):
        raise ConfigurationError("positions and vectors must be aligned with keys")
    if term_freqs and not set(term_freqs).issubset(keys):
        raise ConfigurationError("every key of term_freqs must be one of the candidate keys")
    vec = None
    if mode != "keyword" and query_vector is not None and vectors is not None:
        vec = cosine_scores(query_vector, vectors)
    kw = None
    if mode != "vector" and query_terms and term_freqs:
        freqs = [term_freqs.get(key) for key in keys]
        lens = [lengths.get(key) for key in keys] if lengths is not None else None
        kw = bm25_scores(
            query_terms,
            freqs,
            stats or CorpusStats(doc_count=len(keys)),
            lens,
            k1=params.bm25_k1,
            b=params.bm25_b,
        )
    rec = recency_scores(positions, half_life=params.recency_half_life)
    return fuse(keys, vector=vec, keyword=kw, recency=rec, mode=mode, params=params, limit=limit)
