"""OpenAI Agents SDK sessions in the SQL database your app already has.

Example::

    from agents import Agent, Runner
    from agents_sqlalchemy import SessionStore

    store = SessionStore("agent.db", create_tables=True)
    session = store.session("user-123", user_id="alice")
    await Runner.run(agent, "remember my dog is called Mochi", session=session)
"""

from .app_env import LibraryTables
from .errors import (
    AgentsSQLAlchemyError,
    ConfigurationError,
    CorruptItemError,
    DatabaseError,
    InvalidSessionIdError,
    ItemError,
    SchemaError,
)
from .migrate import SchemaStatus, downgrade, upgrade
from .records import Removed, SessionInfo, SessionPage
from .sdk_import import ImportReport, import_sdk
from .session import SQLAlchemySession
from .store import SessionStore
from .tables import TableNames

__all__ = [
    "AgentsSQLAlchemyError",
    "ConfigurationError",
    "CorruptItemError",
    "DatabaseError",
    "ImportReport",
    "InvalidSessionIdError",
    "ItemError",
    "LibraryTables",
    "Removed",
    "SQLAlchemySession",
    "SchemaError",
    "SchemaStatus",
    "SessionInfo",
    "SessionPage",
    "SessionStore",
    "TableNames",
    "downgrade",
    "import_sdk",
    "upgrade",
]
