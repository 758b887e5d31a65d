"""Ranking on its own: keyword coverage (BM25), cosine and recency signals, and their fusion.

No database and no model: the signals are arrays, as the store hands them to `fuse`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import agents_sqlalchemy.search.fusion as fusion_module
from agents_sqlalchemy import ConfigurationError, QueryTooLongError
from agents_sqlalchemy.search import (
    DEFAULT_VECTOR_WEIGHT,
    MAX_QUERY_CHARS,
    WEAK_VECTOR_WEIGHT,
    Fusion,
    HashingEmbedder,
    MiniLMEmbedder,
    Model2VecEmbedder,
    bm25_postings,
    check_query,
    cosine_scores,
    fuse,
    fusion_weight,
    literal_terms,
    named_terms,
    pack_vectors,
    recency_scores,
)


class PlainEmbedder:
    """An embedder that declares no fusion weight."""

    dim, metric, model_id = 2, "cosine", "plain-v1"

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]

    embed_queries = embed


def _bm25_reference(
    terms: list[str], freqs: list[dict[str, int] | None], doc_count: int, k1: float = 1.2
) -> list[float]:
    """BM25 (no length normalisation) written out term by term, divided by the sum of the
    IDFs of the terms that occur: the coverage `bm25_postings` returns."""
    df = {t: sum(1 for f in freqs if f and f.get(t)) for t in terms}
    idf = {t: math.log(1 + (doc_count - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
    ceiling = sum(idf[t] for t in terms if df[t])
    return [
        sum(idf[t] * n * (k1 + 1) / (n + k1) for t, n in (f or {}).items()) / ceiling for f in freqs
    ]


def test_bm25_coverage_rewards_rare_terms_repeats_and_whole_queries() -> None:
    # Items 0-2 hold "rare" (1 other item has it), "common" (in 90 of 100), both.
    rows, terms, counts = [0, 1, 2, 2, 3, 4], [0, 1, 0, 1, 0, 0], [1, 1, 1, 1, 2, 5]
    extra = list(range(5, 93))  # 88 more items holding "common"
    rows, terms, counts = rows + extra, terms + [1] * 88, counts + [1] * 88
    scores = bm25_postings(rows, terms, counts, size=93, doc_count=100)
    rare, common, both, twice, five = scores[:5]
    assert both == pytest.approx(1.0)  # holds the whole query once
    assert rare > 0.9 > 0.1 > common > 0
    assert rare < twice < five < 2.2  # repeats saturate below k1 + 1
    assert scores[5] == common  # equal matches tie exactly


def test_bm25_postings_match_the_formula_in_any_posting_order() -> None:
    rng = np.random.default_rng(7)
    terms = ["disk", "full", "deploy", "lunch"]
    freqs: list[dict[str, int] | None] = []
    for _ in range(300):
        chosen = [t for t in terms if rng.random() < 0.3]
        freqs.append({t: int(rng.integers(1, 5)) for t in chosen} or None)
    postings = [
        (row, terms.index(t), n) for row, f in enumerate(freqs) for t, n in (f or {}).items()
    ]
    expected = _bm25_reference(terms, freqs, doc_count=400)
    shuffled = [postings[i] for i in rng.permutation(len(postings))]
    results = []
    for order in (postings, postings[::-1], shuffled):
        rows, term_ids, counts = zip(*order, strict=True)
        results.append(bm25_postings(rows, term_ids, counts, size=len(freqs), doc_count=400))
    assert np.allclose(results[0], expected, rtol=1e-12, atol=0)
    # Whatever the order, exactly the same sums: equal matches tie exactly.
    assert results[0].tolist() == results[1].tolist() == results[2].tolist()
    assert bm25_postings([], [], [], size=3, doc_count=10).tolist() == [0.0, 0.0, 0.0]


def test_cosine_and_recency_scores() -> None:
    blobs = pack_vectors(np.array([[1.0, 0.0], [0.0, 1.0]]))
    scores = cosine_scores(np.array([1.0, 0.0], dtype=np.float32), [blobs[0], None, blobs[1]])
    assert scores[0] == 1.0 and math.isnan(scores[1]) and scores[2] == 0.0
    assert cosine_scores(blobs[1], np.array([[0.0, 1.0]])).tolist() == [1.0]
    assert recency_scores([10, 30, 20, 30]).tolist() == [0.0, 1.0, 0.5, 1.0]
    assert recency_scores([100, 90], half_life=10).tolist() == [1.0, 0.5]
    assert recency_scores([5]).tolist() == [1.0]


def test_fuse_modes_keep_their_own_candidates_and_ties_go_to_the_newer() -> None:
    keys = ["a", "b", "c", "d"]
    vector = np.array([0.9, 0.1, np.nan, 0.5])
    keyword = np.array([0.0, 1.0, 0.5, 0.0])
    recency = np.array([0.0, 0.3, 0.6, 1.0])
    signals: dict[str, Any] = {"vector": vector, "keyword": keyword, "recency": recency}
    assert [h.key for h in fuse(keys, mode="vector", **signals)] == ["a", "d", "b"]
    assert [h.key for h in fuse(keys, mode="keyword", **signals)] == ["b", "c"]
    hybrid = fuse(keys, **signals)
    # "a" and "d" hold no query word; of three cosines "a" stands 0.4 above the median
    assert {h.key for h in hybrid} == {"a", "b", "c"}
    assert hybrid[0].key == "b"  # holds the whole query
    assert {h.key for h in fuse(keys, min_score=-1.0, **signals)} == set(keys)
    assert (hybrid[0].vector, hybrid[0].keyword, hybrid[0].recency) == (0.1, 1.0, 0.3)
    assert len(fuse(keys, limit=2, **signals)) == 2
    tie = fuse(["old", "new"], vector=np.array([0.5, 0.5]), recency=np.array([0.0, 1.0]))
    assert tie == []  # two equal cosines and no word: no evidence for either
    tie = fuse(
        ["old", "new"], vector=np.array([0.5, 0.5]), recency=np.array([0.0, 1.0]), min_score=0
    )
    assert [h.key for h in tie] == ["new", "old"]
    assert fuse([], mode="hybrid") == []
    with pytest.raises(ConfigurationError):
        fuse(keys, mode="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="aligned"):
        fuse(keys, vector=np.array([0.1]))
    with pytest.raises(ConfigurationError, match="vector_weight"):
        fuse(keys, vector_weight=-1.0, **signals)
    for bad in (float("nan"), "2"):  # "2" was a TypeError from the comparison
        with pytest.raises(ConfigurationError, match="vector_weight must be a finite number"):
            fuse(keys, vector_weight=bad, **signals)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="min_score"):
        fuse(keys, min_score=math.nan, **signals)


def _scene(
    n: int = 60, seed: int = 3
) -> tuple[list[int], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """`n` candidates with background cosines around 0.2 and no keyword match."""
    rng = np.random.default_rng(seed)
    return list(range(n)), rng.normal(0.2, 0.05, n), np.zeros(n)


def test_items_tying_on_keywords_are_ordered_by_recency_not_by_vector() -> None:
    keys, vector, keyword = _scene()
    keyword[[3, 7, 9]] = 1.0  # three items naming the same error code, once each
    vector[[3, 7, 9]] = [0.50, 0.45, 0.30]  # the oldest repeats it most closely
    recency = recency_scores(keys)
    for weight in (0.0002, 0.064, 0.25):
        hits = fuse(keys, vector=vector, keyword=keyword, recency=recency, vector_weight=weight)
        assert [h.key for h in hits[:3]] == [9, 7, 3], weight  # newest first


def test_a_clear_semantic_match_beats_shared_words_with_a_strong_model_only() -> None:
    keys, vector, keyword = _scene()
    vector[10] = 0.62  # the answer, in other words: far above every other cosine
    keyword[20], vector[20] = 0.5, 0.35  # shares one of the query's two words
    keyword[21], vector[21] = 0.5, 0.25  # shares the other
    recency = recency_scores(keys)
    strong = fuse(keys, vector=vector, keyword=keyword, recency=recency, vector_weight=0.25)
    weak = fuse(keys, vector=vector, keyword=keyword, recency=recency, vector_weight=0.0002)
    assert strong[0].key == 10
    # A lexical embedder's outliers are word overlaps anyway: the two partial matches lead
    # (the vector orders partial matches that tie on coverage).
    assert [h.key for h in weak[:3]] == [20, 21, 10]
    # Without such an outlier, an item holding the whole query beats the partial matches.
    vector[10] = 0.2
    keyword[30], vector[30] = 1.0, 0.3
    for weight in (0.0002, 0.2):
        hits = fuse(keys, vector=vector, keyword=keyword, recency=recency, vector_weight=weight)
        assert hits[0].key == 30


def test_recency_breaks_ties_and_never_outvotes() -> None:
    keys, vector, keyword = _scene()
    vector[0], vector[59] = 0.50, 0.49  # the oldest is (barely) the better match
    hits = fuse(keys, vector=vector, keyword=keyword, recency=recency_scores(keys))
    assert [h.key for h in hits[:2]] == [0, 59]


def test_vector_evidence_is_scale_free_and_grows_in_the_tail() -> None:
    cosines = np.array([0.1, 0.2, 0.3, 0.9])
    present = np.ones(4, bool)
    base = fusion_module.vector_evidence(cosines, present)
    assert np.allclose(fusion_module.vector_evidence(cosines * 0.5 + 0.3, present), base)
    assert base[3] > 10 * base[2] > 0
    assert fusion_module.vector_evidence(np.full(3, 0.4), np.ones(3, bool)).tolist() == [0] * 3
    assert base[0] == base[1] == 0  # at or below the median: no evidence


def test_fusion_weight_comes_from_the_embedder() -> None:
    """A declared weight is kept; one that declares nothing gets a capable model's weight,
    or the weak one when its calibration says so (`calibrate`: tests/test_calibration.py)."""
    hashing, static = fusion_weight(HashingEmbedder()), Model2VecEmbedder.fusion_weight
    assert hashing < static < fusion_weight(PlainEmbedder()) / 100
    assert fusion_weight(PlainEmbedder()) == fusion_weight(None) == DEFAULT_VECTOR_WEIGHT
    assert not hasattr(MiniLMEmbedder, "fusion_weight")  # the same as any other model

    class Declared(PlainEmbedder):
        fusion_weight = 0.5

    class Broken(PlainEmbedder):
        fusion_weight = -1.0

    assert fusion_weight(Declared()) == fusion_weight(Declared(), capable=False) == 0.5
    assert fusion_weight(PlainEmbedder(), capable=False) == WEAK_VECTOR_WEIGHT
    with pytest.raises(ConfigurationError):
        fusion_weight(Broken())


def test_a_query_naming_an_identifier_is_ranked_by_keywords_first() -> None:
    """Records that read alike (a strong model puts them all near the query) told apart by
    the identifier only keywords see."""
    keys, vector, keyword = _scene()
    vector[0:20] = np.linspace(0.55, 0.75, 20)  # twenty incidents, all close in meaning
    keyword[0:20] = 0.05  # each holds "inc", a piece of every incident id
    keyword[4], vector[4] = 1.0, 0.56  # the one holding INC-50670
    recency = recency_scores(keys)
    signals: dict[str, Any] = {"vector": vector, "keyword": keyword, "recency": recency}
    assert fuse(keys, literal=True, vector_weight=DEFAULT_VECTOR_WEIGHT, **signals)[0].key == 4
    assert fuse(keys, literal=False, vector_weight=DEFAULT_VECTOR_WEIGHT, **signals)[0].key == 19
    assert literal_terms("what was the cause of INC-50670?") == ("INC-50670",)


def test_literal_terms_are_identifiers_and_names_not_english() -> None:
    for query, found in [
        ("ERR-4411", ("ERR-4411",)),
        ("max.poll.interval.ms", ("max.poll.interval.ms",)),
        ("route53:ChangeResourceRecordSets", ("route53:ChangeResourceRecordSets",)),
        ("KeyError user_id", ("KeyError", "user_id")),
        ("alex.m@oldmail.com", ("alex.m@oldmail.com",)),
        ("QX7Z2L", ("QX7Z2L",)),
        ("Dana Whitfield", ("Dana", "Whitfield")),
        ("what did we do for Amara Okonkwo?", ("Amara", "Okonkwo")),
        ("how much VAT do we owe?", ("VAT",)),
        ("which drink gives me headaches?", ()),
        ("when does the heating need its next check-up?", ()),
        ("What do I eat on Monday?", ()),
        ("Why did the release break?", ()),
        ("tamari", ("tamari",)),  # one word is looked up as written
    ]:
        assert literal_terms(query) == found, query


def test_queries_have_a_documented_maximum_length() -> None:
    assert check_query("x" * MAX_QUERY_CHARS) == "x" * MAX_QUERY_CHARS
    with pytest.raises(QueryTooLongError, match="at most 2,000"):
        check_query("x" * (MAX_QUERY_CHARS + 1))
    with pytest.raises(ConfigurationError, match="a query is a string, not bytes"):
        check_query(b"disk")  # type: ignore[arg-type]
    assert issubclass(QueryTooLongError, ValueError)


@pytest.mark.parametrize(("ties", "first"), [("recency", "once"), ("coverage", "often")])
def test_items_tying_on_the_score_go_as_the_fitted_tie_break_says(ties: str, first: str) -> None:
    """Two items holding the whole query tie (coverage capped at 1, vector evidence
    shared): by default (fitted: every fold of the evaluation chose it) the newer one goes
    first; `ties="coverage"` puts first the one holding the query's terms more often."""
    assert Fusion().ties == "recency"
    with pytest.raises(ConfigurationError, match="ties must be one of"):
        Fusion(ties="Coverage")  # type: ignore[arg-type]  # was taken for "recency"
    keys = ["often", "once", "neither"]
    signals: dict[str, Any] = {
        "vector": np.array([0.28, 0.21, 0.10]),
        "keyword": np.array([1.57, 1.38, 0.0]),
        "recency": np.array([0.0, 1.0, 0.5]),
    }
    for literal in (False, True):
        fusion = Fusion(ties=ties)  # type: ignore[arg-type]
        hits = fuse(keys, literal=literal, fusion=fusion, **signals)
        assert hits[0].key == first, literal
        assert hits[0].score == hits[1].score


def test_a_named_term_is_the_whole_one_a_url_without_its_scheme() -> None:
    """A URL's first term was its scheme ("http"), which every item with a URL holds: a
    query naming a URL no item held was ranked by keywords first."""
    assert named_terms("was https://other.example.org down?") == {"other.example.org"}
    assert named_terms("what was the cause of INC-81233?") == {"inc-81233"}
    # The first term of a word, not its longest: the name, not a word beside it.
    assert named_terms("ERR42(connection) again") == {"err42"}
    assert named_terms("pin numpy==1.26.4") == {"numpy"}
