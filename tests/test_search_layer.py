"""The search layer on its own: embedders, text projection, tokeniser, ranking. No database."""

from __future__ import annotations

import base64
import copy
import doctest
import json
import math
import random
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import agents_sqlalchemy.search._extras as extras_module
import agents_sqlalchemy.search.fusion as fusion_module
import agents_sqlalchemy.search.ranking as ranking_module
import agents_sqlalchemy.search.text as text_module
from agents_sqlalchemy import AgentsSQLAlchemyError, ConfigurationError, SessionStore
from agents_sqlalchemy.search import (
    MAX_TERM_CHARS,
    Embedder,
    EmbedderError,
    HashingEmbedder,
    MissingExtraError,
    Model2VecEmbedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    blank,
    call_failed,
    check_embedder,
    content_words,
    embed_documents,
    embed_query,
    fuse,
    item_text,
    normalize,
    pack_vectors,
    term_counts,
    tokenize,
    unpack_vectors,
)
from agents_sqlalchemy.search.embedders import declared_weight

from .support import items as sdk

try:  # the openai package's HTTP client: httpx, or its successor httpx2
    import httpx2 as httpx
except ImportError:  # pragma: no cover - depends on the installed openai
    import httpx  # type: ignore[no-redef,import-not-found,unused-ignore]


class SyncEmbedder:
    dim, metric, model_id = 3, "cosine", "sync-v1"

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [[float(len(t)), 1.0, 0.0] for t in texts]

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        return [[0.0, 0.0, 2.0] for _ in texts]


class AsyncEmbedder:
    dim, metric, model_id = 2, "cosine", "async-v1"

    async def embed(self, texts: list[str]) -> np.ndarray[Any, Any]:
        return np.array([[3.0, 4.0] for _ in texts])

    async def embed_queries(self, texts: list[str]) -> np.ndarray[Any, Any]:
        return np.array([[0.0, 5.0] for _ in texts])


@pytest.mark.parametrize("module", [text_module, ranking_module, fusion_module, extras_module])
def test_docstring_examples_hold(module: Any) -> None:
    assert doctest.testmod(module).failed == 0


# --- Embedder protocol and helpers -------------------------------------------------------


def test_any_object_with_the_attributes_is_an_embedder() -> None:
    assert isinstance(SyncEmbedder(), Embedder)
    assert isinstance(AsyncEmbedder(), Embedder)
    assert isinstance(HashingEmbedder(), Embedder)
    assert not isinstance(object(), Embedder)


async def test_sync_and_async_embedders_give_a_byte_per_dimension_and_unit_vectors() -> None:
    for embedder in (SyncEmbedder(), AsyncEmbedder()):
        blobs = await embed_documents(embedder, ["ab", "abcd"])
        assert [len(b) for b in blobs] == [embedder.dim] * 2
        matrix = unpack_vectors(blobs, embedder.dim)
        assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0)
    query = await embed_query(AsyncEmbedder(), "q")
    assert query.dtype == np.float32 and query.tolist() == [0.0, 1.0]
    assert (await embed_query(SyncEmbedder(), "q")).tolist() == [0.0, 0.0, 1.0]
    assert await embed_documents(SyncEmbedder(), []) == []


async def test_bad_embedder_output_and_input_raise_embedder_error() -> None:
    class WrongShape(SyncEmbedder):
        def embed(self, texts: list[str]) -> list[list[float]]:
            return [[1.0, 2.0] for _ in texts]

    class NotANumber(SyncEmbedder):
        def embed(self, texts: list[str]) -> list[list[float]]:
            return [[math.nan, 1.0, 1.0] for _ in texts]

    class DotProduct(SyncEmbedder):
        metric = "dot"

    with pytest.raises(EmbedderError, match=r"shape \(1, 2\), expected \(1, 3\)"):
        await embed_documents(WrongShape(), ["x"])
    with pytest.raises(EmbedderError, match="NaN"):
        await embed_documents(NotANumber(), ["x"])
    with pytest.raises(EmbedderError, match="metric"):
        await embed_documents(DotProduct(), ["x"])
    with pytest.raises(EmbedderError, match="empty"):
        await embed_documents(SyncEmbedder(), ["fine", "  "])
    assert issubclass(EmbedderError, AgentsSQLAlchemyError)


