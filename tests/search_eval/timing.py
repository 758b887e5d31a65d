"""Time the search layer alone (no database): embedding throughput and one query per
embedder, the semantic model's first query in a fresh process (import, load, embed), and
scoring plus fusing 10,000 candidates.

Run: python -m tests.search_eval.timing [--embedder hashing,model2vec,minilm]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

from agents_sqlalchemy.search import (
    BUILTIN_EMBEDDERS,
    Embedder,
    bm25_postings,
    cosine_scores,
    embed_documents,
    embed_query,
    embedder_by_name,
    fuse,
    fusion_weight,
    recency_scores,
    term_counts,
)

VOCABULARY = (
    "deploy disk full release pipeline runner docker alert refund order blender flight hotel "
    "kyoto budget revenue cloud egress meeting contract vet dog lunch friday seat booking "
    "index query postgres worker memory python version cache test failure error timeout"
)
WORDS = VOCABULARY.split()
QUERY = "why did the release break on the runner?"
FIRST_QUERY = """
import time
started = time.perf_counter()
from agents_sqlalchemy.search import MiniLMEmbedder
imported = time.perf_counter()
embedder = MiniLMEmbedder()
loaded = time.perf_counter()
embedder.embed_queries(["why did the release break?"])
done = time.perf_counter()
print(imported - started, loaded - imported, done - loaded)
"""


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
    started, cpu = time.perf_counter(), time.process_time()
    blobs = await embed_documents(embedder, texts)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    print(
        f"{name:10} embed {len(texts)} texts: {elapsed:.2f} s ({len(texts) / elapsed:,.0f}/s; "
        f"{cpu:.2f} CPU s, {len(texts) / cpu:,.0f} per CPU s)"
    )
    samples = []
    for _ in range(50):
        started = time.perf_counter()
        await embed_query(embedder, QUERY)
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    p50, p95 = statistics.median(samples), samples[int(0.95 * (len(samples) - 1))]
    print(f"{name:10} embed one query: p50 {p50:.2f} ms  p95 {p95:.2f} ms")
    query_vector = await embed_query(embedder, QUERY)
    query_terms = list(term_counts(QUERY))
    postings = [
        (row, t, counts[term])
        for row, counts in enumerate(term_counts(text) for text in texts)
        for t, term in enumerate(query_terms)
        if term in counts
    ]
    rows, term_ids, freqs = (list(column) for column in zip(*postings, strict=True))
    keys = list(range(len(texts)))

    def run() -> None:
        fuse(
            keys,
            vector=cosine_scores(query_vector, blobs),
            keyword=bm25_postings(rows, term_ids, freqs, size=len(keys), doc_count=len(keys)),
            recency=recency_scores(keys),
            vector_weight=fusion_weight(embedder),
            limit=5,
        )

    p50, p95 = percentiles(run, 30)
    print(
        f"{name:10} score and fuse {len(keys)} candidates ({len(set(rows))} keyword matches, "
        f"{embedder.dim} dims): p50 {p50:.1f} ms  p95 {p95:.1f} ms"
    )


def first_query(runs: int = 3) -> None:
    """The semantic model's first query in fresh processes: import, load (checksums), embed."""
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", FIRST_QUERY], capture_output=True, text=True, check=True
        )
        imported, loaded, embedded = (float(x) for x in out.stdout.split())
        print(
            f"minilm     first query in a fresh process: import {imported:.2f} s, load "
            f"{loaded:.2f} s, embed {embedded * 1000:.0f} ms"
        )


async def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--embedder", default=",".join(BUILTIN_EMBEDDERS))
    args = parser.parse_args(argv)
    for name in args.embedder.split(","):
        count = 2_000 if name == "minilm" else 10_000
        texts = short_texts(count)
        if name == "minilm":
            first_query()
        await time_embedder(name, embedder_by_name(name), texts)


if __name__ == "__main__":
    asyncio.run(main())
