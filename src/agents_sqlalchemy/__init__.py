"""OpenAI Agents SDK sessions in the SQL database your app already has.

Example::

    from agents import Agent, Runner
    from agents_sqlalchemy import SessionStore

    store = SessionStore("agent.db", create_tables=True)
    session = store.session("user-123", user_id="alice")
    await Runner.run(agent, "remember my dog is called Mochi", session=session)
"""

from .advanced import AdvancedSQLiteSession
from .app_env import LibraryTables
from .crypto import KeyProvider
from .errors import (
    AgentsSQLAlchemyError,
    BranchError,
    ConfigurationError,
    CorruptItemError,
    DatabaseError,
    DatabaseTimeoutError,
    DecryptionError,
    EmbedderError,
    InvalidKeyError,
    InvalidSessionIdError,
    ItemError,
    KeyProviderError,
    KeyringError,
    MissingExtraError,
    QueryTooLongError,
    SchemaError,
    SdkHistoryWarning,
    SearchError,
    SessionBusyError,
    StoreClosedError,
    TamperedItemError,
    WrongKeyError,
)
from .migrate import SchemaStatus, downgrade, upgrade
from .records import (
    DailyUsage,
    Removed,
    SearchHit,
    SessionInfo,
    SessionPage,
    TokenUsage,
    UsageReport,
)
from .search import (
    Embedder,
    HashingEmbedder,
    Model2VecEmbedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
)
from .services.importer import ImportReport, import_sdk
from .store import SessionStore, SQLAlchemySession
from .tables import TableNames

__all__ = [
    "AdvancedSQLiteSession",
    "AgentsSQLAlchemyError",
    "BranchError",
    "ConfigurationError",
    "CorruptItemError",
    "DailyUsage",
    "DatabaseError",
    "DatabaseTimeoutError",
    "DecryptionError",
    "Embedder",
    "EmbedderError",
    "HashingEmbedder",
    "ImportReport",
    "InvalidKeyError",
    "InvalidSessionIdError",
    "ItemError",
    "KeyProvider",
    "KeyProviderError",
    "KeyringError",
    "LibraryTables",
    "MissingExtraError",
    "Model2VecEmbedder",
    "OpenAIEmbedder",
    "QueryTooLongError",
    "Removed",
    "SQLAlchemySession",
    "SchemaError",
    "SchemaStatus",
    "SdkHistoryWarning",
    "SearchError",
    "SearchHit",
    "SentenceTransformerEmbedder",
    "SessionBusyError",
    "SessionInfo",
    "SessionPage",
    "SessionStore",
    "StoreClosedError",
    "TableNames",
    "TamperedItemError",
    "TokenUsage",
    "UsageReport",
    "WrongKeyError",
    "downgrade",
    "import_sdk",
    "upgrade",
]
