"""An in-memory index that ranks exactly as `SessionStore.search` does, for the evaluation.

It keeps per item what the store's tables keep (`{term: count}` and one vector) and turns a
query into the same inputs the store computes from SQL: the candidates are the items with a
vector plus those holding a query term; BM25 comes from `bm25_postings` over those postings
with the candidate count as the corpus size; recency from `recency_scores` over positions;
cosine from `cosine_scores`; the ranking from the library's own `fuse`, with the embedder's
calibration (`calibrate`: its weight and noise floor), and whether a candidate holds an
identifier or name of the query (`named_terms`).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from agents_sqlalchemy.search import (
    Embedder,
    Fusion,
    Hit,
    SearchMode,
    bm25_postings,
    calibrate,
    check_query,
    cosine_scores,
    embed_documents,
    embed_query,
    fuse,
    fusion_weight,
    item_text,
    named_terms,
    recency_scores,
    term_counts,
)

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class IndexedItem:
    """What the store keeps of one item: its index row: term counts and one vector."""

    position: float
    terms: Mapping[str, int]
    vector: bytes | None


@dataclass(frozen=True)
class Signals(Generic[K]):
    """One query's candidates and their raw signals, as the store hands them to `fuse`."""

    keys: list[K]
    vector: npt.NDArray[np.float64] | None
    keyword: npt.NDArray[np.float64] | None
    recency: npt.NDArray[np.float64]
    vector_weight: float
    literal: bool = False
    vector_floor: float | None = None

    def rank(
        self,
        mode: SearchMode = "hybrid",
        limit: int | None = None,
        *,
        fusion: Fusion | None = None,
        vector_weight: float | None = None,
        min_score: float | None = None,
    ) -> list[Hit[K]]:
        """The library's fusion of these signals (with other constants, if given)."""
        return fuse(
            self.keys,
            vector=self.vector,
            keyword=self.keyword,
            recency=self.recency,
            mode=mode,
            limit=limit,
            vector_weight=self.vector_weight if vector_weight is None else vector_weight,
            vector_floor=self.vector_floor,
            literal=self.literal,
            min_score=min_score,
            fusion=fusion or Fusion(),
        )


class MemoryIndex(Generic[K]):
    """Items indexed in memory, searched by vector, keyword or both.

    Example::

        index = MemoryIndex(HashingEmbedder())
        await index.add([(1, {"role": "user", "content": "the disk was full"}),
                         (2, {"role": "user", "content": "lunch plans for friday"})])
        hits = await index.search("disk full", limit=1)
        hits[0].key          # 1
    """

    def __init__(self, embedder: Embedder | None = None) -> None:
        self.embedder = embedder
        self.entries: dict[K, IndexedItem] = {}
        self._next_position = 0
        self._query_vectors: dict[str, npt.NDArray[np.float32]] = {}

    async def add(
        self,
        items: Sequence[tuple[K, Mapping[str, Any]]],
        vectors: Mapping[K, bytes] | None = None,
    ) -> None:
        """Index SDK items in order (later ones are newer); items without text are skipped.

        `vectors` (by key) reuses vectors already made by the same embedder.
        """
        texts = [(key, text) for key, item in items if (text := item_text(item))]
        made: list[bytes | None] = [None] * len(texts)
        if self.embedder is not None and texts:
            missing = [t for k, t in texts if vectors is None or k not in vectors]
            fresh = iter(await embed_documents(self.embedder, missing) if missing else [])
            made = [vectors[k] if vectors and k in vectors else next(fresh) for k, _ in texts]
        for (key, text), vector in zip(texts, made, strict=True):
            self._next_position += 1
            self.entries[key] = IndexedItem(self._next_position, term_counts(text), vector)

    def remove(self, key: K) -> None:
        """Forget an item (its terms and vector)."""
        self.entries.pop(key, None)

    async def signals(self, query: str, mode: SearchMode = "hybrid") -> Signals[K]:
        """The candidates and signals the store would compute for `query` in this scope."""
        with_vector = [k for k, e in self.entries.items() if e.vector is not None]
        query_terms = list(term_counts(query)) if mode != "vector" else []
        postings = [
            (key, t, entry.terms[term])
            for key, entry in self.entries.items()
            for t, term in enumerate(query_terms)
            if term in entry.terms
        ]
        known = set(with_vector)
        keys = with_vector + sorted({k for k, _, _ in postings} - known, key=self._order)
        where = {key: i for i, key in enumerate(keys)}
        vector = None
        if mode != "keyword" and self.embedder is not None and keys:
            vector = cosine_scores(
                await self._query_vector(query), [self.entries[k].vector for k in keys]
            )
        keyword = None
        if postings:
            keyword = bm25_postings(
                [where[k] for k, _, _ in postings],
                [t for _, t, _ in postings],
                [c for _, _, c in postings],
                size=len(keys),
                doc_count=len(keys),
            )
        positions = [self.entries[k].position for k in keys]
        weight, floor = fusion_weight(None), None
        if self.embedder is not None:
            calibration = await calibrate(self.embedder)
            weight, floor = calibration.weight, calibration.floor
        names = named_terms(query)
        literal = any(query_terms[t] in names for _, t, _ in postings)
        return Signals(keys, vector, keyword, recency_scores(positions), weight, literal, floor)

    async def search(
        self, query: str, *, mode: SearchMode = "hybrid", limit: int = 5
    ) -> list[Hit[K]]:
        """The best items for `query`, best first."""
        check_query(query)
        if not self.entries or not query.strip():
            return []
        return (await self.signals(query, mode)).rank(mode, limit)

    def _order(self, key: K) -> float:
        return self.entries[key].position

    async def _query_vector(self, query: str) -> npt.NDArray[np.float32]:
        assert self.embedder is not None
        if query not in self._query_vectors:
            self._query_vectors[query] = await embed_query(self.embedder, query)
        return self._query_vectors[query]