@pytest.mark.parametrize(
    "returned",
    [
        lambda texts: [[1.0, 2.0, 3.0]] * (len(texts) - 1) + [[]],  # no row for one text
        lambda texts: ([1.0, 2.0, 3.0] for _ in texts),  # a generator
        lambda texts: [["1", "2", "3"] for _ in texts],  # text
        lambda texts: {"vectors": [[1.0, 2.0, 3.0] for _ in texts]},
        lambda texts: [[1j, 2.0, 3.0] for _ in texts],
        lambda texts: None,
    ],
)
async def test_what_is_no_array_of_numbers_is_an_embedder_error_of_the_output(
    returned: Any,
) -> None:
    """Rows of unequal lengths or a generator raised numpy's ValueError or TypeError, which
    no caller expects (the indexer's retry one text at a time, a search's catch-up): they
    are no vectors, as a wrong shape is, and not a failed call (`call_failed`)."""

    class Returning(SyncEmbedder):
        def embed(self, texts: list[str]) -> Any:
            return returned(texts)

    with pytest.raises(EmbedderError, match=r"expected (shape )?\(2, 3\)") as raised:
        await embed_documents(Returning(), ["one", "two"])
    assert not call_failed(raised.value)


async def test_huge_and_tiny_components_give_unit_vectors() -> None:
    """Components of 1e30 overflowed float32 in the norm (a zero vector: no vector hits),
    of 1e-30 underflowed it (a vector of length 1e-30, cosines of 1e-30)."""

    class Scaled(SyncEmbedder):
        scale = 1.0

        def embed(self, texts: list[str]) -> list[list[float]]:
            return [[self.scale * v for v in row] for row in super().embed(texts)]

        def embed_queries(self, texts: list[str]) -> list[list[float]]:
            return self.embed(texts)

    for scale in (1e30, 1e-30, 1e38, 1e-38):
        embedder = Scaled()
        embedder.scale = scale
        query = await embed_query(embedder, "abc")
        assert np.allclose(query, np.array([3.0, 1.0, 0.0]) / math.sqrt(10)), scale
        vectors = unpack_vectors(await embed_documents(embedder, ["abc"]), 3)
        assert float(vectors[0] @ query) == pytest.approx(1.0, abs=0.002), scale
    matrix = normalize(np.array([[3e30, 4e30], [3e-30, 4e-30], [0.0, 0.0], [0.3, 0.4]]))
    assert np.allclose(matrix, [[0.6, 0.8], [0.6, 0.8], [0.0, 0.0], [0.6, 0.8]])


def test_vectors_round_trip_and_a_foreign_length_is_refused() -> None:
    matrix = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 0.0]], dtype=np.float32)
    blobs = pack_vectors(matrix)
    assert blobs == [bytes([127, 0]), bytes([95, 127]), bytes([0, 0])]  # 0.6/0.8*127 = 95.25
    assert np.allclose(unpack_vectors(blobs, 2), matrix, atol=0.002)
    rng = np.random.default_rng(3)
    vectors = normalize(rng.normal(size=(200, 256)))
    angles = unpack_vectors(pack_vectors(vectors), 256) @ vectors[0]
    assert np.abs(angles - vectors @ vectors[0]).max() < 0.005  # cosines move by ~0.001
    with pytest.raises(EmbedderError, match="another model"):
        unpack_vectors([blobs[0], b"\x00" * 8], 2)


# --- The default embedder ----------------------------------------------------------------


def test_hashing_embedder_is_deterministic_unit_and_lexical() -> None:
    embedder = HashingEmbedder()
    assert (embedder.dim, embedder.model_id) == (256, "hashing-v2-256-3-5-0.5")
    assert HashingEmbedder(dim=64, ngram_weight=0).model_id == "hashing-v2-64-3-5-0"
    a, b, c, empty = embedder.embed(
        ["the deployments failed", "deployment failure on friday", "lunch plans", "the of"]
    )
    assert math.isclose(float(np.linalg.norm(a)), 1.0, rel_tol=1e-5)
    assert float(a @ b) > float(a @ c) + 0.2
    assert not empty.any()
    with pytest.raises(ConfigurationError):
        HashingEmbedder(dim=4)


