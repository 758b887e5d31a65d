"""Search over stored items: gather candidates, score each signal, fuse.

The repository supplies the numbers (candidates with their packed terms and vectors), the
codec opens what is sealed, and `agents_sqlalchemy.search` scores and fuses them. Items
missing from the index are indexed first, by the `Indexer`.

Example::

    searcher = Searcher(SearchIndex(schema), opener, indexer, background)
    hits = await searcher.search(Scope(user_id="alice"), "disk full", limit=5, mode="hybrid")
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..aio import off_loop
from ..codec import Codec, MissingOwnerKeys
from ..errors import ConfigurationError, EmbedderError, SearchError
from ..records import SearchHit
from ..repository import SearchIndex
from ..search import (
    SEARCH_MODES,
    Embedder,
    SearchMode,
    blank,
    bm25_postings,
    calibrate,
    check_query,
    check_real,
    cosine_scores,
    embed_query,
    fuse,
    named_terms,
    postings,
    recency_scores,
    term_counts,
)
from ..telemetry import current
from ..types import Candidates, Scope, ScopeStamp
from ..validation import check_range
from .background import Background
from .indexer import CATCH_UP_BATCH, Indexer
from .opener import Opener
from .owners import Owners

T = TypeVar("T")
# Candidates ranked (and sealed vectors opened) in a worker thread beyond this many (below,
# the hop costs more).
CANDIDATES_OFF_LOOP = 2000
# At most this many are indexed by one search: more means the embedder changed (reindex).
SEARCH_CATCH_UP = 2000

logger = logging.getLogger("agents_sqlalchemy")


class Searcher:
    """Ranks a scope's items for a query, with the embedder its `Indexer` indexes for."""

    def __init__(
        self,
        index: SearchIndex,
        opener: Opener,
        owners: Owners,
        indexer: Indexer,
        background: Background,
    ) -> None:
        self._index = index
        self._opener = opener
        self._owners = owners
        self._indexer = indexer
        self._background = background

    @property
    def embedder(self) -> Embedder:
        """The embedder the indexer indexes with (the database's model, see `Indexer`)."""
        return self._indexer.embedder

    async def search(
        self, scope: Scope, query: str, limit: int, mode: SearchMode, min_score: float | None = None
    ) -> list[SearchHit]:
        """The items in scope that best answer `query`, best first.

        Candidates are the live items in scope with an index row: ranked by their vector of
        the embedder's model and their packed terms (items not reindexed for this model yet
        are found by keyword only).
        """
        if mode not in SEARCH_MODES:
            raise ConfigurationError(f"mode must be one of {SEARCH_MODES}, got {mode!r}")
        check_range("limit", limit, 1, 1000)
        check_query(query)
        if min_score is not None:
            min_score = check_real("min_score", min_score)
        codec = await self._opener.ready()
        if blank(query):  # spaces, controls, zero-width characters: nothing asked
            return []
        if not await self._indexer.model_agrees():  # vectors of another model: keywords only
            if mode == "vector":
                raise SearchError(
                    "the database was indexed with another embedding model than this store's: "
                    "run store.reindex() first, or open the store with the database's embedder"
                )
            mode = "keyword"
        await self._background.flush()  # what this process wrote is indexed
        since = codec.removals  # a removal after the fetch: what it opens is not kept
        candidates = await self._candidates(scope, mode, codec)
        # Across sessions a position is a time, shared by the items of one write: the
        # order they were written in (their row ids) ranks those.
        written_order = candidates.item_pks if scope.session is None else None
        if (operation := current()) is not None:
            operation.candidates(len(candidates))
        # The query's vector even where nothing is indexed: an embedder that cannot embed it
        # raises here (an API key missing), where it failed the indexing too, silently.
        query_vector = None if mode == "keyword" else await embed_query(self.embedder, query)
        if not len(candidates):
            return []
        scored: tuple[Any, list[bytes | None]] | None = None  # the query's vector, the items'
        if query_vector is not None:
            scored = (query_vector, await self._vectors(codec, candidates, since))
        weight = floor = None  # hybrid: the embedder's, as measured (`calibrate`)
        if mode == "hybrid":
            calibration = await calibrate(self.embedder)
            weight, floor = calibration.weight, calibration.floor

        def rank() -> list[Any]:
            nonlocal scored
            keyword, literal = None, False
            if mode != "vector":
                query_ids = list(codec.term_ids(term_counts(query)))
                size = len(candidates)
                found = postings(candidates.terms, query_ids)
                keyword = bm25_postings(*found, size=size, doc_count=size)
                # The query names identifiers or names some candidate holds (`fuse`).
                named = set(codec.term_ids(dict.fromkeys(named_terms(query), 1)))
                literal = any(query_ids[t] in named for t in set(found[1].tolist()))
            vector = None if scored is None else cosine_scores(*scored)
            scored = None  # the vectors are freed here, off the loop when ranked off it
            return fuse(
                range(len(candidates)),
                vector=vector,
                keyword=keyword,
                recency=recency_scores(candidates.positions, then=written_order),
                mode=mode,
                limit=limit,
                vector_weight=weight,
                vector_floor=floor,
                literal=literal,
                min_score=min_score,
            )

        # Many candidates are ranked in a worker thread, so that the event loop stays free.
        hits = await off_loop(len(candidates), rank, past=CANDIDATES_OFF_LOOP)
        rows = await self._index.hit_rows([candidates.item_pks[hit.key] for hit in hits], scope)
        # An item whose owner key is destroyed (its session deleted since, or in a copy of
        # the database from before an erasure) is gone too.
        kek_ids = (stored.kek_id for _, stored in rows.values())
        gone = await self._owners.load(kek_ids, erased_too=True)
        results: list[SearchHit] = []
        for hit in hits:
            # An item removed, expired or moved out of scope since the candidates were read
            # is not found, and its id may name another item by now (SQLite gives a deleted
            # last row's id again): a row counts only at the place it was ranked for.
            i = hit.key
            row = rows.get(candidates.item_pks[i])
            ranked_at = (candidates.session_hashes[i], candidates.seqs[i])
            if row is None or (row[0].hash, row[1].seq) != ranked_at or row[1].kek_id in gone:
                continue
            key, stored = row
            try:
                item = codec.item(key, stored, since)
            except MissingOwnerKeys:  # its owner key was destroyed meanwhile: it is gone
                continue
            results.append(
                SearchHit(
                    session_id=key.session_id,
                    seq=stored.seq,
                    item=item,
                    score=hit.score,
                    vector=hit.vector,
                    keyword=hit.keyword,
                    recency=hit.recency,
                )
            )
        if (operation := current()) is not None:
            operation.set(search_hits=len(results))
        return results

    async def _candidates(self, scope: Scope, mode: SearchMode, codec: Codec) -> Candidates:
        """The scope's candidates, once what others left unindexed is indexed (at most
        SEARCH_CATCH_UP items by one search): fewer items indexed than live in scope means
        some are missing; the read is then done again if the search indexed any. Only
        items up to the stamp's newest are its to index: those written since, beside
        writers that never pause, are the worker's (a search would chase them). A large
        scope's candidates come from the codec's `CandidateCache` while the stamp is
        unchanged, and with those of the items added since when that is all that changed."""
        model_id = self._indexer.indexed_as
        vectors, terms = mode != "keyword" and not codec.caches_vectors, mode != "vector"
        read = functools.partial(
            self._index.candidates, scope, model_id, vectors=vectors, terms=terms
        )
        cache, key = codec.kept, (*scope.key, model_id, vectors, terms)
        since = cache.generation  # a removal after this: what is read is not kept
        stamp_first = cache.large(key)
        if stamp_first:  # then candidates are never kept with a stamp newer than they are
            stamp = await self._index.stamp(scope)
            read = functools.partial(read, upto=stamp.newest)  # just what the stamp counts
            kept = cache.get(key, stamp)
            if kept is not None and kept[0] == stamp:
                return kept[1]
            grown = None if kept is None else await self._grown(scope, *kept, stamp, read)
            candidates, indexed = grown or await read()
        else:  # a small scope, or one not seen yet: both at once, as cheap as it gets
            stamp, (candidates, indexed) = await asyncio.gather(self._index.stamp(scope), read())
        missing = indexed < stamp.live and not self._indexer.reindexing
        if missing and await self._catch_up(scope, stamp.newest):
            candidates, indexed = await read()
        if stamp_first and indexed >= stamp.live:
            cache.put(key, stamp, candidates, since)
        else:
            cache.note(key, len(candidates))
        return candidates

    async def _catch_up(self, scope: Scope, upto: int | None) -> int:
        """Index what the scope holds unindexed, up to `upto` (`Indexer.catch_up`); how many
        items that went over. An embedder that fails (a model down) fails no search: it
        ranks what is indexed, and the rest is tried again by the next."""
        batch = min(CATCH_UP_BATCH, SEARCH_CATCH_UP)
        try:
            return await self._indexer.catch_up(
                scope, batch_size=batch, limit=SEARCH_CATCH_UP, upto=upto
            )
        except EmbedderError as failure:
            logger.warning(
                "a search left items unindexed: the embedder %r failed (%s)",
                self.embedder.model_id,
                type(failure.__cause__ or failure).__name__,
            )
            return 0

    async def _grown(
        self,
        scope: Scope,
        old: ScopeStamp,
        kept: Candidates,
        stamp: ScopeStamp,
        read: Callable[..., Awaitable[tuple[Candidates, int]]],
    ) -> tuple[Candidates, int] | None:
        """The candidates `kept` under stamp `old`, then those of the items added since, if
        that is all that changed in the scope: the stamp of the items after `old`'s newest
        (up to `stamp`'s), added to `old`, comes to `stamp`, and each of them is indexed.
        Else None: the scope is read again whole. With how many are indexed, as `read`."""
        added, (newer, indexed) = await asyncio.gather(
            self._index.stamp(scope, after=old.newest, upto=stamp.newest),
            read(after=old.newest),
        )
        if old.plus(added) != stamp or indexed < added.live:
            return None
        return kept.plus(newer), stamp.live

    async def _vectors(
        self, codec: Codec, candidates: Candidates, since: int
    ) -> list[bytes | None]:
        """The candidates' plain vectors of the embedder's model (None: it has none): opened
        from memory, or read and opened where missing (None also: the item is gone, even if
        its id names another item by now), and kept unless a removal came `since`."""
        model_id = self._indexer.indexed_as
        vectors = await off_loop(
            len(candidates), codec.vectors, candidates, model_id, since, past=CANDIDATES_OFF_LOOP
        )
        missing = await off_loop(
            len(vectors), _unopened, vectors, candidates.has_vector, past=CANDIDATES_OFF_LOOP
        )
        if missing:
            pks = [candidates.item_pks[i] for i in missing]
            stored = await self._index.vectors(pks, model_id)
            gone = await self._owners.load(
                {candidates.kek_ids[i] for i in missing}, erased_too=True
            )
            read = await off_loop(
                len(missing),
                _with_stored,
                candidates,
                missing,
                stored,
                gone,
                past=CANDIDATES_OFF_LOOP,
            )
            try:
                opened = await off_loop(
                    len(read), codec.vectors, read, model_id, since, past=CANDIDATES_OFF_LOOP
                )
            except MissingOwnerKeys as destroyed:  # meanwhile, by another task of this store
                kept = [
                    None if k in destroyed.key_ids else v
                    for k, v in zip(read.kek_ids, read.vectors, strict=True)
                ]
                left = read.take(range(len(read)), kept)
                opened = await off_loop(
                    len(left), codec.vectors, left, model_id, since, past=CANDIDATES_OFF_LOOP
                )
            await off_loop(
                len(missing), _placed, vectors, missing, opened, past=CANDIDATES_OFF_LOOP
            )
        return vectors


def _placed(vectors: list[bytes | None], at: list[int], opened: list[bytes | None]) -> None:
    """Each of `opened` into `vectors`, at its place of `at`."""
    for i, vector in zip(at, opened, strict=True):
        vectors[i] = vector


def _unopened(vectors: list[bytes | None], has_vector: list[bool]) -> list[int]:
    """The places of the candidates that have a vector not opened yet."""
    return [i for i, v in enumerate(vectors) if v is None and has_vector[i]]


def _with_stored(
    candidates: Candidates,
    missing: list[int],
    stored: dict[tuple[int, bytes | None], bytes],
    gone: frozenset[str],
) -> Candidates:
    """The `missing` candidates with their stored vectors (None where the item is gone or
    its owner key was destroyed)."""
    pks, wrapped, kek_ids = candidates.item_pks, candidates.wrapped_keys, candidates.kek_ids
    found = [None if kek_ids[i] in gone else stored.get((pks[i], wrapped[i])) for i in missing]
    return candidates.take(missing, found)
