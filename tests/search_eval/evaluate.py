"""Search quality on the evaluation sets, cross-validated: every constant of the fusion is
fitted on some transcripts and reported on the others.

Items are indexed in memory (`memory_index.MemoryIndex`, which ranks exactly as the store
does) once per embedder; every question is ranked by each signal alone and by the hybrid
fusion. Scope "session" searches the question's own transcript (`session.search`), scope
"all" every transcript of every set at once (`store.search`).

Cross-validation: the transcripts are dealt into `FOLDS` folds; for each fold the fusion's
constants (`Fusion`: keyword power, literal ratio, the vector evidence a hit needs; the
vector weight of an embedder that declares none, fitted on MiniLM; the weights the hashing
and static models declare) are chosen on the other folds' questions, as the ones whose
worst row (hybrid MRR minus the better single signal's) is best, and the fold's questions
are ranked with them. The "hybrid (held out)" figures put every question's held-out rank
together. "hybrid (shipped)" ranks with the library's own constants.

Off topic: every question is also searched in a transcript of another set, where nothing
answers it; the table counts what hybrid returns there without a keyword match (vector
evidence alone), at each `min_vector_z` of the grid, with and without the embedder's noise
floor (`calibrate`), beside the worst gap there. It shows what each threshold trades:
fewer hits on noise against answers found by vectors.

Embedders: hashing (the default), model2vec (the bundled static model), minilm
(all-MiniLM-L6-v2, int8 ONNX), and model2vec-protocol and minilm-protocol: the same
vectors seen through the `Embedder` protocol alone, declaring nothing, so weighed as
`calibrate` measures them. Their calibrations are printed too.

Run:
    python -m tests.search_eval.evaluate            # every table, as text
    python -m tests.search_eval.evaluate --write    # and regenerate docs/search/evaluation.md
                                                    # and the tables in tests/search_eval/README.md
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import re
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from agents_sqlalchemy.search import (
    Calibration,
    Embedder,
    Evidence,
    Fusion,
    SearchMode,
    calibrate,
    embed_documents,
    embedder_by_name,
    evidence,
    fused_scores,
    has_evidence,
    item_text,
)
from agents_sqlalchemy.search.fusion import TieBreak

from .memory_index import MemoryIndex, Signals
from .queries import Query
from .sets import all_conversations, eval_sets

Key = tuple[str, int]
SCOPES = ("session", "all")
FOLDS = 4
EMBEDDERS = ("hashing", "model2vec", "model2vec-protocol", "minilm", "minilm-protocol")
#: The suffix of an embedder seen through the protocol alone (see `ProtocolOnly`).
PROTOCOL = "-protocol"
#: Allowed shortfall of hybrid MRR against the better single signal.
TOLERANCE = 0.01

# The grid the constants are fitted on.
KEYWORD_POWERS = (2.0, 4.0, 8.0)
LITERAL_RATIOS = (0.002, 0.005)
MIN_VECTOR_ZS = (1.0, 1.5, 2.0)
TIE_BREAKS: tuple[TieBreak, ...] = ("recency", "coverage")
DEFAULT_WEIGHTS = (1.0, 2.0, 4.0)
DECLARED_WEIGHTS = {
    "hashing": (0.0001, 0.0002, 0.0005),
    "model2vec": (0.001, 0.002, 0.005),
}
#: The weight of an embedder that declares none and that `calibrate` finds weak.
WEAK_WEIGHTS = (0.0001, 0.0002, 0.0005, 0.001)

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "search" / "evaluation.md"
README = Path(__file__).with_name("README.md")
START, END = "<!-- evaluation tables: start -->", "<!-- evaluation tables: end -->"


@dataclass
class Corpus:
    """Every transcript indexed once for one embedder: per conversation and all together."""

    sessions: dict[str, MemoryIndex[Key]]
    everything: MemoryIndex[Key]
    answers: dict[Query, set[Key]]
    calibration: Calibration
    _signals: dict[tuple[str, str, str, SearchMode], Signals[Key]] = field(default_factory=dict)

    async def signals(self, query: Query, scope: str, mode: SearchMode) -> Signals[Key]:
        """What the store would hand `fuse` for this question (computed once)."""
        cache_key = (query.conversation, query.text, scope, mode)
        if cache_key not in self._signals:
            index = self.everything if scope == "all" else self.sessions[query.conversation]
            self._signals[cache_key] = await index.signals(query.text, mode)
        return self._signals[cache_key]


class ProtocolOnly:
    """An embedder seen only through the `Embedder` protocol: it declares no weight."""

    def __init__(self, inner: Embedder) -> None:
        self._inner = inner

    dim = property(lambda self: self._inner.dim)
    metric = property(lambda self: self._inner.metric)
    model_id = property(lambda self: self._inner.model_id)

    def embed(self, texts: list[str]) -> Any:
        return self._inner.embed(texts)

    def embed_queries(self, texts: list[str]) -> Any:
        return self._inner.embed_queries(texts)


async def build(embedder: Embedder) -> Corpus:
    """Index every conversation of every set (and all of them together) with `embedder`."""
    convs = all_conversations()
    items = [((c.name, i), item) for c in convs for i, item in enumerate(c.items)]
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
    return Corpus(sessions, everything, answers, await calibrate(embedder))


async def corpora(names: Sequence[str]) -> dict[str, Corpus]:
    """A corpus per embedder name; "<name>-protocol" shares the built-in's vectors."""
    out: dict[str, Corpus] = {}
    for name in names:
        base = name.removesuffix(PROTOCOL)
        if base == name:
            out[name] = await build(embedder_by_name(name))
            continue
        corpus = out.get(base) or await build(embedder_by_name(base))
        calibration = await calibrate(ProtocolOnly(embedder_by_name(base)))
        out[name] = replace(corpus, calibration=calibration, _signals=corpus._signals)
    return out


