"""The `Embedder` protocol, and the helpers that call any embedder and pack its vectors.

An embedder is any object with `dim`, `metric` ("cosine"), `model_id` and two methods,
`embed(texts)` for stored items and `embed_queries(texts)` for queries (the same for most
models; different for models trained with query prompts). Each returns one vector per text as
a numpy array or a list of lists of floats, and may be sync or `async`.

An embedder may also declare `fusion_weight`, how much its vectors count against keywords
in hybrid ranking (see `fusion.fuse`); without it, a capable model's weight is used (the
built-in hashing and static models declare a small one).

Vectors are stored as one signed byte per dimension (`pack_vectors`), and read back as
L2-normalised float32 rows, so cosine similarity is a dot product: `embed_documents` returns
those bytes, `embed_query` the query as an array.

Example::

    class Constant:
        dim, metric, model_id = 2, "cosine", "constant-v1"

        def embed(self, texts: list[str]) -> list[list[float]]:
            return [[1.0, 0.0] for _ in texts]

        embed_queries = embed

    blobs = await embed_documents(Constant(), ["a", "b"])   # [b'\\x7f\\x00', b'\\x7f\\x00']
    query = await embed_query(Constant(), "a")              # array([1., 0.], dtype=float32)
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import numbers
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeAlias, runtime_checkable

import numpy as np
import numpy.typing as npt

from ..errors import AgentsSQLAlchemyError, ConfigurationError, EmbedderError
from ..validation import check_finite, check_range, storable
from .text import TOKENIZER_VERSION

#: What `embed`/`embed_queries` may return: one row per text.
VectorBatch: TypeAlias = "npt.NDArray[Any] | Sequence[Sequence[float]]"
#: A float32 matrix, one L2-normalised row per text.
Matrix: TypeAlias = "npt.NDArray[np.float32]"
#: The byte layout of a stored vector: a signed byte per dimension (see `pack_vectors`).
VECTOR_DTYPE = np.dtype("i1")


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of `dim` floats; `model_id` names the model and its settings.

    Vectors of two different `model_id` values are never compared: change `model_id`
    whenever the vectors would change (model, version, dimensions, prompts). A store
    keeps an item's terms and vector under `index_id(model_id)`.

    Example::

        class InHouse:                  # an embedding service of one's own
            dim, metric, model_id = 768, "cosine", "inhouse-embed-v3"   # new model: new id

            async def embed(self, texts: list[str]) -> list[list[float]]:
                return (await client.post("/embed", json={"texts": texts})).json()["vectors"]

            embed_queries = embed

        store = SessionStore("agent.db", embedder=InHouse())
    """

    @property
    def dim(self) -> int: ...

    @property
    def metric(self) -> str: ...

    @property
    def model_id(self) -> str: ...

    def embed(self, texts: list[str]) -> VectorBatch | Awaitable[VectorBatch]:
        """Vectors of stored texts (documents)."""
        ...

    def embed_queries(self, texts: list[str]) -> VectorBatch | Awaitable[VectorBatch]:
        """Vectors of search queries."""
        ...


def index_id(model_id: str) -> str:
    """What the search index stores an item's terms and vector under: the embedder's
    `model_id` and the terms' `TOKENIZER_VERSION`. Rows of another model or tokenizer are
    never mixed in; `reindex` moves them.

    >>> index_id("minilm:all-MiniLM-L6-v2-int8")
    'minilm:all-MiniLM-L6-v2-int8+terms-v2'
    """
    return f"{model_id}+terms-v{TOKENIZER_VERSION}"


#: The most dimensions an embedder's vectors may have (a stored vector is a byte each).
MAX_DIM = 65_536
#: The longest embedder `model_id` a store takes: the index keeps `index_id` in 200.
MAX_MODEL_ID_CHARS = 180


def check_model_id(model_id: object) -> str:
    """`model_id` if it can name an index (`index_id`): text of 1 to `MAX_MODEL_ID_CHARS`
    characters that every database stores as it is; else `ConfigurationError`.

    >>> check_model_id("minilm:all-MiniLM-L6-v2")
    'minilm:all-MiniLM-L6-v2'
    """
    fits = isinstance(model_id, str) and model_id.strip() and len(model_id) <= MAX_MODEL_ID_CHARS
    if fits and storable(model_id):
        return str(model_id)
    raise ConfigurationError(
        f"the embedder's model_id must be text of 1 to {MAX_MODEL_ID_CHARS} characters, "
        f"without NUL, got {model_id!r:.100}"
    )


#: What an object needs to be an `Embedder`.
MEMBERS = ("dim", "metric", "model_id", "embed", "embed_queries")


