"""The batch tokeniser gives exactly what `term_counts` gives each text, packed as the index
packs it, and the hashing embedder's vectors from it are those of `embed`."""

from __future__ import annotations

import random

import numpy as np
import pytest

from agents_sqlalchemy.search import (
    HashingEmbedder,
    item_text,
    pack_terms,
    pack_vectors,
    term_counts,
    term_id,
)
from agents_sqlalchemy.search import text as text_module
from agents_sqlalchemy.search import vocabulary as vocabulary_module
from agents_sqlalchemy.search.vocabulary import TermTable, Vocabulary

from .search_eval.sets import all_conversations

# Word characters, the connectors terms keep, every kind of space `str.split` knows (the
# ones NFKC leaves and the ones it turns into spaces), the gap between texts, case pairs
# that fold to other lengths, CJK, a ligature, a lone surrogate, an emoji, punctuation.
ALPHABET = (
    "aZ09 _-.+/:@#'\u2019\x1e\x1f\t\n\x0b\x85\u1680\u2028\u2029\u00a0\u2003\u3000"
    'ÉéßİΣς日本語カタ한ﬁ①\ud800😀,;!?()[]{}"\\'
)


def _random_texts(count: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    return ["".join(rnd.choices(ALPHABET, k=rnd.randint(0, 60))) for _ in range(count)]


def _corpus() -> list[str]:
    return [item_text(item) for c in all_conversations() for item in c.items]


def _entries(blob: bytes | None) -> list[bytes]:
    return sorted(blob[i : i + 12] for i in range(0, len(blob), 12)) if blob else []


@pytest.mark.parametrize("texts", [_corpus(), _random_texts(5000, 1), [], [""], ["", "a b", ""]])
def test_a_table_holds_term_counts_of_each_text_packed_as_pack_terms(texts: list[str]) -> None:
    vocabulary = Vocabulary()
    for _ in range(2):  # pieces new, then known
        table = vocabulary.table(texts)
        assert table.size == len(texts)
        packed = table.packed(term_id)
        for row, text in enumerate(texts):
            counts = term_counts(text)
            assert table.counts_of(row) == counts, repr(text)
            expected = pack_terms({term_id(t): n for t, n in counts.items()})
            assert _entries(packed[row]) == _entries(expected), repr(text)
            assert (packed[row] is None) == (expected is None)


def test_terms_whose_ids_coincide_are_counted_together() -> None:
    table = Vocabulary().table(["alpha beta gamma beta", "beta", "delta"])
    packed = table.packed(lambda term: 5 if term in ("alpha", "beta") else 9)
    assert _entries(packed[0]) == _entries(pack_terms({5: 3, 9: 1}))
    assert _entries(packed[1]) == _entries(pack_terms({5: 1}))
    assert _entries(packed[2]) == _entries(pack_terms({9: 1}))


def test_a_vocabulary_past_its_size_starts_afresh_and_stays_exact(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(vocabulary_module, "MAX_PIECES", 50)
    vocabulary = Vocabulary()
    for seed in range(20):
        texts = _random_texts(30, seed)
        table = vocabulary.table(texts)
        assert [table.counts_of(r) for r in range(len(texts))] == list(map(term_counts, texts))
        assert len(vocabulary._pieces) <= 50 + 30 * 60


def test_long_pieces_are_neither_kept_past_the_vocabularys_bytes_nor_process_wide(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A tool's output may hold a 16,000-character hash: one piece, seldom seen twice.
    monkeypatch.setattr(vocabulary_module, "MAX_PIECE_BYTES", 100_000)
    forget = text_module._chunk_terms.cache_clear
    forget()
    vocabulary = Vocabulary()
    rng = random.Random(7)
    for _ in range(20):
        texts = [f"deploy {rng.randbytes(8000).hex()} failed" for _ in range(5)]
        table = vocabulary.table(texts)
        assert [table.counts_of(r) for r in range(len(texts))] == list(map(term_counts, texts))
        assert vocabulary._piece_bytes <= 100_000 + 5 * 16_100
    # Only the short pieces are kept process-wide, each once.
    assert text_module._chunk_terms.cache_info().currsize == 2  # "deploy", "failed"
    forget()


def test_the_hashing_embedder_embeds_a_table_as_it_embeds_the_texts() -> None:
    embedder = HashingEmbedder()
    texts = [*_corpus(), "", "the the", "ERR-4411 ERR-4411 disk"]
    from_table = embedder.embed_table(Vocabulary().table(texts))
    assert np.allclose(from_table, embedder.embed(texts), atol=1e-6)
    assert pack_vectors(from_table) == pack_vectors(embedder.embed(texts))
    assert embedder.embed_table(TermTable.of_counts([])).shape == (0, 256)
