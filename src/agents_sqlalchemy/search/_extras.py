"""Import an optional dependency, or fail with the `pip install` line that provides it; load
a model through one, or fail with the library's own error."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import AgentsSQLAlchemyError, ConfigurationError, MissingExtraError

T = TypeVar("T")


def require(module: str, extra: str, what: str) -> Any:
    """Import `module`, or raise `MissingExtraError` naming the extra that installs it.

    >>> require("json", "none", "JSON").dumps([1])
    '[1]'
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise missing(module, extra, what) from exc


def missing(module: str, extra: str, what: str) -> MissingExtraError:
    """The error `require` raises, for a package found missing without importing it."""
    return MissingExtraError(
        f"{what} needs the '{module}' package: pip install 'openai-agents-sqlalchemy[{extra}]'"
    )


def loaded(what: str, load: Callable[[], T]) -> T:
    """`load()`, whose failure (a name the hub does not have, offline; a path that holds no
    model) is a `ConfigurationError` naming `what`, not the model library's own exception.

    >>> loaded("a model", lambda: {}["model"])
    Traceback (most recent call last):
    agents_sqlalchemy.errors.ConfigurationError: cannot load a model: KeyError: 'model'
    """
    try:
        return load()
    except AgentsSQLAlchemyError:
        raise
    except Exception as exc:
        raise ConfigurationError(f"cannot load {what}: {type(exc).__name__}: {exc}") from exc