def test_hashing_embedder_from_term_counts_is_embed_exactly() -> None:
    """The indexer hands the embedder the terms it counted: the vectors are bit for bit
    those of `embed` (stored vectors and query vectors must agree)."""
    embedder = HashingEmbedder()
    texts = ["ERR-4411: disk full, disk full!", "lunch", "", "the of", "déjà vu 東京", "x x x"]
    counts = [term_counts(text) for text in texts]
    assert np.array_equal(embedder.embed_counts(counts), embedder.embed(texts))
    assert embedder.embed_counts([]).shape == (0, 256)


@pytest.mark.slow
def test_hashing_embedder_is_the_same_in_every_process() -> None:
    code = (
        "from agents_sqlalchemy.search import HashingEmbedder;"
        "print(HashingEmbedder().embed(['ERR-4411 disk full']).tobytes().hex())"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={"PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1
    assert outputs.pop().strip() == HashingEmbedder().embed(["ERR-4411 disk full"]).tobytes().hex()


# --- Plain-text projection ---------------------------------------------------------------


def test_item_text_of_every_sdk_item_shape_and_items_are_not_mutated() -> None:
    before = copy.deepcopy(sdk.ALL)
    texts = [item_text(item) for item in sdk.ALL]
    assert before == sdk.ALL
    user, reasoning, call, output, assistant, multipart, nested = texts
    assert user == "Remember: my dog is called Mochi 🐶, né à Zürich."
    assert reasoning == "The user wants the weather; call the tool."
    assert call == "lookup_weather\ncity: Zürich\nunits: metric"
    assert output == "temp_c: 21.5\nsky: ☀️"
    assert assistant == "It is 21.5 °C and sunny."
    assert multipart == "What is in this picture? 日本語も"
    assert nested == "nested"
    assert "gAAAA" not in reasoning and "base64" not in multipart


def test_item_text_of_other_tool_items() -> None:
    shell = {"type": "local_shell_call", "action": {"command": ["ls", "-la"], "env": {}}}
    assert item_text(shell) == "ls\n-la"
    web = {"type": "web_search_call", "id": "ws_1", "action": {"type": "search", "query": "q"}}
    assert item_text(web) == "q"
    files = {
        "type": "file_search_call",
        "queries": ["refund policy"],
        "results": [{"file_id": "f1", "filename": "policy.pdf", "text": "30 days"}],
    }
    assert item_text(files) == "refund policy\npolicy.pdf\n30 days"
    mcp = {"type": "mcp_call", "name": "get", "arguments": "not json", "output": "[1, 2]"}
    assert item_text(mcp) == "get\nnot json\n1\n2"
    click = {"type": "computer_call", "action": {"type": "click", "x": 10, "y": 20}}
    assert item_text(click) == ""
    refusal = {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]}
    assert item_text(refusal) == "No."
    assert item_text({"type": "item_reference", "id": "msg_1"}) == ""
    assert item_text({"role": "user", "content": "x" * 50 + " y" * 50}, max_chars=20) == "x" * 20
    assert item_text({"role": "user", "content": "a" * 300}) == ""  # a blob, not words


# --- Tokeniser ---------------------------------------------------------------------------


def test_identifiers_survive_whole_and_in_parts() -> None:
    assert term_counts("ERR-4411") == {"err-4411": 1, "err": 1, "4411": 1}
    assert term_counts("user_42") == {"user_42": 1, "user": 1, "42": 1}
    assert tokenize("v2.3.1") == ["v2.3.1", "v2"]
    assert set(tokenize("alex.moreno@fastmail.com")) >= {
        "alex.moreno@fastmail.com",
        "alex.moreno",
        "fastmail.com",
        "moreno",
    }
    # End-of-sentence punctuation is not part of an identifier.
    assert tokenize("It failed with ERR-4411.") == ["fail", "err-4411", "err", "4411"]


def test_tokeniser_is_unicode_aware_with_stems_and_stopwords() -> None:
    assert tokenize("Zürich STRASSE Straße") == ["zurich", "strass", "strass"]
    assert tokenize("日本語") == ["日本", "本語"]


def test_latin_letters_lose_their_accents_and_other_scripts_keep_their_words() -> None:
    """`cafe` finds `café` and `zurich` finds `Zürich`, as in search engines (and SQLite's
    FTS5); a word of a script written with combining marks (Devanagari's vowel signs,
    Hebrew's points) stays one term: it was cut at each mark."""
    assert term_counts("Le CAFÉ à Zürich") == term_counts("le cafe a zurich")
    assert tokenize("naïve résumé Ærøskøbing Łódź İstanbul") == [
        "naiv",
        "resum",
        "aeroskob",
        "lodz",
        "istanbul",
    ]
    assert tokenize("cafe\u0301") == tokenize("café") == ["caf"]  # decomposed, or not
    assert tokenize("हिंदी भाषा") == ["हिंदी", "भाषा"]
    assert tokenize("שָׁלוֹם עוֹלָם") == ["שָׁלוֹם", "עוֹלָם"]
    assert tokenize("がぎ") == ["がぎ"]  # kana keep their sound marks
    assert tokenize("What is the") == []
    assert tokenize("deployments deployed deploying") == ["deploy"] * 3
    assert tokenize("Lena's shouldn't") == ["lena", "shouldnt"]
    long = "x" * 100
    assert tokenize(long) == ["x" * MAX_TERM_CHARS]
    counts = term_counts("disk disk full")
    assert counts == {"disk": 2, "full": 1}
    assert all(type(t) is str and len(t) <= MAX_TERM_CHARS for t in counts)


def test_tokenising_in_pieces_gives_the_terms_of_the_whole_text() -> None:
    # `tokenize` splits at characters no term holds and caches each piece's terms; the
    # reference here runs the token pattern over the whole text at once.
    def whole(text: str) -> list[str]:
        text = unicodedata.normalize("NFKC", text).casefold()
        text = text_module._APOSTROPHE.sub("", text_module._APOSTROPHE_S.sub("", text))
        text = text_module._LATIN_MARKS.sub("", text.translate(text_module._FOLD))
        pattern = text_module._TOKEN if text.isascii() else text_module._token_with_marks()
        return [t for token in pattern.findall(text) for t in _token_terms(token)]

    _token_terms = text_module._token_terms
    alphabet = [*"aZ09 _-.+/:@#'\u2019\t\n,;!?()\"<>=*`|", "é", "ß", "ﬁ", "日本", "İ", "Σ"]
    alphabet += ["\u00a0", "\u2028", "\x1c", "\x85", "①", "Ⅻ", "٣", "—", "«", "🙂", "\u0301", "'s"]
    alphabet += ["Ø", "ǿ", "\u093f", "ह", "\u05b8", "ש"]
    rng = random.Random(7)
    texts = ["".join(rng.choices(alphabet, k=rng.randint(0, 25))) for _ in range(20_000)]
    texts += [item_text(item) for item in sdk.ALL]
    for text in texts:
        assert tokenize(text) == whole(text), text


def test_a_query_of_controls_formats_and_separators_is_blank() -> None:
    for query in ("", " ", "\x00", "\u200b", "\u2028\u2029\xa0", "\ufeff\t\r\n", "\u2060"):
        assert blank(query), repr(query)
    for query in ("a", "\u200ba", "\x00 1", "?", "\u0301", "\ue000"):
        assert not blank(query), repr(query)


def test_content_words_drop_stopwords_and_punctuation() -> None:
    assert content_words("Why did the release break?") == "release break"
    assert content_words("the of") == "the of"


# --- Optional adapters -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "extra", "make"),
    [
        ("model2vec", "model2vec", lambda: Model2VecEmbedder.from_pretrained("some/model")),
        (
            "sentence_transformers",
            "sentence-transformers",
            lambda: SentenceTransformerEmbedder("all-MiniLM-L6-v2"),
        ),
        ("openai", "openai", lambda: OpenAIEmbedder()),
    ],
)
def test_missing_extras_name_the_pip_install(
    monkeypatch: pytest.MonkeyPatch, module: str, extra: str, make: Any
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    with pytest.raises(MissingExtraError) as caught:
        make()
    assert f"pip install 'openai-agents-sqlalchemy[{extra}]'" in str(caught.value)
    assert isinstance(caught.value, ImportError)


async def test_sentence_transformer_adapter_passes_prompts_and_normalises() -> None:
    calls: list[dict[str, Any]] = []

    class FakeModel:
        def get_sentence_embedding_dimension(self) -> int:
            return 2

        def encode(self, texts: list[str], **options: Any) -> np.ndarray[Any, Any]:
            calls.append({"texts": texts, **options})
            return np.array([[1.0, 1.0] for _ in texts])

    embedder = SentenceTransformerEmbedder(
        FakeModel(), model_id="st:e5", query_prompt="query: ", document_prompt="passage: "
    )
    assert embedder.dim == 2 and embedder.model_id == "st:e5:q='query: ':d='passage: '"
    await embed_documents(embedder, ["doc"])
    await embed_query(embedder, "question")
    assert [c["prompt"] for c in calls] == ["passage: ", "query: "]
    assert all(c["normalize_embeddings"] for c in calls)
    with pytest.raises(ConfigurationError, match="model_id"):
        SentenceTransformerEmbedder(FakeModel())


def _openai_client(handler: Any) -> Any:
    import openai

    transport = httpx.MockTransport(handler)
    return openai.AsyncOpenAI(
        api_key="sk-test",
        base_url="http://embeddings.test/v1",
        http_client=httpx.AsyncClient(transport=transport),
        max_retries=0,
    )


async def test_openai_embedder_request_and_response_over_a_fake_transport() -> None:
    requests: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/embeddings"
        assert request.headers["authorization"] == "Bearer sk-test"
        body = json.loads(request.content)
        requests.append(body)
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": base64.b64encode(
                    np.array([float(len(text)), 0.0, 1.0], dtype="<f4").tobytes()
                ).decode(),
            }
            for i, text in enumerate(body["input"])
        ]
        data.reverse()  # the order of `data` is not promised: `index` is
        usage = {"prompt_tokens": 1, "total_tokens": 1}
        return httpx.Response(
            200, json={"object": "list", "data": data, "model": body["model"], "usage": usage}
        )

    embedder = OpenAIEmbedder(
        "text-embedding-3-small", dimensions=3, client=_openai_client(handler), batch_size=2
    )
    assert (embedder.dim, embedder.model_id) == (3, "openai:text-embedding-3-small:3")
    vectors = await embedder.embed(["a", "bb", "ccc"])
    assert requests == [
        {
            "model": "text-embedding-3-small",
            "input": ["a", "bb"],
            "dimensions": 3,
            "encoding_format": "base64",
        },
        {
            "model": "text-embedding-3-small",
            "input": ["ccc"],
            "dimensions": 3,
            "encoding_format": "base64",
        },
    ]
    assert vectors.dtype == np.float32
    assert vectors.tolist() == [[1.0, 0.0, 1.0], [2.0, 0.0, 1.0], [3.0, 0.0, 1.0]]
    query = await embed_query(embedder, "bb")
    assert np.allclose(query, np.array([2.0, 0.0, 1.0]) / math.sqrt(5))


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda: OpenAIEmbedder(5), "model must be a model's name"),  # "unknown model 5"
        (lambda: OpenAIEmbedder(dimensions=0), "dimensions must be between 1"),  # 1536 dims
        (lambda: OpenAIEmbedder(dimensions="5"), "dimensions must be an integer"),  # taken
        (lambda: OpenAIEmbedder(batch_size=0), "batch_size must be between 1 and 2048"),
        (lambda: OpenAIEmbedder(client=5), "client must be an openai.AsyncOpenAI"),
        (lambda: Model2VecEmbedder(5, model_id="m"), "model must be a loaded model2vec"),
        (lambda: Model2VecEmbedder("name", model_id="m"), "model must be a loaded model2vec"),
    ],
)
def test_embedder_options_of_the_wrong_kind_are_refused(make: Any, said: str) -> None:
    """Each was taken (and failed at the first embedding, or the first request) or raised
    AttributeError."""
    with pytest.raises(ConfigurationError, match=said):
        make()


