"""Grid search of the ranking's general parameters, to choose `RankParams` defaults.

Scores each setting by hybrid MRR, averaged over both embedders and both scopes, and shows
the best settings of each half of the conversations: a setting that wins on one half only is
noise. Run: python -m tests.search_eval.tune
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import replace

from agents_sqlalchemy.search import RankParams

from .evaluate import Corpus, build, embedders, evaluate
from .queries import QUERIES

HALVES = {
    "first": {"incident", "personal", "travel"},
    "second": {"support", "coding", "finance"},
}


def grid() -> list[RankParams]:
    out = []
    for b, recency in itertools.product((0.0, 0.3, 0.75), (0.0, 0.1, 0.2, 0.3)):
        for k, vw in itertools.product((10.0, 30.0, 60.0), (0.5, 0.75, 1.0)):
            out.append(
                RankParams(
                    fusion="rrf", rrf_k=k, vector_weight=vw, recency_weight=recency, bm25_b=b
                )
            )
        for vw in (0.5, 1.0):
            out.append(
                RankParams(fusion="blend", vector_weight=vw, recency_weight=recency, bm25_b=b)
            )
    return out


async def mrr(corpora: dict[str, Corpus], params: RankParams, half: str | None) -> float:
    queries = [q for q in QUERIES if half is None or q.conversation in HALVES[half]]
    total = 0.0
    for corpus in corpora.values():
        for scope in ("session", "all"):
            scores = await evaluate(corpus, params=params, scope=scope, queries=queries)
            total += scores["hybrid"].mrr
    return total / (2 * len(corpora))


def label(p: RankParams) -> str:
    head = f"{p.fusion:5} b={p.bm25_b:<4} vw={p.vector_weight:<4} rw={p.recency_weight:<5}"
    return head + (f" k={p.rrf_k:g}" if p.fusion == "rrf" else "")


async def main() -> None:
    corpora = {name: await build(e) for name, e in embedders("all").items()}
    results = []
    for params in grid():
        row = [await mrr(corpora, params, half) for half in (None, "first", "second")]
        results.append((row, params))
    for title, column in (("all queries", 0), ("first half", 1), ("second half", 2)):
        print(f"best on {title}:")
        for row, params in sorted(results, key=lambda r: -r[0][column])[:8]:
            print(f"  {label(params)}  all {row[0]:.3f} first {row[1]:.3f} second {row[2]:.3f}")
    default = RankParams()
    print(
        "default:",
        label(default),
        [round(x, 3) for x in [await mrr(corpora, default, h) for h in (None, "first", "second")]],
    )
    for fusion in ("rrf", "blend"):
        best = max((r for r in results if r[1].fusion == fusion), key=lambda r: r[0][0])
        print(f"best {fusion}: {label(best[1])} {best[0][0]:.3f}")
    no_recency = replace(default, recency_weight=0.0)
    print("default without recency:", round(await mrr(corpora, no_recency, None), 3))


if __name__ == "__main__":
    asyncio.run(main())
