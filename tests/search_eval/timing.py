"""Time the search layer alone (no database): embedding 10,000 short texts, embedding one
query, and ranking 10,000 candidates from stored bytes.

Run: python -m tests.search_eval.timing
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from collections.abc import Callable

from agents_sqlalchemy.search import (
    CorpusStats,
    Embedder,
    HashingEmbedder,
    Model2VecEmbedder,
    embed_documents,
    embed_query,
    rank,
    term_counts,
)

VOCABULARY = (
    "deploy disk full release pipeline runner docker alert refund order blender flight hotel "
    "kyoto budget revenue cloud egress meeting contract vet dog lunch friday seat booking "
    "index query postgres worker memory python version cache test failure error timeout"
)
WORDS = VOCABULARY.split()


def short_texts(n: int, seed: int = 7) -> list[str]:
    """`n` short sentences of 8 to 20 words, some with identifiers."""
    rng = random.Random(seed)
    return [
        " ".join(rng.choices(WORDS, k=rng.randint(8, 20))) + f" ERR-{rng.randint(1000, 9999)}"
        for _ in range(n)
    ]


def percentiles(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """p50 and p95 of `fn` in milliseconds."""
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(0.95 * (len(samples) - 1))]


async def time_embedder(name: str, embedder: Embedder, texts: list[str]) -> None:
    started = time.perf_counter()
    blobs = await embed_documents(embedder, texts)
    print(f"{name:10} embed {len(texts)} texts: {time.perf_counter() - started:.2f} s")
    query = "why did the release break on the runner?"
    samples = []
    for _ in range(50):
        started = time.perf_counter()
        await embed_query(embedder, query)
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    p50, p95 = statistics.median(samples), samples[int(0.95 * (len(samples) - 1))]
    print(f"{name:10} embed one query: p50 {p50:.2f} ms  p95 {p95:.2f} ms")
    query_vector = await embed_query(embedder, query)
    query_terms = term_counts(query)
    keys = list(range(len(texts)))
    counts = [term_counts(t) for t in texts]
    term_freqs = {
        k: {t: c[t] for t in query_terms if t in c}
        for k, c in enumerate(counts)
        if any(t in c for t in query_terms)
    }
    lengths = {k: sum(c.values()) for k, c in enumerate(counts)}
    df = {t: sum(1 for f in term_freqs.values() if t in f) for t in query_terms}
    stats = CorpusStats(len(texts), df, sum(lengths.values()) / len(lengths))

    def run() -> None:
        rank(
            keys,
            positions=keys,
            query_vector=query_vector,
            vectors=blobs,
            query_terms=query_terms,
            term_freqs=term_freqs,
            lengths=lengths,
            stats=stats,
            limit=5,
        )

    p50, p95 = percentiles(run, 30)
    print(
        f"{name:10} rank {len(keys)} candidates ({len(term_freqs)} keyword matches, "
        f"{embedder.dim} dims): p50 {p50:.1f} ms  p95 {p95:.1f} ms"
    )


async def main() -> None:
    texts = short_texts(10_000)
    await time_embedder("hashing", HashingEmbedder(), texts)
    await time_embedder("model2vec", Model2VecEmbedder.bundled(), texts)


if __name__ == "__main__":
    asyncio.run(main())
