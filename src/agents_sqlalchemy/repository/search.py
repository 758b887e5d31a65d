"""Search SQL: candidates with their vectors, term frequencies, hit rows, and reindexing."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, delete, select
from sqlalchemy.engine import Connection

from ..aio import settle
from .base import NewItem, RepositoryBase, SessionKey, StoredItem


@dataclass(frozen=True)
class Candidate:
    """An item that search may rank: where it is, and its (maybe sealed) vector."""

    item_pk: int
    session_hash: str
    seq: int
    created_at: datetime
    vector: bytes
    wrapped_key: bytes | None


@dataclass(frozen=True)
class Scope:
    """Which items a search looks at: one session, one user's sessions, or all."""

    session: SessionKey | None = None
    user_id: str | None = None


@dataclass(frozen=True)
class Unindexed:
    """A live item that has no vector of the current embedding model yet."""

    item_pk: int
    session_pk: int
    key: SessionKey
    stored: StoredItem


class SearchOps(RepositoryBase):
    """The search index tables (terms, embeddings), read and rebuilt beside the items."""

    def _in_scope(self, scope: Scope) -> ColumnElement[bool]:
        sessions = self._sessions
        if scope.session is not None:
            return sessions.c.session_hash == scope.session.hash
        if scope.user_id is not None:
            return sessions.c.user_id == scope.user_id
        return sessions.c.id.is_not(None)

    async def candidates(self, scope: Scope, model_id: str) -> list[Candidate]:
        """Live items in scope with a vector of `model_id` (never another model's)."""
        items, sessions, vectors = self._items, self._sessions, self._embeddings
        columns = [
            items.c.id,
            sessions.c.session_hash,
            items.c.seq,
            items.c.created_at,
            vectors.c.vector,
        ]
        query = (
            select(*columns, *([self._item_keys.c.wrapped_key] if self._sealed else []))
            .select_from(vectors)
            .join(items, items.c.id == vectors.c.item_pk)
            .join(sessions, sessions.c.id == items.c.session_pk)
            .where(vectors.c.model_id == model_id, self._in_scope(scope), self._live(self._now()))
        )
        if self._sealed:
            query = query.join(self._item_keys, self._item_keys.c.item_pk == items.c.id)

        def work(conn: Connection) -> list[Candidate]:
            return [
                Candidate(row[0], row[1], row[2], row[3], row[4], row[5] if self._sealed else None)
                for row in conn.execute(query)
            ]

        return await self._db.run(work, write=False)

    async def term_freqs(
        self, scope: Scope, item_pks: Collection[int], terms: Collection[str]
    ) -> dict[int, dict[str, int]]:
        """`{item_pk: {term: frequency}}` for the query terms found among the candidates."""
        if not terms or not item_pks:
            return {}
        table, sessions = self._terms, self._sessions
        query = (
            select(table.c.item_pk, table.c.term, table.c.frequency)
            .join(sessions, sessions.c.id == table.c.session_pk)
            .where(table.c.term.in_(list(terms)), self._in_scope(scope))
        )
        wanted = set(item_pks)

        def work(conn: Connection) -> dict[int, dict[str, int]]:
            found: dict[int, dict[str, int]] = {}
            for item_pk, term, frequency in conn.execute(query):
                if item_pk in wanted:
                    found.setdefault(item_pk, {})[term] = frequency
            return found

        return await self._db.run(work, write=False)

    async def hit_rows(self, item_pks: list[int]) -> dict[int, tuple[SessionKey, StoredItem]]:
        """The items behind the hits, with their sessions, by primary key."""
        items, sessions = self._items, self._sessions
        query = (
            self._item_columns()
            .add_columns(sessions.c.session_id)
            .join(sessions, sessions.c.id == items.c.session_pk)
            .where(items.c.id.in_(item_pks))
        )

        def work(conn: Connection) -> dict[int, tuple[SessionKey, StoredItem]]:
            return {
                row[0]: (SessionKey.of(row[-1]), self._stored(row[:-1]))
                for row in conn.execute(query)
            }

        return await self._db.run(work, write=False)

    async def unindexed(self, model_id: str, batch: int, after: int) -> list[Unindexed]:
        """Up to `batch` live items after pk `after` without a vector of `model_id`, in order."""
        items, sessions, vectors = self._items, self._sessions, self._embeddings
        indexed = select(vectors.c.item_pk).where(vectors.c.model_id == model_id)
        query = (
            self._item_columns()
            .add_columns(items.c.session_pk, sessions.c.session_id)
            .join(sessions, sessions.c.id == items.c.session_pk)
            .where(items.c.id > after, items.c.id.not_in(indexed), self._live(self._now()))
            .order_by(items.c.id)
            .limit(batch)
        )

        def work(conn: Connection) -> list[Unindexed]:
            return [
                Unindexed(row[0], row[-2], SessionKey.of(row[-1]), self._stored(row[:-2]))
                for row in conn.execute(query)
            ]

        return await self._db.run(work, write=False)

    async def replace_index(self, entries: list[tuple[int, int, NewItem]]) -> None:
        """Index `(item_pk, session_pk, NewItem)` entries anew: their old terms and vectors go."""
        if entries:
            await settle(self._db.run(lambda conn: self._replace(conn, entries), write=True))

    def _replace(self, conn: Connection, entries: list[tuple[int, int, NewItem]]) -> None:
        pks = [item_pk for item_pk, _, _ in entries]
        conn.execute(delete(self._terms).where(self._terms.c.item_pk.in_(pks)))
        conn.execute(delete(self._embeddings).where(self._embeddings.c.item_pk.in_(pks)))
        by_session: dict[int, list[tuple[int, NewItem]]] = {}
        for item_pk, session_pk, item in entries:
            by_session.setdefault(session_pk, []).append((item_pk, item))
        for session_pk, indexed in by_session.items():
            self._add_side_rows(conn, session_pk, indexed)

    async def drop_other_models(self, model_id: str) -> int:
        """Delete vectors of every other embedding model; return how many."""
        vectors = self._embeddings
        statement = delete(vectors).where(vectors.c.model_id != model_id)
        return await settle(
            self._db.run(lambda conn: int(conn.execute(statement).rowcount), write=True)
        )
