"""An in-memory index: the reference for what a repository stores and supplies per query.

It keeps, per item, exactly the rows the SQL tables keep (`{term: count}` and one vector),
and answers a query with the same inputs the repository computes in SQL. It serves the
evaluation and the tests, and small apps that need no database.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .embedders import Embedder, embed_documents, embed_query
from .ranking import DEFAULT_PARAMS, CorpusStats, Hit, RankParams, SearchMode, rank
from .text import item_text, term_counts

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class IndexedItem:
    """What the index keeps of one item: the terms table's rows and the embeddings row."""

    position: float
    terms: Mapping[str, int]
    length: int
    vector: bytes | None


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

    async def add(self, items: Sequence[tuple[K, Mapping[str, Any]]]) -> None:
        """Index SDK items in order (later ones are newer); items without text are skipped."""
        texts = [(key, item_text(item)) for key, item in items]
        texts = [(key, text) for key, text in texts if text]
        vectors: list[bytes | None] = [None] * len(texts)
        if self.embedder is not None and texts:
            vectors = list(await embed_documents(self.embedder, [t for _, t in texts]))
        for (key, text), vector in zip(texts, vectors, strict=True):
            terms = term_counts(text)
            self._next_position += 1
            self.entries[key] = IndexedItem(self._next_position, terms, sum(terms.values()), vector)

    def remove(self, key: K) -> None:
        """Forget an item (its terms and vector)."""
        self.entries.pop(key, None)

    async def search(
        self,
        query: str,
        *,
        mode: SearchMode = "hybrid",
        limit: int = 5,
        params: RankParams = DEFAULT_PARAMS,
    ) -> list[Hit[K]]:
        """The best items for `query`, best first."""
        keys = list(self.entries)
        if not keys or not query.strip():
            return []
        entries = [self.entries[key] for key in keys]
        query_terms = term_counts(query)
        term_freqs: dict[K, dict[str, int]] = {}
        doc_freq = dict.fromkeys(query_terms, 0)
        for key, entry in zip(keys, entries, strict=True):
            found = {t: entry.terms[t] for t in query_terms if t in entry.terms}
            if found:
                term_freqs[key] = found
                for t in found:
                    doc_freq[t] += 1
        indexed = [e for e in entries if e.terms]
        stats = CorpusStats(
            doc_count=len(indexed),
            doc_freq=doc_freq,
            avg_length=sum(e.length for e in indexed) / len(indexed) if indexed else None,
        )
        query_vector = None
        if self.embedder is not None and mode != "keyword":
            query_vector = await embed_query(self.embedder, query)
        return rank(
            keys,
            positions=[e.position for e in entries],
            mode=mode,
            query_vector=query_vector,
            vectors=[e.vector for e in entries],
            query_terms=query_terms,
            term_freqs=term_freqs,
            lengths={key: e.length for key, e in zip(keys, entries, strict=True)},
            stats=stats,
            params=params,
            limit=limit,
        )
