"""Search over stored items: gather candidates, score each signal, fuse; and reindexing.

The repository supplies the numbers (candidates with their vectors, term postings), the
codec opens what is sealed, and `agents_sqlalchemy.search` scores and fuses them.

Example::

    searcher = Searcher(repository, keyring, HashingEmbedder())
    hits = await searcher.search(Scope(user_id="alice"), "disk full", limit=5, mode="hybrid")
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ..aio import holding
from ..codec import Codec
from ..errors import ConfigurationError
from ..records import SearchHit
from ..repository import Repository
from ..search import (
    SEARCH_MODES,
    Embedder,
    HashingEmbedder,
    SearchMode,
    bm25_postings,
    cosine_scores,
    embed_documents,
    embed_query,
    fuse,
    fusion_weight,
    item_text,
    pack_vectors,
    recency_scores,
    term_counts,
)
from ..types import Candidates, IndexEntry, Postings, Scope, SessionKey
from ..validation import check_range
from .background import Background
from .keyring import Keyring

# Items indexed per transaction when search catches up.
CATCH_UP_BATCH = 200
# At most this many are indexed by one search: more means the embedder changed (reindex).
SEARCH_CATCH_UP = 2000

logger = logging.getLogger("agents_sqlalchemy")


class Searcher:
    """Ranks a scope's items for a query with one embedder; indexes items for it."""

    def __init__(
        self, repository: Repository, keyring: Keyring, embedder: Embedder, background: Background
    ) -> None:
        self.embedder = embedder
        self._repository = repository
        self._keyring = keyring
        self._catching_up = threading.Lock()
        self._background = background

    def written(self, key: SessionKey) -> None:
        """Items were added to this session: index them soon, off the caller's path."""
        scope = Scope(session=key)
        self._background.submit(("index", key.hash), lambda: self.catch_up(scope))

    async def index(self, items: list[Any]) -> list[IndexEntry]:
        """Term counts and a vector per item (an item with no text: no terms, no vector)."""
        embedder = self.embedder
        texts = [item_text(item) for item in items]
        counts = [term_counts(text) for text in texts]
        if isinstance(embedder, HashingEmbedder):  # it hashes the terms counted just now
            present = [c for text, c in zip(texts, counts, strict=True) if text]
            blobs = pack_vectors(embedder.embed_counts(present))
        else:
            blobs = await embed_documents(embedder, [text for text in texts if text])
        vectors = iter(blobs)
        return [
            IndexEntry(c, next(vectors) if text else None, embedder.model_id)
            for text, c in zip(texts, counts, strict=True)
        ]

    async def search(
        self, scope: Scope, query: str, limit: int, mode: SearchMode
    ) -> list[SearchHit]:
        """The items in scope that best answer `query`, best first.

        Candidates are the live items in scope with a vector of the embedder's model, plus
        those holding a query term (items not reindexed yet are found by keyword only).
        """
        if mode not in SEARCH_MODES:
            raise ConfigurationError(f"mode must be one of {SEARCH_MODES}, got {mode!r}")
        check_range("limit", limit, 1, 1000)
        codec = await self._keyring.ready()
        if not query.strip():
            return []
        await self._background.flush()  # what this process wrote is indexed ...
        await self.catch_up(scope, limit=SEARCH_CATCH_UP)  # ... and so is what others wrote
        model_id = self.embedder.model_id
        candidates = await self._repository.candidates(
            scope, model_id, vectors=mode != "keyword" and not codec.caches_vectors
        )
        with_vector = len(candidates)
        query_terms = list(codec.terms(term_counts(query))) if mode != "vector" else []
        postings = await self._repository.postings(scope, query_terms)
        index = dict(zip(candidates.item_pks, range(with_vector), strict=True))
        keyword_only = sorted(set(postings.item_pks).difference(index))
        if keyword_only:
            candidates.extend(await self._repository.positions(scope, keyword_only))
            added = range(with_vector, len(candidates))
            index.update(zip(candidates.item_pks[with_vector:], added, strict=True))
        if not len(candidates):
            return []
        vector_scores = None
        if mode != "keyword":
            vectors = await self._vectors(codec, candidates, with_vector)
            vectors += [None] * (len(candidates) - with_vector)
            vector_scores = cosine_scores(await embed_query(self.embedder, query), vectors)
        hits = fuse(
            candidates.item_pks,
            vector=vector_scores,
            keyword=_keyword_scores(postings, query_terms, index, len(candidates)),
            recency=recency_scores(candidates.positions),
            mode=mode,
            limit=limit,
            vector_weight=fusion_weight(self.embedder),
        )
        rows = await self._repository.hit_rows([hit.key for hit in hits])
        return [
            SearchHit(
                session_id=rows[hit.key][0].session_id,
                seq=rows[hit.key][1].seq,
                item=codec.item(*rows[hit.key]),
                score=hit.score,
                vector=hit.vector,
                keyword=hit.keyword,
            )
            for hit in hits
            if hit.key in rows  # an item removed since the candidates were read is not found
        ]

    async def _vectors(
        self, codec: Codec, candidates: Candidates, with_vector: int
    ) -> list[bytes | None]:
        """Plain vectors of the first `with_vector` candidates: opened from memory, or read
        and opened where missing (None: the item is gone)."""
        model_id = self.embedder.model_id
        if with_vector < len(candidates):  # keyword matches come last, without a vector
            candidates = candidates.take(range(with_vector), candidates.vectors[:with_vector])
        vectors = codec.vectors(candidates, model_id)
        missing = [i for i, vector in enumerate(vectors) if vector is None]
        if missing:
            pks = [candidates.item_pks[i] for i in missing]
            stored = await self._repository.vectors(pks, model_id)
            read = candidates.take(missing, [stored.get(pk) for pk in pks])
            for i, vector in zip(missing, codec.vectors(read, model_id), strict=True):
                vectors[i] = vector
        return vectors

    async def reindex(self, *, batch_size: int, progress: Callable[[int, int], None] | None) -> int:
        """Index every live item for the embedder; see `SessionStore.reindex`."""
        check_range("batch_size", batch_size, 1)
        await self._keyring.ready()
        await self._repository.drop_other_models(self.embedder.model_id)
        return await self.catch_up(Scope(), batch_size=batch_size, progress=progress)

    async def catch_up(
        self,
        scope: Scope,
        *,
        batch_size: int = CATCH_UP_BATCH,
        limit: int | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Index the live items in scope that have no vector of the embedder yet.

        One transaction per batch; an item removed meanwhile is skipped. With `limit`,
        stops after about that many (a search does not turn into a reindex). Returns how
        many items were gone over.
        """
        codec = await self._keyring.ready()
        repository, model_id = self._repository, self.embedder.model_id
        async with holding(self._catching_up):  # one indexer per store at a time
            done, after = 0, 0
            total = await repository.count_unindexed(model_id, scope) if progress else 0
            if progress is not None:
                progress(done, total)
            while batch := await repository.unindexed(model_id, batch_size, after, scope):
                after = batch[-1].item_pk
                entries = await self.index([codec.item(row.key, row.stored) for row in batch])
                await repository.replace_index(
                    [
                        (
                            row.item_pk,
                            row.session_pk,
                            row.stored.seq,
                            codec.reindexed(row.key, row.stored, entry),
                        )
                        for row, entry in zip(batch, entries, strict=True)
                    ]
                )
                done += len(batch)
                if progress is not None:
                    progress(done, max(total, done))
                if limit is not None and done >= limit:
                    logger.warning(
                        "search indexed %d items for %s and left the rest of its scope to "
                        "keyword search: run reindex() (agents-sqlalchemy reindex) after "
                        "changing the embedder",
                        done,
                        model_id,
                    )
                    break
        return done


def _keyword_scores(
    postings: Postings, query_terms: list[str], index: dict[int, int], size: int
) -> Any:
    """BM25 coverage of each candidate (by its place in `index`), or None when no term
    matched."""
    if not postings.item_pks:
        return None
    term_index = {term: i for i, term in enumerate(query_terms)}
    at = np.fromiter((index.get(pk, -1) for pk in postings.item_pks), np.intp)
    terms = np.fromiter((term_index[term] for term in postings.terms), np.intp)
    live = at >= 0  # postings of expired items are left out
    return bm25_postings(
        at[live], terms[live], np.asarray(postings.counts)[live], size=size, doc_count=size
    )
