"""The store's parts, one concern each, composed over one database and one set of tables.

`SessionStore` is a façade over a `Services`; each session of the store calls its
`conversation`, `branches` and `searcher` directly. Data flows down: services use the codec,
the repository, the search layer and crypto, never the other way round.

Example::

    services = Services.build("agent.db", tables=TableNames(), key=None, ttl=None,
                              embedder=HashingEmbedder(), create_tables=True)
    await services.conversation.append(SessionKey.of("chat-1"), [{"role": "user"}])
    await services.close()
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from .. import repository
from ..crypto import Key, OwnerKeyStore, validate_key
from ..database.engines import DEFAULT_LOCK_TIMEOUT
from ..database.units import Database
from ..errors import ConfigurationError
from ..models import build_models
from ..repository import (
    Compaction,
    Imports,
    Items,
    KeyringRows,
    Lines,
    OwnerKeyRows,
    Schema,
    SearchIndex,
    Sessions,
    Usage,
)
from ..search import Embedder
from ..tables import ROLES, TableNames
from ..telemetry import Telemetry
from .adoption import Adoption
from .background import Background
from .branches import Branches
from .conversation import Conversation
from .indexer import Indexer
from .keys import ROTATE_BATCH, KeyRotation
from .management import Management
from .opener import Opener
from .owners import Owners
from .portability import Portability
from .searcher import Searcher

__all__ = ["ROTATE_BATCH", "Services"]


@dataclass(frozen=True)
class Services:
    """The database, the services a store is made of, and the repository's concerns that
    are reached from outside the services (imports; the search index)."""

    db: Database
    imports: Imports
    search_index: SearchIndex
    background: Background
    opener: Opener
    owners: Owners
    keys: KeyRotation
    adoption: Adoption
    conversation: Conversation
    management: Management
    branches: Branches
    portability: Portability
    indexer: Indexer | None
    searcher: Searcher | None

    @classmethod
    def build(
        cls,
        url_or_engine: str | Path | URL | AsyncEngine,
        *,
        tables: TableNames,
        key: Key | None,
        ttl: timedelta | None,
        embedder: Embedder | None,
        create_tables: bool,
        engine_kwargs: dict[str, Any] | None = None,
        sqlite_synchronous: str = "NORMAL",
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        statement_timeout: float | None = None,
        import_sdk_history: bool = False,
        embedder_chosen: bool = True,
        telemetry: Telemetry | None = None,
        owner_keys: OwnerKeyStore | None = None,
    ) -> Services:
        """Compose the services of one store (no I/O: the database is met on first use)."""
        key = None if key is None else validate_key(key)
        models = build_models(tables)
        db = Database(
            url_or_engine,
            engine_kwargs=engine_kwargs,
            sqlite_synchronous=sqlite_synchronous,
            lock_timeout=lock_timeout,
            statement_timeout=statement_timeout,
            telemetry=telemetry,
            tables=[tables.name(role) for role in ROLES],  # the version table among them
            refusals=models.refusals(),
        )
        # The repository: one schema context, one object per concern built on it.
        schema = Schema(db, models, sealed=key is not None)
        items, sessions, lines = Items(schema), Sessions(schema), Lines(schema)
        branches = repository.Branches(schema, lines)
        usage = Usage(schema, items, lines, branches)
        keyring, imports, index = KeyringRows(schema), Imports(schema), SearchIndex(schema)

        background = Background(
            release=db.release_loop, thread=db.owns_engines, telemetry=db.telemetry
        )
        db.telemetry.describe(
            items_table=tables.items_table,
            sessions_table=tables.sessions_table,
            sealed=key is not None,
            backlog=background.backlog,
            pools=db.pools,
        )
        opener = Opener(
            db,
            keyring,
            imports,
            tables,
            key=key,
            create_tables=create_tables,
            background=background,
            forget_sealed=branches.forget_remembered,
        )
        opener.announce_history = not import_sdk_history  # else each session is imported
        if owner_keys is not None and key is None:
            raise ConfigurationError("owner_keys= needs a key: a plaintext store has no keys")
        if owner_keys is not None and not isinstance(owner_keys, OwnerKeyStore):
            raise ConfigurationError(
                f"owner_keys must implement OwnerKeyStore (keep, fetch, destroy), got "
                f"{type(owner_keys).__name__}"
            )
        owners = Owners(
            opener.ready, OwnerKeyRows(schema), sessions, owner_keys, sealed=key is not None
        )
        adoption = Adoption(
            db, opener, owners, sessions, imports, tables, import_on_use=import_sdk_history, ttl=ttl
        )
        indexer = (
            None
            if embedder is None
            else Indexer(index, opener, owners, embedder, background, chosen=embedder_chosen)
        )
        written = indexer.written if indexer else None
        conversation = Conversation(
            items, sessions, Compaction(schema), opener, owners, written, ttl=ttl
        )
        management = Management(sessions, index, opener, owners)
        branches_service = Branches(branches, usage, opener, owners, written, ttl=ttl)
        return cls(
            db=db,
            imports=imports,
            search_index=index,
            background=background,
            opener=opener,
            owners=owners,
            keys=KeyRotation(opener, keyring, owners),
            adoption=adoption,
            conversation=conversation,
            management=management,
            branches=branches_service,
            portability=Portability(conversation, branches_service, management),
            indexer=indexer,
            searcher=(
                None if indexer is None else Searcher(index, opener, owners, indexer, background)
            ),
        )

    def search(self) -> Searcher:
        """The searcher; `ConfigurationError` when the store does not search."""
        if self.searcher is None:
            raise _search_is_off()
        return self.searcher

    def index(self) -> Indexer:
        """The indexer; `ConfigurationError` when the store does not search."""
        if self.indexer is None:
            raise _search_is_off()
        return self.indexer

    async def close(self) -> None:
        """Finish the background work, then release the connections the database made (an
        engine passed in stays open)."""
        await self.background.close()
        await self.db.close()


def _search_is_off() -> ConfigurationError:
    return ConfigurationError(
        "search is off for this store (search=False): open it with search=True, the "
        "default, to index items and search them"
    )
