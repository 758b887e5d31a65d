"""Evaluate the search layer on the transcripts: recall@1 and MRR per mode and embedder.

Items are indexed in memory with `MemoryIndex` (the same inputs the repository supplies) and
every query is ranked in each mode. Scope "session" searches the query's own conversation
(`session.search`); scope "all" searches all conversations at once (`store.search`).

Run: python -m tests.search_eval.evaluate [--embedder hashing|model2vec|all] [--by-kind]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from agents_sqlalchemy.search import (
    DEFAULT_PARAMS,
    SEARCH_MODES,
    Embedder,
    HashingEmbedder,
    MemoryIndex,
    Model2VecEmbedder,
    RankParams,
    SearchMode,
)

from .queries import QUERIES, Query
from .transcripts import conversations

Key = tuple[str, int]


@dataclass(frozen=True)
class Score:
    """Recall@1 and mean reciprocal rank over some queries."""

    recall_at_1: float
    mrr: float
    count: int

    def __str__(self) -> str:
        return f"R@1 {self.recall_at_1:.3f}  MRR {self.mrr:.3f}  (n={self.count})"


@dataclass
class Corpus:
    """The transcripts indexed once for one embedder, per conversation and all together."""

    sessions: dict[str, MemoryIndex[Key]]
    everything: MemoryIndex[Key]
    answers: dict[Query, set[Key]]


async def build(embedder: Embedder | None) -> Corpus:
    """Index every conversation (and all of them together) with `embedder`."""
    sessions: dict[str, MemoryIndex[Key]] = {}
    everything: MemoryIndex[Key] = MemoryIndex(embedder)
    answers: dict[Query, set[Key]] = {}
    convs = {c.name: c for c in conversations()}
    for name, conv in convs.items():
        items = [((name, i), item) for i, item in enumerate(conv.items)]
        sessions[name] = MemoryIndex(embedder)
        await sessions[name].add(items)
        await everything.add(items)
    for query in QUERIES:
        refs = convs[query.conversation].refs
        answers[query] = {(query.conversation, refs[a]) for a in query.answers}
    return Corpus(sessions, everything, answers)


def _score(ranks: Sequence[int | None]) -> Score:
    n = len(ranks)
    return Score(
        recall_at_1=sum(1 for r in ranks if r == 1) / n,
        mrr=sum(1.0 / r for r in ranks if r) / n,
        count=n,
    )


async def ranks(
    corpus: Corpus,
    mode: SearchMode,
    *,
    params: RankParams = DEFAULT_PARAMS,
    scope: str = "session",
    queries: Sequence[Query] = QUERIES,
) -> list[int | None]:
    """The rank of the first answer of each query (None: not found)."""
    out: list[int | None] = []
    for query in queries:
        index = corpus.everything if scope == "all" else corpus.sessions[query.conversation]
        hits = await index.search(query.text, mode=mode, limit=len(index.entries), params=params)
        found = [i for i, hit in enumerate(hits, 1) if hit.key in corpus.answers[query]]
        out.append(found[0] if found else None)
    return out


async def evaluate(
    corpus: Corpus,
    *,
    params: RankParams = DEFAULT_PARAMS,
    scope: str = "session",
    queries: Sequence[Query] = QUERIES,
) -> dict[SearchMode, Score]:
    """Recall@1 and MRR of each mode."""
    return {
        mode: _score(await ranks(corpus, mode, params=params, scope=scope, queries=queries))
        for mode in SEARCH_MODES
    }


async def by_kind(
    corpus: Corpus, mode: SearchMode, *, params: RankParams = DEFAULT_PARAMS
) -> dict[str, Score]:
    """Scores per kind of query (paraphrase, identifier, name, recent, old, topic)."""
    groups: dict[str, list[Query]] = defaultdict(list)
    for query in QUERIES:
        groups[query.kind].append(query)
    return {
        kind: _score(await ranks(corpus, mode, params=params, queries=qs))
        for kind, qs in sorted(groups.items())
    }


def embedders(name: str) -> dict[str, Embedder]:
    """The embedders to evaluate: "hashing", "model2vec" or "all"."""
    found: dict[str, Embedder] = {}
    if name in ("hashing", "all"):
        found["hashing"] = HashingEmbedder()
    if name in ("model2vec", "all"):
        found["model2vec"] = Model2VecEmbedder.bundled()
    return found


async def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--embedder", default="all", choices=["hashing", "model2vec", "all"])
    parser.add_argument("--by-kind", action="store_true", help="break hybrid down by kind")
    args = parser.parse_args(argv)
    print(f"{len(QUERIES)} queries over {len(conversations())} conversations")
    for name, embedder in embedders(args.embedder).items():
        started = time.perf_counter()
        corpus = await build(embedder)
        for scope in ("session", "all"):
            for mode, score in (await evaluate(corpus, scope=scope)).items():
                print(f"{name:10} {scope:8} {mode:8} {score}")
        if args.by_kind:
            for mode in SEARCH_MODES:
                for kind, score in (await by_kind(corpus, mode)).items():
                    print(f"{name:10} {mode:8} {kind:11} {score}")
        print(f"{name:10} ({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    asyncio.run(main())