class _Declared:
    """An embedder of the protocol; each case changes one of its declarations."""

    metric = "cosine"
    dim = 8
    model_id = "declared-test"

    def embed(self, texts: list[str]) -> Any:
        return np.ones((len(texts), 8), dtype=np.float32)

    def embed_queries(self, texts: list[str]) -> Any:
        return self.embed(texts)


@pytest.mark.parametrize(
    ("declared", "said"),
    [
        ({"dim": "8"}, "dim must be an integer"),  # vectors refused as "(2, 8), expected (2, 8)"
        ({"dim": 0}, "dim must be between 1 and 65536"),  # refused at the first indexing
        ({"metric": "dot"}, "metric must be 'cosine'"),  # logged by the background worker
        ({"fusion_weight": "2"}, "fusion_weight must be a finite number"),  # silently ignored
        ({"lexical": "yes"}, "lexical must be True or False"),  # silently ignored
    ],
)
def test_an_embedder_declaring_what_cannot_be_used_is_refused_when_the_store_is_made(
    tmp_path: Path, declared: dict[str, Any], said: str
) -> None:
    embedder = _Declared()
    for name, value in declared.items():
        setattr(embedder, name, value)
    with pytest.raises(ConfigurationError, match=said):
        SessionStore(str(tmp_path / "s.db"), embedder=embedder)


