"""Fusion of the search signals: evidence weighed per query, fitted out of sample.

The method, for one query over its candidates:

1. Keyword evidence is *coverage*, capped at 1: `bm25_postings` scales BM25 so that an item
   holding each matched query term once scores 1 (0.5: it holds half the query's term
   weight), and `K = min(coverage, 1)`.
2. Vector evidence is how far an item stands out in this query's own cosine distribution: a
   robust z-score (median, MAD), turned into the log-likelihood ratio `V = z**2 / 2` nats
   for z > 0, else 0. No absolute cosine threshold, so it works for any model's scale;
   only a spread under `MIN_SPREAD` (candidates all but alike) counts as that much.
3. What the query names decides which evidence leads. A query holding identifiers or
   names (`query.literal_terms`: `INC-81233`, `max.poll.interval.ms`, `Dana Whitfield`),
   where some candidate holds one of them whole (`query.named_terms`), is ranked by
   coverage; vectors count
   `literal_ratio` of their weight, and items tying exactly on coverage share their mean
   vector evidence, the newest first. A model reads an identifier as a few word pieces
   and puts every record that looks alike near it; only the exact term tells them apart.
4. Any other query is a question in words: `score = K**keyword_power + w * V`, items
   holding the whole query sharing their vector evidence. Coverage to a power makes a
   partial match weak ("which *drink* gives me headaches?" against "*Drink* more water")
   and a whole one strong; `w` is the embedder's `fusion_weight`.
5. Only hits with evidence are returned: a keyword match, or a cosine at least
   `min_vector_z` robust deviations above the median and above the embedder's noise
   floor (`vector_floor`, from `calibration.calibrate`: the cosine 95% of unrelated
   pairs stay under; a model whose answers lie in its noise too has none, unless its
   vectors are its words: `lexical`). Among fewer than `SMALL_SCOPE` vectors no z-score
   can stand out (of two, one is always 0.67 above the median), so there a cosine
   `min_cosine_margin` (0.1) above the median counts: an absolute margin, chosen on
   small examples (unrelated texts lie within 0.02-0.12 of each other with the built-in
   models; "why did the release break?" and "the deployment failed: the disk was full"
   0.21-0.35 above "lunch plans for friday"), not fitted: the evaluation's scopes are
   all larger. A lone vector has nothing to stand out from: the noise floor alone decides
   (an embedder without one: keywords only). A query that nothing holds or means returns
   nothing; `fuse(min_score=...)` returns instead every candidate whose score reaches it.
   Items tying exactly go by `ties`: the newer first, or first the one holding the query's
   terms more often (coverage uncapped); fitted like the rest.

An embedder that declares no `fusion_weight` is measured (`calibration.calibrate`): one
whose cosines tell answers from unrelated texts gets `DEFAULT_VECTOR_WEIGHT`, a capable
model's (all-MiniLM-L6-v2 declares nothing), any other `WEAK_VECTOR_WEIGHT`; the built-in
hashing and static models declare how little their vectors add to words. Everything is
linear in the candidates (a median, a partition; `np.unique` for ties sorts only the
keyword matches).

Why (tests/search_eval, 314 questions in five sets; every constant here fitted by
cross-validation over transcripts, `python -m tests.search_eval.evaluate`):

- The previous fusion, `K + w * V` with one weight per embedder and ties shared among
  all equal coverages, could not serve both kinds of set. With MiniLM, where shared words
  mislead (the "shared-words" set) it scored MRR 0.322 against vectors alone 0.375, and
  where meaning misleads ("identifiers": near-identical records) 0.923 against keywords
  1.000 (0.753 against 0.949 across all sessions); raising the weight helped the first and
  hurt the second (at weight 2: -0.031 and -0.426). Through the protocol MiniLM got the
  static model's weight 0.064: 0.57 against 0.82 on the paraphrase set.
- No statistic of one query's scores alone told those apart (score dispersion, agreement
  of the rankings, the correlation of cosine and coverage: the static model looked as
  "semantic" by them as MiniLM). What tells them apart is the query: every question of
  "identifiers" that MiniLM's vectors lost named an identifier or a name, and every loss
  on "paraphrase" and "shared-words" with the literal rule came from hyphenated English
  (`check-up`, `sign-off`) taken for identifiers, hence the rule that hyphens alone do not
  make one.
- Held out, with MiniLM (declared or through the protocol) hybrid ranking is then at
  least its better signal minus 0.01 on every set and scope, and better than both on the
  topical and mixed sets (+0.016 to +0.052). The hashing default holds every row but one
  held out (-0.014 on paraphrases across all sessions, where neither of its signals finds
  anything: MRR 0.02-0.07); the
  static model falls short on its two weakest rows (paraphrase and shared-words per
  session, -0.04 and -0.02: its vectors alone score 0.15 and 0.08, and a partial keyword
  match flips single questions).
- A set written after this fusion was fitted, none of it in tests/search_eval (six chats,
  97 questions), found three faults, mended since: a capitalised word no item held
  ("out of *RAM*") made keywords lead on a question's filler words; a query of one word
  ("tamari") put an item without it first, its vector standing out of one word's vague
  meaning; and items holding the whole query tied and went newest first, though one held
  its terms more. With MiniLM its held-out gaps went from -0.028 to 0.000 on identifiers
  and -0.036 to -0.011 on paraphrases (per session), and mixed above rose +0.010 to
  +0.014; its word-sharing questions stay at -0.010 (per session) and -0.024 (all
  sessions), where keywords alone find the answer more often than either fusion.
- The third mend, ties by coverage, was never measured on this evaluation: its rank
  broke ties by age, as the fusion did before (11 of 628 questions with the hashing model
  ranked otherwise than the store). Fitted as a constant (`Fusion.ties`), every fold
  chose the newer first: by coverage, the hashing model's mixed set per session fell to
  -0.014 and the static model's to -0.016, and MiniLM's topical gains shrank by 0.009. A
  second held-out set (four chats, 85 questions) could not tell the two apart (within
  0.004 on the whole set, with every model).

Example::

    hits = fuse(
        [101, 102, 103],
        vector=np.array([0.61, 0.12, 0.20]),        # cosines (NaN: no vector)
        keyword=np.array([0.0, 1.0, 0.5]),          # bm25_postings: coverage
        recency=np.array([0.0, 0.5, 1.0]),          # recency_scores
        vector_weight=fusion_weight(embedder),
        literal=False,                              # no name of the query is held
        limit=2,
    )
    [(hit.key, round(hit.score, 3)) for hit in hits]
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar, get_args

import numpy as np
import numpy.typing as npt

from ..errors import ConfigurationError
from .embedders import Embedder, check_real, declared_weight

K = TypeVar("K", bound=Hashable)
SearchMode = Literal["hybrid", "vector", "keyword"]
#: How items tying exactly on the score are ordered (see `Fusion.ties`).
TieBreak = Literal["recency", "coverage"]
Scores = npt.NDArray[np.float64]
SEARCH_MODES: tuple[SearchMode, ...] = ("hybrid", "vector", "keyword")

#: The vector weight of a capable embedder that declares none (see `fusion_weight`).
DEFAULT_VECTOR_WEIGHT = 2.0
#: The vector weight of an embedder that declares none and whose cosines do not tell
#: answers from unrelated texts (`calibration.calibrate`).
WEAK_VECTOR_WEIGHT = 0.0002
#: Keyword evidence is coverage to this power: holding part of a question's words is weak.
KEYWORD_POWER = 4.0
#: In a query that names identifiers or names, vectors count this fraction of their weight.
LITERAL_RATIO = 0.002
#: Items tying exactly on the score go first by (see `Fusion.ties`).
TIES: TieBreak = "recency"
#: Without keyword evidence, a hybrid hit needs a robust z-score of its cosine this high.
MIN_VECTOR_Z = 1.0
#: Among fewer candidates with a vector than this, no z-score can stand out (of two, one
#: is always 0.67 above the median); there a cosine this far above the median counts.
SMALL_SCOPE = 8
MIN_COSINE_MARGIN = 0.1
#: The least spread of a query's cosines `robust_z` divides by. Near-duplicate candidates
#: (a log of alike lines) have cosines a hair apart: divided by that hair, one of them
#: differing by a hash collision stood out by hundreds of deviations, and scored so too.
#: Of the evaluation's 628 searches per model, one spreads less (0.0098, with the hashing
#: default; its rank did not change); the least are 0.023 with MiniLM, 0.044 with the
#: static model.
MIN_SPREAD = 0.01


@dataclass(frozen=True)
class Fusion:
    """The fusion's fitted constants (see the module docstring); `fuse` takes them whole.

    Example::

        fuse(keys, vector=cosines, keyword=coverage, fusion=Fusion(keyword_power=2.0))
    """

    keyword_power: float = KEYWORD_POWER
    literal_ratio: float = LITERAL_RATIO
    min_vector_z: float = MIN_VECTOR_Z
    min_cosine_margin: float = MIN_COSINE_MARGIN
    #: Items tying exactly on the score: the newer first ("recency"), or the one holding
    #: the query's terms more often first, then the newer ("coverage").
    ties: TieBreak = TIES

    def __post_init__(self) -> None:
        if self.ties not in get_args(TieBreak):
            raise ConfigurationError(f"ties must be one of {get_args(TieBreak)}, not {self.ties!r}")


@dataclass(frozen=True)
class Evidence:
    """One query's evidence per candidate, before weighting (see `evidence`).

    `keyword` is coverage capped at 1, `vector` the cosine's log-likelihood ratio in nats,
    `z` the cosine's robust z-score (0 without a vector), `cosine` the cosines (NaN: none).
    """

    cosine: Scores
    keyword: Scores
    vector: Scores
    z: Scores
    has_vector: npt.NDArray[np.bool_]
    has_keyword: npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Hit(Generic[K]):
    """One ranked candidate: its fused `score` and the signals behind it.

    `vector` is the cosine similarity (None without a vector), `keyword` the BM25 coverage
    (0 without a matching term), `recency` in [0, 1] with 1 for the newest candidate.
    """

    key: K
    score: float
    vector: float | None
    keyword: float
    recency: float


def fusion_weight(embedder: Embedder | None, *, capable: bool = True) -> float:
    """How much `fuse` weighs an embedder's vector evidence against keyword coverage.

    An embedder may declare it as a `fusion_weight` attribute (fitted with
    tests/search_eval/tune.py: the built-in hashing and static models declare how little
    their vectors know beyond words); any other gets `DEFAULT_VECTOR_WEIGHT` if it is
    `capable` (as `calibration.calibrate` measures), else `WEAK_VECTOR_WEIGHT`. The
    evidence of each query decides the rest (see the module docstring).

    >>> fusion_weight(None), fusion_weight(None, capable=False)
    (2.0, 0.0002)
    """
    declared = declared_weight(embedder)
    if declared is not None:
        return declared
    return DEFAULT_VECTOR_WEIGHT if capable else WEAK_VECTOR_WEIGHT


def fuse(
    keys: Sequence[K],
    *,
    vector: Scores | None = None,
    keyword: Scores | None = None,
    recency: Scores | None = None,
    mode: SearchMode = "hybrid",
    limit: int | None = 10,
    vector_weight: float | None = None,
    vector_floor: float | None = None,
    literal: bool = False,
    min_score: float | None = None,
    fusion: Fusion = Fusion(),
) -> list[Hit[K]]:
    """Rank candidates from their signals (arrays aligned with `keys`), best first.

    `vector` holds cosines (NaN: no vector), `keyword` coverage from `bm25_postings` (0: no
    match), `recency` values in [0, 1]. Mode "vector" ranks the candidates with a vector by
    cosine, "keyword" those with a match by coverage, "hybrid" all of them by evidence
    fusion with `vector_weight` (None: `DEFAULT_VECTOR_WEIGHT`); `literal` says the query
    names identifiers or names that some candidate holds (`query.named_terms`). Items
    tying on the score go as `fusion.ties` says.

    What is returned: in "hybrid", only hits with evidence (`has_evidence`): a keyword
    match, or a cosine standing out and at least `vector_floor` (the embedder's noise
    floor, `calibration.calibrate`; None: no floor); an empty list is an answer. With
    `min_score`, instead, every candidate of the mode whose score reaches it (fused score,
    cosine or coverage).
    """
    n = len(keys)
    vec = np.full(n, np.nan) if vector is None else np.asarray(vector, dtype=np.float64)
    kw = np.zeros(n) if keyword is None else np.asarray(keyword, dtype=np.float64)
    rec = np.zeros(n) if recency is None else np.asarray(recency, dtype=np.float64)
    if not vec.shape == kw.shape == rec.shape == (n,):
        raise ConfigurationError("vector, keyword and recency must be aligned with keys")
    if min_score is not None:
        min_score = check_real("min_score", min_score)
    if vector_floor is not None:
        vector_floor = check_real("vector_floor", vector_floor)
    has_vec, has_kw = ~np.isnan(vec), kw > 0
    if mode == "vector":
        score, keep = np.where(has_vec, vec, -np.inf), has_vec
    elif mode == "keyword":
        score, keep = kw, has_kw
    elif mode == "hybrid":
        weight = check_real(
            "vector_weight", DEFAULT_VECTOR_WEIGHT if vector_weight is None else vector_weight
        )
        if weight < 0:
            raise ConfigurationError(f"vector_weight must be >= 0, not {weight!r}")
        found = evidence(vec, kw)
        score = fused_scores(found, weight=weight, literal=literal, fusion=fusion)
        keep = has_evidence(found, fusion, vector_floor)
    else:
        raise ConfigurationError(f"mode must be one of {SEARCH_MODES}, not {mode!r}")
    if min_score is not None:
        keep = (has_vec | has_kw if mode == "hybrid" else keep) & (score >= min_score)
    index = np.flatnonzero(keep)
    by = [-rec[index], -score[index]]  # np.lexsort sorts by the last one first
    if fusion.ties == "coverage":
        by.insert(1, -kw[index])
    order = index[np.lexsort(by)]
    if limit is not None:
        order = order[:limit]
    return [
        Hit(
            key=keys[i],
            score=float(score[i]),
            vector=float(vec[i]) if has_vec[i] else None,
            keyword=float(kw[i]),
            recency=float(rec[i]),
        )
        for i in order
    ]


def evidence(cosines: Scores, coverage: Scores) -> Evidence:
    """Each candidate's keyword and vector evidence for one query (see the module
    docstring): linear in the candidates, like everything `fuse` does per query."""
    has_vec, has_kw = ~np.isnan(cosines), coverage > 0
    z = robust_z(cosines, has_vec)
    positive = np.maximum(z, 0.0)
    return Evidence(cosines, np.minimum(coverage, 1.0), positive * positive / 2, z, has_vec, has_kw)


def has_evidence(
    found: Evidence, fusion: Fusion, floor: float | None = None
) -> npt.NDArray[np.bool_]:
    """Which candidates a hybrid search returns by default: those holding a query term, or
    whose cosine stands `fusion.min_vector_z` robust deviations above the median (among
    fewer than `SMALL_SCOPE` vectors: `fusion.min_cosine_margin` above it; a lone vector,
    with nothing to stand out from, only by the floor) and reaches `floor` (the embedder's
    noise floor; None: none)."""
    vec = found.has_vector
    cosine = np.where(vec, found.cosine, -np.inf)
    stands_out = found.z >= fusion.min_vector_z
    count = int(vec.sum())
    if count == 1 and floor is not None:  # nothing to stand out from: the floor decides
        stands_out = vec
    elif 0 < count < SMALL_SCOPE:
        stands_out |= cosine >= float(np.median(found.cosine[vec])) + fusion.min_cosine_margin
    meaningful = vec & stands_out & (cosine >= (-np.inf if floor is None else floor))
    return np.asarray(found.has_keyword | meaningful, dtype=np.bool_)


def fused_scores(found: Evidence, *, weight: float, literal: bool, fusion: Fusion) -> Scores:
    """The hybrid score of each candidate (see the module docstring).

    A query naming identifiers or names, where some candidate holds a query term, is ranked
    by coverage, vectors weighted by `fusion.literal_ratio`; items tying exactly on coverage
    share their vector evidence (and go newest first). Any other query: coverage to the
    power `fusion.keyword_power` plus `weight` times the vector evidence, items holding the
    whole query sharing theirs.
    """
    kw, vec = found.keyword, found.vector
    if literal and found.has_keyword.any():
        shared = _shared(vec, kw, found.has_keyword)
        return np.asarray(kw + weight * fusion.literal_ratio * shared, dtype=np.float64)
    shared = _shared(vec, kw, kw >= 1.0)
    return np.asarray(kw**fusion.keyword_power + weight * shared, dtype=np.float64)


def _shared(values: Scores, groups: Scores, among: npt.NDArray[np.bool_]) -> Scores:
    """`values`, each replaced (where `among`) by the mean over the items with exactly the
    same `groups` value."""
    out = np.array(values, dtype=np.float64)
    if among.any():
        _, group = np.unique(groups[among], return_inverse=True)
        out[among] = (np.bincount(group, weights=values[among]) / np.bincount(group))[group]
    return out


def robust_z(cosines: Scores, present: npt.NDArray[np.bool_]) -> Scores:
    """How far each cosine stands out among the query's: (cosine - median) / (1.4826 *
    MAD), the standard deviation if the MAD is 0, and `MIN_SPREAD` at least; 0 where there
    is no vector, or fewer than two.

    >>> robust_z(np.array([0.1, 0.2, 0.3, 0.9]), np.ones(4, bool)).round(2).tolist()
    [-1.01, -0.34, 0.34, 4.38]
    >>> robust_z(np.array([0.2, 0.201, 0.202, 0.3]), np.ones(4, bool)).round(2).tolist()
    [-0.15, -0.05, 0.05, 9.85]
    """
    out = np.zeros(cosines.shape[0])
    if int(present.sum()) < 2:
        return out
    values = cosines[present]
    median = float(np.median(values))
    spread = 1.4826 * float(np.median(np.abs(values - median))) or float(values.std())
    out[present] = (values - median) / max(spread, MIN_SPREAD)
    return out


def vector_evidence(cosines: Scores, present: npt.NDArray[np.bool_]) -> Scores:
    """How far each candidate stands out among the query's cosines, in nats (0: none).

    The robust z-score (`robust_z`) turned into the log-likelihood ratio of a normal
    shifted to the item's cosine against the query's own: `z**2 / 2` above the median, 0
    at or below it.

    >>> vector_evidence(np.array([0.1, 0.2, 0.3, 0.9]), np.ones(4, bool)).round(2).tolist()
    [0.0, 0.0, 0.06, 9.61]
    """
    z = np.maximum(robust_z(cosines, present), 0.0)
    return np.asarray(z * z / 2, dtype=np.float64)
