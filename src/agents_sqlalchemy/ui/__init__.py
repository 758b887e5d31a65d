"""A local web app to browse a store: users and sessions, transcripts with their branches,
tool calls and token usage, search with its evidence, and charts drawn as SVG.

Needs the `ui` extra (`pip install 'openai-agents-sqlalchemy[ui]'`); run it with
`agents-sqlalchemy ui --url ...`, or serve `create_app(store)` with any ASGI server.

Example::

    from agents_sqlalchemy import SessionStore
    from agents_sqlalchemy.ui import create_app

    store = SessionStore("agent.db")
    app = create_app(store, allow_writes=False)
"""

from __future__ import annotations

from ..errors import MissingExtraError

try:
    import jinja2  # noqa: F401
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtraError(
        f"the session browser needs the ui extra ({exc.name} is missing): "
        "pip install 'openai-agents-sqlalchemy[ui]'"
    ) from exc

from .app import create_app
from .security import check_bind

__all__ = ["check_bind", "create_app"]
