"""`SessionStore`: one database, its configuration and key, and the sessions it mints."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import numpy as np
from agents.memory import SessionSettings
from agents.memory.session_settings import coerce_session_settings
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from .aio import holding
from .codec import Codec, IndexEntry, PlainCodec, SealedCodec, encode_item, encode_items
from .crypto import (
    Key,
    KeyEncryptionKey,
    KeyringRecord,
    create_kek,
    open_kek,
    rewrap_many,
    rewrap_state,
    validate_key,
)
from .database import Database
from .errors import (
    ConfigurationError,
    InvalidSessionIdError,
    KeyringError,
    WrongKeyError,
)
from .models import build_models
from .records import (
    Removed,
    SearchHit,
    SessionInfo,
    SessionPage,
    decode_cursor,
    encode_cursor,
)
from .repository import Candidates, Repository, Scope, SessionKey
from .search import (
    SEARCH_MODES,
    Embedder,
    HashingEmbedder,
    SearchMode,
    bm25_postings,
    cosine_scores,
    embed_documents,
    embed_query,
    fuse,
    item_text,
    recency_scores,
    term_counts,
)
from .tables import TableNames

if TYPE_CHECKING:
    from .session import SQLAlchemySession

DELETE_BATCH = 500
ROTATE_BATCH = 1000


def session_key(
    session_id: object, user_id: str | None = None, metadata: dict[str, Any] | None = None
) -> SessionKey:
    """Validate an SDK session id (any non-empty Unicode text without NUL) and key it."""
    if not isinstance(session_id, str) or not session_id:
        raise InvalidSessionIdError(f"session id must be a non-empty string, got {session_id!r}")
    if "\x00" in session_id:
        raise InvalidSessionIdError("session id must not contain NUL characters")
    try:
        return SessionKey.of(session_id, user_id=user_id, metadata=_json_object(metadata))
    except UnicodeEncodeError as exc:
        raise InvalidSessionIdError(f"session id is not valid Unicode text: {exc}") from exc


class SessionStore:
    """Agents SDK sessions kept in SQLite or PostgreSQL through SQLAlchemy.

    `url_or_engine` is a database URL (`"postgresql://..."`, `"sqlite+aiosqlite:///a.db"`),
    a bare file path (SQLite), or an `AsyncEngine` the app owns. The store works from any
    event loop or thread: `asyncio.run` called repeatedly, `Runner.run_sync` in threads.

    With `key` (a passphrase, 32 raw bytes, or a `KeyProvider`), every item and state is
    sealed under its own data key; deleting an item destroys its key. `ttl` (seconds or a
    timedelta) makes items expire: reads never return them, `purge_expired` deletes them.
    `search=True` (or an `Embedder`) indexes items as they are added, for `search()`.

    Example::

        async with SessionStore("agent.db", create_tables=True, key="passphrase") as store:
            session = store.session("user-123", user_id="alice")
            await Runner.run(agent, "hello", session=session)
    """

    def __init__(
        self,
        url_or_engine: str | Path | URL | AsyncEngine,
        *,
        tables: TableNames | None = None,
        create_tables: bool = False,
        key: Key | None = None,
        ttl: float | timedelta | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        search: bool | Embedder = False,
        engine_kwargs: dict[str, Any] | None = None,
        sqlite_synchronous: str = "NORMAL",
    ) -> None:
        self.tables = tables or TableNames()
        self.create_tables = create_tables
        self.ttl = ttl_delta(ttl)
        self.session_settings = _settings(session_settings) or SessionSettings()
        self.key = None if key is None else validate_key(key)
        self.embedder = _embedder(search)
        self._db = Database(
            url_or_engine, engine_kwargs=engine_kwargs, sqlite_synchronous=sqlite_synchronous
        )
        self._repository = Repository(
            self._db, build_models(self.tables), sealed=self.key is not None
        )
        self._codec: Codec | None = None
        self._kek: KeyEncryptionKey | None = None
        self._opening = threading.Lock()
        self._refused: WrongKeyError | None = None

    @property
    def engine(self) -> AsyncEngine:
        """An `AsyncEngine` on the store's database (the app's own, if it gave one)."""
        return self._db.engine

    def session(
        self,
        session_id: str,
        *,
        user_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        ttl: float | timedelta | None = None,
    ) -> SQLAlchemySession:
        """A session object for `Runner.run(..., session=...)`; its row is made on first write.

        `user_id` and `metadata` are recorded when the session is first written (change
        them later with `session.update_metadata` and `session.set_user_id`); `ttl`, in
        seconds or a timedelta, overrides the store's for items this object adds.
        """
        from .session import SQLAlchemySession

        return SQLAlchemySession(
            session_id,
            store=self,
            user_id=user_id,
            metadata=metadata,
            session_settings=session_settings,
            ttl=ttl,
        )

    async def close(self) -> None:
        """Release the connections this store made; an engine passed in stays open."""
        await self._db.close()

    async def __aenter__(self) -> SessionStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # -- items of one session, used by SQLAlchemySession ---------------------------------------

    async def read_items(self, key: SessionKey, limit: int | None) -> list[Any]:
        """Live items of a session in order; with a limit, the latest `limit`."""
        if limit is not None and limit < 0:
            raise ConfigurationError(f"limit must be None or >= 0, got {limit}")
        if limit == 0:
            return []
        codec = await self._ready()
        return [codec.item(key, stored) for stored in await self._repository.read(key, limit)]

    async def append_items(
        self, key: SessionKey, items: list[Any], ttl: timedelta | None = None
    ) -> None:
        """Append a batch, all or nothing; items expire after `ttl` (else the store's)."""
        payloads = encode_items(items)
        if payloads:
            codec = await self._ready()
            index = await self._index_entries(items) if self.embedder else None
            await self._repository.append(
                key,
                len(payloads),
                lambda first_seq: codec.rows(key, payloads, first_seq, index),
                ttl or self.ttl,
            )

    async def pop_item(self, key: SessionKey) -> Any | None:
        """Remove and return the latest live item, or None; its key is destroyed."""
        codec = await self._ready()
        async with self._scrubbing():
            return await self._repository.pop(key, lambda stored: codec.item(key, stored))

    async def clear_items(self, key: SessionKey) -> int:
        """Delete every item of a session (and their keys); return how many."""
        await self._ready()
        async with self._scrubbing():
            return await self._repository.clear(key)

    # -- search --------------------------------------------------------------------------------

    async def search(
        self,
        query: str,
        *,
        user_id: str | None = None,
        limit: int = 5,
        mode: SearchMode = "hybrid",
    ) -> list[SearchHit]:
        """The stored items that best answer `query`, across sessions (one user's, or all).

        Ranks on vector similarity, keyword rank and recency together (`mode="vector"` or
        `"keyword"` for one signal); each hit says which session it came from.
        """
        return await self.search_items(Scope(user_id=user_id), query, limit, mode)

    async def search_items(
        self, scope: Scope, query: str, limit: int, mode: SearchMode
    ) -> list[SearchHit]:
        """`search` within a scope: one session (`Scope(session=key)`), a user, or all.

        Candidates are the live items in scope with a vector of the embedder's model, plus
        those holding a query term (items not reindexed yet are found by keyword only).
        """
        embedder = self._search_embedder()
        if mode not in SEARCH_MODES:
            raise ConfigurationError(f"mode must be one of {SEARCH_MODES}, got {mode!r}")
        if not 1 <= limit <= 1000:
            raise ConfigurationError(f"limit must be between 1 and 1000, got {limit}")
        codec = await self._ready()
        if not query.strip():
            return []
        model_id = embedder.model_id
        repository = self._repository
        read_vectors = mode != "keyword" and not codec.caches_vectors
        candidates = await repository.candidates(scope, model_id, vectors=read_vectors)
        with_vector = len(candidates)
        query_terms = list(codec.terms(term_counts(query))) if mode != "vector" else []
        postings = await repository.postings(scope, query_terms)
        index = dict(zip(candidates.item_pks, range(with_vector), strict=True))
        keyword_only = sorted(set(postings.item_pks).difference(index))
        if keyword_only:
            candidates.extend(await repository.positions(scope, keyword_only))
            added = range(with_vector, len(candidates))
            index.update(zip(candidates.item_pks[with_vector:], added, strict=True))
        if not len(candidates):
            return []
        vector_scores = None
        if mode != "keyword":
            vectors = await self._vectors(codec, candidates, with_vector, model_id)
            vectors += [None] * (len(candidates) - with_vector)
            vector_scores = cosine_scores(await embed_query(embedder, query), vectors)
        keyword_scores = None
        if postings.item_pks:
            term_index = {term: i for i, term in enumerate(query_terms)}
            at = np.fromiter((index.get(pk, -1) for pk in postings.item_pks), np.intp)
            terms = np.fromiter((term_index[term] for term in postings.terms), np.intp)
            live = at >= 0  # postings of expired items are left out
            keyword_scores = bm25_postings(
                at[live],
                terms[live],
                np.asarray(postings.counts)[live],
                size=len(candidates),
                doc_count=len(candidates),
            )
        hits = fuse(
            candidates.item_pks,
            vector=vector_scores,
            keyword=keyword_scores,
            recency=recency_scores(candidates.positions),
            mode=mode,
            limit=limit,
        )
        rows = await repository.hit_rows([hit.key for hit in hits])
        return [
            SearchHit(
                session_id=rows[hit.key][0].session_id,
                seq=rows[hit.key][1].seq,
                item=codec.item(*rows[hit.key]),
                score=hit.score,
                vector=hit.vector,
                keyword=hit.keyword,
            )
            for hit in hits
            if hit.key in rows  # an item removed since the candidates were read is not found
        ]

    async def _vectors(
        self, codec: Codec, candidates: Candidates, with_vector: int, model_id: str
    ) -> list[bytes | None]:
        """Plain vectors of the first `with_vector` candidates: opened from memory, or read
        and opened where missing (None: the item is gone)."""
        if with_vector < len(candidates):  # keyword matches come last, without a vector
            candidates = candidates.take(range(with_vector), candidates.vectors[:with_vector])
        vectors = codec.vectors(candidates, model_id)
        missing = [i for i, vector in enumerate(vectors) if vector is None]
        if missing:
            pks = [candidates.item_pks[i] for i in missing]
            stored = await self._repository.vectors(pks, model_id)
            read = candidates.take(missing, [stored.get(pk) for pk in pks])
            for i, vector in zip(missing, codec.vectors(read, model_id), strict=True):
                vectors[i] = vector
        return vectors

    async def reindex(
        self, *, batch_size: int = 200, progress: Callable[[int, int], None] | None = None
    ) -> int:
        """Index every live item for the store's embedder; drop other models' vectors.

        Run it after changing the embedder (its `model_id`); until then the items indexed
        under the old model are found by keyword only, and vectors of two models are never
        compared. Items added meanwhile are indexed as they come. `progress(done, total)` is
        called before the first batch and after each one. Returns how many items were
        gone over (those without text to index included).
        """
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be >= 1, got {batch_size}")
        embedder = self._search_embedder()
        codec = await self._ready()
        await self._repository.drop_other_models(embedder.model_id)
        done, after = 0, 0
        total = await self._repository.count_unindexed(embedder.model_id)
        if progress is not None:
            progress(done, total)
        while batch := await self._repository.unindexed(embedder.model_id, batch_size, after):
            after = batch[-1].item_pk
            items = [codec.item(row.key, row.stored) for row in batch]
            entries = await self._index_entries(items)
            await self._repository.replace_index(
                [
                    (row.item_pk, row.session_pk, codec.reindexed(row.key, row.stored, entry))
                    for row, entry in zip(batch, entries, strict=True)
                    if entry is not None
                ]
            )
            done += len(batch)
            if progress is not None:
                progress(done, max(total, done))
        return done

    async def _index_entries(self, items: list[Any]) -> list[IndexEntry | None]:
        """Term counts and a vector per item (None for an item with no text to index)."""
        embedder = self._search_embedder()
        texts = [item_text(item) for item in items]
        vectors = iter(await embed_documents(embedder, [text for text in texts if text]))
        return [
            IndexEntry(term_counts(text), next(vectors), embedder.model_id) if text else None
            for text in texts
        ]

    def _search_embedder(self) -> Embedder:
        if self.embedder is None:
            raise ConfigurationError(
                "search is off for this store: pass search=True (or an Embedder) to SessionStore"
            )
        return self.embedder

    # -- owner, metadata and state -------------------------------------------------------------

    async def get_metadata(self, key: SessionKey) -> dict[str, Any]:
        """The session's metadata ({} when it has none or no row yet)."""
        await self._ready()
        row = await self._repository.read_session_columns(key, ("metadata",))
        return dict(row.metadata or {}) if row else {}

    async def update_metadata(self, key: SessionKey, values: dict[str, Any]) -> dict[str, Any]:
        """Merge `values` into the session's metadata (a None value removes a name)."""
        values = _json_object(values) or {}
        merged: dict[str, Any] = {}

        def change(row: Any) -> dict[str, Any]:
            merged.update(row.metadata or {})
            merged.update(values)
            for name in [name for name, value in values.items() if value is None]:
                del merged[name]
            return {"metadata": merged}

        await self._ready()
        await self._repository.update_session(key, change, ("metadata",))
        return merged

    async def set_user_id(self, key: SessionKey, user_id: str | None) -> None:
        """Give the session to `user_id` (None: to nobody)."""
        await self._ready()
        await self._repository.update_session(key, lambda _: {"user_id": user_id}, ())

    async def get_state(self, key: SessionKey) -> dict[str, Any]:
        """The session's whole state mapping ({} when empty)."""
        codec = await self._ready()
        row = await self._repository.read_session_columns(key, codec.state_columns)
        return codec.state(key, row) if row else {}

    async def change_state(
        self, key: SessionKey, name: str, value: Any = None, *, delete: bool = False
    ) -> None:
        """Set (or delete) one named state value, under the session's lock."""
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"state names are non-empty strings, got {name!r}")
        if not delete:
            encode_item({"value": value}, f"state {name!r}")  # ItemError before any write
        codec = await self._ready()

        def change(row: Any) -> dict[str, Any]:
            state = codec.state(key, row)
            if delete:
                state.pop(name, None)
            else:
                state[name] = value
            return codec.state_values(key, state)

        await self._repository.update_session(key, change, codec.state_columns)

    # -- management ------------------------------------------------------------------------------

    async def session_info(self, session_id: str) -> SessionInfo | None:
        """How the session stands (owner, metadata, times, live item count), or None."""
        await self._ready()
        row = await self._repository.describe(session_key(session_id))
        return _info(row) if row else None

    async def list_sessions(
        self,
        *,
        user_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> SessionPage:
        """A page of sessions, most recently active first; follow `page.next_cursor`.

        Filters: the owner, metadata values (all must match), and an activity window.
        Pages are keyset-paginated, so a page costs the same however many sessions exist.
        """
        if not 1 <= limit <= 1000:
            raise ConfigurationError(f"limit must be between 1 and 1000, got {limit}")
        await self._ready()
        rows = await self._repository.list_sessions(
            user_id=user_id,
            metadata=metadata,
            updated_after=updated_after,
            updated_before=updated_before,
            after=decode_cursor(cursor) if cursor else None,
            limit=limit + 1,
        )
        page = [_info(row) for row in rows[:limit]]
        last = rows[limit - 1] if len(rows) > limit else None
        return SessionPage(page, encode_cursor(last.updated_at, last.id) if last else None)

    async def delete_session(self, session_id: str) -> Removed:
        """Delete a session: its items (and their keys), state and row."""
        return await self._delete(session_hash=session_key(session_id).hash)

    async def delete_user(self, user_id: str) -> Removed:
        """Delete every session of a user, e.g. for an erasure request."""
        return await self._delete(user_id=user_id)

    async def purge_inactive(self, older_than: timedelta) -> Removed:
        """Delete the sessions with no activity for `older_than`."""
        return await self._delete(inactive_for=older_than)

    async def purge_expired(self, *, batch_size: int = 1000) -> int:
        """Delete expired items (reads already hide them), in batches; return how many."""
        await self._ready()
        async with self._scrubbing():
            return await self._repository.purge_expired(batch_size)

    async def _delete(self, **where: Any) -> Removed:
        await self._ready()
        condition = self._repository.sessions_where(**where)
        async with self._scrubbing():
            sessions, items = await self._repository.delete_sessions(condition, DELETE_BATCH)
        return Removed(sessions=sessions, items=items)

    @asynccontextmanager
    async def _scrubbing(self) -> AsyncIterator[None]:
        """After a removal in encrypted mode, leave no copy of the removed keys in a WAL."""
        yield
        if isinstance(self._codec, SealedCodec):
            self._codec.forget_keys()
        if self.key is not None:
            await self._repository.scrub()

    # -- keys --------------------------------------------------------------------------------------

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
        """
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be >= 1, got {batch_size}")
        new_key = validate_key(new_key)
        await self._ready(rotating=True)
        old = self._kek
        if old is None:
            raise ConfigurationError("rotate_key needs a store opened with its current key")
        rows = await self._repository.keyring_rows()
        pending = [row for row in rows if row["retired_at"] is None and row["kek_id"] != old.kek_id]
        if pending:  # a rotation was interrupted: `new_key` must open its new keyring row
            new = await open_kek(new_key, KeyringRecord.from_row(pending[-1]))
        else:
            new = await create_kek(new_key, previous=old)
            await self._repository.add_keyring(new.record.as_row(), retire=old.kek_id)
        done, total = 0, await self._repository.count_keys(old.kek_id)
        if progress is not None:
            progress(done, total)
        finished = False
        while not finished:  # until no key (from a writer racing the rotation) is left behind
            while count := await self._repository.rewrap_keys(
                old.kek_id, new.kek_id, lambda wrapped: rewrap_many(wrapped, old, new), batch_size
            ):
                done += count
                if progress is not None:
                    progress(done, max(total, done))
            after: int | None = 0
            while after is not None:
                after = await self._repository.rewrap_states(
                    lambda blob: rewrap_state(blob, old, new), after, batch_size
                )
            finished = await self._repository.finish_rotation(old.kek_id)
        await self._repository.scrub()
        self.key, self._kek, self._codec = new_key, new, SealedCodec(new)
        return done

    async def _ready(self, *, rotating: bool = False) -> Codec:
        """Check the schema and open the keyring, once per store; then return the codec."""
        if self._codec is not None:
            return self._codec
        async with holding(self._opening):
            # A wrong key is refused once, not re-derived per call; a rotation may try the
            # key again (the previous key resumes an unfinished rotation).
            if self._refused is not None and not rotating:
                raise WrongKeyError(str(self._refused))
            if self._codec is None:
                await self._repository.ensure_schema(create=self.create_tables)
                try:
                    self._kek = await self._open_keyring(rotating)
                except WrongKeyError as exc:
                    self._refused = exc
                    raise
                self._codec = PlainCodec() if self._kek is None else SealedCodec(self._kek)
        return self._codec

    async def _open_keyring(self, rotating: bool) -> KeyEncryptionKey | None:
        """The store's key-encryption key; a wrong or missing key fails before any item I/O."""
        rows = await self._repository.keyring_rows()
        active = [KeyringRecord.from_row(row) for row in rows if row["retired_at"] is None]
        retired = [KeyringRecord.from_row(row) for row in rows if row["retired_at"] is not None]
        if self.key is None:
            if rows:
                raise WrongKeyError(
                    "this database is encrypted: open the store with its key (key=...); "
                    "nothing was read or written"
                )
            return None
        if not rows:
            if rotating:
                raise KeyringError("this database is not encrypted (no keyring): nothing to rotate")
            if await self._repository.has_plaintext_items():
                raise KeyringError(
                    "this database holds items stored without a key: open it without key=, "
                    "or copy its sessions into a new database opened with the key"
                )
            kek = await create_kek(self.key)
            if await self._repository.add_keyring(kek.record.as_row()):
                return kek
            return await self._open_keyring(rotating)  # another store created it first
        try:
            kek = await open_kek(self.key, active[-1])
        except WrongKeyError as exc:
            if not retired:
                raise
            if rotating:  # an unfinished rotation is resumed with the previous key
                for record in reversed(retired):
                    try:
                        return await open_kek(self.key, record)
                    except WrongKeyError:
                        continue
                raise exc
            raise WrongKeyError(
                f"{exc} A key rotation is unfinished: if this is the previous key, finish it "
                "with rotate_key(new_key) on a store opened with it (or `agents-sqlalchemy "
                "rotate-key`)"
            ) from None
        if retired:
            raise KeyringError(
                "a key rotation to this key is unfinished: open a store with the previous key "
                "and call rotate_key(new_key) again (or run `agents-sqlalchemy rotate-key`) "
                "to finish it"
            )
        return kek


def _embedder(search: bool | Embedder) -> Embedder | None:
    if search is True:
        return HashingEmbedder()
    if search is False or search is None:
        return None
    if not isinstance(search, Embedder):
        raise ConfigurationError(f"search must be True, False or an Embedder, got {search!r}")
    return search


def ttl_delta(ttl: float | timedelta | None) -> timedelta | None:
    """A ttl option as a positive timedelta (or None)."""
    if ttl is None:
        return None
    ttl = ttl if isinstance(ttl, timedelta) else timedelta(seconds=ttl)
    if ttl <= timedelta(0):
        raise ConfigurationError(f"ttl must be positive, got {ttl}")
    return ttl


def _json_object(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """Check that metadata is a JSON object; raise `ItemError` if not."""
    if value is not None:
        encode_item(value, "metadata")
    return value


def _info(row: Any) -> SessionInfo:
    return SessionInfo(
        session_id=row.session_id,
        user_id=row.user_id,
        metadata=dict(row.metadata or {}),
        created_at=row.created_at,
        updated_at=row.updated_at,
        item_count=row.item_count,
    )


def _settings(value: SessionSettings | dict[str, Any] | None) -> SessionSettings | None:
    return None if value is None else coerce_session_settings(value)
