"""Indexing items for search: what appends hand over, what a search finds missing, and
reindexing for a new embedder.

Each item gets its packed terms and, when it has text, a vector of the embedder's model;
the work runs off the caller's path (`Background`), or by a search that finds items
missing from the index.

Example::

    indexer = Indexer(SearchIndex(schema), opener, HashingEmbedder(), background)
    indexer.written(appended)                  # index these soon, on the worker thread
    await indexer.reindex(batch_size=200, progress=None)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from itertools import islice
from typing import Any

from ..aio import FairLock, off_loop
from ..codec import Codec, MissingOwnerKeys
from ..errors import EmbedderError, OwnerKeyError, SearchModelWarning, warn
from ..repository import SearchIndex
from ..search import (
    MAX_INDEXED_CHARS,
    MAX_TEXT_CHARS,
    Embedder,
    HashingEmbedder,
    builtin_indexing_as,
    call_failed,
    embed_alone,
    embed_documents,
    index_id,
    item_text,
    pack_vectors,
)
from ..telemetry import current
from ..types import Appended, IndexEntry, NewItem, Scope, SessionKey, StoredItem, Unindexed
from ..validation import check_range
from .background import Background, on_worker_thread
from .opener import Opener
from .owners import Owners

# Items indexed per transaction when search catches up ...
CATCH_UP_BATCH = 200
# ... and about how many of their stored bytes one batch reads: batches start at
# `FIRST_BATCH` items and grow towards the batch size while their items stay light, and
# shrink when they are heavy (a tool's output may be megabytes each).
CATCH_UP_BYTES = 32 * 2**20
FIRST_BATCH = 16
#: Characters of text past which a batch is tokenised in a worker thread (about 5 ms of
#: work on the event loop; 100,000 took 38 ms).
OFF_LOOP_CHARS = 20_000
#: Items past which a batch indexed from the app's event loop (a reindex, a search's catch
#: up) is opened, hashed, embedded by the built-in model and sealed in a worker thread: a
#: sealed reindex's batch of 200 took 14 ms there (decrypt 3, terms and vectors 8, seal 3).
OFF_LOOP_ITEMS = 16

logger = logging.getLogger("agents_sqlalchemy")


class Indexer:
    """Indexes a store's items for one embedder: packed terms and a vector per item."""

    def __init__(
        self,
        index: SearchIndex,
        opener: Opener,
        owners: Owners,
        embedder: Embedder,
        background: Background,
        *,
        chosen: bool = True,
    ) -> None:
        self.embedder = embedder
        # Whether the embedder was named (not the default): a default gives way to the
        # database's model; see `model_agrees`.
        self._chosen = chosen
        self._agrees: bool | None = None
        self._warned: str | None = None  # the database's model it last warned about
        self._checking = FairLock()
        self._index = index
        self._opener = opener
        self._owners = owners
        self._catching_up = FairLock()
        self._reindexing = 0  # how many `reindex` calls run
        # What the worker is to index next, by session hash (see `written`).
        self._handed: dict[str, list[Appended]] = {}
        self._since: dict[str, int] = {}
        self._pending_lock = threading.Lock()
        self._background = background

    @property
    def indexed_as(self) -> str:
        """What this store's index rows are stored under: its embedder's model and the
        terms' version (`index_id`)."""
        return index_id(self.embedder.model_id)

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

    async def model_agrees(self) -> bool:
        """Whether this store indexes with the model the database was indexed with.

        A database keeps its model until `reindex`: a store given no embedder takes the
        built-in one that model belongs to, where it loads; otherwise it warns
        (`SearchModelWarning`, naming both models, once per model met) and indexes nothing
        with its own. Checked once while it agrees: a reindex elsewhere that makes another
        model the database's is met by the next indexing, which writes nothing then and
        asks again (`_replaced`); while it does not agree, at every call (a reindex
        elsewhere may have made the database's model its own).
        """
        if not self._agrees:
            async with self._checking:
                if not self._agrees:
                    self._agrees = await self._agree()
        return self._agrees

    async def _replaced(self, rows: list[tuple[int, int, NewItem]], moved: list[int]) -> bool:
        """`SearchIndex.replace_index` of `rows`, only under the database's model (a reindex
        makes its own the one, moving the items `moved`); where it is another, nothing is
        written, and the store looks again which model it indexes with (`model_agrees`):
        whether the rows went in."""
        only_as = None if self.reindexing else self.indexed_as
        if await self._index.replace_index(rows, moved=moved, only_as=only_as):
            return True
        self._agrees = None
        await self.model_agrees()
        return False

    async def _agree(self) -> bool:
        await self._opener.ready()
        indexed = await self._index.latest_model_id()
        if indexed is None or indexed == self.indexed_as:
            return True
        if not self._chosen and (embedder := builtin_indexing_as(indexed)) is not None:
            self.embedder = embedder
            return True
        if indexed != self._warned:
            self._warned = indexed
            warn(
                f"the database was indexed with the embedding model {indexed!r}, this store's "
                f"is {self.indexed_as!r}: until `store.reindex()` (or `agents-sqlalchemy "
                "reindex --embedder NAME`) re-indexes every item with it, this store searches "
                "by keyword only and indexes nothing (open it with the database's embedder "
                "instead)",
                SearchModelWarning,
            )
        return False

    async def _index_written(self, key: SessionKey) -> None:
        with self._pending_lock:
            handed = self._handed.pop(key.hash, [])
            since = self._since.pop(key.hash, None)
        if not await self.model_agrees():
            return  # left to a store with the database's model, or to a reindex
        if handed:
            await self._index_handed(key, handed)
        if since is not None:
            await self.catch_up(Scope(session=key), since_seq=since)

    async def _index_handed(self, key: SessionKey, handed: list[Appended]) -> None:
        """Index items handed over by a plaintext store's appends, a batch at a time (only
        that batch's objects at once: fewer for the garbage collector to move up)."""
        codec = await self._opener.ready()
        places = (
            (batch.session_pk, StoredItem(batch.first_seq + i, payload))
            for batch in handed
            if batch.session_pk is not None and batch.payloads is not None
            for i, payload in enumerate(batch.payloads)
        )
        async with self._catching_up:
            while chunk := list(islice(places, CATCH_UP_BATCH)):
                items = codec.items(key, [item for _, item in chunk], counted=False)
                entries = await self.index(items, codec)
                rows = [
                    (session_pk, item.seq, codec.reindexed(key, item, entry))
                    for (session_pk, item), entry in zip(chunk, entries, strict=True)
                ]
                if not await self._replaced(rows, []):
                    return  # a store that switches model: a search catches up

    async def index(self, items: list[Any], codec: Codec) -> list[IndexEntry]:
        """Packed terms and a vector per item (an item with no text: no terms, no vector).

        The batch's terms come from the codec's `Vocabulary` at once, with its term ids,
        from up to `MAX_INDEXED_CHARS` of each item's text; the hashing embedder hashes
        those very terms, another embedder is given the first `MAX_TEXT_CHARS`. A sealed
        codec forgets its vocabulary with its keys, after a removal.
        """
        embedder, indexed_as = self.embedder, self.indexed_as
        if (operation := current()) is not None:
            operation.indexed(len(items))
        texts = [item_text(item, max_chars=MAX_INDEXED_CHARS) for item in items]
        past = _off_loop_past(len(texts), heavy=sum(map(len, texts)) > OFF_LOOP_CHARS)
        hashing = embedder if isinstance(embedder, HashingEmbedder) else None

        def hashed() -> tuple[list[bytes | None], Sequence[bytes | None]]:
            """The terms packed, and the built-in model's vectors (its are hashed terms)."""
            table = codec.vocabulary.table(texts)
            blobs: Sequence[bytes | None] = []
            if hashing is not None:
                present = [i for i, text in enumerate(texts) if text]
                blobs = pack_vectors(hashing.embed_table(table)[present])
            return table.packed(codec.term_id), blobs

        packed, blobs = await off_loop(len(texts), hashed, past=past)
        if hashing is None:
            blobs = await self._embedded([text[:MAX_TEXT_CHARS] for text in texts if text])
        vectors = iter(blobs)
        return [
            IndexEntry(terms, next(vectors) if text else None, indexed_as)
            for text, terms in zip(texts, packed, strict=True)
        ]

    async def _embedded(self, texts: list[str]) -> list[bytes | None]:
        """The embedder's vectors of `texts`. Where what it returned for the batch is no
        vector (a NaN, the wrong shape), each text is tried alone, and one it returns no
        vector for gets none: its item is found by keyword, and one text the model cannot
        take stops neither the indexing of the others nor every search after. A call that
        fails (a model down, a rate limit, a timeout) is raised, for the batch or any text
        alone: nothing is indexed, and it is tried again later."""
        try:
            return list(await embed_documents(self.embedder, texts))
        except EmbedderError as failure:
            if len(texts) < 2 or call_failed(failure):
                raise
            vectors = await embed_alone(self.embedder, texts)
            alone = [None if v is None else pack_vectors(v.reshape(1, -1))[0] for v in vectors]
            failed = alone.count(None)
            if failed == len(texts):
                raise failure
            logger.warning(
                "the embedder %r failed on %d of %d items (%s): they are indexed without a "
                "vector, and found by keyword",
                self.embedder.model_id,
                failed,
                len(texts),
                type(failure.__cause__ or failure).__name__,  # a model's message may quote
            )
            return alone

    async def reindex(self, *, batch_size: int, progress: Callable[[int, int], None] | None) -> int:
        """Index every live item for the embedder; see `SessionStore.reindex`."""
        check_range("batch_size", batch_size, 1)
        await self._opener.ready()
        self._agrees = True  # the database's model is this store's from now on
        self._reindexing += 1
        try:
            done = await self.catch_up(Scope(), batch_size=batch_size, progress=progress)
        finally:
            self._reindexing -= 1
        await self._index.drop_other_models(self.indexed_as)  # of items no longer live
        return done

    @property
    def reindexing(self) -> bool:
        """Whether this store's `reindex` runs: every live item has a row, of the old model
        or of the new, and the reindex indexes the rest (a search need not)."""
        return self._reindexing > 0

    async def catch_up(
        self,
        scope: Scope,
        *,
        batch_size: int = CATCH_UP_BATCH,
        limit: int | None = None,
        progress: Callable[[int, int], None] | None = None,
        since_seq: int = 0,
        upto: int | None = None,
    ) -> int:
        """Index the live items in scope that have no vector of the embedder yet (in a
        session scope, from `since_seq` on: items this store just wrote, read as they are;
        with `upto`, those whose pk is at most that).

        One transaction per batch (`_next_size`: fewer items while they are heavy); an item
        removed meanwhile is skipped. With `limit`, stops after about that many (a search
        does not turn into a reindex). Returns how many items were gone over.
        """
        codec = await self._opener.ready()
        if not await self.model_agrees():
            return 0
        index, model_id = self._index, self.indexed_as
        done, after = 0, max(since_seq - 1, 0)  # in a session a number, else a pk
        total = await index.count_unindexed(model_id, scope) if progress else 0
        if progress is not None:
            progress(done, total)
        new = scope.session is not None and since_seq > 0  # what this store just wrote
        moving = self.reindexing  # a reindex moves each item from its old row
        size = min(batch_size, FIRST_BATCH)
        while True:
            # One indexer per store at a time, a batch at a time: the writes' indexing and
            # a search's go on between a reindex's batches.
            async with self._catching_up:
                removals = codec.removals  # before the read (`Codec.items`)
                read = await index.unindexed(model_id, size, after, scope, new=new, upto=upto)
                if not read:
                    break
                after = read[-1].stored.seq if scope.session is not None else read[-1].item_pk
                await self._owners.load((row.stored.kek_id for row in read), erased_too=True)
                past = _off_loop_past(len(read))
                batch, items = await off_loop(
                    len(read), opened_rows, codec, read, removals, past=past
                )
                entries = await self.index(items, codec)
                moved = [row.item_pk for row in batch] if moving else []
                rows = await off_loop(len(batch), reindexed_rows, codec, batch, entries, past=past)
                if not await self._replaced(rows, moved):
                    break
            done += len(batch)
            if progress is not None:
                progress(done, max(total, done))
            if len(read) < size:  # the last: no need to look again
                break
            if limit is not None and done >= limit:
                if not await index.unindexed(model_id, 1, after, scope, new=new, upto=upto):
                    break  # nothing left after all: nothing to say
                logger.warning(
                    "search indexed %d items for %s and stopped there: the rest of its "
                    "scope is not indexed, and no search finds it until it is (after a "
                    "load through a store with search=False, or a change of embedder, "
                    "run reindex() or agents-sqlalchemy reindex; else writes outpace the "
                    "indexer, which catches up once they pause)",
                    done,
                    model_id,
                )
                break
            size = _next_size(read, size, batch_size)
            if limit is not None:  # at most `limit` in all
                size = min(size, limit - done)
        return done


