"""Search SQL: candidates with their vectors, term postings, hit rows, and reindexing."""

from __future__ import annotations

from collections.abc import Collection
from functools import cached_property
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Float,
    Table,
    and_,
    bindparam,
    cast,
    delete,
    exists,
    extract,
    func,
    literal,
    null,
    select,
    text,
    type_coerce,
)
from sqlalchemy.engine import Connection, Result

from ..types import Candidates, NewItem, Postings, Scope, SessionKey, StoredItem, Unindexed
from .base import RepositoryBase
from .prepared import Prepared

# Primary keys per `IN (...)` list, well under every driver's bound-parameter limit.
IN_BATCH = 5000
# Rows turned into columns at a time (see `_columns`).
PARTITION = 200
# The index rows' columns, in the order their values are given.
TERM_COLUMNS = ("item_pk", "session_pk", "term", "frequency")
VECTOR_COLUMNS = ("item_pk", "session_pk", "model_id", "vector")
# Where epoch seconds count from, as MySQL's naive UTC DATETIME sees it.
EPOCH = literal("1970-01-01 00:00:00")


def _columns(result: Result[Any], width: int) -> list[list[Any]]:
    """A result's rows as `width` lists, one per column, read a partition at a time.

    Search reads tens of thousands of rows per query: holding them all as row objects at
    once makes the garbage collector promote them, and then walk its oldest generation.
    """
    columns: list[list[Any]] = [[] for _ in range(width)]
    for part in result.partitions(PARTITION):
        for column, values in zip(columns, zip(*part, strict=True), strict=True):
            column.extend(values)
    return columns


def _insert(table: Table, names: tuple[str, ...]) -> Prepared:
    values = {name: bindparam(name, type_=table.c[name].type) for name in names}
    return Prepared(table.insert().values(values))


