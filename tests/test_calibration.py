"""An embedder's calibration: its noise floor and the weight its vectors earn, measured on
pairs of its own, and what hybrid search returns with them.

A capable model's hit without a keyword needs a cosine above the model's noise floor; a
weak model gets no floor; an embedder that declares no weight gets the one its
measurement earns, capable or weak, whatever it is called.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np
import pytest

from agents_sqlalchemy import ConfigurationError, SessionStore
from agents_sqlalchemy.search import (
    DEFAULT_VECTOR_WEIGHT,
    WEAK_VECTOR_WEIGHT,
    Embedder,
    EmbedderError,
    HashingEmbedder,
    MiniLMEmbedder,
    Model2VecEmbedder,
    calibrate,
    embed_query,
    embed_texts,
    evidence,
    fuse,
)
from agents_sqlalchemy.search.calibration import CAPABLE_RECALL, PAIRS, SIGNIFICANCE, measure
from agents_sqlalchemy.search.fusion import robust_z

from .support.items import message

BAKING = [
    "Preheat the oven to 200 degrees before the bread goes in.",
    "The sourdough starter needs feeding twice a day.",
    "Knead the dough for ten minutes until it is smooth.",
    "Let the loaf rest on a rack for an hour before slicing.",
    "Rye flour makes a denser crumb than wheat.",
    "A baking stone gives a crisper crust.",
    "Score the top with a razor so it opens evenly.",
    "Proof the shaped dough overnight in the fridge.",
    "Add a pan of water to the oven for steam.",
    "Salt slows the yeast, so weigh it carefully.",
    "The banneton needs dusting with rice flour.",
    "Whole wheat absorbs more water than white flour.",
]


class Undeclared:
    """A model seen through the `Embedder` protocol alone (it declares no weight), and
    counting what it is asked to embed."""

    def __init__(self, inner: Embedder, model_id: str | None = None) -> None:
        self._inner = inner
        self.model_id = model_id or inner.model_id
        self.dim, self.metric = inner.dim, inner.metric
        self.texts = 0

    def embed(self, texts: list[str]) -> Any:
        self.texts += len(texts)
        return self._inner.embed(texts)

    def embed_queries(self, texts: list[str]) -> Any:
        self.texts += len(texts)
        return self._inner.embed_queries(texts)


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture(params=["plaintext", "encrypted"])
def key(request: pytest.FixtureRequest) -> bytes | None:
    """No key, or a raw 32-byte key."""
    return None if request.param == "plaintext" else os.urandom(32)


def test_the_floor_is_the_noise_quantile_and_recall_the_answers_above_it() -> None:
    rng = np.random.default_rng(3)
    queries = rng.normal(size=(40, 64))
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    floor, recall = measure(queries, queries)  # each answer is its question
    unrelated = (queries @ queries.T)[~np.eye(40, dtype=bool)]
    assert floor == pytest.approx(np.quantile(unrelated, SIGNIFICANCE))
    assert recall == 1.0
    answers = rng.normal(size=(40, 64))
    answers /= np.linalg.norm(answers, axis=1, keepdims=True)
    assert measure(queries, answers)[1] < 0.3  # unrelated "answers": noise


async def test_a_model_is_measured_once_per_model_id() -> None:
    first = Undeclared(HashingEmbedder(), model_id="hashing-counted-once")
    await calibrate(first)
    assert first.texts == 2 * len(PAIRS) == 80
    await calibrate(first)
    again = Undeclared(HashingEmbedder(), model_id="hashing-counted-once")
    assert await calibrate(again) == await calibrate(first)
    assert (first.texts, again.texts) == (80, 0)


class Refusing(Undeclared):
    """Returns NaN for the texts of `refused` (one row of a batch), and raises while `down`."""

    def __init__(self, model_id: str, refused: set[str]) -> None:
        super().__init__(HashingEmbedder(), model_id=model_id)
        self.refused, self.down = refused, False

    def embed(self, texts: list[str]) -> Any:
        return self._rows(texts, super().embed(texts))

    def embed_queries(self, texts: list[str]) -> Any:
        return self._rows(texts, super().embed_queries(texts))

    def _rows(self, texts: list[str], rows: Any) -> Any:
        if self.down:
            raise ConnectionError("the model's server went away")
        rows = np.array(rows, dtype=np.float64)
        rows[[text in self.refused for text in texts]] = np.nan
        return rows


async def test_a_model_refusing_some_calibration_texts_is_measured_on_the_rest(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A NaN for one of the 80 texts failed every hybrid search for good ("returned NaN or
    infinite values"), each embedding the 80 texts again: the pairs it embeds are measured,
    once."""
    embedder = Refusing("hashing-refusing-two", {PAIRS[3][0], PAIRS[7][1]})
    calibration = await calibrate(embedder)
    kept = [pair for i, pair in enumerate(PAIRS) if i not in (3, 7)]
    hashing = HashingEmbedder()
    queries = await embed_texts(hashing, [q for q, _ in kept], queries=True)
    expected = measure(queries, await embed_texts(hashing, [a for _, a in kept]))
    assert calibration.measured and (calibration.noise_floor, calibration.recall) == expected
    assert "no vector for 2 of the 80 calibration texts: measured on 38 pairs" in caplog.text
    async with SessionStore(sqlite_url, create_tables=True, embedder=embedder) as store:
        session = store.session("s")
        await session.add_items([message(text) for text in BAKING])
        await store.flush()
        asked = embedder.texts
        for _ in range(2):
            assert await session.search("sourdough starter") != []
        assert embedder.texts == asked + 2  # the queries alone: measured once