def check_embedder(embedder: object) -> Embedder:
    """`embedder` if it has every member of the protocol (else `ConfigurationError` naming
    those it lacks) and what it declares can be used: its `model_id` (`check_model_id`), a
    `dim` of 1 to `MAX_DIM`, the "cosine" metric, and, when it declares them, a `fusion_weight`
    (`declared_weight`) and a `lexical` flag (True or False); else `ConfigurationError`,
    when the store is made rather than at its first search."""
    missing = [name for name in MEMBERS if not hasattr(embedder, name)]
    if missing or not isinstance(embedder, Embedder):
        raise ConfigurationError(
            f"embedder must be an Embedder or a name, got a {type(embedder).__name__:.80} "
            f"without {', '.join(missing)} (an embedder has {', '.join(MEMBERS)})"
        )
    check_model_id(embedder.model_id)
    check_range("the embedder's dim", embedder.dim, 1, MAX_DIM)
    if embedder.metric != "cosine":
        raise ConfigurationError(f"the embedder's metric must be 'cosine', got {embedder.metric!r}")
    declared_weight(embedder)
    lexical = getattr(embedder, "lexical", False)
    if not isinstance(lexical, bool):
        raise ConfigurationError(f"the embedder's lexical must be True or False, not {lexical!r}")
    return embedder


def declared_weight(embedder: object) -> float | None:
    """The `fusion_weight` an embedder declares (a finite number >= 0), or None."""
    declared = getattr(embedder, "fusion_weight", None)
    if declared is None:
        return None
    weight = check_real("fusion_weight", declared)
    if weight < 0:
        raise ConfigurationError(f"fusion_weight must be >= 0, not {declared!r}")
    return weight


def check_real(name: str, value: object) -> float:
    """`value` as a float if it is a finite real number (`check_finite`), numpy's too
    (`np.float32(0.5)`, which is no float); not a boolean, not a string.

    >>> check_real("min_score", np.float32(0.5))
    0.5
    """
    if isinstance(value, numbers.Real) and not isinstance(value, (int, float)):
        with contextlib.suppress(OverflowError):  # then refused as it is
            value = float(value)
    return check_finite(name, value)


def call_failed(failure: EmbedderError) -> bool:
    """Whether the embedder's call raised (`embed_texts` chains its exception), rather than
    returned what no index takes (no vector of a text, or vectors of the wrong shape)."""
    return failure.__cause__ is not None


async def embed_texts(embedder: Embedder, texts: Sequence[str], *, queries: bool = False) -> Matrix:
    """Call the embedder (sync or async) and return a checked, L2-normalised float32 matrix.

    Sync embedders embed in a worker thread so a large batch does not stall the event loop;
    a single query is embedded inline (one short text). A call that raises is an
    `EmbedderError` with the embedder's exception as its cause (`call_failed`); what is no
    `(len(texts), dim)` array of finite numbers is one without a cause.
    """
    texts = list(texts)
    if not texts:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    for i, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            raise EmbedderError(f"text {i} is empty or not a string: index nothing for it")
    if embedder.metric != "cosine":
        raise EmbedderError(f"metric {embedder.metric!r} is not supported: use 'cosine'")
    method: Callable[[list[str]], Any] = embedder.embed_queries if queries else embedder.embed
    try:
        if inspect.iscoroutinefunction(method) or (queries and len(texts) == 1):
            result = method(texts)
        else:
            result = await asyncio.to_thread(method, texts)
        if inspect.isawaitable(result):
            result = await result
    except AgentsSQLAlchemyError:
        raise
    except Exception as exc:  # the model's own failure (a network error, a bug)
        raise EmbedderError(  # its message may quote the texts: it is the cause's alone
            f"embedder {embedder.model_id!r} failed: {type(exc).__name__} (the embedder's own "
            "exception is this one's __cause__)"
        ) from exc
    return _check(result, len(texts), embedder)


def _check(result: object, count: int, embedder: Embedder) -> Matrix:
    """What the embedder returned, as a unit float32 matrix if it is `count` rows of `dim`
    finite numbers; else `EmbedderError` (rows of unequal lengths, text, a generator)."""
    try:
        array = np.asarray(result)
        if array.dtype.kind == "O":  # numbers of other types (Decimal), or no numbers
            array = array.astype(np.float64)
    except Exception:  # rows of unequal lengths, a generator, an object numpy cannot read
        array = None
    if array is None or array.dtype.kind not in "iuf":
        raise EmbedderError(
            f"embedder {embedder.model_id!r} returned no array of numbers (a "
            f"{type(result).__name__:.80}), expected shape ({count}, {embedder.dim})"
        )
    with np.errstate(over="ignore"):  # a number past float32's range: infinite, refused
        matrix = array.astype(np.float32, copy=False)
    if matrix.shape != (count, embedder.dim):
        raise EmbedderError(
            f"embedder {embedder.model_id!r} returned shape {matrix.shape}, "
            f"expected ({count}, {embedder.dim})"
        )
    if not np.isfinite(matrix).all():
        raise EmbedderError(f"embedder {embedder.model_id!r} returned NaN or infinite values")
    return normalize(matrix)