def first_rank(
    score: npt.NDArray[np.float64],
    keep: npt.NDArray[np.bool_],
    recency: npt.NDArray[np.float64],
    answers: npt.NDArray[np.bool_],
    coverage: npt.NDArray[np.float64] | None = None,
) -> int | None:
    """The rank `fuse` gives the first answer (higher score, then higher keyword
    `coverage` uncapped, then newer, then earlier candidate first), or None if no answer is
    kept: linear, no sort."""
    cov = np.zeros(score.size) if coverage is None else coverage
    best: int | None = None
    for a in np.flatnonzero(answers & keep):
        tied = score == score[a]
        level = tied & (cov == cov[a])
        ahead = keep & (
            (score > score[a])
            | (tied & (cov > cov[a]))
            | (level & (recency > recency[a]))
            | (level & (recency == recency[a]) & (np.arange(score.size) < a))
        )
        rank = int(ahead.sum()) + 1
        best = rank if best is None else min(best, rank)
    return best


@dataclass(frozen=True)
class Case:
    """One question in one scope for one embedder, ready to rank with any constants."""

    query: Query
    set_name: str
    scope: str
    found: Evidence
    calibration: Calibration  # the embedder's, as `calibrate` measures it
    literal: bool
    recency: npt.NDArray[np.float64]
    coverage: npt.NDArray[np.float64]  # uncapped: `fuse` breaks ties of the score by it
    answers: npt.NDArray[np.bool_]
    vector_rank: int | None
    keyword_rank: int | None

    def hybrid_rank(self, fusion: Fusion, weight: float, floor: float | None) -> int | None:
        """The first answer's rank with these constants, vector weight and noise floor."""
        found = self.found
        score = fused_scores(found, weight=weight, literal=self.literal, fusion=fusion)
        keep = has_evidence(found, fusion, floor)
        coverage = self.coverage if fusion.ties == "coverage" else None
        return first_rank(score, keep, self.recency, self.answers, coverage)