async def test_a_model_that_embeds_too_few_pairs_is_not_measured_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    embedder = Refusing("hashing-refusing-answers", {a for _, a in PAIRS[: len(PAIRS) // 2 + 1]})
    embedder.lexical = True  # type: ignore[attr-defined]  # even so: no floor
    calibration = await calibrate(embedder)
    assert not calibration.measured and not calibration.capable
    assert calibration.floor is None and calibration.weight == WEAK_VECTOR_WEIGHT
    assert "no vector for 21 of the 80 calibration texts: not measured" in caplog.text
    asked = embedder.texts
    assert await calibrate(embedder) == calibration and embedder.texts == asked


async def test_a_calibration_whose_call_fails_says_so_and_is_tried_again() -> None:
    """The embedder's own failure (a model down) read as any search's, and nothing tells
    a calibration apart: it is named, and measured again by the next hybrid search."""
    embedder = Refusing("hashing-down-at-first", set())
    embedder.down = True
    with pytest.raises(EmbedderError, match="calibrating the embedder 'hashing-down-at-first'"):
        await calibrate(embedder)
    embedder.down = False
    assert (await calibrate(embedder)).measured


async def test_a_sync_model_is_calibrated_off_the_event_loop() -> None:
    """Forty queries are a batch: embedded in a worker thread like documents, while the
    one query of a search is embedded inline."""
    threads: list[int] = []

    class Recording(Undeclared):
        def embed_queries(self, texts: list[str]) -> Any:
            threads.append(threading.get_ident())
            return super().embed_queries(texts)

    embedder = Recording(HashingEmbedder(), model_id="hashing-recorded")
    await calibrate(embedder)
    await embed_query(embedder, "one query")
    assert threads[0] != threading.get_ident() == threads[1]


@pytest.mark.slow
async def test_capable_and_weak_models_are_told_apart_whatever_they_declare(
    minilm: MiniLMEmbedder,
) -> None:
    capable = await calibrate(minilm)
    assert capable.capable and capable.recall >= CAPABLE_RECALL
    assert capable.floor is not None and 0.1 < capable.floor < 0.4
    assert capable.weight == DEFAULT_VECTOR_WEIGHT
    assert await calibrate(Undeclared(minilm)) == capable
    for weak_model in (HashingEmbedder(), Model2VecEmbedder.bundled()):
        declared = await calibrate(weak_model)
        assert not declared.capable and declared.weight == weak_model.fusion_weight
        undeclared = await calibrate(Undeclared(weak_model))
        assert undeclared.weight == WEAK_VECTOR_WEIGHT < DEFAULT_VECTOR_WEIGHT / 1000
        assert undeclared.floor is None
    # The hashing embedder's vectors are its words' pieces: it declares itself lexical, and
    # its floor applies; the static model's answers lie in its noise, and it has none.
    hashing = await calibrate(HashingEmbedder())
    assert hashing.lexical and hashing.floor == hashing.noise_floor
    assert (await calibrate(Model2VecEmbedder.bundled())).floor is None


def test_a_hit_without_a_keyword_needs_a_cosine_above_the_floor() -> None:
    """Items 0 and 5 stand out (z about 6 and 1.3) but lie below the floor; item 1 holds
    the word."""
    cosines = np.array([0.15, 0.02, 0.03, 0.01, 0.02, 0.04, 0.03, 0.02, 0.01, 0.03])
    coverage = np.zeros(10)
    coverage[1] = 1.0
    assert robust_z(cosines, np.ones(10, bool))[0] > 5
    keys = list(range(10))
    assert {h.key for h in fuse(keys, vector=cosines, keyword=coverage)} == {0, 1, 5}
    floored = fuse(keys, vector=cosines, keyword=coverage, vector_floor=0.2)
    assert [h.key for h in floored] == [1]  # the keyword hit stays, whatever its cosine
    assert [h.key for h in fuse(keys, vector=cosines + 0.1, vector_floor=0.2)] == [0]
    small = np.array([0.6, 0.1, 0.12])  # fewer than SMALL_SCOPE: a margin over the median
    assert [h.key for h in fuse([0, 1, 2], vector=small)] == [0]
    assert fuse([0, 1, 2], vector=small, vector_floor=0.7) == []
    # A lone vector stands out from nothing: the floor alone decides (none: keywords only).
    lone = np.array([0.45])
    assert [h.key for h in fuse([0], vector=lone, vector_floor=0.211)] == [0]
    assert fuse([0], vector=lone, vector_floor=0.5) == []
    assert fuse([0], vector=lone) == []
    assert [h.key for h in fuse([0, 1], vector=np.array([0.45, np.nan]), vector_floor=0.2)] == [0]
    found = evidence(cosines, coverage)
    assert found.has_keyword.tolist() == (coverage > 0).tolist()
    for bad in (float("nan"), float("inf"), "0.2"):  # NaN dropped every hit on vectors alone
        with pytest.raises(ConfigurationError, match="vector_floor must be a finite number"):
            fuse(keys, vector=cosines, vector_floor=bad)  # type: ignore[arg-type]


@pytest.mark.slow
async def test_a_question_about_something_else_finds_nothing_in_the_store(
    db_url: str, key: bytes | None, minilm: MiniLMEmbedder
) -> None:
    """A session about baking: questions about a passport or football find nothing, though
    one item stands out among the cosines by chance; a question in other words about the
    bread finds its answer by meaning alone."""
    floor = (await calibrate(minilm)).floor
    assert floor is not None
    async with SessionStore(db_url, create_tables=True, key=key, embedder=minilm) as store:
        session = store.session("baking")
        await session.add_items([message(text) for text in BAKING])
        for question in ("when does my passport expire?", "who won the football match?"):
            assert await session.search(question) == []
            assert await store.search(question) == []
            every = await session.search_hits(question, limit=20, min_score=0.0)
            cosines = np.array([hit.vector for hit in every], dtype=np.float64)
            assert len(every) == len(BAKING) and cosines.max() < floor
            assert robust_z(cosines, np.ones(len(every), bool)).max() >= 1  # z alone: a hit
        [hit] = await session.search_hits("how long before I can cut it?", limit=1)
        assert hit.item == message(BAKING[3]) and hit.keyword == 0
        assert hit.vector is not None and hit.vector > floor
