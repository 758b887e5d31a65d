"""Import an optional dependency, or fail with the `pip install` line that provides it."""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import MissingExtraError


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
