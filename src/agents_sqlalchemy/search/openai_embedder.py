"""OpenAI's embeddings endpoint through the `openai` package's async client (extra `openai`)."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ConfigurationError, EmbedderError
from ..validation import check_range
from ._extras import require

# Native sizes of the current models; others need `dimensions`.
KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
#: The most `dimensions` taken (a vector is stored with every item, 4 bytes a dimension).
MAX_DIMENSIONS = 16_384
#: The most texts one request may carry (the endpoint's own limit).
MAX_BATCH = 2048


class OpenAIEmbedder:
    """Embeddings from `client.embeddings.create`, in batches, as float32.

    `client` is an `openai.AsyncOpenAI` (by default one built from the environment, e.g.
    `OPENAI_API_KEY`); `dimensions` shortens text-embedding-3 vectors.

    Example::

        embedder = OpenAIEmbedder("text-embedding-3-small", dimensions=512)
        vectors = await embedder.embed(["the deployment failed"])   # (1, 512) float32
    """

    metric = "cosine"

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        dimensions: int | None = None,
        client: Any | None = None,
        batch_size: int = 512,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ConfigurationError(f"model must be a model's name, got {model!r:.80}")
        if dimensions is not None:
            dimensions = check_range("dimensions", dimensions, 1, MAX_DIMENSIONS)
        batch_size = check_range("batch_size", batch_size, 1, MAX_BATCH)
        if client is not None and not hasattr(client, "embeddings"):
            raise ConfigurationError(f"client must be an openai.AsyncOpenAI, got {client!r:.80}")
        self._openai = require("openai", "openai", type(self).__name__)
        dim = dimensions or KNOWN_DIMENSIONS.get(model)
        if dim is None:
            raise ConfigurationError(f"unknown model {model!r}: pass dimensions=")
        self.model = model
        self.dimensions = dimensions
        self.dim = dim
        self.model_id = f"openai:{model}" + (f":{dimensions}" if dimensions else "")
        self.batch_size = batch_size
        self._client = client

    @property
    def client(self) -> Any:
        """The `AsyncOpenAI` client, created on first use."""
        if self._client is None:
            self._client = self._openai.AsyncOpenAI()
        return self._client

    async def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """One vector per text, in order."""
        rows: list[npt.NDArray[np.float32]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            options: dict[str, Any] = {"dimensions": self.dimensions} if self.dimensions else {}
            response = await self.client.embeddings.create(
                model=self.model, input=batch, encoding_format="base64", **options
            )
            data = sorted(response.data, key=lambda d: d.index)
            if len(data) != len(batch):
                raise EmbedderError(f"asked for {len(batch)} embeddings, got {len(data)}")
            rows.extend(_decode(d.embedding) for d in data)
        return np.stack(rows) if rows else np.zeros((0, self.dim), dtype=np.float32)

    async def embed_queries(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Queries are embedded like documents."""
        return await self.embed(texts)


def _decode(embedding: str | list[float]) -> npt.NDArray[np.float32]:
    if isinstance(embedding, str):
        return np.frombuffer(base64.b64decode(embedding), dtype="<f4").astype(np.float32)
    return np.asarray(embedding, dtype=np.float32)