async def test_numbers_of_numpy_are_numbers(tmp_path: Path) -> None:
    """`min_score=np.float32(0.1)` and `fusion_weight = np.float32(0.5)` were refused ("must
    be a finite number"), where `limit=np.int64(3)` was taken."""
    embedder = _Declared()
    embedder.fusion_weight = np.float32(0.5)  # type: ignore[attr-defined]
    assert declared_weight(embedder) == 0.5
    keys, vector = [0, 1], np.array([0.2, 0.05])
    assert [
        hit.key for hit in fuse(keys, vector=vector, mode="vector", min_score=np.float32(0.1))
    ] == [0]
    async with SessionStore(str(tmp_path / "s.db"), create_tables=True, embedder=embedder) as st:
        session = st.session("s")
        await session.add_items([sdk.message("hello there")])
        hits = await session.search_hits("hello", limit=np.int64(3), min_score=np.float32(0.1))
        assert [hit.seq for hit in hits] == [1]
        assert await st.search("hello", min_score=np.float64(0.1)) != []
    for bad in (np.float32("nan"), np.bool_(True), "0.1"):
        with pytest.raises(ConfigurationError, match="min_score must be a finite number"):
            fuse(keys, vector=vector, min_score=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("missing", [("embed_queries",), ("model_id", "embed")])
def test_an_object_lacking_members_of_the_protocol_is_told_which(missing: tuple[str, ...]) -> None:
    """It was told it must be "an Embedder or a name", not what it lacks."""
    members = {"dim": 8, "metric": "cosine", "model_id": "m", "embed": _Declared.embed}
    members["embed_queries"] = _Declared.embed_queries
    partial = type("Partial", (), {k: v for k, v in members.items() if k not in missing})()
    with pytest.raises(ConfigurationError, match=f"Partial without {', '.join(missing)} "):
        check_embedder(partial)
    assert check_embedder(_Declared()).model_id == "declared-test"


async def test_an_embedder_that_fails_is_an_embedder_error(tmp_path: Path) -> None:
    """Its own exception (a network error, a bug) reached the caller of search as it was."""
    embedder = _Declared()
    embedder.embed_queries = lambda texts: 1 / 0  # type: ignore[method-assign]
    async with SessionStore(str(tmp_path / "s.db"), create_tables=True, embedder=embedder) as st:
        session = st.session("s")
        await session.add_items([sdk.message("hello there")])
        await st.flush()
        with pytest.raises(EmbedderError, match="failed: ZeroDivisionError") as caught:
            await session.search("hello", mode="vector")
        assert isinstance(caught.value.__cause__, ZeroDivisionError)
        assert await session.get_items() == [sdk.message("hello there")]


async def test_openai_embedder_reads_float_lists_and_checks_counts() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        data = [{"object": "embedding", "index": 0, "embedding": [0.5] * 1536}]
        usage = {"prompt_tokens": 1, "total_tokens": 1}
        return httpx.Response(
            200, json={"object": "list", "data": data, "model": "m", "usage": usage}
        )

    embedder = OpenAIEmbedder(client=_openai_client(handler))
    assert (await embedder.embed(["one"])).shape == (1, 1536)
    with pytest.raises(EmbedderError, match="asked for 2"):
        await embedder.embed(["one", "two"])
    with pytest.raises(ConfigurationError, match="dimensions"):
        OpenAIEmbedder("my-own-model")