def _off_loop_past(count: int, *, heavy: bool = False) -> int:
    """`off_loop`'s `past` for an indexing batch of `count` items: from the app's loop,
    `OFF_LOOP_ITEMS` (none if its text is `heavy`); on the store's worker thread, whose loop
    waits on nothing else, all of them (no hop)."""
    if on_worker_thread():
        return count
    return 0 if heavy else OFF_LOOP_ITEMS


def _next_size(batch: Sequence[Unindexed], size: int, most: int) -> int:
    """How many items the next catch-up batch asks for: twice as many while `batch`'s
    items are light, fewer when they weigh more than `CATCH_UP_BYTES`, at most `most`."""
    weight = sum(len(row.stored.body or b"") for row in batch)
    return max(1, min(most, 2 * size, size * CATCH_UP_BYTES // max(weight, 1)))


def reindexed_rows(
    codec: Codec, batch: Sequence[Unindexed], entries: Sequence[IndexEntry]
) -> list[tuple[int, int, NewItem]]:
    """The index rows of `batch` (session row, place, row), for `SearchIndex.replace_index`;
    an item whose owner key was destroyed while it was being indexed (its session deleted,
    its owner erased) is gone, and left out."""
    rows = []
    for row, entry in zip(batch, entries, strict=True):
        try:
            rows.append(
                (row.session_pk, row.stored.seq, codec.reindexed(row.key, row.stored, entry))
            )
        except OwnerKeyError:
            continue
    return rows


def opened_rows(
    codec: Codec, batch: Sequence[Unindexed], since: int | None = None
) -> tuple[list[Unindexed], list[Any]]:
    """The rows of `batch` that still open, with their items: one whose owner key was
    destroyed since it was read (its session deleted, its owner erased) is gone. `since`:
    as for `Codec.items`."""
    kept, items = [], []
    for row in batch:
        try:
            items.append(codec.item(row.key, row.stored, since))
        except MissingOwnerKeys:
            continue
        kept.append(row)
    return kept, items