class SearchOps(RepositoryBase):
    """The search index tables (terms, embeddings), read and rebuilt beside the items."""

    def _in_scope(self, scope: Scope) -> ColumnElement[bool]:
        sessions = self._sessions
        if scope.session is not None:
            return sessions.c.session_hash == scope.session.hash
        if scope.user_id is not None:
            return sessions.c.user_id == scope.user_id
        return sessions.c.id.is_not(None)

    def _position(self, scope: Scope) -> ColumnElement[Any]:
        """An item's age as a number: `seq` within a session, else `created_at` in epoch
        seconds, computed by the database (parsing datetimes costs more than the search)."""
        items = self._items
        if scope.session is not None:
            return items.c.seq
        if self._db.dialect_name == "sqlite":  # naive UTC text
            return (func.julianday(items.c.created_at) - 2440587.5) * 86400.0
        if self._mysql:  # naive UTC DATETIME(6); UNIX_TIMESTAMP would apply the session's zone
            micros = func.timestampdiff(text("MICROSECOND"), EPOCH, items.c.created_at)
            return type_coerce(micros / 1e6, Float)
        return cast(extract("epoch", items.c.created_at), Float)

    async def candidates(self, scope: Scope, model_id: str, *, vectors: bool = True) -> Candidates:
        """Live items in scope with a vector of `model_id` (never another model's).

        With `vectors=False` the vectors are not read (a sealed store opens them from its
        cache, and reads the missing ones with `vectors`).
        """
        items, sessions, embeddings = self._items, self._sessions, self._embeddings
        position = self._position(scope)
        query = (
            select(
                items.c.id,
                sessions.c.session_hash,
                items.c.seq,
                position,
                embeddings.c.vector if vectors else null(),
                items.c.wrapped_key if self._sealed else null(),
            )
            .select_from(items)
            .join(sessions, sessions.c.id == items.c.session_pk)
            .join(
                embeddings,
                (embeddings.c.item_pk == items.c.id) & (embeddings.c.model_id == model_id),
            )
            .where(self._in_scope(scope), self._live(self._now()), embeddings.c.vector.is_not(None))
        )
        if self._sealed:  # only items with a data key to open their vector with
            query = query.where(items.c.wrapped_key.is_not(None))

        def work(conn: Connection) -> Candidates:
            return Candidates.of(_columns(conn.execute(query), 6))

        return await self._db.read(work)

    async def vectors(self, item_pks: list[int], model_id: str) -> dict[int, bytes]:
        """The stored vectors of `model_id` of these items (those still there)."""
        embeddings = self._embeddings

        def work(conn: Connection) -> dict[int, bytes]:
            found: dict[int, bytes] = {}
            for start in range(0, len(item_pks), IN_BATCH):
                query = select(embeddings.c.item_pk, embeddings.c.vector).where(
                    embeddings.c.model_id == model_id,
                    embeddings.c.item_pk.in_(item_pks[start : start + IN_BATCH]),
                )
                found.update((pk, vector) for pk, vector in conn.execute(query).all())
            return found

        return await self._db.read(work)

    async def positions(self, scope: Scope, item_pks: list[int]) -> Candidates:
        """These items, if still live, as candidates without a vector (keyword matches only)."""
        items, sessions = self._items, self._sessions
        position = self._position(scope)
        columns = [items.c.id, sessions.c.session_hash, items.c.seq, position, null(), null()]

        def work(conn: Connection) -> Candidates:
            found = Candidates.of([[] for _ in range(6)])
            for start in range(0, len(item_pks), IN_BATCH):
                query = (
                    select(*columns)
                    .join(sessions, sessions.c.id == items.c.session_pk)
                    .where(
                        items.c.id.in_(item_pks[start : start + IN_BATCH]),
                        self._live(self._now()),
                    )
                )
                found.extend(Candidates.of(_columns(conn.execute(query), 6)))
            return found

        return await self._db.read(work)

    async def postings(self, scope: Scope, terms: Collection[str]) -> Postings:
        """Every item in scope holding one of `terms`: which, which term, how often.

        Expired items are not left out here: only candidates (live) are ranked.
        """
        if not terms:
            return Postings([], [], [])
        table, sessions = self._terms, self._sessions
        query = select(table.c.item_pk, table.c.term, table.c.frequency).where(
            table.c.term.in_(list(terms))
        )
        if scope.session is not None:  # straight down the (session_pk, term) index
            query = query.where(
                table.c.session_pk == self._session_pk(scope.session).scalar_subquery()
            )
        else:  # session by session, down the same index (there is none by term alone)
            query = query.join(sessions, sessions.c.id == table.c.session_pk)
            if scope.user_id is not None:
                query = query.where(sessions.c.user_id == scope.user_id)

        def work(conn: Connection) -> Postings:
            return Postings(*_columns(conn.execute(query), 3))

        return await self._db.read(work)

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

        return await self._db.read(work)

    def _unindexed_where(self, model_id: str, scope: Scope) -> ColumnElement[bool]:
        """Live items in scope without a vector (or marker) of `model_id`; never the items a
        session wrote on its other branches (its companion row's): only main lines are
        searched."""
        items, embeddings = self._items, self._embeddings
        indexed = exists().where(
            embeddings.c.item_pk == items.c.id, embeddings.c.model_id == model_id
        )
        main_line = self._sessions.c.parent_pk.is_(None)
        return and_(~indexed, self._live(self._now()), self._in_scope(scope), main_line)

    async def count_unindexed(self, model_id: str, scope: Scope) -> int:
        """How many live items in scope have no vector of `model_id`."""
        items, sessions = self._items, self._sessions
        query = (
            select(func.count())
            .select_from(items)
            .join(sessions, sessions.c.id == items.c.session_pk)
            .where(self._unindexed_where(model_id, scope))
        )
        return await self._db.read(lambda conn: int(conn.execute(query).scalar_one()))

    async def unindexed(
        self, model_id: str, batch: int, after: int, scope: Scope
    ) -> list[Unindexed]:
        """Up to `batch` live items in scope after pk `after` without a vector of `model_id`."""
        items, sessions = self._items, self._sessions
        query = (
            self._item_columns()
            .add_columns(items.c.session_pk, sessions.c.session_id)
            .join(sessions, sessions.c.id == items.c.session_pk)
            .where(self._unindexed_where(model_id, scope))
            .order_by(items.c.id)
            .limit(batch)
        )
        if after:  # not on the first page: PostgreSQL would AND a scan of the whole pk index
            query = query.where(items.c.id > after)

        def work(conn: Connection) -> list[Unindexed]:
            return [
                Unindexed(row[0], row[-2], SessionKey.of(row[-1]), self._stored(row[:-2]))
                for row in conn.execute(query)
            ]

        return await self._db.read(work)

    async def replace_index(self, entries: list[tuple[int, int, int, NewItem]]) -> None:
        """Index `(item_pk, session_pk, seq, NewItem)` entries anew: their terms and their
        vectors of the entries' model are replaced (other models' vectors stay, until
        `drop_other_models`)."""
        if entries:
            await self._db.write(lambda conn: self._replace(conn, entries))

    def _replace(self, conn: Connection, entries: list[tuple[int, int, int, NewItem]]) -> None:
        items = self._items
        pks = [item_pk for item_pk, _, _, _ in entries]
        # An item is known by its row id and its number: SQLite gives a deleted row's id to
        # a new one, never a session's number. Items removed (or replaced) since they were
        # read are skipped, and the others cannot be removed until this commits: PostgreSQL
        # and MySQL lock them first (before the index rows, in the order a delete's cascade
        # takes); SQLite holds its write lock from the first delete on, and looks again.
        expected = {item_pk: seq for item_pk, _, seq, _ in entries}
        still = select(items.c.id, items.c.seq).where(items.c.id.in_(pks))
        row_locks = self._db.dialect_name == "postgresql" or self._mysql
        if row_locks:  # FOR NO KEY UPDATE on PostgreSQL, FOR UPDATE on MySQL
            still = still.with_for_update(key_share=True)
        kept = {pk for pk, seq in conn.execute(still) if expected[pk] == seq}
        # Terms are the same whatever the model; vectors of other models stay.
        models = {item.model_id for _, _, _, item in entries}
        embeddings = self._embeddings
        conn.execute(delete(self._terms).where(self._terms.c.item_pk.in_(kept)))
        conn.execute(
            delete(embeddings).where(
                embeddings.c.item_pk.in_(kept), embeddings.c.model_id.in_(models)
            )
        )
        if not row_locks:
            kept &= {pk for pk, seq in conn.execute(still) if expected[pk] == seq}
        kept_entries = [entry for entry in entries if entry[0] in kept]
        terms = [
            (item_pk, session_pk, term, count)
            for item_pk, session_pk, _, item in kept_entries
            for term, count in (item.terms or {}).items()
        ]
        vectors = [
            (item_pk, session_pk, item.model_id, item.vector)
            for item_pk, session_pk, _, item in kept_entries
            if item.model_id is not None
        ]
        for statement, names, rows in (
            (self._index_inserts[0], TERM_COLUMNS, terms),
            (self._index_inserts[1], VECTOR_COLUMNS, vectors),
        ):
            if rows:
                statement.run_rows(conn, names, rows)

    @cached_property
    def _index_inserts(self) -> tuple[Prepared, Prepared]:
        """The inserts of terms and vectors rows, compiled once per dialect (`Prepared`)."""
        return _insert(self._terms, TERM_COLUMNS), _insert(self._embeddings, VECTOR_COLUMNS)

    async def latest_model_id(self) -> str | None:
        """The embedding model of the most recently indexed item, or None."""
        embeddings = self._embeddings
        query = select(embeddings.c.model_id).order_by(embeddings.c.id.desc()).limit(1)
        return await self._db.read(lambda conn: conn.execute(query).scalar_one_or_none())

    async def drop_other_models(self, model_id: str) -> int:
        """Delete vectors of every other embedding model; return how many."""
        vectors = self._embeddings
        statement = delete(vectors).where(vectors.c.model_id != model_id)
        return await self._db.write(lambda conn: int(conn.execute(statement).rowcount))
