"""The built-in embedders by name, so a store, a command line or a config file can pick one.

Example::

    embedder_by_name("minilm")       # MiniLMEmbedder(): semantic, offline ([semantic] extra)
    embedder_by_name("hashing")      # HashingEmbedder(): no model, no extra
    builtin_indexing_as(store_indexed_model)  # the one a store given none takes, or None
    BUILTIN_EMBEDDERS                # ("hashing", "model2vec", "minilm")
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import AgentsSQLAlchemyError, ConfigurationError
from .embedders import Embedder, index_id
from .hashing import HashingEmbedder
from .minilm import MiniLMEmbedder
from .model2vec_embedder import Model2VecEmbedder

_FACTORIES: dict[str, Callable[[], Embedder]] = {
    "hashing": HashingEmbedder,
    "model2vec": Model2VecEmbedder.bundled,
    "minilm": MiniLMEmbedder,
}
#: Names `embedder_by_name` knows: the no-download default first.
BUILTIN_EMBEDDERS: tuple[str, ...] = tuple(_FACTORIES)


# How each built-in's `model_id` begins (the settings follow).
_MODEL_ID_PREFIXES = {"hashing": "hashing-", "model2vec": "model2vec:", "minilm": "minilm:"}


def builtin_for(model_id: str) -> str | None:
    """The name of the built-in embedder whose vectors carry `model_id`, or None.

    >>> builtin_for("hashing-v2-256-3-5-0.5+terms-v2")
    'hashing'
    """
    for name, prefix in _MODEL_ID_PREFIXES.items():
        if model_id.startswith(prefix):
            return name
    return None


def embedder_by_name(name: str) -> Embedder:
    """A new instance of the built-in embedder called `name` (models load once per process).

    An optional model's missing package raises `MissingExtraError` naming its extra; an
    unknown name raises `ConfigurationError` listing the known ones.

    Example::

        embedder = embedder_by_name(os.environ.get("EMBEDDER", "hashing"))   # or "minilm"
        store = SessionStore("agent.db", embedder=embedder)   # as embedder=<the name> would
        embedder.model_id                                      # e.g. "hashing-v2-256-3-5-0.5"
    """
    factory = _FACTORIES.get(name.strip().lower()) if isinstance(name, str) else None
    if factory is None:
        raise ConfigurationError(
            f"unknown embedder {name!r}: the built-in ones are {', '.join(BUILTIN_EMBEDDERS)}"
        )
    return factory()


def builtin_indexing_as(indexed: str) -> Embedder | None:
    """The built-in embedder whose index rows are `indexed` (an `index_id`), where it loads
    (its extra installed); else None. What a store opened without `embedder=` takes."""
    name = builtin_for(indexed)
    if name is None:
        return None
    try:
        embedder = embedder_by_name(name)
    except AgentsSQLAlchemyError:  # its extra is not installed
        return None
    return embedder if index_id(embedder.model_id) == indexed else None
