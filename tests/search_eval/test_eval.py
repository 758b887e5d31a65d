"""Search quality on the evaluation set, with the real offline model (model2vec, bundled)."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from agents_sqlalchemy.search import (
    HashingEmbedder,
    MemoryIndex,
    Model2VecEmbedder,
    embed_documents,
    embed_query,
    item_text,
    rank,
    term_counts,
)

from .evaluate import build, evaluate
from .queries import QUERIES
from .timing import short_texts
from .transcripts import conversations


def test_the_evaluation_set_is_big_varied_and_consistent() -> None:
    convs = {c.name: c for c in conversations()}
    assert len(QUERIES) >= 50
    assert len({q.text for q in QUERIES}) == len(QUERIES)
    kinds = Counter(q.kind for q in QUERIES)
    assert set(kinds) == {"paraphrase", "identifier", "name", "recent", "old", "topic"}
    for query in QUERIES:
        refs = convs[query.conversation].refs
        assert query.answers and all(a in refs for a in query.answers), query
        for answer in query.answers:
            assert item_text(convs[query.conversation].items[refs[answer]]), answer
    types = Counter(item.get("type", "message") for c in convs.values() for item in c.items)
    assert {"message", "function_call", "function_call_output", "reasoning"} <= set(types)


@pytest.fixture(scope="module")
def model2vec() -> Model2VecEmbedder:
    return Model2VecEmbedder.bundled()


async def test_hybrid_beats_each_signal_alone_with_the_offline_model(
    model2vec: Model2VecEmbedder,
) -> None:
    """Per session (`session.search`), the figures in tests/search_eval/README.md."""
    scores = await evaluate(await build(model2vec), scope="session")
    hybrid, vector, keyword = scores["hybrid"], scores["vector"], scores["keyword"]
    assert hybrid.mrr > vector.mrr, scores
    assert hybrid.mrr > keyword.mrr, scores
    assert hybrid.recall_at_1 >= max(vector.recall_at_1, keyword.recall_at_1), scores
    assert hybrid.mrr >= 0.65, scores  # 0.677 when written


async def test_across_sessions_hybrid_ties_keywords_and_beats_vectors(
    model2vec: Model2VecEmbedder,
) -> None:
    """Across all sessions (`store.search`) the small model adds noise: hybrid only ties
    keyword search (0.605 vs 0.607 MRR when written). This pins that down, not a win."""
    scores = await evaluate(await build(model2vec), scope="all")
    hybrid, vector, keyword = scores["hybrid"], scores["vector"], scores["keyword"]
    assert hybrid.mrr > vector.mrr + 0.1, scores
    assert hybrid.mrr >= keyword.mrr - 0.02, scores


async def test_hybrid_beats_each_signal_with_the_default_embedder() -> None:
    scores = await evaluate(await build(HashingEmbedder()), scope="session")
    assert scores["hybrid"].mrr > max(scores["vector"].mrr, scores["keyword"].mrr), scores


async def test_the_issue_example(model2vec: Model2VecEmbedder) -> None:
    index: MemoryIndex[str] = MemoryIndex(model2vec)
    await index.add(
        [
            (
                "deploy",
                {"role": "user", "content": "the deployment failed because the disk was full"},
            ),
            ("lunch", {"role": "user", "content": "lunch plans for friday"}),
        ]
    )
    for mode in ("hybrid", "vector"):
        hits = await index.search("why did the release break?", mode=mode, limit=1)
        assert [h.key for h in hits] == ["deploy"]


async def test_ranking_ten_thousand_candidates_is_fast(model2vec: Model2VecEmbedder) -> None:
    texts = short_texts(10_000)
    blobs = await embed_documents(model2vec, texts)
    query = "why did the release break on the runner?"
    query_vector = await embed_query(model2vec, query)
    query_terms = term_counts(query)
    counts = [term_counts(t) for t in texts]
    term_freqs = {k: {t: c[t] for t in query_terms if t in c} for k, c in enumerate(counts)}
    keys = list(range(len(texts)))
    samples = []
    for _ in range(5):
        started = time.perf_counter()
        hits = rank(
            keys,
            positions=keys,
            query_vector=query_vector,
            vectors=blobs,
            query_terms=query_terms,
            term_freqs={k: f for k, f in term_freqs.items() if f},
            lengths={k: sum(c.values()) for k, c in enumerate(counts)},
            limit=5,
        )
        samples.append(time.perf_counter() - started)
    assert len(hits) == 5
    assert sorted(samples)[2] < 0.1  # about 10 ms on a laptop core; generous for busy CI
