"""Search over stored items: gather candidates, score each signal, fuse; and reindexing.

The repository supplies the numbers (candidates with their packed terms and vectors), the
codec opens what is sealed, and `agents_sqlalchemy.search` scores and fuses them.

Example::

    searcher = Searcher(repository, keyring, HashingEmbedder(), background)
    hits = await searcher.search(Scope(user_id="alice"), "disk full", limit=5, mode="hybrid")
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable
from itertools import islice
from typing import Any

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
    check_query,
    cosine_scores,
    embed_documents,
    embed_query,
    fuse,
    fusion_weight,
    item_text,
    literal_terms,
    pack_vectors,
    postings,
    recency_scores,
    term_counts,
)
from ..types import Appended, Candidates, IndexEntry, Scope, SessionKey, StoredItem
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
        # What the worker is to index next, by session hash (see `written`).
        self._handed: dict[str, list[Appended]] = {}
        self._since: dict[str, int] = {}
        self._pending_lock = threading.Lock()
        self._background = background

    def written(self, appended: Appended) -> None:
        """Items were added to a session: index them soon, off the caller's path.

        Items handed over with their JSON are indexed as they are, without reading them
        back; otherwise the session is read from the first new number on (from its start
        if that is not known), so that the pass costs what the new items do, not what the
        session holds. Anything else a search catches up.
        """
        key = appended.key
        with self._pending_lock:
            if appended.payloads is not None:
                self._handed.setdefault(key.hash, []).append(appended)
            else:
                since = self._since.get(key.hash, appended.first_seq)
                self._since[key.hash] = min(since, appended.first_seq)
        self._background.submit(("index", key.hash), lambda: self._index_written(key))

    async def _index_written(self, key: SessionKey) -> None:
        with self._pending_lock:
            handed = self._handed.pop(key.hash, [])
            since = self._since.pop(key.hash, None)
        if handed:
            await self._index_handed(key, handed)
        if since is not None:
            await self.catch_up(Scope(session=key), since_seq=since)

    async def _index_handed(self, key: SessionKey, handed: list[Appended]) -> None:
        """Index items handed over by a plaintext store's appends, a batch at a time (only
        that batch's objects at once: fewer for the garbage collector to move up)."""
        codec = await self._keyring.ready()
        places = (
            (batch.session_pk, StoredItem(batch.first_seq + i, payload))
            for batch in handed
            if batch.session_pk is not None and batch.payloads is not None
            for i, payload in enumerate(batch.payloads)
        )
        async with holding(self._catching_up):
            while chunk := list(islice(places, CATCH_UP_BATCH)):
                entries = await self.index(codec.items(key, [item for _, item in chunk]), codec)
                await self._repository.replace_index(
                    [
                        (session_pk, item.seq, codec.reindexed(key, item, entry))
                        for (session_pk, item), entry in zip(chunk, entries, strict=True)
                    ]
                )

    async def index(self, items: list[Any], codec: Codec) -> list[IndexEntry]:
        """Packed terms and a vector per item (an item with no text: no terms, no vector).

        The batch's terms come from the codec's `Vocabulary` at once, with its term ids;
        the hashing embedder hashes those very terms. A sealed codec forgets its vocabulary
        with its keys, after a removal.
        """
        embedder = self.embedder
        texts = [item_text(item) for item in items]
        table = codec.vocabulary.table(texts)
        if isinstance(embedder, HashingEmbedder):
            present = [i for i, text in enumerate(texts) if text]
            blobs = pack_vectors(embedder.embed_table(table)[present])
        else:
            blobs = await embed_documents(embedder, [text for text in texts if text])
        vectors = iter(blobs)
        return [
            IndexEntry(terms, next(vectors) if text else None, embedder.model_id)
            for text, terms in zip(texts, table.packed(codec.term_id), strict=True)
        ]

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
        codec = await self._keyring.ready()
        if not query.strip():
            return []
        await self._background.flush()  # what this process wrote is indexed
        candidates = await self._candidates(scope, mode, codec)
        if not len(candidates):
            return []
        keyword = None
        if mode != "vector":
            query_ids = list(codec.term_ids(term_counts(query)))
            size = len(candidates)
            found = postings(candidates.terms, query_ids)
            keyword = bm25_postings(*found, size=size, doc_count=size)
        vector = None
        if mode != "keyword":
            query_vector = await embed_query(self.embedder, query)
            vector = cosine_scores(query_vector, await self._vectors(codec, candidates))
        hits = fuse(
            range(len(candidates)),
            vector=vector,
            keyword=keyword,
            recency=recency_scores(candidates.positions),
            mode=mode,
            limit=limit,
            vector_weight=fusion_weight(self.embedder),
            literal=bool(literal_terms(query)),
            min_score=min_score,
        )
        rows = await self._repository.hit_rows([candidates.item_pks[hit.key] for hit in hits])
        results: list[SearchHit] = []
        for hit in hits:
            # An item removed since the candidates were read is not found, and its id may
            # name another item by now (SQLite gives a deleted last row's id again): a row
            # counts only at the place it was ranked for.
            i = hit.key
            row = rows.get(candidates.item_pks[i])
            ranked_at = (candidates.session_hashes[i], candidates.seqs[i])
            if row is None or (row[0].hash, row[1].seq) != ranked_at:
                continue
            key, stored = row
            results.append(
                SearchHit(
                    session_id=key.session_id,
                    seq=stored.seq,
                    item=codec.item(key, stored),
                    score=hit.score,
                    vector=hit.vector,
                    keyword=hit.keyword,
                    recency=hit.recency,
                )
            )
        return results

    async def _candidates(self, scope: Scope, mode: SearchMode, codec: Codec) -> Candidates:
        """The scope's candidates, once what others left unindexed is indexed (at most
        SEARCH_CATCH_UP items by one search): fewer items indexed than live in scope means
        some are missing; the read is then done again."""
        read = functools.partial(
            self._repository.candidates,
            scope,
            self.embedder.model_id,
            vectors=mode != "keyword" and not codec.caches_vectors,
            terms=mode != "vector",
        )
        live, (candidates, indexed) = await asyncio.gather(
            self._repository.count_live(scope), read()
        )
        if indexed >= live:
            return candidates
        batch = min(CATCH_UP_BATCH, SEARCH_CATCH_UP)
        await self.catch_up(scope, batch_size=batch, limit=SEARCH_CATCH_UP)
        return (await read())[0]

    async def _vectors(self, codec: Codec, candidates: Candidates) -> list[bytes | None]:
        """The candidates' plain vectors of the embedder's model (None: it has none): opened
        from memory, or read and opened where missing (None also: the item is gone, even if
        its id names another item by now)."""
        model_id = self.embedder.model_id
        vectors = codec.vectors(candidates, model_id)
        missing = [i for i, v in enumerate(vectors) if v is None and candidates.has_vector[i]]
        if missing:
            pks = [candidates.item_pks[i] for i in missing]
            stored = await self._repository.vectors(pks, model_id)
            keys = [(pk, candidates.wrapped_keys[i]) for i, pk in zip(missing, pks, strict=True)]
            read = candidates.take(missing, [stored.get(key) for key in keys])
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
        since_seq: int = 0,
    ) -> int:
        """Index the live items in scope that have no vector of the embedder yet (in a
        session scope, from `since_seq` on: items this store just wrote, read as they are).

        One transaction per batch; an item removed meanwhile is skipped. With `limit`,
        stops after about that many (a search does not turn into a reindex). Returns how
        many items were gone over.
        """
        codec = await self._keyring.ready()
        repository, model_id = self._repository, self.embedder.model_id
        async with holding(self._catching_up):  # one indexer per store at a time
            done, after = 0, max(since_seq - 1, 0)  # in a session a number, else a pk
            total = await repository.count_unindexed(model_id, scope) if progress else 0
            if progress is not None:
                progress(done, total)
            new = scope.session is not None and since_seq > 0  # what this store just wrote
            while batch := await repository.unindexed(model_id, batch_size, after, scope, new=new):
                after = batch[-1].stored.seq if scope.session is not None else batch[-1].item_pk
                entries = await self.index(
                    [codec.item(row.key, row.stored) for row in batch], codec
                )
                await repository.replace_index(
                    [
                        (row.session_pk, row.stored.seq, codec.reindexed(row.key, row.stored, e))
                        for row, e in zip(batch, entries, strict=True)
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
                if len(batch) < batch_size:  # the last: no need to look again
                    break
        return done