def arrays(signals: Signals[Key]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """A question's cosines (NaN: no vector) and coverage (0: no match), one per candidate."""
    n = len(signals.keys)
    vec = np.full(n, np.nan) if signals.vector is None else signals.vector
    return vec, np.zeros(n) if signals.keyword is None else signals.keyword


async def cases(corpus: Corpus) -> list[Case]:
    """Every question of every set, in both scopes."""
    out = []
    for set_name, eval_set in eval_sets().items():
        for scope in SCOPES:
            for query in eval_set.queries:
                signals = await corpus.signals(query, scope, "hybrid")
                vec, kw = arrays(signals)
                answers = np.array([k in corpus.answers[query] for k in signals.keys], bool)
                has_vec, has_kw = ~np.isnan(vec), kw > 0
                rec = signals.recency
                out.append(
                    Case(
                        query,
                        set_name,
                        scope,
                        evidence(vec, kw),
                        corpus.calibration,
                        signals.literal,
                        rec,
                        kw,
                        answers,
                        first_rank(np.where(has_vec, vec, -np.inf), has_vec, rec, answers),
                        first_rank(kw, has_kw, rec, answers),
                    )
                )
    return out


@dataclass(frozen=True)
class Score:
    """Recall@1 and mean reciprocal rank over some questions."""

    recall_at_1: float
    mrr: float
    count: int

    def __str__(self) -> str:
        return f"{self.recall_at_1:.3f} / {self.mrr:.3f}"


def score(ranks: Sequence[int | None]) -> Score:
    """Recall@1 and MRR from the rank of each question's first answer (None: not found)."""
    n = max(len(ranks), 1)
    return Score(
        recall_at_1=sum(1 for r in ranks if r == 1) / n,
        mrr=sum(1.0 / r for r in ranks if r) / n,
        count=len(ranks),
    )


def _worst(groups: Mapping[Any, list[tuple[Case, int | None]]]) -> tuple[float, float]:
    """(worst, mean) over rows of hybrid MRR minus the better single signal's."""
    gaps = []
    for rows in groups.values():
        hybrid = score([r for _, r in rows]).mrr
        vector = score([c.vector_rank for c, _ in rows]).mrr
        keyword = score([c.keyword_rank for c, _ in rows]).mrr
        gaps.append(hybrid - max(vector, keyword))
    return (min(gaps), sum(gaps) / len(gaps)) if gaps else (0.0, 0.0)


def _rows(cases: Iterable[Case], ranks: Iterable[int | None]) -> dict[Any, list[Any]]:
    groups: dict[Any, list[Any]] = defaultdict(list)
    for case, rank in zip(cases, ranks, strict=True):
        groups[case.set_name, case.scope].append((case, rank))
    return groups


@dataclass(frozen=True)
class Fit:
    """Constants fitted on some questions: the fusion's, and a weight per embedder."""

    fusion: Fusion
    weights: dict[str, float]

    def __str__(self) -> str:
        f = self.fusion
        weights = ", ".join(f"{k} {v:g}" for k, v in self.weights.items())
        return (
            f"keyword power {f.keyword_power:g}, literal ratio {f.literal_ratio:g}, "
            f"min vector z {f.min_vector_z:g}, ties by {f.ties}; weights: {weights}"
        )


def fit(by_embedder: Mapping[str, list[Case]]) -> Fit:
    """The constants that leave the smallest shortfall beyond `TOLERANCE`.

    Each embedder's worst row (hybrid MRR minus the better single signal's, over sets and
    scopes) counts where it is more than `TOLERANCE` below zero: first that of an embedder
    declaring nothing (minilm-protocol: what any capable model gets), then the sum over
    embedders; ties go to the larger sum of worst rows (the most robust), then of means.
    The weight of an embedder that declares none is fitted on minilm-protocol (a capable
    model) and on model2vec-protocol (a weak one); the hashing and static models' weights
    (which they declare) each on its own rows; the fusion's constants are shared by all,
    the order of exact ties then `min_vector_z` fitted last. `min_vector_z` starts at 1:
    below it, of two candidates one always counts as standing out (z = 0.67).
    """
    shared = "minilm-protocol" in by_embedder  # then minilm's rows are the same
    names = [n for n in by_embedder if not (shared and n == "minilm")]
    capable = "minilm-protocol" if shared else "minilm"

    def judge(fusion: Fusion, weights: Mapping[str, float]) -> tuple[float, ...]:
        total = [0.0, 0.0, 0.0, 0.0]
        for name in names:
            penalty, worst, mean = judge_one(fusion, name, weights[name])
            if name == capable:
                total[0] += penalty
            total[1:] = [total[1] + penalty, total[2] + worst, total[3] + mean]
        return tuple(total)

    def best_weights(fusion: Fusion) -> dict[str, float]:
        chosen = {}
        for name in names:
            weak = name.endswith(PROTOCOL) and not by_embedder[name][0].calibration.capable
            options = WEAK_WEIGHTS if weak else DECLARED_WEIGHTS.get(name, DEFAULT_WEIGHTS)
            chosen[name] = max(options, key=partial(judge_one, fusion, name))
        return chosen

    def judge_one(fusion: Fusion, name: str, weight: float) -> tuple[float, float, float]:
        cs = by_embedder[name]
        ranks = [c.hybrid_rank(fusion, weight, c.calibration.floor) for c in cs]
        worst, mean = _worst(_rows(cs, ranks))
        return min(worst + TOLERANCE, 0.0), worst, mean

    scored = []
    for power, ratio in itertools.product(KEYWORD_POWERS, LITERAL_RATIOS):
        fusion = Fusion(keyword_power=power, literal_ratio=ratio)
        weights = best_weights(fusion)
        scored.append((judge(fusion, weights), fusion, weights))
    _, fusion, weights = max(scored, key=lambda s: s[0])
    fusion = max(  # the newer first where the two orders judge alike (listed first)
        (replace(fusion, ties=ties) for ties in TIE_BREAKS),
        key=lambda f: (judge(f, weights), -TIE_BREAKS.index(f.ties)),
    )
    fusion = max(
        (replace(fusion, min_vector_z=z) for z in MIN_VECTOR_ZS),
        key=lambda f: (judge(f, weights), -f.min_vector_z),
    )
    if shared and "minilm" in by_embedder:
        weights["minilm"] = weights["minilm-protocol"]
    return Fit(fusion, weights)


def folds() -> dict[str, int]:
    """The fold of each transcript: dealt in turn, so each fold mixes the sets."""
    return {c.name: i % FOLDS for i, c in enumerate(all_conversations())}


@dataclass(frozen=True)
class OffTopic:
    """What hybrid returns for questions searched where nothing answers them, at one
    `min_vector_z` and noise floor, beside the worst gap (all transcripts, the embedder's
    weight) there."""

    empty: float  # the share of those questions answered with nothing
    vector_only: float  # hits without a keyword match, per question (any limit)
    worst_gap: float


async def off_topic(
    corpus: Corpus, cases: list[Case]
) -> dict[tuple[float, float | None], OffTopic]:
    """Each question searched in a transcript of another set (the same one each run), at
    each `min_vector_z` of the grid, with the embedder's noise floor and without it, the
    shipped fusion otherwise."""
    convs = all_conversations()
    set_of = {q.conversation: n for n, s in eval_sets().items() for q in s.queries}
    found = []
    for set_name, eval_set in eval_sets().items():
        others = [c.name for c in convs if set_of.get(c.name) != set_name]
        for i, query in enumerate(eval_set.queries):
            signals = await corpus.sessions[others[i % len(others)]].signals(query.text)
            found.append(evidence(*arrays(signals)))
    out = {}
    weight = corpus.calibration.weight
    for z, floor in itertools.product(
        MIN_VECTOR_ZS, dict.fromkeys([corpus.calibration.floor, None])
    ):
        fusion = Fusion(min_vector_z=z)
        kept = [has_evidence(e, fusion, floor) for e in found]
        alone = [int((k & ~e.has_keyword).sum()) for k, e in zip(kept, found, strict=True)]
        ranks = [c.hybrid_rank(fusion, weight, floor) for c in cases]
        worst, _ = _worst(_rows(cases, ranks))
        out[z, floor] = OffTopic(
            empty=sum(1 for k in kept if not k.any()) / len(kept),
            vector_only=sum(alone) / len(alone),
            worst_gap=worst,
        )
    return out


@dataclass
class Report:
    """Everything the evaluation prints."""

    rows: dict[tuple[str, str, str], dict[str, Score]]  # (set, embedder, scope) -> column
    fold_fits: list[Fit]
    fold_gaps: dict[tuple[int, str, str, str], float]  # (fold, set, scope, embedder) -> gap
    fold_transcripts: list[list[str]]
    all_data: Fit
    kinds: dict[tuple[str, str], Score]  # (embedder, kind) -> held-out hybrid, session
    calibrations: dict[str, Calibration]
    # (embedder, min_vector_z, noise floor) -> what off-topic questions get
    off_topic: dict[tuple[str, float, float | None], OffTopic] = field(default_factory=dict)
    seconds: float = 0.0


async def run(names: Sequence[str] = EMBEDDERS) -> Report:
    """Index, cross-validate and score; see the module docstring."""
    started = time.perf_counter()
    by_name = await corpora(names)
    by_embedder = {name: await cases(corpus) for name, corpus in by_name.items()}
    fold_of = folds()
    fold_fits, held_out = [], {}
    fold_gaps: dict[tuple[int, str, str, str], float] = {}
    for k in range(FOLDS):
        train = {
            n: [c for c in cs if fold_of[c.query.conversation] != k]
            for n, cs in by_embedder.items()
        }
        fitted = fit(train)
        fold_fits.append(fitted)
        for name, cs in by_embedder.items():
            test = [c for c in cs if fold_of[c.query.conversation] == k]
            ranks = [
                c.hybrid_rank(fitted.fusion, fitted.weights[name], c.calibration.floor)
                for c in test
            ]
            for case, rank in zip(test, ranks, strict=True):
                held_out[name, id(case)] = rank
            for (set_name, scope), group_rows in _rows(test, ranks).items():
                fold_gaps[k, set_name, scope, name] = _worst({0: group_rows})[0]
    all_data = fit(by_embedder)
    rows: dict[tuple[str, str, str], dict[str, Score]] = {}
    kinds: dict[tuple[str, str], Score] = {}
    for name, cs in by_embedder.items():
        calibration = by_name[name].calibration
        groups: dict[tuple[str, str], list[Case]] = defaultdict(list)
        for case in cs:
            groups[case.set_name, case.scope].append(case)
        for (set_name, scope), group in groups.items():
            rows[set_name, name, scope] = {
                "hybrid (held out)": score([held_out[name, id(c)] for c in group]),
                "hybrid (shipped)": score(
                    [c.hybrid_rank(Fusion(), calibration.weight, calibration.floor) for c in group]
                ),
                "vector": score([c.vector_rank for c in group]),
                "keyword": score([c.keyword_rank for c in group]),
            }
        by_kind: dict[str, list[int | None]] = defaultdict(list)
        for case in cs:
            if case.scope == "session":
                by_kind[case.query.kind].append(held_out[name, id(case)])
        for kind, ranks in sorted(by_kind.items()):
            kinds[name, kind] = score(ranks)
    transcripts = [
        [c.name for c in all_conversations() if fold_of[c.name] == k] for k in range(FOLDS)
    ]
    off: dict[tuple[str, float, float | None], OffTopic] = {}
    for name, cs in by_embedder.items():
        if not name.endswith(PROTOCOL):  # what is kept does not depend on the weight
            for (z, floor), figures in (await off_topic(by_name[name], cs)).items():
                off[name, z, floor] = figures
    calibrations = {name: corpus.calibration for name, corpus in by_name.items()}
    report = Report(rows, fold_fits, fold_gaps, transcripts, all_data, kinds, calibrations, off)
    report.seconds = time.perf_counter() - started
    return report


def gap(columns: Mapping[str, Score], hybrid: str = "hybrid (held out)") -> float:
    """Hybrid MRR minus the better single signal's."""
    return columns[hybrid].mrr - max(columns["vector"].mrr, columns["keyword"].mrr)


def markdown(report: Report) -> str:
    """The generated tables (docs/search/evaluation.md, and the README's section)."""
    sets = eval_sets()
    total = sum(len(s.queries) for s in sets.values())
    lines = [
        f"{total} questions in {len(sets)} sets over {len(all_conversations())} transcripts; "
        f"{FOLDS} folds of transcripts. Recall@1 / MRR; gap: held-out hybrid MRR minus the "
        "better single signal's.",
        "",
        "| set | embedder | scope | hybrid (held out) | hybrid (shipped) | vector | keyword "
        "| gap |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (set_name, name, scope), columns in sorted(
        report.rows.items(), key=lambda r: (list(sets).index(r[0][0]), r[0][1], r[0][2])
    ):
        cells = " | ".join(str(columns[c]) for c in columns)
        lines.append(f"| {set_name} | {name} | {scope} | {cells} | {gap(columns):+.3f} |")
    names = [n for n in EMBEDDERS if any(key[3] == n for key in report.fold_gaps)]
    lines += [
        "",
        "Folds: the constants fitted on the other folds, and the worst held-out gap of each "
        "embedder over the fold's sets and scopes.",
        "",
        "| fold | held-out transcripts | fitted on the others | " + " | ".join(names) + " |",
        "|---|---|---|" + "---|" * len(names),
    ]
    for k, fitted in enumerate(report.fold_fits):
        worst = [
            min(g for (f, _, _, n), g in report.fold_gaps.items() if f == k and n == name)
            for name in names
        ]
        lines.append(
            f"| {k} | {', '.join(report.fold_transcripts[k])} | {fitted} | "
            + " | ".join(f"{w:+.3f}" for w in worst)
            + " |"
        )
    lines += [
        "",
        f"Fitted on every transcript (what the library ships): {report.all_data}.",
        "",
        "Held-out hybrid by kind of question (scope session), recall@1 / MRR:",
        "",
        "| embedder | " + " | ".join(sorted({k for _, k in report.kinds})) + " |",
        "|---|" + "---|" * len({k for _, k in report.kinds}),
    ]
    for embedder in dict.fromkeys(n for n, _ in report.kinds):
        kinds = [str(report.kinds[embedder, k]) for k in sorted({k for _, k in report.kinds})]
        lines.append(f"| {embedder} | " + " | ".join(kinds) + " |")
    lines += [
        "",
        "Calibration (`calibrate`, measured on its own 40 question-answer pairs): the noise "
        "floor (the cosine 95% of unrelated pairs stay under), the share of true answers "
        "above it, and the weight and floor the fusion uses.",
        "",
        "| embedder | noise floor | true answers above it | capable | weight | floor used |",
        "|---|---|---|---|---|---|",
    ]
    for name, c in report.calibrations.items():
        lines.append(
            f"| {name} | {_floor(c.noise_floor)} | {c.recall:.0%} | "
            f"{'yes' if c.capable else 'no'} | {c.weight:g} | {_floor(c.floor)} |"
        )
    if report.off_topic:
        lines += [
            "",
            "Off topic: each question searched in a transcript of another set, where nothing "
            "answers it (scope session), by the hybrid ranking at each `min_vector_z` of the "
            "grid, with the embedder's noise floor and without (* shipped): the share answered "
            "with nothing, and the hits without a keyword match per question; beside it the "
            "worst gap there (every transcript, held in).",
            "",
            "| embedder | min vector z | noise floor | off topic: nothing returned | off topic: "
            "hits on vectors alone | worst gap |",
            "|---|---|---|---|---|---|",
        ]
        for (embedder, z, floor), figures in report.off_topic.items():
            shipped = floor == report.calibrations[embedder].floor
            star = " *" if shipped and z == Fusion().min_vector_z else ""
            lines.append(
                f"| {embedder} | {z:g}{star} | {_floor(floor)} | {figures.empty:.0%} | "
                f"{figures.vector_only:.1f} | {figures.worst_gap:+.3f} |"
            )
    return "\n".join(lines)


def _floor(floor: float | None) -> str:
    return "none" if floor is None else f"{floor:.3f}"


def text(report: Report) -> str:
    """Every row and every fold's rows, as text."""
    out = []
    for (set_name, name, scope), columns in report.rows.items():
        cells = "  ".join(f"{c} {s}" for c, s in columns.items())
        out.append(f"{set_name:13} {name:16} {scope:8} {cells}  gap {gap(columns):+.3f}")
    for k, fitted in enumerate(report.fold_fits):
        out.append(f"fold {k} (held out: {', '.join(report.fold_transcripts[k])}): {fitted}")
        for (f, set_name, scope, name), g in sorted(report.fold_gaps.items()):
            if f == k:
                out.append(f"  {set_name:13} {scope:8} {name:16} held-out gap {g:+.3f}")
    out.append(f"all transcripts: {report.all_data}")
    for (name, kind), s in report.kinds.items():
        out.append(f"{name:16} {kind:11} held-out hybrid {s}")
    for name, c in report.calibrations.items():
        out.append(f"{name:18} calibration: {c}")
    for (name, z, floor), off in report.off_topic.items():
        out.append(
            f"{name:18} min vector z {z:g}, noise floor {_floor(floor)}: off topic, nothing "
            f"returned {off.empty:.0%}, {off.vector_only:.1f} hits on vectors alone; "
            f"worst gap {off.worst_gap:+.3f}"
        )
    return "\n".join(out)


def write(report: Report) -> None:
    """Regenerate docs/search/evaluation.md and the README's tables."""
    tables = markdown(report)
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(
        "# Search evaluation\n\n<!-- Generated by `python -m tests.search_eval.evaluate "
        "--write`: do not edit by hand. -->\n\n"
        "How the sets are built and what the fusion does: tests/search_eval/README.md and "
        "the docstring of `agents_sqlalchemy.search.fusion`.\n\n" + tables + "\n"
    )
    readme = README.read_text()
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.S)
    if not pattern.search(readme):
        raise SystemExit(f"{README} has no {START} ... {END} section")
    README.write_text(pattern.sub(lambda _: f"{START}\n\n{tables}\n\n{END}", readme))


async def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--embedder", default=",".join(EMBEDDERS))
    parser.add_argument("--write", action="store_true", help="regenerate the docs' tables")
    args = parser.parse_args(argv)
    names = [n for n in args.embedder.split(",") if n]
    report = await run(names)
    print(text(report))
    print()
    print(markdown(report))
    print(f"({report.seconds:.1f} s)")
    if args.write:
        if tuple(names) != EMBEDDERS:
            raise SystemExit("--write needs every embedder")
        write(report)


if __name__ == "__main__":
    asyncio.run(main())
