"""Search through the store, end to end: on SQLite and PostgreSQL, plaintext and encrypted.

What issue 6 asks of the wiring: the example with the real offline model, the plain-text
projection, an index that follows the items (pop, clear, TTL and purge, delete, compaction),
a model change and `reindex`, search across one user's sessions, the three modes, nothing in
plain text on disk in encrypted mode, and a clear error when search is off.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import threading
import time
import warnings
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
from agents.memory import OpenAIResponsesCompactionSession
from sqlalchemy.engine import make_url

from agents_sqlalchemy import (
    ConfigurationError,
    HashingEmbedder,
    QueryTooLongError,
    SearchError,
    SearchModelWarning,
    SessionStore,
    TableNames,
)
from agents_sqlalchemy import codec as codec_module
from agents_sqlalchemy.repository import SearchIndex
from agents_sqlalchemy.repository import search as repository_search
from agents_sqlalchemy.search import (
    MAX_QUERY_CHARS,
    Embedder,
    EmbedderError,
    Model2VecEmbedder,
    embed_documents,
    index_id,
    item_text,
    pack_terms,
    term_counts,
    term_id,
)
from agents_sqlalchemy.search.postings import TERM_DTYPE
from agents_sqlalchemy.search.text import MAX_INDEXED_CHARS
from agents_sqlalchemy.search.vocabulary import Vocabulary
from agents_sqlalchemy.services import background as background_module
from agents_sqlalchemy.services import indexer as indexer_module
from agents_sqlalchemy.services.indexer import reindexed_rows
from agents_sqlalchemy.types import Scope, ScopeStamp, SessionKey

from .search_eval.memory_index import MemoryIndex
from .search_eval.queries import QUERIES
from .search_eval.transcripts import conversations
from .support.clock import travel
from .support.items import ALL, FUNCTION_CALL, MULTIPART, REASONING, message
from .support.tables import execute, raw_rows

try:  # the openai package's HTTP client: httpx, or its successor httpx2
    import httpx2 as httpx
except ImportError:  # pragma: no cover - depends on the installed openai
    import httpx  # type: ignore[no-redef,import-not-found,unused-ignore]

ITEMS, INDEX = "agents_sqlalchemy_items", "agents_sqlalchemy_search_index"
DEPLOY = message("the deployment failed because the disk was full")
LUNCH = message("lunch plans for friday")


@pytest.fixture(scope="module")
def model2vec() -> Model2VecEmbedder:
    """The real offline model (about a second to load), once for the module."""
    return Model2VecEmbedder.bundled()


@pytest.fixture(params=["plaintext", "encrypted"])
def key(request: pytest.FixtureRequest) -> bytes | None:
    """No key, or a raw 32-byte key (no passphrase stretching: fast)."""
    return None if request.param == "plaintext" else os.urandom(32)


async def index_rows(url: str) -> dict[str, set[int]]:
    """Item primary keys in the items table and in the search index."""
    return {
        table: {int(row[0]) for row in await raw_rows(url, f"SELECT {column} FROM {table}")}
        for table, column in ((ITEMS, "id"), (INDEX, "item_pk"))
    }


async def index_around(
    store: SessionStore, limit: int, change: Callable[[], Awaitable[None]]
) -> int:
    """An indexing pass with `change()` between its read and its write: up to `limit`
    unindexed items read and indexed, `change()`, then their index rows written. Returns
    how many items it read."""
    services = store._services
    search_index, indexer = services.search_index, services.index()
    batch = await search_index.unindexed(indexer.indexed_as, limit, 0, Scope())
    codec = await services.opener.ready()
    await services.owners.load(r.stored.kek_id for r in batch)  # none is destroyed here
    entries = await indexer.index([codec.item(r.key, r.stored) for r in batch], codec)
    await change()
    await search_index.replace_index(reindexed_rows(codec, batch, entries))
    return len(batch)


async def pk_of(url: str, session_id: str, seq: int) -> int:
    """The primary key of item `seq` of a session."""
    digest = SessionKey.of(session_id).hash
    rows = await raw_rows(
        url,
        f"SELECT i.id FROM {ITEMS} i JOIN agents_sqlalchemy_sessions s ON s.id = i.session_pk "
        f"WHERE s.session_hash = '{digest}' AND i.seq = {seq}",
    )
    return int(rows[0][0])


async def assert_index_is(store: SessionStore, url: str, live: dict[tuple[str, int], Any]) -> None:
    """Once the store has indexed what it wrote, the index holds exactly the rows of these
    live items ((session, seq) -> item): one index row per item (its vector NULL when the
    item has no text) packing each distinct term once; nothing of removed items (SQLite
    may give a removed item's id to a new one: rows are counted, not just ids)."""
    await store.flush()
    expected = {await pk_of(url, *place): item_text(item) for place, item in live.items()}
    rows = await raw_rows(url, f"SELECT item_pk, vector, terms FROM {INDEX}")
    assert sorted(int(pk) for pk, _, _ in rows) == sorted(expected)
    with_text = {int(pk) for pk, vector, _ in rows if vector is not None}
    assert with_text == {pk for pk, text in expected.items() if text}
    packed = {int(pk): len(terms or b"") // TERM_DTYPE.itemsize for pk, _, terms in rows}
    assert packed == {pk: len(term_counts(text)) for pk, text in expected.items()}
    assert len(await raw_rows(url, f"SELECT id FROM {ITEMS}")) == len(live)


def found(hits: list[Any], item: Any) -> bool:
    """Whether `item` is among the hits."""
    return any(hit.item == item for hit in hits)


def texts(hits: list[Any]) -> list[str]:
    return [hit.item["content"] for hit in hits]


# -- the issue's example, with the real model --------------------------------------------------


@pytest.mark.slow
async def test_the_issue_example(db_url: str, key: bytes | None, model2vec: Embedder) -> None:
    async with SessionStore(db_url, create_tables=True, key=key, embedder=model2vec) as store:
        session = store.session("ops", user_id="alice")
        await session.add_items([DEPLOY, LUNCH])
        [hit] = await session.search_hits("why did the release break?", limit=1)
        assert hit.item == DEPLOY and hit.session_id == "ops" and hit.seq == 1
        assert hit.vector is not None and hit.keyword == 0  # no shared word: meaning alone
        [hit] = await store.search("why did the release break?", user_id="alice", limit=1)
        assert (hit.session_id, hit.item) == ("ops", DEPLOY)
    async with SessionStore(db_url, key=key, embedder=model2vec) as store:  # from disk
        [hit] = await store.session("ops").search_hits("why did the release break?", limit=1)
        assert hit.item == DEPLOY
        [hit] = await store.session("ops").search_hits("what are we doing for lunch?", limit=1)
        assert hit.item == LUNCH


# -- what is indexed -------------------------------------------------------------------------


async def test_only_a_text_projection_is_indexed_items_stay_verbatim(
    db_url: str, key: bytes | None
) -> None:
    async with SessionStore(db_url, create_tables=True, key=key, search=True) as store:
        session = store.session("s")
        await session.add_items(ALL)
        assert await session.get_items() == ALL  # stored verbatim
        [hit] = await session.search_hits("lookup_weather", limit=1, mode="keyword")
        assert hit.item == FUNCTION_CALL  # the tool name ...
        [hit] = await session.search_hits("metric units", limit=1, mode="keyword")
        assert hit.item == FUNCTION_CALL  # ... and its arguments
        [hit] = await session.search_hits("weather tool", limit=1, mode="keyword")
        assert hit.item == REASONING  # a reasoning summary
        [hit] = await session.search_hits("picture", limit=1, mode="keyword")
        assert hit.item == MULTIPART and hit.item is not MULTIPART
        # Ids, encrypted blobs and image data are not text: never matched.
        hidden_words = ("fc_1", "msg_1", "gAAAAABo", "opaque", "blob", "iVBORw0KGgo", "auto")
        for hidden in (*hidden_words, "completed", "summary_text", "output_text"):
            assert await session.search_hits(hidden, mode="keyword") == [], hidden
    if key is None:  # the index holds the projection's terms, nothing else
        blobs = [bytes(row[0]) for row in await raw_rows(db_url, f"SELECT terms FROM {INDEX}")]
        stored = set(np.frombuffer(b"".join(blobs), dtype=TERM_DTYPE)["id"].tolist())
        expected = set().union(*(term_counts(item_text(item)) for item in ALL))
        assert stored == {term_id(term) for term in expected}
        assert term_id("opaque") not in stored


async def test_tool_data_nested_past_any_parser_is_text_and_blocks_no_search(
    sqlite_url: str,
) -> None:
    """A tool's arguments of 1,500 nested brackets (a few KB of JSON in one string) made every
    search of the store raise RecursionError, and a 5,000-digit number ValueError."""
    deep = "[" * 1500 + "]" * 1500
    calls = [
        {"type": "function_call", "call_id": "c1", "name": "parse", "arguments": deep},
        {"type": "function_call_output", "call_id": "c1", "output": "[" * 900 + "]" * 900},
        {"type": "function_call", "call_id": "c2", "name": "count", "arguments": "9" * 5000},
        {"type": "function_call_output", "call_id": "c2", "output": "done"},
    ]
    async with SessionStore(sqlite_url, create_tables=True, search=True) as store:
        session = store.session("deep")
        await session.add_items([message("weird brackets"), *calls])
        [hit] = await store.search("weird", mode="keyword")
        assert hit.item == message("weird brackets")
        [hit] = await session.search_hits("parse", mode="keyword")
        assert hit.item == calls[0]
        assert await store.reindex() == 0  # every item was indexed as it was written


# -- the index follows the items -------------------------------------------------------------


async def test_pop_clear_and_delete_take_the_index_with_them(
    db_url: str, key: bytes | None
) -> None:
    alpha, bravo, charlie = (message(f"{w} quokka") for w in ("alpha", "bravo", "charlie"))
    delta, echo = message("delta quokka"), message("echo quokka")
    async with SessionStore(db_url, create_tables=True, key=key, search=True) as store:
        one = store.session("one", user_id="alice")
        await one.add_items([alpha, bravo])
        assert await one.pop_item() == bravo
        for mode in ("hybrid", "vector", "keyword"):
            assert not found(await one.search_hits("bravo quokka", mode=mode), bravo)
            assert not found(await store.search("bravo quokka", mode=mode), bravo)
        assert [h.item for h in await one.search_hits("quokka", mode="keyword")] == [alpha]
        await assert_index_is(store, db_url, {("one", 1): alpha})

        await one.clear_session()
        assert await one.search_hits("alpha quokka") == []
        await assert_index_is(store, db_url, {})
        await one.add_items([charlie])  # the session goes on (a removed id may come back)
        assert [h.item for h in await one.search_hits("alpha quokka")] == [charlie]
        await assert_index_is(store, db_url, {("one", 3): charlie})

        await store.session("two", user_id="bob").add_items([delta])
        await store.session("three", user_id="bob").add_items([echo])
        await store.delete_session("one")
        hits = await store.search("charlie quokka")
        assert {h.session_id for h in hits} == {"two", "three"} and not found(hits, charlie)
        await assert_index_is(store, db_url, {("two", 1): delta, ("three", 1): echo})
        await store.delete_user("bob")
        assert await store.search("quokka") == []
        assert await store.search("quokka", user_id="bob") == []
        await assert_index_is(store, db_url, {})


async def test_expired_items_are_never_found_and_purge_removes_their_index(
    db_url: str, key: bytes | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with SessionStore(db_url, create_tables=True, key=key, search=True) as store:
        old, new = message("old walrus"), message("new walrus")
        expiring = store.session("s", user_id="alice", ttl=timedelta(minutes=10))
        await expiring.add_items([old])
        session = store.session("s")
        await session.add_items([new])
        assert len(await session.search_hits("walrus")) == 2
        travel(monkeypatch, timedelta(minutes=11))
        for mode in ("hybrid", "vector", "keyword"):
            assert [h.item for h in await session.search_hits("old walrus", mode=mode)] == [new]
            hits = await store.search("old walrus", user_id="alice", mode=mode)
            assert [h.item for h in hits] == [new]
        assert len(await raw_rows(db_url, f"SELECT id FROM {INDEX}")) == 2  # hidden only
        assert await store.purge_expired() == 1
        await assert_index_is(store, db_url, {("s", 2): new})
        assert [h.item for h in await session.search_hits("walrus")] == [new]


def _compaction_client(output: list[dict[str, Any]], calls: list[dict[str, Any]]) -> Any:
    """An OpenAI client whose `responses.compact` answers `output` over a fake transport."""
    import openai

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path.endswith("/responses/compact")
        calls.append(json.loads(request.content))
        usage = {"input_tokens": 30, "output_tokens": 5, "total_tokens": 35}
        usage |= {"input_tokens_details": {"cached_tokens": 0}}
        usage |= {"output_tokens_details": {"reasoning_tokens": 0}}
        body = {"id": "cmp_1", "created_at": 0, "object": "response.compaction"}
        return httpx.Response(200, json=body | {"output": output, "usage": usage})

    return openai.AsyncOpenAI(
        api_key="sk-test",
        base_url="http://compaction.test/v1",
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)),
        max_retries=0,
    )


async def test_compaction_replaces_the_index_with_the_compacted_history(
    db_url: str, key: bytes | None
) -> None:
    """The SDK's real compaction session, its API faked: on a session without atomic
    replacement it clears the session and adds the compacted items."""
    question = message("please check the falcon gateway")
    history = [
        question,
        {"type": "function_call", "call_id": "c1", "name": "gateway_status", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": '{"state": "rebooted"}'},
        message("the falcon gateway rebooted at noon after a kernel panic"),
    ]
    compacted_user = {
        "type": "message",
        "id": "msg_u",
        "role": "user",
        "status": "completed",
        "content": [{"type": "input_text", "text": "please check the falcon gateway"}],
    }
    summary = {"type": "compaction", "id": "cmp_item", "encrypted_content": "kernel-panic-blob"}
    calls: list[dict[str, Any]] = []
    async with SessionStore(db_url, create_tables=True, key=key, search=True) as store:
        session = store.session("c", user_id="alice")
        await session.add_items(history)
        compaction = OpenAIResponsesCompactionSession(
            "c", session, client=_compaction_client([compacted_user, summary], calls)
        )
        await compaction.run_compaction({"force": True})
        assert [call["input"] for call in calls] == [history]
        stored = await session.get_items()
        assert [item.get("type") for item in stored] == ["message", "compaction"]
        await assert_index_is(store, db_url, {("c", 5): stored[0], ("c", 6): stored[1]})
        assert await session.search_hits("kernel panic noon rebooted", mode="keyword") == []
        assert await store.search("rebooted kernel", user_id="alice", mode="keyword") == []
        [hit] = await session.search_hits("falcon gateway", limit=5)  # the summary has no text
        assert hit.seq == 5 and hit.item == stored[0]


# -- a new embedding model -----------------------------------------------------------------


@pytest.mark.slow
async def test_a_new_model_is_never_mixed_and_reindex_moves_everything_to_it(
    db_url: str, key: bytes | None, model2vec: Embedder
) -> None:
    """A database keeps its model until an explicit reindex: a store given another one says
    so, searches by keyword only and writes no vector of its own model meanwhile."""
    old = HashingEmbedder()  # 256 dims: compared with the 64 of model2vec, it would raise
    async with SessionStore(db_url, create_tables=True, key=key, embedder=old) as store:
        await store.session("s", user_id="alice").add_items([DEPLOY, LUNCH, *ALL])
    async with SessionStore(db_url, key=key, embedder=model2vec) as store:
        session = store.session("s")
        new = message("the rollout broke when the volume ran out of space")
        await session.add_items([new])
        with pytest.warns(SearchModelWarning) as warned:
            hits = await session.search_hits("lunch friday", limit=2)
        [text] = [str(w.message) for w in warned if w.category is SearchModelWarning]
        assert old.model_id in text and model2vec.model_id in text and "reindex" in text
        assert hits[0].item == LUNCH and all(hit.vector is None for hit in hits)
        with pytest.raises(SearchError, match="reindex"):
            await session.search_hits("why did the release break?", mode="vector")
        await store.flush()
        models = {row[0] for row in await raw_rows(db_url, f"SELECT model_id FROM {INDEX}")}
        assert models == {index_id(old.model_id)}  # nothing of the new model until the reindex
        assert await store.indexed_model() == index_id(old.model_id)
        assert await store.reindex() == len(ALL) + 3
        models = {row[0] for row in await raw_rows(db_url, f"SELECT model_id FROM {INDEX}")}
        assert models == {index_id(model2vec.model_id)}  # ... and the old model's are deleted
        hits = await session.search_hits("why did the release break?", mode="vector", limit=2)
        assert {hit.item["content"] for hit in hits} == {DEPLOY["content"], new["content"]}
        hits = await session.search_hits("disk full release", limit=20, min_score=0.0)
        assert len({hit.seq for hit in hits}) == len(hits) == len(ALL) + 3

    third = HashingEmbedder(dim=64)
    async with SessionStore(db_url, key=key, embedder=third) as store:
        reports: list[tuple[int, int]] = []
        done = await store.reindex(batch_size=3, progress=lambda *report: reports.append(report))
        total = 3 + len(ALL)
        assert done == total
        assert reports[0] == (0, total) and reports[-1] == (total, total)
        assert [r[0] for r in reports] == sorted(r[0] for r in reports) and len(reports) > 2
        models = {row[0] for row in await raw_rows(db_url, f"SELECT model_id FROM {INDEX}")}
        assert models == {index_id(third.model_id)}
        indexed = await index_rows(db_url)
        assert indexed[INDEX] == indexed[ITEMS]  # every item, with text or not
        assert await store.reindex() == 0


async def test_a_store_told_of_another_model_sees_the_reindex_that_makes_it_its_own(
    db_url: str, key: bytes | None
) -> None:
    """A store given another model than the database's searched by keyword only, as it
    said, but until it was restarted: a reindex elsewhere to its model went unseen, and the
    items it wrote after were never indexed, nor found by its own searches."""
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        await store.session("s").add_items([DEPLOY, LUNCH])
    small = HashingEmbedder(dim=64)
    async with SessionStore(db_url, key=key, embedder=small) as app:
        session = app.session("s")
        with pytest.warns(SearchModelWarning):
            await session.search_hits("lunch friday")
        async with SessionStore(db_url, key=key, embedder=HashingEmbedder(dim=64)) as other:
            assert await other.reindex() == 2
        new = message("the printer ran out of paper")
        await session.add_items([new])
        await app.flush()
        hits = await session.search_hits("printer paper", mode="vector", limit=1)
        assert [hit.item for hit in hits] == [new]
    models = {row[0] for row in await raw_rows(db_url, f"SELECT model_id FROM {INDEX}")}
    assert models == {index_id(small.model_id)}
    indexed = await index_rows(db_url)
    assert indexed[INDEX] == indexed[ITEMS] and len(indexed[ITEMS]) == 3


async def test_the_model_warning_points_at_the_line_that_searched(sqlite_url: str) -> None:
    """`SearchModelWarning` pointed into the library (its indexer): the app's line that
    searched is the one to see, and to filter warnings by."""
    async with SessionStore(sqlite_url, create_tables=True) as store:
        await store.session("s").add_items([DEPLOY, LUNCH])
    async with SessionStore(sqlite_url, embedder=HashingEmbedder(dim=64)) as app:
        with pytest.warns(SearchModelWarning) as warned:
            await app.session("s").search_hits("lunch friday")
    [warning] = [w for w in warned if w.category is SearchModelWarning]
    assert warning.filename == __file__


async def test_a_reindex_elsewhere_is_not_undone_by_a_store_still_open(
    db_url: str, key: bytes | None
) -> None:
    """A store open since before a reindex elsewhere went on indexing with the old model:
    its next write made that model the database's again, and its next search indexed every
    item with it. Its indexing now writes nothing of another model than the database's;
    it says so, and searches by keyword only."""
    small = HashingEmbedder(dim=64)
    async with SessionStore(db_url, create_tables=True, key=key) as app:
        session = app.session("s")
        await session.add_items([DEPLOY, LUNCH])
        assert await session.search_hits("lunch friday")  # it agrees with the database
        async with SessionStore(db_url, key=key, embedder=small) as other:
            assert await other.reindex() == 2
        with pytest.warns(SearchModelWarning, match=small.model_id):  # as it indexes
            await session.add_items([message("the printer ran out of paper")])
            await app.flush()
            assert await session.search_hits("printer paper") == []  # left unindexed
        assert await app.indexed_model() == index_id(small.model_id)
    models = {row[0] for row in await raw_rows(db_url, f"SELECT model_id FROM {INDEX}")}
    assert models == {index_id(small.model_id)}
    async with SessionStore(db_url, key=key, embedder=small) as store:  # catches it up
        hits = await store.session("s").search_hits("printer paper", mode="vector", limit=1)
        assert [hit.seq for hit in hits] == [3]


@pytest.mark.dialects("postgresql", "mariadb")
async def test_an_index_write_that_read_the_old_model_as_a_reindex_ended_is_undone(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store's index write read the old model as the database's, then a reindex to
    another ran to its end before that write committed: its rows of the old model came
    after, and made that model the database's again. The reindex's last step now waits
    for such a write and deletes its rows."""
    small = HashingEmbedder(dim=64)
    async with SessionStore(db_url, create_tables=True) as store:
        await store.session("s").add_items([DEPLOY, LUNCH])
    writing, original = threading.Event(), SearchIndex._replace_rows

    def slow(self: SearchIndex, conn: Any, entries: Any) -> None:
        if any(entry.model_id != index_id(small.model_id) for _, _, entry in entries):
            writing.set()
            time.sleep(1.5)  # inside its transaction, the model read
        original(self, conn, entries)

    monkeypatch.setattr(SearchIndex, "_replace_rows", slow)

    async def late() -> None:
        async with SessionStore(db_url) as stale:
            await stale.session("s").add_items([message("the printer ran out of paper")])
            await stale.flush()

    writer = threading.Thread(target=asyncio.run, args=(late(),))
    writer.start()
    assert await asyncio.to_thread(writing.wait, 10)
    async with SessionStore(db_url, embedder=small) as store:
        await store.reindex()
    await asyncio.to_thread(writer.join, 10)
    models = {row[0] for row in await raw_rows(db_url, f"SELECT model_id FROM {INDEX}")}
    assert models == {index_id(small.model_id)}


@pytest.mark.parametrize("extra", [0, 1])
async def test_a_search_indexes_its_limit_and_warns_only_of_what_is_left(
    sqlite_url: str, extra: int, caplog: pytest.LogCaptureFixture
) -> None:
    """A search catching up exactly its limit of items warned that the rest of its scope
    was not indexed, where nothing was left; one past it indexed 2,001, where the docs say
    2,000 at most."""
    from agents_sqlalchemy.services.searcher import SEARCH_CATCH_UP

    notes = [message(f"note {n}") for n in range(SEARCH_CATCH_UP + extra)]
    async with SessionStore(sqlite_url, create_tables=True, search=False) as store:
        await store.session("s").add_items(notes)
    async with SessionStore(sqlite_url) as store:
        await store.session("s").search("note")
    indexed = await index_rows(sqlite_url)
    assert len(indexed[INDEX]) == SEARCH_CATCH_UP
    assert ("stopped there" in caplog.text) is bool(extra)


class Paused:
    """An embedder that stops before its `stop_at`-th batch until `go` is set."""

    dim, metric, model_id = 8, "cosine", "paused-v1"

    def __init__(self, stop_at: int) -> None:
        self.batches, self.stop_at = 0, stop_at
        self.stopped, self.go = threading.Event(), threading.Event()

    def embed(self, texts: list[str]) -> list[list[float]]:  # in a worker thread
        self.batches += 1
        if self.batches == self.stop_at:
            self.stopped.set()
            self.go.wait(30)
        return [[float(len(t) % (i + 2)) + 1.0 for i in range(self.dim)] for t in texts]

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        return [[1.0] * self.dim for _ in texts]


async def test_a_search_during_a_reindex_finds_every_item_at_once(
    db_url: str, key: bytes | None
) -> None:
    """A reindex deleted the old model's rows first: a search meanwhile waited for the
    whole reindex, then found none of the items it had not reached (0 hits for the last)."""
    notes = [message(f"note about q{chr(97 + n % 26)}{chr(97 + n // 26)}z") for n in range(60)]
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        await store.session("s", user_id="alice").add_items([*notes, message("my dog Mochi")])
    embedder = Paused(stop_at=3)
    async with SessionStore(db_url, key=key, embedder=embedder) as store:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SearchModelWarning)
            reindex = asyncio.create_task(store.reindex(batch_size=16))
            assert await asyncio.to_thread(embedder.stopped.wait, 10)
            session = store.session("s")
            for query, seq in (("Mochi", 61), ("qdaz", 4)):  # not moved yet, and moved
                hits = await asyncio.wait_for(session.search_hits(query, mode="keyword"), 5)
                assert [hit.seq for hit in hits] == [seq], query
            embedder.go.set()
            await session.add_items([message("a new note about Mochi")])
            hits = await session.search_hits("Mochi", mode="keyword")
            assert sorted(hit.seq for hit in hits) == [61, 62]
            assert await reindex >= 61
    models = {row[0] for row in await raw_rows(db_url, f"SELECT model_id FROM {INDEX}")}
    assert models == {index_id(embedder.model_id)}
    indexed = await index_rows(db_url)
    assert indexed[INDEX] == indexed[ITEMS]


@pytest.mark.slow
async def test_a_store_given_no_embedder_uses_the_databases_built_in_model(
    db_url: str, key: bytes | None, model2vec: Embedder
) -> None:
    """Opened without `embedder=` on a database indexed with a built-in model, a store
    searches and indexes with that model, not the default, and says nothing."""
    async with SessionStore(db_url, create_tables=True, key=key, embedder="model2vec") as store:
        await store.session("s").add_items([DEPLOY, LUNCH])
    with warnings.catch_warnings():
        warnings.simplefilter("error", SearchModelWarning)
        async with SessionStore(db_url, key=key) as store:
            session = store.session("s")
            new = message("the rollout broke when the volume ran out of space")
            await session.add_items([new])
            hits = await session.search_hits("why did the release break?", mode="vector")
            assert {hit.item["content"] for hit in hits[:2]} == {
                DEPLOY["content"],
                new["content"],
            }
            await store.flush()
            assert await store.indexed_model() == index_id(model2vec.model_id)
            assert store.embedder is not None  # it said the default (hashing) before
            assert store.embedder.model_id == model2vec.model_id
    models = {row[0] for row in await raw_rows(db_url, f"SELECT model_id FROM {INDEX}")}
    assert models == {index_id(model2vec.model_id)}


@pytest.mark.slow
async def test_an_index_made_by_an_older_tokenizer_is_named_and_moved_by_reindex(
    db_url: str, model2vec: Embedder
) -> None:
    """Rows indexed as the library did before terms lost their accents, with the same
    model: the store says so and finds them by their old terms until `reindex`, after
    which `zurich` finds `Zürich`; the database's index then names the terms' version."""
    cafe = message("Le café à Zürich")
    async with SessionStore(db_url, create_tables=True, embedder=model2vec) as store:
        await store.session("trip").add_items([cafe])
        await store.flush()
    older = pack_terms({term_id(term): 1 for term in ("le", "café", "zürich")})
    await execute(
        db_url,
        f"UPDATE {INDEX} SET model_id = :model, terms = :terms",
        {"model": model2vec.model_id, "terms": older},  # what the index stored then
    )
    async with SessionStore(db_url, embedder=model2vec) as store:
        session = store.session("trip")
        with pytest.warns(SearchModelWarning, match=r"content-words'.*terms-v2'.*reindex"):
            assert await session.search("zurich") == []  # its terms kept the accents
        assert await store.indexed_model() == model2vec.model_id
        assert await store.reindex() == 1
        for query in ("zurich", "Zürich", "CAFE"):
            assert await session.search(query) == [cafe], query
        assert await store.indexed_model() == index_id(model2vec.model_id)
    models = {row[0] for row in await raw_rows(db_url, f"SELECT model_id FROM {INDEX}")}
    assert models == {index_id(model2vec.model_id)}


async def test_a_search_tells_what_is_left_unindexed_from_its_own_read(
    db_url: str, key: bytes | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search learns whether its scope holds items not indexed yet from its own read (the
    items with a row of its model) and a count of the live items: an item without text is
    indexed all the same, an expired one counts on neither side, and one written without
    search is missing until the search indexes it."""
    async with SessionStore(db_url, create_tables=True, key=key, search=False) as store:
        await store.session("s").add_items([message("an old note")])
    async with SessionStore(db_url, key=key) as store:
        session = store.session("s")
        await session.add_items(
            [message("the disk was full"), {"type": "item_reference", "id": "r"}]
        )
        await store.session("s", ttl=timedelta(minutes=10)).add_items([message("soon gone")])
        await store.flush()
        services = store._services
        search_index, model_id = (
            services.search_index,
            index_id(services.search().embedder.model_id),
        )
        scope = Scope(session=SessionKey.of("s"))

        async def indexed_and_live() -> tuple[int, int, int]:
            candidates, indexed = await search_index.candidates(scope, model_id)
            return len(candidates), indexed, (await search_index.stamp(scope)).live

        assert await indexed_and_live() == (2, 3, 4)  # the reference: indexed, no candidate
        travel(monkeypatch, timedelta(hours=1))
        assert await indexed_and_live() == (1, 2, 3)
        assert texts(await session.search_hits("old note", mode="keyword")) == ["an old note"]
        assert await indexed_and_live() == (2, 3, 3)


async def test_a_history_loaded_with_search_off_is_indexed_by_reindex(
    db_url: str, key: bytes | None
) -> None:
    """The bulk load the search guide advises: write with `search=False`, then `reindex()` on a
    store with search on indexes each item once, and a search finds them."""
    history = [message(f"note {n} about topic{n}") for n in range(300)]
    async with SessionStore(db_url, create_tables=True, key=key, search=False) as bulk:
        await bulk.session("loaded").add_items(history)
    async with SessionStore(db_url, key=key) as store:
        assert await store.reindex() == 300
        assert await store.reindex() == 0  # nothing left to index
        found = await store.session("loaded").search("topic217", limit=1)
        assert found == [history[217]]


async def test_reindex_skips_an_item_removed_meanwhile(db_url: str, key: bytes | None) -> None:
    """An item popped between reading a batch and writing its index breaks nothing, and a
    new item given the popped row's id (SQLite reuses it) never gets the old one's index."""
    async with SessionStore(db_url, create_tables=True, key=key, search=False) as store:
        await store.session("s").add_items([message("first note"), message("second note")])
    store = SessionStore(db_url, key=key, embedder=HashingEmbedder(dim=64))
    async with store:

        async def pop_and_append() -> None:
            assert await store.session("s").pop_item() == message("second note")
            await store.session("s").add_items([message("third entry")])
            await store.flush()

        assert await index_around(store, 10, pop_and_append) == 2
        indexed = await index_rows(db_url)
        assert len(indexed[ITEMS]) == 2 and indexed[INDEX] == indexed[ITEMS]
        session = store.session("s")
        assert texts(await session.search_hits("note", mode="keyword")) == ["first note"]
        assert texts(await session.search_hits("second", mode="keyword")) == []
        assert texts(await session.search_hits("third entry", mode="keyword")) == ["third entry"]


async def test_an_index_write_of_many_rows_puts_each_item_s_own_terms_at_its_place(
    db_url: str, key: bytes | None
) -> None:
    """Index rows go in many per statement (on SQLite): a batch of more than two such
    statements, read before its last item was popped and another session was deleted and
    written anew, indexes each item still at its place with its own terms, and nothing
    else."""
    per_statement = 128  # the most index rows (5 values each) a statement takes
    count = per_statement * 2 + 50
    async with SessionStore(db_url, create_tables=True, key=key, search=False) as store:
        await store.session("s").add_items([message(f"note w{n}x") for n in range(count)])
        await store.session("t").add_items([message("an old plan")])
    async with SessionStore(db_url, key=key, embedder=HashingEmbedder(dim=64)) as store:

        async def pop_and_write_anew() -> None:
            assert await store.session("s").pop_item() == message(f"note w{count - 1}x")
            await store.delete_session("t")
            await store.session("t").add_items([message("a new plan")])
            await store.flush()

        assert await index_around(store, count + 10, pop_and_write_anew) == count + 1
        indexed = await index_rows(db_url)
        assert len(indexed[ITEMS]) == count and indexed[INDEX] == indexed[ITEMS]
        session = store.session("s")
        for n in (0, per_statement - 1, per_statement, count - 2):
            assert texts(await session.search_hits(f"w{n}x", mode="keyword")) == [f"note w{n}x"]
        assert texts(await session.search_hits(f"w{count - 1}x", mode="keyword")) == []
        assert texts(await store.session("t").search_hits("plan", mode="keyword")) == ["a new plan"]


# -- scopes, modes, options ------------------------------------------------------------------


async def test_store_search_says_which_session_and_keeps_to_the_user(
    db_url: str, key: bytes | None
) -> None:
    async with SessionStore(db_url, create_tables=True, key=key, search=True) as store:
        await store.session("a1", user_id="alice").add_items(
            [message("invoice INV-2207 was paid"), message("the cat is named Mochi")]
        )
        await store.session("a2", user_id="alice").add_items([message("invoice INV-2208 due")])
        await store.session("b1", user_id="bob").add_items([message("invoice INV-2207 lost")])
        await store.session("n1").add_items([message("invoice INV-2207 unowned")])
        hits = await store.search("invoice INV-2207", user_id="alice")
        assert [(h.session_id, h.seq) for h in hits] == [("a1", 1), ("a2", 1)]  # not the cat
        assert hits[0].item == message("invoice INV-2207 was paid")

        async def sessions(query: str, user_id: str | None = None) -> set[str]:
            hits = await store.search(query, user_id=user_id, mode="keyword", limit=20)
            return {hit.session_id for hit in hits}

        assert await sessions("invoice", "bob") == {"b1"}
        assert await sessions("2207") == {"a1", "b1", "n1"}
        assert await store.search("invoice", user_id="carol") == []
        await store.session("b1").set_user_id("alice")
        assert await sessions("2207", "alice") == {"a1", "b1"}
        # session.search keeps to its own session.
        assert {h.session_id for h in await store.session("a2").search_hits("invoice")} == {"a2"}


async def test_items_appended_at_popped_row_ids_are_not_taken_for_the_popped_ones(
    sqlite_url: str,
) -> None:
    """SQLite gives a removed last row's id again. Two items popped from one session and
    one appended in each of two others, at numbers summing to the popped ones', left the
    count and the sums of ids, numbers and sessions of a user's scope as they were: its
    kept candidates were ranked, and neither new item was found."""
    async with SessionStore(sqlite_url, create_tables=True) as store:
        a, b, c = (store.session(name, user_id="alice") for name in "abc")
        await a.add_items([message(f"note {n} about the garden") for n in range(1500)])
        await b.add_items([message(f"entry {n} about the kitchen") for n in range(798)])
        await c.add_items([message(f"line {n} about the garage") for n in range(97)])
        await b.add_items([message("the newest two"), message("of session b")])  # 799, 800
        for _ in range(2):  # the scope is large: its candidates are kept
            assert await store.search("garden", user_id="alice", mode="keyword")
        assert await b.pop_item() == message("of session b")
        assert await b.pop_item() == message("the newest two")
        await a.add_items([message("a zebracorn in the garden")])  # 1501: the row id of 799
        await c.add_items([message("a zebracorn in the garage")])  # 98: that of 800
        assert 1501 + 98 == 799 + 800
        await store.flush()
        hits = await store.search("zebracorn", user_id="alice", mode="keyword")
        assert {(hit.session_id, hit.seq) for hit in hits} == {("a", 1501), ("c", 98)}


async def test_the_stamp_s_mix_is_the_one_every_database_sums(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stamp's last sum is computed in SQL; `ScopeStamp.mix` says what it sums."""
    stamps: list[ScopeStamp] = []
    read_stamp = SearchIndex.stamp

    async def stamp(self: SearchIndex, scope: Scope, *args: Any) -> ScopeStamp:
        stamps.append(await read_stamp(self, scope, *args))
        return stamps[-1]

    monkeypatch.setattr(SearchIndex, "stamp", stamp)
    async with SessionStore(db_url, create_tables=True) as store:
        for name, count in (("a", 3), ("b", 2)):
            await store.session(name, user_id="alice").add_items(
                [message(f"note {n}") for n in range(count)]
            )
        await store.session("c", user_id="bob").add_items([message("other note")])
        assert len(await store.search("note", user_id="alice", mode="keyword")) == 5
    read = await raw_rows(
        db_url,
        f"SELECT i.id, i.seq, i.session_pk FROM {ITEMS} i JOIN agents_sqlalchemy_sessions s"
        " ON s.id = i.session_pk WHERE s.user_id = 'alice'",
    )
    rows = [cast(tuple[int, int, int], row) for row in read]
    [stamp] = stamps
    assert stamp.live == len(rows) == 5
    ids, seqs, sessions = (sum(column) for column in zip(*rows, strict=True))
    assert stamp.sums == (ids, seqs, sessions, sum(ScopeStamp.mix(*row) for row in rows))


async def test_candidates_read_as_many_small_arrays_rank_as_one_read(
    db_url: str, key: bytes | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL reads candidates as arrays, one row per `ARRAY_ROWS` item ids: split into
    rows of two ids, the same hits come back with the same scores (elsewhere: rows)."""
    async with SessionStore(db_url, create_tables=True, key=key, search=True) as store:
        for n in range(4):
            words = ["disk full", "deploy failed", "lunch at noon", "disk check"]
            await store.session(f"s{n}", user_id="ana").add_items(
                [message(f"{w} on host {n}") for w in words]
            )

        async def ranked() -> list[tuple[str, int, float, float | None]]:
            hits = [
                *await store.session("s1").search_hits("disk", limit=4, min_score=0.0),
                *await store.search("disk host", user_id="ana", limit=8),
                *await store.search("deploy", user_id="ana", mode="vector", limit=8),
            ]
            return [(h.session_id, h.seq, h.score, h.keyword) for h in hits]

        whole = await ranked()
        assert len(whole) == 20
        monkeypatch.setattr(repository_search, "ARRAY_ROWS", 2)
        assert await ranked() == whole


async def test_modes_and_their_signals(db_url: str, key: bytes | None) -> None:
    async with SessionStore(db_url, create_tables=True, key=key, search=True) as store:
        session = store.session("s")
        await session.add_items(
            [
                message("checkout failed with ERR-4411 after the deploy"),
                message("redeployment of the checkout service is scheduled"),
                message("the weather is nice today"),
            ]
        )
        keyword = await session.search_hits("ERR-4411", mode="keyword")
        assert [h.seq for h in keyword] == [1]
        assert keyword[0].vector is None and keyword[0].keyword > 0
        vector = await session.search_hits("redeployments", mode="vector", limit=3)
        assert len(vector) == 3 and vector[0].seq == 2  # word pieces, no shared term
        assert all(h.vector is not None for h in vector)
        assert vector[0].score == vector[0].vector
        assert [h.vector for h in vector] == sorted((h.vector for h in vector), reverse=True)
        hybrid = await session.search_hits("checkout ERR-4411", mode="hybrid", limit=2)
        assert hybrid[0].seq == 1 and hybrid[0].keyword > 0 and hybrid[0].vector is not None
        every = await session.search_hits("checkout weather", mode="vector", limit=3)
        assert {h.seq: h.recency for h in every} == {1: 0.0, 2: 0.5, 3: 1.0}
        # Across sessions too, though the three share their write's time (all read 1.0).
        across = await store.search("checkout weather", mode="vector", limit=3)
        assert {h.seq: h.recency for h in across} == {1: 0.0, 2: 0.5, 3: 1.0}
        assert await session.search_hits("   ") == []
        with pytest.raises(ConfigurationError, match="mode"):
            await session.search_hits("x", mode="fuzzy")  # type: ignore[arg-type]
        for limit in (0, 1001):
            with pytest.raises(ConfigurationError, match="limit"):
                await session.search_hits("x", limit=limit)
        assert await store.session("never-written").search_hits("checkout") == []


async def test_hits_need_evidence_and_queries_have_a_maximum_length(
    db_url: str, key: bytes | None
) -> None:
    """The example app's bob: a search for "dog" among items about other things finds
    nothing, unless `min_score` asks for whatever scores; a query past the bound raises."""
    async with SessionStore(db_url, create_tables=True, key=key, search=True) as store:
        session = store.session("bob", user_id="bob")
        garden, bike = message("Plant the tomatoes before the frost."), message("Fix the bike")
        await session.add_items([garden, bike])
        assert await session.search("dog") == []
        assert await store.search("dog", user_id="bob") == []
        assert len(await session.search("dog", min_score=0.0)) == 2
        assert len(await store.search("dog", user_id="bob", min_score=0.0)) == 2
        assert await session.search("tomatoes") == [garden]
        assert await session.search("x" * MAX_QUERY_CHARS) == []
        for nothing in ("?!.,;:", "🔥🚀"):  # no word piece: were both items, scored 0
            assert await session.search(nothing, mode="vector") == []
        for call in (session.search, store.search):
            with pytest.raises(QueryTooLongError, match="at most 2,000"):
                await call("x" * (MAX_QUERY_CHARS + 1))
            for not_text in (7, None, b"dog"):  # were QueryTooLongError
                with pytest.raises(ConfigurationError, match="a query is a string, not"):
                    await call(not_text)  # type: ignore[arg-type]
            for bad in ("0.1", True, float("nan"), 10**400):  # "0.1" was a TypeError
                with pytest.raises(ConfigurationError, match="min_score must be a finite"):
                    await call("tomatoes", min_score=bad)


async def test_a_hair_of_difference_among_alike_items_is_no_evidence(sqlite_url: str) -> None:
    """Among 200 alike lines, cosines lie a hair apart: one differing from the others by a
    hash collision stood out by hundreds of deviations, and outscored (81) the one item
    holding the query's word (1). The spread a cosine stands out of is 0.01 at least."""
    async with SessionStore(sqlite_url, create_tables=True) as store:
        session = store.session("log")
        alike = [message(f"filler message number {n} about gardening") for n in range(200)]
        await session.add_items([*alike, message("a buffalo crossed the road")])
        for query in ("buffalo", "zebrafish", "what is the capital of peru?"):
            hits = await session.search_hits(query, limit=5)
            assert all(hit.score < 0.1 for hit in hits if hit.keyword == 0), (query, hits)
        assert texts(await session.search_hits("buffalo", limit=1)) == [
            "a buffalo crossed the road"
        ]


async def test_search_is_on_by_default_and_returns_the_items(sqlite_url: str) -> None:
    async with SessionStore(sqlite_url, create_tables=True) as store:  # no search options
        session = store.session("s")
        await session.add_items([message("my dog is called Mochi")])
        await session.add_items([message("lunch is at noon"), DEPLOY])
        assert await session.search("what is the dog called?", limit=1) == [
            message("my dog is called Mochi")
        ]
        [hit] = await session.search_hits("what is the dog called?", limit=1)
        assert hit.session_id == "s" and hit.seq == 1 and hit.score > 0


async def test_search_off_says_how_to_turn_it_on(sqlite_url: str) -> None:
    async with SessionStore(sqlite_url, create_tables=True, search=False) as store:
        session = store.session("s")
        await session.add_items([DEPLOY])
        for call in (session.search("disk"), store.search("disk"), store.reindex()):
            with pytest.raises(ConfigurationError, match="search=True"):
                await call
        with pytest.raises(ConfigurationError, match="search must be"):
            SessionStore(sqlite_url, search="yes")  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="built-in ones are hashing"):
            SessionStore(sqlite_url, embedder="no-such-model")
    async with SessionStore(sqlite_url) as store:  # items added without search are found
        assert texts(await store.session("s").search_hits("disk")) == [DEPLOY["content"]]
        assert await store.reindex() == 0  # nothing left to index


async def test_the_pass_after_a_write_indexes_that_write_and_a_flush_cuts_its_pause(
    db_url: str, key: bytes | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After an append the worker indexes that batch only (handed over in plaintext, read
    back from its first number when sealed): its cost is the batch's, not the session's, and
    an older item written without search is left to the next search. A flush just after a
    write does not sit out the worker's gathering pause."""
    async with SessionStore(db_url, create_tables=True, key=key, search=False) as store:
        await store.session("s").add_items([message("an old note about kayaks")])
    monkeypatch.setattr(background_module, "GATHER_SECONDS", 60.0)
    async with SessionStore(db_url, key=key) as store:
        session = store.session("s")
        for n in range(5):
            await session.add_items([message(f"new note {n}")])
            await asyncio.wait_for(store.flush(), 10)
        assert [len(pks) for pks in (await index_rows(db_url)).values()] == [6, 5]
        assert texts(await session.search_hits("kayaks", mode="keyword")) == [
            "an old note about kayaks"
        ]
        indexed = await index_rows(db_url)
        assert indexed[INDEX] == indexed[ITEMS]


async def test_items_handed_to_the_worker_and_gone_before_it_runs_are_skipped(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plaintext store's appends hand their items to the worker, which indexes them at
    their places: an item popped, or a session deleted and written again, before the worker
    runs leaves no index row behind and takes no other item's place."""
    monkeypatch.setattr(background_module, "GATHER_SECONDS", 60.0)  # the worker waits
    async with SessionStore(db_url, create_tables=True) as store:
        session, other = store.session("s"), store.session("t")
        await session.add_items([message("first note"), message("second note")])
        assert await session.pop_item() == message("second note")
        await session.add_items([message("third note")])
        await other.add_items([message("an old plan")])
        await store.delete_session("t")
        await other.add_items([message("a new plan"), message("another plan")])
        await store.flush()
        indexed = await index_rows(db_url)
        assert indexed[INDEX] == indexed[ITEMS] and len(indexed[ITEMS]) == 4
        assert texts(await session.search_hits("note", mode="keyword")) == [
            "third note",
            "first note",
        ]
        assert texts(await other.search_hits("old", mode="keyword")) == []
        assert sorted(texts(await other.search_hits("plan", mode="keyword"))) == [
            "a new plan",
            "another plan",
        ]


async def test_a_session_written_anew_elsewhere_before_the_worker_runs_keeps_its_own_terms(
    db_url: str, key: bytes | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another store (another process) deletes a session and writes it anew before this
    store's worker indexes what it wrote there: the new items get their own index rows, not
    the old ones', because a deleted session's id is never given to a new one (SQLite gives
    a deleted last row's id again unless the table says AUTOINCREMENT)."""
    monkeypatch.setattr(background_module, "GATHER_SECONDS", 60.0)  # the worker waits
    async with (
        SessionStore(db_url, create_tables=True, key=key) as store,
        SessionStore(db_url, key=key, search=False) as elsewhere,
    ):
        await store.session("s").add_items([message("the disk was full")])
        [[old_pk]] = await raw_rows(db_url, "SELECT id FROM agents_sqlalchemy_sessions")
        await elsewhere.delete_session("s")
        await elsewhere.session("s").add_items([message("lunch in paris")])
        [[new_pk]] = await raw_rows(db_url, "SELECT id FROM agents_sqlalchemy_sessions")
        assert new_pk != old_pk
        await store.flush()
        session = store.session("s")
        assert texts(await session.search_hits("disk", mode="keyword")) == []
        assert texts(await session.search_hits("paris", mode="keyword")) == ["lunch in paris"]


async def test_a_hit_removed_during_the_search_never_returns_the_item_that_took_its_id(
    db_url: str, key: bytes | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alice's best hit is popped while her search runs, and Bob's next item takes its row
    id (SQLite gives a deleted last row's id again): her results leave the hit out; they
    never hold Bob's item."""
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        alice, bob = store.session("a", user_id="alice"), store.session("b", user_id="bob")
        await bob.add_items([message("bob's first note")])
        await alice.add_items([message("an older note on kayaks")])
        read_hits = SearchIndex.hit_rows

        async def meanwhile(self: SearchIndex, item_pks: list[int], scope: Scope) -> Any:
            await alice.pop_item()
            await bob.add_items([message("bob's secret diary")])
            return await read_hits(self, item_pks, scope)

        for search in (
            lambda: alice.search_hits("kayaks for sale", mode="keyword"),
            lambda: store.search("kayaks for sale", user_id="alice", mode="keyword"),
        ):
            await alice.add_items([message("kayaks for sale")])
            await store.flush()
            with monkeypatch.context() as patch:
                patch.setattr(SearchIndex, "hit_rows", meanwhile)
                assert texts(await search()) == ["an older note on kayaks"]


async def test_a_sealed_vector_read_after_its_item_went_is_not_taken_for_tampering(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An encrypted store reads the vectors it has not opened yet after the candidates: if
    an item was popped in between and a new item took its row id, the new item's vector is
    not opened with the old item's key (that would fail as tampering); the item is gone."""
    async with SessionStore(db_url, create_tables=True, key=os.urandom(32)) as store:
        alice, bob = store.session("a"), store.session("b")
        await alice.add_items([message("an older note on kayaks"), message("kayaks for sale")])
        read_vectors = SearchIndex.vectors

        async def meanwhile(self: SearchIndex, item_pks: list[int], model_id: str) -> Any:
            await alice.pop_item()
            await bob.add_items([message("kayaks for bob")])
            await store.flush()
            return await read_vectors(self, item_pks, model_id)

        monkeypatch.setattr(SearchIndex, "vectors", meanwhile)
        hits = await alice.search_hits("kayaks for sale", mode="vector")
        assert texts(hits) == ["an older note on kayaks"]


async def test_a_reused_row_id_never_gets_a_stale_vector(db_url: str, key: bytes | None) -> None:
    """SQLite reuses the id of a deleted last row; the sealed vector cache must not (and
    forgets the vectors it opened after a removal)."""
    async with SessionStore(db_url, create_tables=True, key=key, search=True) as store:
        session = store.session("s")
        await session.add_items([message("zebra zebra zebra")])
        [hit] = await session.search_hits("zebra", mode="vector")
        assert hit.vector == pytest.approx(1, abs=0.002)  # the stored vector is rounded
        codec: Any = await store._services.opener.ready()
        opened = lambda: sum(len(cache.kept) for cache in codec._opened.values())  # noqa: E731
        assert key is None or opened() == 1  # opened vectors are kept ...
        await session.pop_item()
        assert key is None or opened() == 0  # ... until a removal
        await session.add_items([message("marmalade sandwich")])
        [hit] = await session.search_hits("marmalade sandwich", mode="vector")
        assert hit.item == message("marmalade sandwich")
        assert hit.vector == pytest.approx(1, abs=0.002)


async def test_the_vectors_a_sealed_store_keeps_stay_within_their_bytes(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An embedder's vectors weigh a byte per dimension: 3 KB each for OpenAI's largest.
    monkeypatch.setattr(codec_module, "VECTOR_BYTES", 16 * 256)  # 16 of the default's
    async with SessionStore(db_url, create_tables=True, key=os.urandom(32)) as store:
        session = store.session("s")
        words = [a + b for a in ("ka", "lo", "mi", "ru", "te", "zo") for b in "bdfgkmnprs"]
        await session.add_items([message(f"{word}lu {word}ta") for word in words])
        await store.flush()
        hits = await session.search_hits("mirlu mirta", mode="vector", limit=60)
        assert len(hits) == 60 and hits[0].item == message("mirlu mirta")
        codec: Any = await store._services.opener.ready()
        [cache] = codec._opened.values()
        assert 0 < len(cache.kept) <= 16 and cache.weight == 256 * len(cache.kept)
        again = await session.search_hits("mirlu mirta", mode="vector", limit=60)
        assert [hit.item for hit in again] == [hit.item for hit in hits]


@pytest.mark.parametrize("size", [20_000, 20])
async def test_a_catch_up_reads_heavy_items_a_few_at_a_time_and_light_ones_many(
    db_url: str, key: bytes | None, size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tools' outputs may be megabytes each: 200 of them at once were all held at once.
    monkeypatch.setattr(indexer_module, "CATCH_UP_BYTES", 100_000)
    asked: list[tuple[int, int]] = []  # (items asked for, bytes read)
    read = SearchIndex.unindexed

    async def unindexed(self: SearchIndex, *args: Any, **kwargs: Any) -> Any:
        found = await read(self, *args, **kwargs)
        asked.append((args[1], sum(len(row.stored.body) for row in found)))
        return found

    items = [message(f"otter n{n}q " + "x" * size) for n in range(300)]
    async with SessionStore(db_url, create_tables=True, key=key, search=False) as store:
        await store.session("s").add_items(items)
    async with SessionStore(db_url, key=key) as store:
        monkeypatch.setattr(SearchIndex, "unindexed", unindexed)
        assert await store.reindex() == 300
        hits = await store.session("s").search("otter n7q", mode="keyword", limit=1)
        assert hits == [items[7]]
    sizes = [count for count, _ in asked]
    if size > 1000:  # 16 items at first, then about 100 KB a batch
        assert sizes[0] == 16 and max(sizes[1:]) <= 5
        assert max(bytes_read for _, bytes_read in asked[1:]) <= 100_000 + 2 * size
    else:  # light: the batches grow to the batch size
        assert sizes[:5] == [16, 32, 64, 128, 200]


async def test_a_search_indexes_what_was_written_before_it_and_leaves_the_rest_to_the_worker(
    db_url: str, key: bytes | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Beside writers that never pause, a search chased their new items up to its limit.
    before = [message(f"heron b{n}q") for n in range(30)]
    after = [message(f"heron a{n}q") for n in range(20)]
    async with SessionStore(db_url, create_tables=True, key=key, search=False) as other:
        await other.session("s").add_items(before)  # another process: left unindexed
        stamp = SearchIndex.stamp

        async def stamp_then_write(self: SearchIndex, scope: Scope) -> Any:
            taken = await stamp(self, scope)
            await other.session("s").add_items(after)  # just after the search's stamp
            monkeypatch.setattr(SearchIndex, "stamp", stamp)
            return taken

        async with SessionStore(db_url, key=key) as store:
            monkeypatch.setattr(SearchIndex, "stamp", stamp_then_write)
            hits = await store.session("s").search("heron b7q", mode="keyword", limit=1)
            assert hits == [before[7]]
            index = store._services.search_index
            model_id = store._services.index().indexed_as
            assert await index.count_unindexed(model_id, Scope()) == len(after)
            assert await store.reindex() == len(after)  # left whole for the worker, or a reindex


# -- ranking through the store is the reference ranking ------------------------------------


@pytest.mark.slow
async def test_the_store_ranks_the_evaluation_set_like_the_reference(
    db_url: str, key: bytes | None, model2vec: Embedder
) -> None:
    """Every query of tests/search_eval, per session, through SQL (and sealed rows): the same
    ranking as `MemoryIndex`, the in-memory reference the evaluation figures come from."""
    convs = conversations()
    async with SessionStore(db_url, create_tables=True, key=key, embedder=model2vec) as store:
        references: dict[str, MemoryIndex[int]] = {}
        for conv in convs:
            await store.session(conv.name).add_items(conv.items)
            references[conv.name] = MemoryIndex(model2vec)
            await references[conv.name].add([(i + 1, item) for i, item in enumerate(conv.items)])
        for query in QUERIES:
            for mode in ("hybrid", "vector", "keyword"):
                got = await store.session(query.conversation).search_hits(
                    query.text, limit=5, mode=mode
                )
                want = await references[query.conversation].search(query.text, limit=5, mode=mode)
                assert [h.seq for h in got] == [h.key for h in want], (query.text, mode)
                for g, w in zip(got, want, strict=True):
                    assert g.score == pytest.approx(w.score, rel=1e-5, abs=1e-6)


# -- encrypted mode on disk ------------------------------------------------------------------

SECRET_ITEMS = [
    message("Zanzibar quokka smuggled marmalade through Kyrgyzstan"),
    {
        "type": "function_call",
        "call_id": "c9",
        "name": "lookup_wombat",
        "arguments": '{"destination": "Timbuktu", "cargo": "xylophones"}',
    },
    message("Tell Bartholomew the flamingo password is ultraviolet"),
]
SECRET_WORDS = ["zanzibar", "quokka", "marmalade", "kyrgyzstan", "wombat", "timbuktu"]
SECRET_WORDS += ["xylophone", "bartholomew", "flamingo", "ultraviolet"]
KEY = os.urandom(32)


def _plaintext_terms() -> set[str]:
    """Every term of the items that has letters outside hex (so no hash can spell it)."""
    terms = set().union(*(term_counts(item_text(item)) for item in SECRET_ITEMS))
    return {t for t in terms if len(t) >= 4 and any(c not in "0123456789abcdef" for c in t)}


async def _plaintext_vectors() -> list[bytes]:
    """The plain vectors of the items, as the default embedder packs them."""
    return await embed_documents(HashingEmbedder(), [item_text(i) for i in SECRET_ITEMS])


def _found(blob: bytes, words: list[str], vectors: list[bytes]) -> list[str]:
    """The words whose text or plain term id, and the vectors, that `blob` holds."""
    low = blob.lower()
    hits = [word for word in words if word.encode() in low]
    hits += [f"id {word}" for word in words if term_id(word).to_bytes(8, "little") in blob]
    for i, vector in enumerate(vectors):
        middle = vector[len(vector) // 2 : len(vector) // 2 + 64]
        if vector in blob or middle in blob:
            hits.append(f"vector {i}")
    return hits


async def _index_columns(url: str, tables: TableNames) -> bytes:
    """Every column of every row of the search index, as bytes."""
    out = bytearray()
    for role in ("search_index",):
        for row in await raw_rows(url, f"SELECT * FROM {tables.name(role)}"):
            for value in row:
                out += value if isinstance(value, (bytes, memoryview)) else str(value).encode()
                out += b"\x00"
    return bytes(out)


async def test_words_far_into_a_long_tool_output_are_found(db_url: str) -> None:
    """Terms were taken from an item's first 16,000 characters only: an error at the end of
    a long log was found by no search."""
    log = "\n".join(f"INFO request {n} served in {n % 97} ms" for n in range(25_000))
    output = f"{log}\nFATAL ERR_9931 disk quota exceeded on vol-7731"
    assert 800_000 < len(output) < MAX_INDEXED_CHARS
    item = {"type": "function_call_output", "call_id": "c1", "output": output}
    async with SessionStore(db_url, create_tables=True, key=KEY) as store:
        session = store.session("logs", user_id="ops")
        await session.add_items([message("why did the job fail?"), item])
        for query in ("ERR_9931", "vol-7731", "disk quota exceeded"):
            hits = await session.search_hits(query, mode="keyword")
            assert [hit.seq for hit in hits] == [2], query
            assert [hit.seq for hit in await store.search(query, mode="keyword")] == [2]


class Choking:
    """An embedder that fails on one text (NaN for what holds U+2063), or on all when down."""

    dim, metric, model_id = 3, "cosine", "choking-v1"
    down = False
    flaky = False  # every other call fails, as under a rate limit
    calls = 0

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        if self.down or (self.flaky and self.calls % 2):
            raise ConnectionError("the model's server went away")
        return [[math.nan if "\u2063" in t else 1.0, float(len(t)), 1.0] for t in texts]

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 1.0, 1.0] for _ in texts]


async def test_an_item_the_embedder_fails_on_stops_no_search(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """One item an embedder could not take (a NaN, too many tokens) made every search of
    the store raise, keyword ones too, and left the items written with it unindexed."""
    embedder = Choking()
    async with SessionStore(db_url, create_tables=True, embedder=embedder) as store:
        await store.session("m", user_id="mallory").add_items(
            [message("invoice \u2063 poison"), message("invoice from mallory")]
        )
        await store.session("b", user_id="bob").add_items([message("invoice from bob")])
        await store.flush()
        for mode in ("keyword", "hybrid"):
            found = {(h.session_id, h.seq) for h in await store.search("invoice", mode=mode)}
            assert found == {("m", 1), ("m", 2), ("b", 1)}, mode
        assert "failed on 1 of 2 items (EmbedderError)" in caplog.text
        embedder.down = True  # a model down: nothing indexed, tried again; searches go on
        await store.session("b", user_id="bob").add_items([message("invoice again")])
        await store.flush()
        hits = await store.search("invoice", mode="keyword")
        assert ("b", 2) not in {(h.session_id, h.seq) for h in hits} and len(hits) == 3
        assert "the embedder 'choking-v1' failed (ConnectionError)" in caplog.text
        embedder.down = False
        hits = await store.search("invoice again", mode="keyword", limit=1)
        assert [(h.session_id, h.seq) for h in hits] == [("b", 2)]


async def test_a_model_that_fails_now_and_then_leaves_no_item_without_its_vector(
    sqlite_url: str,
) -> None:
    """Calls that failed now and then (a rate limit) left the items of their batch indexed
    without a vector for good: a vector search never found them once the model was back."""
    embedder = Choking()
    async with SessionStore(sqlite_url, create_tables=True, embedder=embedder) as store:
        embedder.flaky = True
        session = store.session("s")
        await session.add_items([message(f"note {n} about the garden") for n in range(6)])
        await store.flush()
        embedder.flaky = False
        hits = await session.search_hits("garden", mode="vector", limit=10)
        assert len(hits) == 6


class Ragged(Choking):
    """An embedder that returns no row for a text holding U+2063 (rows of unequal lengths)
    or, `lazily`, a generator for a batch holding one."""

    model_id = "ragged-v1"
    lazily = False

    def embed(self, texts: list[str]) -> Any:
        rows = [[] if "\u2063" in t else [1.0, float(len(t)), 1.0] for t in texts]
        if self.lazily and any("\u2063" in t for t in texts):
            return (row for row in rows)
        return rows


@pytest.mark.parametrize("lazily", [False, True])
async def test_an_embedder_returning_no_array_of_numbers_stops_no_search(
    db_url: str, lazily: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Rows of unequal lengths (none for one text) or a generator raised numpy's ValueError
    or TypeError from every search of the store, keyword ones too, and left the items
    unindexed: they are no vectors, like a wrong shape, and each text is asked alone."""
    embedder = Ragged()
    embedder.lazily = lazily
    async with SessionStore(db_url, create_tables=True, embedder=embedder) as store:
        session = store.session("m", user_id="mallory")
        await session.add_items([message("invoice \u2063 poison"), message("invoice from mallory")])
        await store.flush()
        for mode in ("keyword", "hybrid"):
            found = {(h.session_id, h.seq) for h in await store.search("invoice", mode=mode)}
            assert found == {("m", 1), ("m", 2)}, mode
        hits = await session.search_hits("invoice", mode="vector", limit=5)
        assert [hit.seq for hit in hits] == [2]  # the item it gave a vector for
        assert "failed on 1 of 2 items (EmbedderError)" in caplog.text


@pytest.mark.parametrize("query", ["\x00", "\u200b", "\ufeff", " \u200b\u2028\t", "\x00 \x1f"])
async def test_a_query_that_shows_nothing_finds_nothing(sqlite_url: str, query: str) -> None:
    """A query of spaces found nothing, but one of NUL or zero-width characters was taken
    for a question: an embedder gave it a vector, and a vector search returned every item,
    a hybrid one those its vector stood out for."""
    async with SessionStore(sqlite_url, create_tables=True, embedder=Choking()) as store:
        session = store.session("s")
        await session.add_items([message(f"note {n} about the garden") for n in range(5)])
        await store.flush()
        assert len(await session.search_hits("garden", mode="vector")) == 5
        for mode in ("hybrid", "vector", "keyword"):
            assert await session.search_hits(query, mode=mode) == [], mode
            assert await store.search(query, mode=mode) == [], mode


async def test_a_search_tokenises_a_long_item_off_the_event_loop(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search indexes what it finds missing on the caller's loop: a long tool output's
    terms (about 0.4 s for a million characters) must be made in a worker thread."""
    threads: list[str] = []
    table = Vocabulary.table

    def noted(self: Vocabulary, texts: list[str]) -> Any:
        threads.append(threading.current_thread().name)
        return table(self, texts)

    monkeypatch.setattr(Vocabulary, "table", noted)
    output = "\n".join(f"INFO request {n} served in {n % 97} ms" for n in range(5_000))
    item = {"type": "function_call_output", "call_id": "c1", "output": output + "\nFATAL"}
    async with SessionStore(sqlite_url, create_tables=True, search=False) as store:
        await store.session("logs").add_items([message("short"), item])
    async with SessionStore(sqlite_url) as store:
        hits = await store.session("logs").search_hits("fatal", mode="keyword")
    assert [hit.seq for hit in hits] == [2]
    assert threads and threading.current_thread().name not in threads


async def test_an_encrypted_index_keeps_no_word_order(sqlite_url: str) -> None:
    """The terms of an item were packed in the order its words came: with each word's
    keyed hash learnt from items of one word, the blob gave the sentence back."""
    sentence = "quokka pelican transfer offshore account money tomorrow evening"
    async with SessionStore(sqlite_url, create_tables=True, key=KEY) as store:
        await store.session("s").add_items([message(sentence)])
        await store.flush()
    [(terms,)] = await raw_rows(
        sqlite_url, f"SELECT terms FROM {TableNames().name('search_index')}"
    )
    ids = np.frombuffer(bytes(terms), dtype=TERM_DTYPE)["id"].tolist()
    assert len(ids) >= len(sentence.split()) and ids == sorted(ids)


def _database_files(url: str) -> bytes:
    """The bytes of a SQLite database file and its WAL."""
    path = Path(str(make_url(url).database))
    files = [Path(f"{path}{suffix}") for suffix in ("", "-wal")]
    return b"".join(file.read_bytes() for file in files if file.exists())


async def test_encrypted_mode_leaves_no_plaintext_terms_or_vectors_on_disk(db_url: str) -> None:
    words = SECRET_WORDS + sorted(_plaintext_terms())
    vectors = await _plaintext_vectors()
    sqlite = db_url.startswith("sqlite")
    # The plaintext store, to show the scan finds what is there: another file, or tables.
    plain_url = db_url.replace("agent.db", "plain.db") if sqlite else db_url
    plain_tables = TableNames() if sqlite else TableNames(prefix="plain_")
    queries = ["marmalade smuggling", "wombat lookup Timbuktu", "flamingo password"]
    ranked: dict[str, list[list[tuple[int, float]]]] = {}
    for url, tables, key in ((plain_url, plain_tables, None), (db_url, TableNames(), KEY)):
        options: dict[str, Any] = {"tables": tables, "key": key, "search": True}
        async with SessionStore(url, create_tables=True, **options) as store:
            session = store.session("secrets", user_id="alice")
            await session.add_items(SECRET_ITEMS)
            await session.add_items([message("padding about the weather")])
            await session.pop_item()
            ranking = [
                [(h.seq, round(h.score, 6)) for h in await session.search_hits(q)] for q in queries
            ]
            assert [hits[0][0] for hits in ranking] == [1, 2, 3]
            ranked["plaintext" if key is None else "encrypted"] = ranking
            columns = await _index_columns(url, tables)
            files = _database_files(url) if sqlite else b""
        if key is None:  # the scan finds plaintext where it is: it could fail
            in_columns = set(_found(columns, words, vectors))
            plain_ids = {f"id {term}" for term in _plaintext_terms()}
            assert plain_ids | {"vector 0", "vector 1", "vector 2"} <= in_columns
            assert not sqlite or set(SECRET_WORDS) | {"vector 1"} <= set(
                _found(files, words, vectors)
            )
        else:
            assert _found(columns, words, vectors) == []
            if sqlite:
                assert files and _found(files, words, vectors) == []
                assert _found(_database_files(url), words, vectors) == []  # closed
    assert ranked["encrypted"] == ranked["plaintext"]  # sealed, it ranks the same


PARTY_CHAT = [
    "We are having twelve people over for a birthday lunch on Sunday.",
    "Lovely. Shall we plan a menu around a big shared main course?",
    "Yes, and my brother is allergic to peanuts.",
    "Then no satay, and check every sauce label for peanut traces.",
    "I was thinking of a slow-roasted lamb shoulder.",
    "Roast it at 140 degrees for five hours under foil, then uncover for the last half hour.",
    "What can I serve before it?",
    "A platter of grilled halloumi with honey and thyme, ready in ten minutes.",
    "Halloumi! The kids adore it. And a pudding?",
    "A lemon posset sets in the fridge overnight and needs only cream, sugar and lemons.",
    "What drinks should I get?",
    "A pitcher of elderflower cordial with soda for the children, and a chilled rosé.",
]
PODS_CHAT = [
    "Our web app keeps restarting every few hours on the cluster.",
    "It says OOMKilled with exit code 137.",
    "Then the kernel killed the container for going over its memory limit; raise the limit.",
    "Could it be the system DNS instead? The app logs show lookups failing.",
    "The kube-system CoreDNS pods serve the app's lookups; check that they are running.",
    "The node image is fine; the app container was shot down because it used too much memory.",
]


async def test_names_lead_only_where_held_and_one_word_is_looked_up(sqlite_url: str) -> None:
    """With MiniLM, "RAM" (taken for an identifier) ranked a question by its filler words,
    though no item holds it; and a one-word query put an item that does not hold the
    word above the one that does (its vector stood out of one word's vague meaning)."""
    async with SessionStore(sqlite_url, create_tables=True, embedder="minilm") as store:
        for session_id, texts in (("party", PARTY_CHAT), ("pods", PODS_CHAT)):
            await store.session(session_id).add_items(
                [{"role": "user", "content": text} for text in texts]
            )
        [soda, *_] = await store.session("party").search_hits("soda")
        assert "soda" in soda.item["content"]
        question = "why did the app run out of RAM and get killed by the system"
        [first, *_] = await store.session("pods").search_hits(question)
        assert "kernel killed the container" in first.item["content"]


class Refusing:
    """An embedder whose every call fails, as one whose API key is missing."""

    dim, metric, model_id = 3, "cosine", "refusing-v1"

    def embed(self, texts: list[str]) -> list[list[float]]:
        raise PermissionError("no API key")

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        raise PermissionError("no API key")


class Quoting(Refusing):
    """An embedder whose API refuses the texts and quotes them, as some do."""

    def embed(self, texts: list[str]) -> list[list[float]]:
        raise RuntimeError(f"upstream refused input {texts[0]!r}")

    embed_queries = embed


async def test_an_embedder_quoting_its_input_puts_no_item_in_a_message_or_a_log(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The embedder's exception quoted a sealed item: the background job's warning logged
    its traceback, and `EmbedderError` its message, plaintext in both. Each names the
    class and where it was raised; the embedder's exception stays its `__cause__`."""
    caplog.set_level(logging.DEBUG, logger="agents_sqlalchemy")
    async with SessionStore(
        sqlite_url, create_tables=True, key="log-pass", embedder=Quoting()
    ) as store:
        await store.session("s").add_items([message("narwhal plaintext 3141")])
        await store.flush()
        with pytest.raises(EmbedderError) as raised:
            await store.reindex()
    assert "narwhal" in str(raised.value.__cause__)
    assert "narwhal" not in str(raised.value) and "RuntimeError" in str(raised.value)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "background job ('index'" in logged and "builtins.RuntimeError" in logged
    assert "narwhal" not in logged + "".join(caplog.text)


async def test_a_search_needing_a_query_vector_raises_where_nothing_is_indexed(
    sqlite_url: str,
) -> None:
    """With an embedder that cannot embed at all, nothing is indexed: a hybrid or vector
    search returned nothing, silently, where the docs promise an `EmbedderError` (it was
    raised only once some items were indexed)."""
    async with SessionStore(sqlite_url, create_tables=True, embedder=Refusing()) as store:
        session = store.session("s")
        await session.add_items([message("my dog is called Mochi")])
        for mode in ("hybrid", "vector"):
            with pytest.raises(EmbedderError, match="PermissionError") as raised:
                await session.search("dog", mode=mode)
            assert str(raised.value.__cause__) == "no API key"
            with pytest.raises(EmbedderError):
                await store.search("dog", mode=mode)
        assert await session.search("dog", mode="keyword") == []  # nothing indexed, as said
