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
from .crypto import Destruction, KeyDirectory, KeyProvider, OwnerKeyStore
from .errors import (
    AgentsSQLAlchemyError,
    BranchError,
    ConfigurationError,
    ConstraintError,
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
    OwnerKeyError,
    QueryTooLongError,
    SchemaError,
    SdkHistoryError,
    SdkHistoryWarning,
    SearchError,
    SearchModelWarning,
    SessionBusyError,
    StoreClosedError,
    TamperedItemError,
    WrongKeyError,
)
from .migrations.api import SchemaStatus, check, current, downgrade, stamp, upgrade, upgrade_sql
from .records import (
    DailyUsage,
    ErasureReceipt,
    ImportedUser,
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
    MiniLMEmbedder,
    Model2VecEmbedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    embedder_by_name,
)
from .services.importer import ImportOmission, ImportReport, import_sdk
from .store import SessionStore, SQLAlchemySession
from .tables import TableNames
from .telemetry import Telemetry

__all__ = [
    "AdvancedSQLiteSession",
    "AgentsSQLAlchemyError",
    "BranchError",
    "ConfigurationError",
    "ConstraintError",
    "CorruptItemError",
    "DailyUsage",
    "DatabaseError",
    "DatabaseTimeoutError",
    "DecryptionError",
    "Destruction",
    "Embedder",
    "EmbedderError",
    "ErasureReceipt",
    "HashingEmbedder",
    "ImportOmission",
    "ImportReport",
    "ImportedUser",
    "InvalidKeyError",
    "InvalidSessionIdError",
    "ItemError",
    "KeyDirectory",
    "KeyProvider",
    "KeyProviderError",
    "KeyringError",
    "LibraryTables",
    "MiniLMEmbedder",
    "MissingExtraError",
    "Model2VecEmbedder",
    "OpenAIEmbedder",
    "OwnerKeyError",
    "OwnerKeyStore",
    "QueryTooLongError",
    "Removed",
    "SQLAlchemySession",
    "SchemaError",
    "SchemaStatus",
    "SdkHistoryError",
    "SdkHistoryWarning",
    "SearchError",
    "SearchHit",
    "SearchModelWarning",
    "SentenceTransformerEmbedder",
    "SessionBusyError",
    "SessionInfo",
    "SessionPage",
    "SessionStore",
    "StoreClosedError",
    "TableNames",
    "TamperedItemError",
    "Telemetry",
    "TokenUsage",
    "UsageReport",
    "WrongKeyError",
    "check",
    "current",
    "downgrade",
    "embedder_by_name",
    "import_sdk",
    "stamp",
    "upgrade",
    "upgrade_sql",
]
