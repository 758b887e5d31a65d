"""Measure an embedder's `fusion_weight`: sweep the weight, print hybrid's MRR gap to the
better single signal on every set and scope, and the weight whose worst gap is largest.

The library's constants come from the cross-validated fit in `evaluate.py`; this sweep is
for an embedder of your own (add it to `embedder_by_name`, or call `sweep` with its
corpus). The method itself is in `agents_sqlalchemy/search/fusion.py`.

Run: python -m tests.search_eval.tune [--embedder minilm] [--weights 0.5,1,2]
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

from agents_sqlalchemy.search import Fusion, embedder_by_name

from .evaluate import Case, _rows, _worst, build, cases

WEIGHTS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0)


def gaps(all_cases: Sequence[Case], weight: float) -> dict[tuple[str, str], float]:
    """Hybrid MRR minus the better single signal's, per (set, scope)."""
    ranks = [c.hybrid_rank(Fusion(), weight, c.calibration.floor) for c in all_cases]
    return {key: _worst({0: rows})[0] for key, rows in _rows(all_cases, ranks).items()}


def sweep(all_cases: Sequence[Case], weights: Sequence[float]) -> float:
    """Print the gaps for each weight; return the weight with the largest worst gap."""
    best_weight, best_worst = weights[0], -1.0
    for weight in weights:
        found = gaps(all_cases, weight)
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
    best = sweep(await cases(corpus), [float(w) for w in args.weights.split(",")])
    print(f"{args.embedder}: best weight {best:g}")


if __name__ == "__main__":
    asyncio.run(main())
