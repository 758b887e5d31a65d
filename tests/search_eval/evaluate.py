"""Search quality on the evaluation sets: recall@1 and MRR per embedder, set, scope and signal.

Items are indexed in memory (`memory_index.MemoryIndex`, which ranks exactly as the store
does) once per embedder; every question is then ranked in each mode. Scope "session"
searches the question's own transcript (`session.search`), scope "all" every transcript of
every set at once (`store.search`).

Run:
    python -m tests.search_eval.evaluate                     # every embedder, as text
    python -m tests.search_eval.evaluate --markdown          # the README's table
    python -m tests.search_eval.evaluate --embedder minilm --by-kind
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agents_sqlalchemy.search import (
    BUILTIN_EMBEDDERS,
    SEARCH_MODES,
    Embedder,
    SearchMode,
    embed_documents,
    embedder_by_name,
    item_text,
)

from .memory_index import MemoryIndex, Signals
from .queries import Query
from .sets import all_conversations, eval_sets

Key = tuple[str, int]
SCOPES = ("session", "all")
#: Ranks signals into keys, best first: the library's `fuse` by default.
Ranker = Callable[[Signals[Key], SearchMode], Sequence[Key]]


def library_ranker(signals: Signals[Key], mode: SearchMode) -> list[Key]:
    """The ranking `SessionStore.search` returns."""
    return [hit.key for hit in signals.rank(mode)]


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
    """Every transcript indexed once for one embedder: per conversation and all together."""

    sessions: dict[str, MemoryIndex[Key]]
    everything: MemoryIndex[Key]
    answers: dict[Query, set[Key]]
    _signals: dict[tuple[str, str, str, SearchMode], Signals[Key]] = field(default_factory=dict)

    async def signals(self, query: Query, scope: str, mode: SearchMode) -> Signals[Key]:
        """What the store would hand `fuse` for this question (computed once)."""
        cache_key = (query.conversation, query.text, scope, mode)
        if cache_key not in self._signals:
            index = self.everything if scope == "all" else self.sessions[query.conversation]
            self._signals[cache_key] = await index.signals(query.text, mode)
        return self._signals[cache_key]


async def build(embedder: Embedder | None) -> Corpus:
    """Index every conversation of every set (and all of them together) with `embedder`."""
    convs = all_conversations()
    items = [((c.name, i), item) for c in convs for i, item in enumerate(c.items)]
    vectors: dict[Key, bytes] = {}
    if embedder is not None:
        texts = [(key, text) for key, item in items if (text := item_text(item))]
        blobs = await embed_documents(embedder, [t for _, t in texts])
        vectors = {key: blob for (key, _), blob in zip(texts, blobs, strict=True)}
    sessions: dict[str, MemoryIndex[Key]] = {}
    everything: MemoryIndex[Key] = MemoryIndex(embedder)
    for conv in convs:
        own = [(key, item) for key, item in items if key[0] == conv.name]
        sessions[conv.name] = MemoryIndex(embedder)
        await sessions[conv.name].add(own, vectors)
        await everything.add(own, vectors)
    by_name = {c.name: c for c in convs}
    answers = {
        q: {(q.conversation, by_name[q.conversation].refs[a]) for a in q.answers}
        for s in eval_sets().values()
        for q in s.queries
    }
    return Corpus(sessions, everything, answers)


def score(ranks: Sequence[int | None]) -> Score:
    """Recall@1 and MRR from the rank of each query's first answer (None: not found)."""
    n = len(ranks)
    return Score(
        recall_at_1=sum(1 for r in ranks if r == 1) / n,
        mrr=sum(1.0 / r for r in ranks if r) / n,
        count=n,
    )


async def ranks(
    corpus: Corpus,
    queries: Sequence[Query],
    mode: SearchMode,
    scope: str,
    ranker: Ranker = library_ranker,
) -> list[int | None]:
    """The rank of the first answer of each query (None: not found)."""
    out: list[int | None] = []
    for query in queries:
        ranked = ranker(await corpus.signals(query, scope, mode), mode)
        found = [i for i, key in enumerate(ranked, 1) if key in corpus.answers[query]]
        out.append(found[0] if found else None)
    return out


async def evaluate(
    corpus: Corpus,
    queries: Sequence[Query],
    *,
    scope: str = "session",
    ranker: Ranker = library_ranker,
) -> dict[SearchMode, Score]:
    """Recall@1 and MRR of each mode (signal) over `queries`."""
    return {mode: score(await ranks(corpus, queries, mode, scope, ranker)) for mode in SEARCH_MODES}


async def table(names: Sequence[str]) -> dict[tuple[str, str, str], dict[SearchMode, Score]]:
    """Scores by (embedder, set, scope), for every named embedder."""
    out: dict[tuple[str, str, str], dict[SearchMode, Score]] = {}
    for name in names:
        corpus = await build(embedder_by_name(name))
        for set_name, eval_set in eval_sets().items():
            for scope in SCOPES:
                out[name, set_name, scope] = await evaluate(corpus, eval_set.queries, scope=scope)
    return out


def markdown(results: dict[tuple[str, str, str], dict[SearchMode, Score]]) -> str:
    """The README's table: one row per embedder, set and scope, best MRR in bold."""
    lines = [
        "| embedder | set | scope | hybrid R@1 / MRR | vector R@1 / MRR | keyword R@1 / MRR |",
        "|---|---|---|---|---|---|",
    ]
    for (name, set_name, scope), scores in results.items():
        best = max(s.mrr for s in scores.values())
        cells = []
        for mode in SEARCH_MODES:
            s = scores[mode]
            cell = f"{s.recall_at_1:.3f} / {s.mrr:.3f}"
            cells.append(f"**{cell}**" if s.mrr == best else cell)
        lines.append(f"| {name} | {set_name} | {scope} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


async def by_kind(corpus: Corpus, mode: SearchMode, scope: str) -> dict[str, Score]:
    """Scores per kind of question (paraphrase, identifier, name, recent, old, topic)."""
    groups: dict[str, list[Query]] = defaultdict(list)
    for eval_set in eval_sets().values():
        for query in eval_set.queries:
            groups[query.kind].append(query)
    return {
        kind: score(await ranks(corpus, qs, mode, scope)) for kind, qs in sorted(groups.items())
    }


async def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--embedder", default=",".join(BUILTIN_EMBEDDERS))
    parser.add_argument("--markdown", action="store_true", help="print the README's table")
    parser.add_argument("--by-kind", action="store_true", help="break each mode down by kind")
    args = parser.parse_args(argv)
    names = [n for n in args.embedder.split(",") if n]
    sets = eval_sets()
    sizes = ", ".join(
        f"{s.name}: {len(s.queries)} questions over {len(s.conversations)} transcripts"
        for s in sets.values()
    )
    print(sizes)
    started = time.perf_counter()
    results = await table(names)
    if args.markdown:
        print(markdown(results))
    else:
        for (name, set_name, scope), scores in results.items():
            for mode, s in scores.items():
                print(f"{name:10} {set_name:8} {scope:8} {mode:8} {s}")
    if args.by_kind:
        for name in names:
            corpus = await build(embedder_by_name(name))
            for mode in SEARCH_MODES:
                for kind, s in (await by_kind(corpus, mode, "session")).items():
                    print(f"{name:10} session  {mode:8} {kind:11} {s}")
    print(f"({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    asyncio.run(main())
