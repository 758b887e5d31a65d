"""`AdvancedSQLiteSession`: a drop-in for the Agents SDK's class of that name.

Its constructor is the SDK's (`session_id=`, `db_path=`, `create_tables=`, `logger=`,
`session_settings=`, `sessions_table=`/`messages_table=`), and so are its methods: turns,
token usage and branches, here kept by this library's store in a SQLite file (or in memory).
Every session of a `SessionStore`, on any database, has the same methods; this class only
builds one the SDK's way.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .aio import run_blocking
from .crypto import Key
from .errors import ConfigurationError, StoreClosedError
from .search import Embedder
from .services import Services
from .session import StoreSession
from .store import SessionStore, drop_in_tables, embedder_option
from .tables import TableNames

if TYPE_CHECKING:
    from agents.memory import SessionSettings

logger = logging.getLogger(__name__)


class AdvancedSQLiteSession(StoreSession):
    """The SDK's `AdvancedSQLiteSession`, kept by this library: change the import only.

    Sessions on the same file (and tables) share one store; `db_path=":memory:"` (the
    default) is a database of this object's own. `key=` encrypts, `ttl=` expires items,
    `search=`/`embedder=` are the store's.

    Example::

        from agents_sqlalchemy import AdvancedSQLiteSession

        session = AdvancedSQLiteSession(session_id="chat-1", db_path="agent.db",
                                        create_tables=True)
        result = await Runner.run(agent, "hello", session=session)
        await session.create_branch_from_turn(1, "retry")
        session.close()
    """

    def __init__(
        self,
        *,
        session_id: str,
        db_path: str | Path = ":memory:",
        create_tables: bool = False,
        logger: logging.Logger | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        sessions_table: str | None = None,
        messages_table: str | None = None,
        key: Key | None = None,
        ttl: float | timedelta | None = None,
        search: bool = True,
        embedder: Embedder | str | None = None,
        user_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(db_path, (str, Path)) or not str(db_path).strip():
            raise ConfigurationError(
                f"db_path must be a file path or ':memory:', got {db_path!r:.80}"
            )
        if logger is not None and not callable(getattr(logger, "debug", None)):
            raise ConfigurationError(f"logger must be a logging.Logger, got {logger!r:.80}")
        tables = drop_in_tables(sessions_table, messages_table)
        store = self._open_store(
            db_path,
            tables=tables,
            create_tables=create_tables,
            key=key,
            embedder=embedder_option(search, embedder),
        )
        super().__init__(
            session_id,
            store._services,
            settings=store._session_settings,
            release=store.release,
            user_id=user_id,
            metadata=metadata,
            session_settings=session_settings,
            ttl=ttl,
        )
        self._store = store
        self.db_path = db_path
        # As the SDK's attributes: the tables the session's history is in.
        self.sessions_table = tables.sessions_table
        self.messages_table = tables.items_table
        if logger is not None:
            self._logger = logger

    @classmethod
    def _open_store(
        cls,
        db_path: str | Path,
        *,
        tables: TableNames,
        create_tables: bool,
        key: Key | None,
        embedder: Embedder | None,
    ) -> SessionStore:
        """The store behind a session: its own in memory, shared per file."""
        if str(db_path) == ":memory:":
            return SessionStore(
                ":memory:",
                tables=tables,
                create_tables=create_tables,
                key=key,
                search=embedder is not None,
                embedder=embedder,
            )
        return SessionStore.shared(
            Path(db_path),
            tables=tables,
            create_tables=create_tables,
            key=key,
            search=embedder is not None,
            embedder=embedder,
        )

    def _live(self) -> Services:
        if self._closed:
            raise StoreClosedError(
                "this AdvancedSQLiteSession is closed: nothing was read or written"
            )
        return self._services

    @property
    def store(self) -> SessionStore:
        """The store that keeps this session."""
        return self._store

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.session_id!r}, store={self._store!r})"

    def close(self) -> None:  # type: ignore[override]  # the SDK's class closes synchronously
        """Stop using this session; later calls raise `StoreClosedError` (a RuntimeError).

        Its share of the store is released at once outside an event loop; inside one, use
        `await session.aclose()` for that (else it goes when the store is collected).
        """
        if self._closed:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            run_blocking(self.aclose)
        else:
            self._closed = True

    async def aclose(self) -> None:
        """`close()`, releasing the store this session shares (the last one closes it)."""
        await StoreSession.close(self)

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def store_run_usage(self, result: Any) -> None:
        """Record a run's usage on the current turn; a failure is logged, never raised (as
        the SDK's class does). See `StoreSession.store_run_usage`."""
        try:
            await super().store_run_usage(result)
        except Exception as exc:
            self._logger.error("Failed to store session usage (%s)", type(exc).__name__)
