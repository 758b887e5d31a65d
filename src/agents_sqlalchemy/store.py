"""The store: `SessionStore`, a database and its configuration, and `SQLAlchemySession`, a
session as the store (or the SDK's way of building one) makes it.

The store is a façade: what it does is done by its services (`services/`); what a session
does is in `session.py`, built from the services, not from the store. A session built
the SDK's way (`SQLAlchemySession(id, url)`) takes a share of the process's store for
those tables (`SessionStore.shared`), which the last such session to close closes.
"""

from __future__ import annotations

import secrets
import threading
import weakref
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from .aio import run_blocking
from .crypto import Key, OwnerKeyStore, same_key
from .database.engines import DEFAULT_LOCK_TIMEOUT, anchored, engine_options, normalize_url
from .errors import ConfigurationError
from .migrations.status import in_memory
from .records import (
    ErasureReceipt,
    ImportedUser,
    Removed,
    SearchHit,
    SessionInfo,
    SessionPage,
    UsageReport,
)
from .search import (
    SEARCH_MODES,
    Embedder,
    HashingEmbedder,
    SearchMode,
    check_embedder,
    embedder_by_name,
)
from .services import ROTATE_BATCH, Services
from .services.portability import Lines, erase
from .session import StoreSession, default_settings, sdk_settings, settings_option
from .tables import TableNames, table_names
from .telemetry import Telemetry, telemetry_option, traced
from .types import Scope
from .validation import check_flag, check_progress, check_user_id, session_key, ttl_delta

if TYPE_CHECKING:
    from agents.memory import SessionSettings

Target = str | Path | URL | AsyncEngine


def _removed_items(removed: Removed | ErasureReceipt) -> int:
    return removed.items


#: What `SessionStore.create_session` passes on to `session()` besides the owner.
SESSION_OPTIONS = ("session_settings", "ttl", "repair_on_read")


