"""Errors of the search layer, rooted in the library's one base class.

Example::

    try:
        vectors = await embed_documents(embedder, texts)
    except EmbedderError as exc:
        log.error("embedder misbehaved: %s", exc)
"""

from __future__ import annotations

from ..errors import AgentsSQLAlchemyError


class SearchError(AgentsSQLAlchemyError):
    """Base class of the search layer's errors."""


class EmbedderError(SearchError, ValueError):
    """An embedder returned vectors of the wrong shape, or was given text it cannot embed."""


class MissingExtraError(SearchError, ImportError):
    """An optional embedder's package is not installed; the message names the extra."""
