"""The search signals, each a numpy array aligned with the candidates: keyword, vector, recency.

Everything here is pure: the caller fetches the numbers (from SQL or memory) and `fuse`
(in `fusion.py`) ranks them. Terms are opaque strings, so keyed hashes of terms work the
same as terms.

What the caller supplies for one query over one scope (a session, or a user's sessions):

- the candidates: the items in the scope with an index row (every item indexed);
- postings: which candidate holds which query term how often (`postings`, from the packed
  terms of the candidates' index rows);
- per candidate its stored vector bytes (or None), and its position (larger is newer: the
  per-session `seq` in a session, `created_at` as epoch seconds across sessions).

Example::

    rows, term_ids, counts = postings(packed_terms, query_term_ids)
    keyword = bm25_postings(rows, term_ids, counts, size=len(keys), doc_count=len(keys))
    vector = cosine_scores(await embed_query(embedder, query), blobs)
    hits = fuse(keys, vector=vector, keyword=keyword, recency=recency_scores(positions),
                vector_weight=fusion_weight(embedder), limit=5)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .embedders import VECTOR_DTYPE, unpack_vectors

Scores = npt.NDArray[np.float64]
#: BM25's term-frequency saturation. There is no length normalisation (b = 0): it favours
#: short items, and in a transcript those are tool calls and questions, not answers.
BM25_K1 = 1.2


def bm25_postings(
    rows: npt.ArrayLike,
    terms: npt.ArrayLike,
    frequencies: npt.ArrayLike,
    *,
    size: int,
    doc_count: int,
    k1: float = BM25_K1,
) -> Scores:
    """BM25 of each candidate (0 where none match), as *coverage* of the query.

    Posting `j` says that candidate `rows[j]` (an index below `size`) holds query term
    `terms[j]` (an index) `frequencies[j]` times, each pair once. Document frequencies are
    counted in the postings: exact when they hold every item of the scope with a query term.
    Scores are divided by the BM25 of an item holding each matched term once (the sum of
    their IDFs), so 1 means "holds the whole query", 0.5 "holds half its term weight";
    repeats saturate towards `k1 + 1`. Within a query the order is plain BM25's.

    >>> bm25_postings([0, 1, 1], [0, 0, 1], [2, 1, 1], size=3, doc_count=10).round(3)
    array([0.586, 1.   , 0.   ])
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
    # the postings (`fuse` treats exact ties as one group, ordered by recency).
    out = np.zeros(size)
    for t in range(df.size):
        chosen = term == t
        out += np.bincount(row[chosen], weights=weights[chosen], minlength=size)
    return out / float(idf[df > 0].sum())


def cosine_scores(
    query: npt.NDArray[Any] | bytes,
    vectors: Sequence[bytes | None] | npt.NDArray[Any],
) -> Scores:
    """Cosine similarity of the query to each vector; NaN where a candidate has none, and
    everywhere if the query has none (a zero vector: an embedder that found nothing to
    embed in "?!" or an emoji, where every cosine was 0 and vector mode ranked all alike).

    Vectors are the stored bytes (or a matrix of unit rows); the query is a unit vector.
    """
    q = (
        unpack_vectors([query], len(query) // VECTOR_DTYPE.itemsize)[0]
        if isinstance(query, bytes)
        else np.asarray(query, dtype=np.float32)
    )
    if not q.any():
        return np.full(len(vectors), np.nan)
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


def recency_scores(
    positions: Sequence[float],
    *,
    half_life: float | None = None,
    then: Sequence[float] | None = None,
) -> Scores:
    """Recency in [0, 1], 1 for the newest candidate.

    With `half_life`, exponential decay by distance from the newest; without it, linear in
    the candidates' rank by position, ties of position ranked by `then` (distinct numbers:
    across sessions, where the items of one write share their time, the row ids, in the
    order written), or else sharing a score.

    >>> recency_scores([3, 1, 2]).tolist()
    [1.0, 0.0, 0.5]
    >>> recency_scores([5, 5, 4], then=[8, 7, 1]).tolist()
    [1.0, 0.5, 0.0]
    """
    pos = np.asarray(positions, dtype=np.float64)
    if pos.size == 0:
        return pos
    if half_life is not None:
        return np.asarray(0.5 ** ((pos.max() - pos) / half_life), dtype=np.float64)
    if then is not None and pos.size > 1:
        order = np.lexsort((np.asarray(then), pos))
        ranks = np.empty(pos.size, dtype=np.float64)
        ranks[order] = np.arange(pos.size)
        return ranks / (pos.size - 1)
    distinct, rank = np.unique(pos, return_inverse=True)
    if len(distinct) == 1:
        return np.ones_like(pos)
    return np.asarray(rank / (len(distinct) - 1), dtype=np.float64)
