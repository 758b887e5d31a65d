"""sentence-transformers models (extra `sentence-transformers`; pulls in torch)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ConfigurationError
from ._extras import loaded, require


class SentenceTransformerEmbedder:
    """An embedder around a `sentence_transformers.SentenceTransformer`.

    Pass a model name (loaded here) or a loaded model with its `model_id`. Models trained
    with prompts take them through `query_prompt` / `document_prompt`.

    Example::

        embedder = SentenceTransformerEmbedder("sentence-transformers/all-MiniLM-L6-v2")
        e5 = SentenceTransformerEmbedder(
            "intfloat/e5-small-v2", query_prompt="query: ", document_prompt="passage: "
        )
    """

    metric = "cosine"

    def __init__(
        self,
        model: str | Any,
        *,
        model_id: str | None = None,
        query_prompt: str | None = None,
        document_prompt: str | None = None,
        batch_size: int = 32,
        **load_options: Any,
    ) -> None:
        if isinstance(model, str):
            st = require("sentence_transformers", "sentence-transformers", type(self).__name__)
            model_id = model_id or f"sentence-transformers:{model}"
            name = model
            model = loaded(
                f"the sentence-transformers model {name!r}",
                lambda: st.SentenceTransformer(name, **load_options),
            )
        elif model_id is None:
            raise ConfigurationError(
                "pass model_id with a loaded model: it names the vectors it makes"
            )
        self.model = model
        self.query_prompt = query_prompt
        self.document_prompt = document_prompt
        self.batch_size = batch_size
        get_dim = getattr(model, "get_embedding_dimension", None) or (
            model.get_sentence_embedding_dimension
        )
        self.dim = int(get_dim())
        prompts = (
            f":q={query_prompt!r}:d={document_prompt!r}" if query_prompt or document_prompt else ""
        )
        self.model_id = f"{model_id}{prompts}"

    def _encode(self, texts: list[str], prompt: str | None) -> npt.NDArray[np.float32]:
        options: dict[str, Any] = {"prompt": prompt} if prompt else {}
        vectors = self.model.encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
            **options,
        )
        return np.asarray(vectors, dtype=np.float32)

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Vectors of stored texts, with `document_prompt`."""
        return self._encode(texts, self.document_prompt)

    def embed_queries(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Vectors of queries, with `query_prompt`."""
        return self._encode(texts, self.query_prompt)