class SessionStore:
    """Agents SDK sessions kept in SQLite, PostgreSQL or MySQL/MariaDB through SQLAlchemy.

    `url_or_engine` is a database URL (`"postgresql://..."`, `"sqlite+aiosqlite:///a.db"`),
    a bare file path (SQLite), or an `AsyncEngine` the app owns. The store works from any
    event loop or thread: `asyncio.run` called repeatedly, `Runner.run_sync` in threads.

    With `key` (a passphrase, 32 raw bytes, or a `KeyProvider`), every item and state is
    sealed under its own data key, wrapped under a key of its owner (its user, or the
    session when it has none); deleting an item destroys its key, erasing a user destroys
    theirs. `owner_keys` says where owner keys are kept (default: in the database, wrapped
    under `key`; `KeyDirectory(path)` or a KMS for erasure that reaches backups). `ttl`
    (seconds or a timedelta) makes items expire: reads never return them, `purge_expired`
    deletes them.
    Items are indexed for `search()` just after they are written, by `embedder` (an
    `Embedder`, or a built-in's name; None: the built-in the database was indexed with, else
    the default, which downloads nothing); `search=False` turns indexing off. A database
    keeps its embedding model until `reindex()`: a store with another one warns
    (`SearchModelWarning`) and searches by keyword only. A write waits at most
    `lock_timeout` seconds for another writer of its session (`SessionBusyError`); with
    `statement_timeout`, no unit of work waits longer than that for a server
    (`DatabaseTimeoutError`), but making the tables runs to its end. `telemetry` (a
    `Telemetry`, or False) says how operations are reported to OpenTelemetry.

    On a database where the SDK's own `SQLAlchemySession` kept conversations, a session id
    with history there and none here is refused (`SdkHistoryError`, naming the command that
    imports it) or, with `import_sdk_history=True`, imported on its first use: a
    conversation is never split into an old half and a new, empty one.

    `close()` (or the end of an `async with` or `with` block) releases its connections;
    any call after that raises `StoreClosedError`.

    Example::

        async with SessionStore("agent.db", create_tables=True, key="passphrase") as store:
            session = store.session("user-123", user_id="alice")
            await Runner.run(agent, "hello", session=session)

        with SessionStore("agent.db", create_tables=True) as store:   # sync code
            Runner.run_sync(agent, "hello", session=store.session("user-123"))
    """

    def __init__(
        self,
        url_or_engine: Target,
        *,
        tables: TableNames | None = None,
        create_tables: bool = False,
        key: Key | None = None,
        owner_keys: OwnerKeyStore | None = None,
        ttl: float | timedelta | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        search: bool = True,
        embedder: Embedder | str | None = None,
        engine_kwargs: dict[str, Any] | None = None,
        sqlite_synchronous: str = "NORMAL",
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        statement_timeout: float | None = None,
        import_sdk_history: bool = False,
        telemetry: Telemetry | bool | None = None,
    ) -> None:
        self.tables = table_names(tables)
        check_flag("create_tables", create_tables)
        check_flag("import_sdk_history", import_sdk_history)
        self._ttl = ttl_delta(ttl)
        self._session_settings = settings_option(session_settings)  # None: made when asked
        self._embedder = embedder_option(search, embedder)
        self._services = Services.build(
            url_or_engine,
            tables=self.tables,
            key=key,
            owner_keys=owner_keys,
            ttl=self._ttl,
            embedder=self._embedder,
            create_tables=create_tables,
            engine_kwargs=engine_kwargs,
            sqlite_synchronous=sqlite_synchronous,
            lock_timeout=lock_timeout,
            statement_timeout=statement_timeout,
            import_sdk_history=import_sdk_history,
            embedder_chosen=embedder is not None,
            telemetry=telemetry_option(telemetry),
        )
        # Drop-in sessions sharing this store (see `SQLAlchemySession.close`).
        self._shares = 0
        self._shared_as: tuple[Any, ...] | None = None

    @property
    def session_settings(self) -> SessionSettings:
        """What every session of this store starts from (made, with the SDK, on first use)."""
        made = sdk_settings(self._session_settings) or default_settings()
        self._session_settings = made
        return made

    @session_settings.setter
    def session_settings(self, value: SessionSettings | dict[str, Any] | None) -> None:
        self._session_settings = settings_option(value)

    @property
    def ttl(self) -> timedelta | None:
        """How long the items of this store's sessions live (None: for ever); read-only,
        the sessions are built with it: `store.session(..., ttl=...)` sets one session's."""
        return self._ttl

    @property
    def key(self) -> Key | None:
        """The key the store was opened with (after `rotate_key`, the new one)."""
        return self._services.opener.key

    @property
    def embedder(self) -> Embedder | None:
        """What the store indexes and searches with (None: search is off): the embedder
        given, else the default; given none on a database indexed with another built-in
        model, that model, once the store has looked (at its first search or write)."""
        indexer = self._services.indexer
        return self._embedder if indexer is None else indexer.embedder

    @property
    def create_tables(self) -> bool:
        """Whether the store migrates its tables to head on first use."""
        return self._services.opener.create_tables

    @property
    def engine(self) -> AsyncEngine:
        """An `AsyncEngine` on the store's database (the app's own, if it gave one)."""
        return self._services.db.engine

    def session(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        ttl: float | timedelta | None = None,
        repair_on_read: bool = False,
    ) -> SQLAlchemySession:
        """A session object for `Runner.run(..., session=...)`; its row is made on first write.

        `user_id` and `metadata` are recorded when the session is first written (change
        them later with `session.update_metadata` and `session.set_user_id`); `ttl`, in
        seconds or a timedelta, overrides the store's for items this object adds. With
        `repair_on_read`, reads give the history mended as `session.repair()` would mend
        it (what is stored is left as it is).
        """
        self._services.db.check_open()
        return SQLAlchemySession(
            session_id,
            store=self,
            user_id=user_id,
            metadata=metadata,
            session_settings=session_settings,
            ttl=ttl,
            repair_on_read=repair_on_read,
        )

    @property
    def closed(self) -> bool:
        """Whether the store was closed; every call then raises `StoreClosedError`."""
        return self._services.db.closed

    async def close(self) -> None:
        """Release the connections this store made; an engine passed in stays open.

        Afterwards every call on the store or its sessions raises `StoreClosedError`.
        """
        await self._services.close()

    @classmethod
    def shared(
        cls,
        url_or_engine: Target,
        *,
        tables: TableNames | None = None,
        create_tables: bool = False,
        key: Key | None = None,
        search: bool = True,
        embedder: Embedder | str | None = None,
        engine_kwargs: dict[str, Any] | None = None,
        import_sdk_history: bool = False,
    ) -> SessionStore:
        """The process's store of these tables in this database, made on first use; each
        call takes a share of it, which `release()` gives back (the last one closes it).

        What sessions built the SDK's way use (`SQLAlchemySession(id, url)`): one store,
        and so one engine per event loop, however many sessions a process builds. The same
        tables opened again with another key or embedder are refused.

        Example::

            store = SessionStore.shared("agent.db", create_tables=True)
            session = store.session("chat-1")
            await store.release()
        """
        tables = table_names(tables)
        chosen = embedder_option(search, embedder)
        target = (
            ("engine", id(url_or_engine))
            if isinstance(url_or_engine, AsyncEngine)
            else ("url", anchored(normalize_url(url_or_engine)).render_as_string(False))
        )
        if in_memory(str(target[1])):  # as the SDK's class: a new in-memory database each time
            target = ("memory", secrets.token_hex(8))
        identity = (target, tables, repr(sorted(engine_options(engine_kwargs).items())))
        with _shared_stores_lock:
            store = _shared_stores.get(identity)
            if store is None or store.closed:
                store = cls(
                    url_or_engine,
                    tables=tables,
                    create_tables=create_tables,
                    key=key,
                    search=search,
                    embedder=embedder,
                    engine_kwargs=engine_kwargs,
                    import_sdk_history=import_sdk_history,
                )
                store._shared_as = identity
                _shared_stores[identity] = store
            elif not same_key(store.key, key):
                raise ConfigurationError(
                    "these tables are already open in this process with another key (or none): "
                    "one database has one key"
                )
            elif model_id(store._embedder) != model_id(chosen):
                raise ConfigurationError(
                    f"these tables are already open in this process with the embedder "
                    f"{model_id(store._embedder)!r}, not {model_id(chosen)!r}: open both the "
                    "same way"
                )
            store._services.opener.create_tables |= create_tables
            store._services.adoption.import_on_use |= import_sdk_history
            if import_sdk_history:  # the SDK's history is imported as it is used: no warning
                store._services.opener.announce_history = False
            store._shares += 1
            return store

    async def release(self) -> None:
        """Give back a share taken by `shared()`; the last one closes the store (one not
        made by `shared()` is closed). A shared store with no share left to give back
        (released once more than taken) raises `ConfigurationError`."""
        if self._shared_as is None:
            await self.close()
            return
        with _shared_stores_lock:
            if self._shares <= 0:
                raise ConfigurationError(
                    "release() gives back a share taken by SessionStore.shared(): this store "
                    "has none left (released twice?)"
                )
            self._shares -= 1
            last = self._shares <= 0
            if last and _shared_stores.get(self._shared_as or ()) is self:
                del _shared_stores[self._shared_as or ()]
        if last:
            await self.close()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        run_blocking(self.close)

    async def __aenter__(self) -> SessionStore:
        self._services.db.check_open()  # a closed store is not entered again
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @traced("search", search=SEARCH_MODES, user_argument="user_id")
    async def search(
        self,
        query: str,
        *,
        user_id: str | None = None,
        limit: int = 5,
        mode: SearchMode = "hybrid",
        min_score: float | None = None,
    ) -> list[SearchHit]:
        """The stored items that best answer `query`, across sessions (one user's, or all).

        Ranks on vector similarity, keyword rank and recency together (`mode="vector"` or
        `"keyword"` for one signal); each hit says which session it came from. Only hits
        with evidence are returned (see `SQLAlchemySession.search`), or with `min_score`
        every hit whose score reaches it; `limit` is 1 to 1,000.
        """
        searcher = self._services.search()
        scope = Scope(user_id=check_user_id(user_id))
        return await searcher.search(scope, query, limit, mode, min_score)

    @traced("reindex")
    async def reindex(
        self, *, batch_size: int = 200, progress: Callable[[int, int], None] | None = None
    ) -> int:
        """Index every live item for the store's embedder, in place of other models' rows.

        Run it after changing the embedder (its `model_id`), or after an upgrade that
        changed the keyword terms (`search.index_id` names both); until then the items
        indexed under the old model are found by keyword only, and vectors of two models
        are never compared. Items added meanwhile are indexed as they come, and a search
        meanwhile finds every item (by keyword, until the reindex reaches it). A transaction
        indexes at most `batch_size` items, fewer while they are heavy (about 32 MiB of them
        at a time).
        `progress(done, total)` is called before the first batch and after each one.
        Returns how many items were gone over (those without text to index included).
        """
        indexer = self._services.index()
        return await indexer.reindex(batch_size=batch_size, progress=check_progress(progress))

    @traced("indexed_model")
    async def indexed_model(self) -> str | None:
        """What the latest item was indexed with (None: none yet; items are indexed
        just after their write, so `flush()` first to know about the last ones): the
        embedder's `model_id` and the terms' version (`search.index_id`), as
        `"minilm:...+terms-v2"`.

        What the database was indexed with, so a tool can search with the same model.
        """
        return await self._services.management.indexed_model()

    @traced("flush")
    async def flush(self) -> None:
        """Wait for the work that follows writes: new items indexed for search, and (in
        encrypted mode, on SQLite) removed keys checkpointed out of the WAL.

        Both run just after the write, off the caller's path; a search waits for the
        indexing by itself, and `close()` for all of it.
        """
        self._services.db.check_open()  # after close() it raises, as every call does
        await self._services.background.flush()

    @traced("rotate_key")
    async def rotate_key(
        self,
        new_key: Key,
        *,
        batch_size: int = ROTATE_BATCH,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Re-wrap every data key under `new_key`, without re-encrypting any item.

        Runs in batches, one transaction each; if interrupted, call it again on a store
        opened with the old key and it resumes. Afterwards only `new_key` opens the
        database, and the old keyring row is deleted (on SQLite, scrubbed from the file).
        `progress(done, total)` is called before the first batch and after each one.
        Returns how many item keys were re-wrapped.

        From its start, a store still holding the old key (another process's) has every
        sealed write refused with `WrongKeyError` (with owner keys kept in the database;
        with an owner key store, such as a `KeyDirectory`, its writes go on, under the
        owners' keys the rotation then re-wraps). This store goes on reading and writing
        while it rotates. The search-term secret is kept (a
        re-wrap, not a reindex): the old key opens nothing of the rotated database, but
        can still confirm a guessed word in its keyword index. If the old key may have
        leaked, copy the data into a fresh database instead (`export_user`/`import_user`).
        """
        progress = check_progress(progress)
        return await self._services.keys.rotate(new_key, batch_size=batch_size, progress=progress)

    @traced("rotate_owner_keys")
    async def rotate_owner_keys(
        self,
        *,
        batch_size: int = ROTATE_BATCH,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Give every owner a fresh key, re-wrap every data key under its owner's new one,
        and destroy the old owner keys; the store's key stays. Resumable, as `rotate_key`.

        The maintenance that makes removals final where owner keys are kept outside the
        database (`owner_keys=`): copies made before hold only keys that are destroyed.
        With the owner keys in the database, copies still hold the old ones wrapped under
        the store's key: use `rotate_key` to a fresh key instead. Returns how many item
        keys were re-wrapped.
        """
        progress = check_progress(progress)
        return await self._services.keys.rotate_owner_keys(batch_size=batch_size, progress=progress)

    # -- sessions as an operator sees them -------------------------------------------------

    @traced("create_session", sessions=True, user_argument="user_id")
    async def create_session(
        self,
        *,
        user_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        **options: Any,
    ) -> SQLAlchemySession:
        """A new session with a fresh id (URL-safe, unguessable), listed from now on.

        `session.session_id` is the id to hand to the client; `options` are those
        of `store.session()` (`session_settings`, `ttl`, `repair_on_read`), checked before
        the session's row is made.
        """
        unknown = sorted(set(options) - set(SESSION_OPTIONS))
        if unknown:
            raise ConfigurationError(
                f"unknown session options {unknown}: the options are {', '.join(SESSION_OPTIONS)}"
            )
        management = self._services.management
        while True:  # 128 random bits: a clash is not expected, but never overwrites
            # Hex: an id never starts with a dash, which a command line takes for an option.
            key = session_key(secrets.token_hex(16), user_id, metadata)
            session = self.session(key.session_id, user_id=user_id, metadata=metadata, **options)
            if await management.create_as(key):
                return session

    @traced("session_info", session_argument="session_id", sessions=True)
    async def session_info(self, session_id: str) -> SessionInfo | None:
        """How the session stands (owner, metadata, times, live item count), or None."""
        return await self._services.management.info(session_key(session_id))

    @traced("list_sessions", sessions=True, user_argument="user_id")
    async def list_sessions(
        self,
        *,
        user_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        limit: int = 50,
        cursor: str | None = None,
        archived: bool | None = False,
    ) -> SessionPage:
        """A page of sessions, most recently active first; follow `page.next_cursor`.

        Filters: the owner, metadata values (all must match), and an activity window.
        Pages are keyset-paginated, so a page costs the same however many sessions exist.
        Archived sessions are left out; `archived=True` lists only them, `None` both.
        `limit` (the page's size) is 1 to 1,000.
        """
        return await self._services.management.list_sessions(
            user_id=user_id,
            metadata=metadata,
            updated_after=updated_after,
            updated_before=updated_before,
            limit=limit,
            cursor=cursor,
            archived=archived,
        )

    @traced("delete_session", session_argument="session_id", removed=_removed_items, sessions=True)
    async def delete_session(self, session_id: str) -> Removed:
        """Delete a session: its items (and their keys), state and row."""
        return await self._services.management.delete_one(session_key(session_id))

    @traced("delete_user", removed=_removed_items, sessions=True, user_argument="user_id")
    async def delete_user(self, user_id: str) -> Removed:
        """Delete every session of a user, e.g. for an erasure request."""
        return await self._services.management.delete(user_id=user_id)

    @traced("erase_user", removed=_removed_items, sessions=True, user_argument="user_id")
    async def erase_user(self, user_id: str) -> ErasureReceipt:
        """Erase a user: delete every session of theirs (items and their keys, state,
        branches, usage), as `delete_user` does, and return the receipt to keep.

        The receipt holds counts, the time, the database's dialect and tables, and the
        SHA-256 of the user id, never the id nor any content (see `ErasureReceipt`).
        """
        services = self._services
        return await erase(
            services.management,
            user_id,
            dialect=services.db.dialect_name,
            tables=self.tables,
            encrypted=self.key is not None,
            keeper=services.owners.kept_in,
        )

    def export_user(
        self, user_id: str, *, progress: Callable[[int, int], None] | None = None
    ) -> AsyncIterator[str]:
        """The export of every session of a user (archived ones too), as JSON Lines: an
        async iterator of lines of text, each ending with a newline.

        The format (a first line naming it and its version; then, per session, its
        metadata and state, each line of history with its items verbatim and its usage
        per turn) is described in `agents_sqlalchemy.services.portability`. Sessions are
        read a page at a time, and one session's items at once. `progress(done, total)`
        counts sessions.

        Example::

            with open("alice.jsonl", "w", encoding="utf-8") as out:
                async for line in store.export_user("alice"):
                    out.write(line)
        """
        return self._services.portability.export_user(user_id, check_progress(progress))

    @traced("import_user")
    async def import_user(
        self, lines: Lines | str | bytes, *, skip_existing: bool = False
    ) -> ImportedUser:
        """Write the sessions of an `export_user` stream into this store, whatever store
        made it: items (sealed under this store's key if it has one), metadata, state,
        branches and usage per turn, under the same session ids and owner.

        `lines` is any iterable or async iterable of lines (text or bytes): an open file,
        `export_user(...)` of another store; or the whole export as one text. A session
        whose id this store already has is refused (`ConfigurationError`), or skipped with
        `skip_existing=True`. Sessions are written one at a time as they are read, each
        whole or not at all (what a failed import could not delete, the database gone,
        stays marked and out of listings: an import again refuses it until it is
        deleted); a malformed or truncated stream raises `ConfigurationError` after the
        sessions it held whole.

        Example::

            with open("alice.jsonl", encoding="utf-8") as export:
                report = await store.import_user(export)
        """
        return await self._services.portability.import_user(lines, skip_existing=skip_existing)

    @traced("purge_inactive", removed=_removed_items, sessions=True)
    async def purge_inactive(self, older_than: timedelta | float) -> Removed:
        """Delete the sessions with no activity for `older_than` (a timedelta or seconds,
        positive: `delete_all(confirm=True)` removes every session)."""
        return await self._services.management.delete(inactive_for=older_than)

    @traced("purge_expired", removed=int)
    async def purge_expired(self, *, batch_size: int = 1000) -> int:
        """Delete expired items (reads already hide them), in batches; return how many."""
        return await self._services.management.purge_expired(batch_size)

    @traced("archive_inactive", sessions=True)
    async def archive_inactive(self, older_than: timedelta | float) -> int:
        """Archive the sessions with no activity for `older_than` (a timedelta or seconds);
        return how many.

        Archived sessions keep their items and state and still read and write; they leave
        `list_sessions()` (see `archived=`) until `restore_session`. TTL, `purge_expired`,
        `purge_inactive` and `delete_user` apply to them as to any session.
        """
        return await self._services.management.archive(inactive_for=older_than)

    @traced("archive_session", session_argument="session_id", sessions=True)
    async def archive_session(self, session_id: str) -> bool:
        """Archive one session; False if it has no row or was archived already."""
        return await self._services.management.archive_one(session_key(session_id))

    @traced("restore_session", session_argument="session_id", sessions=True)
    async def restore_session(self, session_id: str) -> bool:
        """Bring an archived session back into `list_sessions()`; False if it was not archived."""
        key = session_key(session_id)
        return await self._services.management.archive_one(key, archive=False)

    @traced("delete_all", removed=_removed_items, sessions=True)
    async def delete_all(self, *, confirm: bool = False) -> Removed:
        """Delete every session of these tables, archived ones too; needs `confirm=True`."""
        return await self._services.management.delete_all(confirm=confirm)

    @traced("usage", user_argument="user_id")
    async def usage(
        self,
        *,
        user_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> UsageReport:
        """Token usage summed by the database per owner and UTC day, across sessions.

        `user_id` keeps one owner's sessions; `since`/`until` (timezone-aware) bound when
        each turn's usage was first recorded. `report.total` sums the rows.
        """
        return await self._services.branches.report(user_id=user_id, since=since, until=until)


class SQLAlchemySession(StoreSession):
    """An Agents SDK session kept by a `SessionStore`; also a drop-in for the SDK's class.

    Mint it from a store, or build it the way the SDK's `SQLAlchemySession` is built:
    sessions on the same database and tables then share one store, which the last of them
    to `close()` closes (a session from `store.session()` leaves its store open).

    Example::

        session = store.session("user-123")
        session = SQLAlchemySession("user-123", "agent.db", create_tables=True)
        session = SQLAlchemySession("user-123", engine=engine, create_tables=True)
        session = SQLAlchemySession.from_url("user-123", url="postgresql://...")
        await Runner.run(agent, "hello", session=session)

        with SQLAlchemySession.from_url("user-123", url="agent.db", create_tables=True) as s:
            Runner.run_sync(agent, "hello", session=s)

    Moving from the SDK's own class on a database that holds its history: pass
    `import_sdk_history=True` to bring each session's history over on its first use.
    """

    def __init__(
        self,
        session_id: str,
        url_or_engine: Target | None = None,
        *,
        engine: AsyncEngine | None = None,
        store: SessionStore | None = None,
        user_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        ttl: float | timedelta | None = None,
        tables: TableNames | None = None,
        sessions_table: str | None = None,
        messages_table: str | None = None,
        create_tables: bool = False,
        key: Key | None = None,
        search: bool = True,
        embedder: Embedder | str | None = None,
        engine_kwargs: dict[str, Any] | None = None,
        import_sdk_history: bool = False,
        repair_on_read: bool = False,
        ensure_ascii: bool = True,
    ) -> None:
        # `ensure_ascii` is the SDK's choice of how its JSON text escapes non-ASCII; taken
        # for its signature: items are kept as UTF-8 JSON and read back the same either way.
        check_flag("ensure_ascii", ensure_ascii)
        session_key(session_id, user_id, metadata)  # a bad id fails before any store opens
        targets = [x for x in (url_or_engine, engine, store) if x is not None]
        if len(targets) != 1:
            raise ConfigurationError("pass exactly one of url_or_engine, engine= or store=")
        owns_store = store is None
        if store is None:
            if tables is not None and (sessions_table or messages_table):
                raise ConfigurationError("pass tables= or sessions_table/messages_table, not both")
            store = SessionStore.shared(
                targets[0],  # type: ignore[arg-type]
                tables=tables or drop_in_tables(sessions_table, messages_table),
                create_tables=create_tables,
                key=key,
                search=search,
                embedder=embedder,
                engine_kwargs=engine_kwargs,
                import_sdk_history=import_sdk_history,
            )
        elif not search or any(
            (
                tables,
                sessions_table,
                messages_table,
                create_tables,
                engine_kwargs,
                key,
                embedder,
                import_sdk_history,
            )
        ):
            raise ConfigurationError(
                "table, key, search and engine options belong to the store= given"
            )
        super().__init__(
            session_id,
            store._services,
            settings=store._session_settings,
            release=store.release if owns_store else None,
            user_id=user_id,
            metadata=metadata,
            session_settings=session_settings,
            ttl=ttl,
            repair_on_read=repair_on_read,
        )
        self._store = store

    @property
    def store(self) -> SessionStore:
        """The store that keeps this session."""
        return self._store

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.session_id!r}, store={self._store!r})"

    @classmethod
    def from_url(
        cls,
        session_id: str,
        *,
        url: str | URL,
        engine_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> SQLAlchemySession:
        """Build a session from a database URL, as the SDK's class does."""
        return cls(session_id, url, engine_kwargs=engine_kwargs, **kwargs)


# Sessions made on the same database and tables share one store (and so one engine per loop).
_shared_stores: weakref.WeakValueDictionary[tuple[Any, ...], SessionStore] = (
    weakref.WeakValueDictionary()
)
_shared_stores_lock = threading.Lock()


def drop_in_tables(sessions_table: str | None, messages_table: str | None) -> TableNames:
    """Tables for the SDK's two names: its own, and the rest prefixed by the first of them."""
    if not (sessions_table or messages_table):
        return TableNames()
    base = sessions_table or messages_table
    try:
        return TableNames(prefix=f"{base}_", sessions=sessions_table, items=messages_table)
    except ConfigurationError as exc:
        given = "sessions_table" if sessions_table else "messages_table"
        raise ConfigurationError(
            f"{given}={base!r:.80}: it also prefixes the library's other tables, whose "
            f"names it makes too long or not plain ({exc}); use a name of at most 22 "
            "characters"
        ) from exc


def embedder_option(search: bool, embedder: Embedder | str | None) -> Embedder | None:
    """The store's embedder: None when search is off, else the one named or the default."""
    if not isinstance(search, bool):
        raise ConfigurationError(f"search must be True or False, got {search!r}")
    if isinstance(embedder, str):
        embedder = embedder_by_name(embedder)
    if embedder is not None:
        embedder = check_embedder(embedder)  # an object lacking members is told which
    if not search:
        return None
    return embedder or HashingEmbedder()


def model_id(embedder: Embedder | None) -> str | None:
    """The embedder's model id (None: no search)."""
    return None if embedder is None else embedder.model_id