#: A row whose squared norm is below this (a norm under 1e-6) is scaled before it is
#: normalised (`normalize`): past it, no float32 square of its largest component is subnormal.
_SMALLEST_SQUARE = 2.0**-40


def normalize(matrix: npt.NDArray[Any]) -> Matrix:
    """Rows scaled to unit length (zero rows stay zero), as a new float32 matrix.

    A row whose squared norm would overflow float32 (components about 1e19 and beyond) or
    lose its precision below it is first divided by its largest component, as
    `pack_vectors` does (unscaled, components of 1e30 made a zero vector and of 1e-30 one
    of length 1e-30); any other row is left as it is, and divided by its norm.

    >>> print(normalize(np.array([[3e30, 4e30], [3e-30, 4e-30], [0.0, 0.0]])).round(3))
    [[0.6 0.8]
     [0.6 0.8]
     [0.  0. ]]
    """
    out = np.array(matrix, dtype=np.float32)
    with np.errstate(over="ignore", under="ignore"):
        squares = np.einsum("ij,ij->i", out, out)
    extreme = ~(squares >= _SMALLEST_SQUARE) | np.isinf(squares)
    if extreme.any():
        rows = out[extreme]
        peak = np.abs(rows).max(axis=1, keepdims=True)
        np.divide(rows, peak, out=rows, where=peak > 0)
        out[extreme] = rows
        squares[extreme] = np.einsum("ij,ij->i", rows, rows)
    norms = np.sqrt(squares)
    norms[norms == 0] = 1.0
    out /= norms[:, None]
    return out


async def embed_alone(
    embedder: Embedder, texts: Sequence[str], *, queries: bool = False
) -> list[npt.NDArray[np.float32] | None]:
    """Each text's unit vector, the texts embedded one at a time: None for one the embedder
    returns no vector for (a NaN, the wrong shape), after a batch of them returned what no
    index takes. A call that fails (`call_failed`) raises."""
    vectors: list[npt.NDArray[np.float32] | None] = []
    for text in texts:
        try:
            vectors.append((await embed_texts(embedder, [text], queries=queries))[0])
        except EmbedderError as failure:
            if call_failed(failure):
                raise
            vectors.append(None)
    return vectors


async def embed_documents(embedder: Embedder, texts: Sequence[str]) -> list[bytes]:
    """One stored vector (`dim` bytes) per text, ready for an index row.

    Texts must not be empty: an item whose `item_text` is `""` gets an index row without a vector.
    """
    return pack_vectors(await embed_texts(embedder, texts))


async def embed_query(embedder: Embedder, text: str) -> npt.NDArray[np.float32]:
    """The query's vector (shape `(dim,)`), for `cosine_scores` or `rank`."""
    matrix = await embed_texts(embedder, [text], queries=True)
    return matrix.reshape(embedder.dim)


def pack_vectors(matrix: npt.NDArray[Any]) -> list[bytes]:
    """Rows of a matrix as one signed byte per dimension, each row scaled so that its
    largest component is +-127: vectors are only ever compared by angle, and the rounding
    moves a cosine by about 0.001, for a quarter of float32's bytes.

    >>> pack_vectors(np.array([[0.6, -0.8]]))
    [b'_\\x81']
    """
    rows = np.asarray(matrix, dtype=np.float32)
    peak = np.abs(rows).max(axis=-1, keepdims=True)
    scaled = np.divide(rows * 127, peak, out=np.zeros_like(rows), where=peak > 0)
    return [row.tobytes() for row in np.rint(scaled).astype(VECTOR_DTYPE)]


def unpack_vectors(blobs: Sequence[bytes], dim: int) -> Matrix:
    """Stored vectors back into an `(n, dim)` float32 matrix of unit rows (zero rows stay
    zero); a wrong length raises.

    A length other than `dim` bytes means the vector came from another model: never compared.
    """
    if set(map(len, blobs)) - {dim * VECTOR_DTYPE.itemsize}:
        raise EmbedderError(f"a stored vector is not {dim} bytes: it belongs to another model")
    return normalize(np.frombuffer(b"".join(blobs), dtype=VECTOR_DTYPE).reshape(len(blobs), dim))
