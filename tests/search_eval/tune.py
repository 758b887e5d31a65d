"""Measure an embedder's `fusion_weight`: sweep the weight, print hybrid's MRR gap to the
better single signal on every set and scope, and the weight whose worst gap is largest.

This is how the built-in weights were chosen (the fusion method itself is in
`agents_sqlalchemy/search/fusion.py`). Run for an embedder of your own by adding it to
`embedder_by_name`, or call `sweep` with it.

Run: python -m tests.search_eval.tune [--embedder minilm] [--weights 0.1,0.2,0.3]
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

from agents_sqlalchemy.search import SearchMode, embedder_by_name

from .evaluate import SCOPES, Corpus, Key, Ranker, build, evaluate
from .memory_index import Signals
from .sets import eval_sets

WEIGHTS = (0.0001, 0.0002, 0.001, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.5)


def ranker(weight: float) -> Ranker:
    """Rank signals as the store does, with `weight` as the embedder's fusion weight."""

    def rank(signals: Signals[Key], mode: SearchMode) -> list[Key]:
        hits = Signals(signals.keys, signals.vector, signals.keyword, signals.recency, weight).rank(
            mode
        )
        return [hit.key for hit in hits]

    return rank


async def gaps(corpus: Corpus, weight: float) -> dict[tuple[str, str], float]:
    """Hybrid MRR minus the better single signal's, per (set, scope)."""
    out = {}
    for set_name, eval_set in eval_sets().items():
        for scope in SCOPES:
            scores = await evaluate(corpus, eval_set.queries, scope=scope, ranker=ranker(weight))
            best = max(scores["vector"].mrr, scores["keyword"].mrr)
            out[set_name, scope] = scores["hybrid"].mrr - best
    return out


async def sweep(corpus: Corpus, weights: Sequence[float]) -> float:
    """Print the gaps for each weight; return the weight with the largest worst gap."""
    best_weight, best_worst = weights[0], -1.0
    for weight in weights:
        found = await gaps(corpus, weight)
        worst = min(found.values())
        cells = "  ".join(f"{s}/{sc} {g:+.3f}" for (s, sc), g in found.items())
        print(f"weight {weight:<7g} worst {worst:+.3f}  {cells}")
        if worst > best_worst:
            best_weight, best_worst = weight, worst
    return best_weight


async def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--weights", default=",".join(map(str, WEIGHTS)))
    args = parser.parse_args(argv)
    corpus = await build(embedder_by_name(args.embedder))
    best = await sweep(corpus, [float(w) for w in args.weights.split(",")])
    print(f"{args.embedder}: best weight {best:g}")


if __name__ == "__main__":
    asyncio.run(main())
