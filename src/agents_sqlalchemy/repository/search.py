"""Search SQL: candidates with their packed terms and vectors, hit rows, and reindexing."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cached_property
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Float,
    and_,
    bindparam,
    case,
    cast,
    delete,
    exists,
    extract,
    func,
    literal,
    or_,
    select,
    table,
    text,
    tuple_,
    type_coerce,
)
from sqlalchemy import column as column_of
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection, Result
from sqlalchemy.sql.expression import ClauseElement, Insert, Select, Subquery, UnaryExpression
from sqlalchemy.sql.operators import custom_op

from ..aio import off_the_loop
from ..database.units import Unchanged
from ..types import (
    MIX_FACTOR,
    MIX_MODULUS,
    Candidates,
    NewItem,
    Scope,
    ScopeStamp,
    SessionKey,
    StoredItem,
    Unindexed,
)
from .prepared import PreparedRows, prepared
from .schema import ARRAY_ROWS, Schema

# Primary keys per `IN (...)` list, well under every driver's bound-parameter limit.
IN_BATCH = 5000
# Rows turned into columns at a time (see `_columns`).
PARTITION = 200
# An index row's columns, in the order their values are given.
INDEX_COLUMNS = ("item_pk", "model_id", "terms", "vector")
# What `_replace` is given per row: the item's place (its session and number), the rest.
INDEX_ROW = ("session_pk", "seq", "model_id", "terms", "vector")
# Where epoch seconds count from, as MySQL's naive UTC DATETIME sees it.
EPOCH = literal("1970-01-01 00:00:00")


def _columns(result: Result[Any], width: int, *, arrays: bool = False) -> list[list[Any]]:
    """A result as `width` lists, one per column: its rows read a partition at a time, or
    (`arrays`) its rows each holding an array per column (`_aggregated`).

    Search reads tens of thousands of rows per query: holding them all as row objects at
    once makes the garbage collector promote them, and then walk its oldest generation.
    """
    columns: list[list[Any]] = [[] for _ in range(width)]
    if arrays:
        blocks: Iterable[Iterable[Any]] = result
    else:
        blocks = (zip(*part, strict=True) for part in result.partitions(PARTITION))
    for block in blocks:
        for column, values in zip(columns, block, strict=True):
            column.extend(values)
    return columns


def _aggregated(query: Select[Any], key: str) -> Select[Any]:
    """`query` as a few rows holding an array per column (PostgreSQL), one row per
    `ARRAY_ROWS` values of its integer column `key`.

    asyncpg makes an object for each row it reads, all at once, and the garbage collector
    tracks them: ten thousand per search brought a full collection (150 to 200 ms) about
    every fifteen searches. Arrays of numbers and bytes give it nothing to track.
    """
    rows = query.subquery()
    arrays: list[Any] = [func.array_agg(column) for column in rows.c]
    return select(*arrays).group_by(rows.c[key] // ARRAY_ROWS)


class SearchIndex:
    """The search index (one row per item and model), read and rebuilt beside the items.

    Example::

        index = SearchIndex(schema)
        candidates, indexed = await index.candidates(Scope(user_id="alice"), model_id)
        rows = await index.hit_rows([candidates.item_pks[0]], Scope(user_id="alice"))
    """

    def __init__(self, schema: Schema) -> None:
        self._schema = schema

    def _session_of_item(self, by_ids: bool = False) -> ColumnElement[Any]:
        """An item's session row id, as the join to its session and the scope compare it.
        `by_ids`, for a read of a few items named by their row ids (a list, or those after
        an id): as `+session_pk`, which no index looks up, so that the ids lead the read.
        SQLite, which keeps no statistics, would read every item of the scope by its index
        otherwise: 1.4-2 ms in a 10,000-item session, against 0.01-0.03 ms."""
        column = self._schema.items.c.session_pk
        if not by_ids:
            return column
        return UnaryExpression(column, operator=custom_op("+"), type_=column.type)

    def _in_scope(self, scope: Scope, by_ids: bool = False) -> ColumnElement[bool]:
        schema, sessions = self._schema, self._schema.sessions
        if scope.session is not None:  # by its pk too: PostgreSQL then reads its items' index
            pk = schema.session_pk(scope.session).scalar_subquery()
            by_pk = self._session_of_item(by_ids) == pk
            return and_(sessions.c.session_hash == scope.session.hash, by_pk)
        if scope.user_id is not None:
            return schema.equals(sessions.c.user_id, scope.user_id)
        return sessions.c.id.is_not(None)

    def _searched(self, scope: Scope, by_ids: bool = False) -> ColumnElement[bool]:
        """The items search indexes in scope: live, on main lines (never the items a session
        wrote on its other branches, its companion row's)."""
        main_line = self._schema.sessions.c.parent_pk.is_(None)
        live = self._schema.live(self._schema.now())
        return and_(self._in_scope(scope, by_ids), live, main_line)

    def _position(self, scope: Scope) -> ColumnElement[Any]:
        """An item's age as a number: `seq` within a session, else `created_at` in epoch
        seconds, computed by the database (parsing datetimes costs more than the search)."""
        items = self._schema.items
        if scope.session is not None:
            return items.c.seq
        if self._schema.db.dialect_name == "sqlite":  # naive UTC text
            return (func.julianday(items.c.created_at) - 2440587.5) * 86400.0
        # MySQL: naive UTC DATETIME(6); UNIX_TIMESTAMP would apply the session's zone.
        if self._schema.mysql:
            micros = func.timestampdiff(text("MICROSECOND"), EPOCH, items.c.created_at)
            return type_coerce(micros / 1e6, Float)
        return cast(extract("epoch", items.c.created_at), Float)

    async def candidates(
        self,
        scope: Scope,
        model_id: str,
        *,
        vectors: bool = True,
        terms: bool = True,
        after: int = 0,
        upto: int | None = None,
    ) -> tuple[Candidates, int]:
        """Live items in scope with an index row: their packed terms, and whether they have
        a vector of `model_id` (never another model's vector); and how many items in scope
        have a row of `model_id` (with text or without), to tell whether any is missing.

        With `vectors=False` the vectors are not read (a sealed store opens them from its
        cache, and reads the missing ones with `vectors`); with `terms=False` neither are
        the terms, and only items with a vector are candidates. An item indexed for another
        model only (the embedder changed, `reindex` has not run) is found by its terms.
        Only items with a row id over `after` count, and, given `upto` (a stamp's newest),
        none written after the stamp was read.
        """
        items, sessions, index = self._schema.items, self._schema.sessions, self._schema.index
        current = index.c.model_id == model_id
        # Only what differs from row to row is read: each value costs the driver more than
        # SQLite spends finding the row (in one session, its hash and numbers are known).
        read: dict[str, ColumnElement[Any]] = {
            "item_pks": items.c.id,
            "seqs": items.c.seq,
            # 0: a row of another model; 1: of `model_id`, without a vector; 2: with one.
            "kinds": case((current, case((index.c.vector.is_(None), 1), else_=2)), else_=0),
        }
        if scope.session is None:
            read["session_hashes"] = sessions.c.session_hash
            read["positions"] = self._position(scope)
        if terms:
            read["terms"] = index.c.terms
        if vectors:
            read["vectors"] = case((current, index.c.vector))
        if self._schema.sealed:
            read["wrapped_keys"] = items.c.wrapped_key
            read["kek_ids"] = items.c.kek_id
        query = (
            select(*read.values())
            .select_from(items)
            .join(sessions, sessions.c.id == self._session_of_item(after > 0))
            .join(index, index.c.item_pk == items.c.id)
            .where(
                self._in_scope(scope, after > 0),
                self._schema.live(self._schema.now()),
                or_(current, index.c.terms.is_not(None)) if terms else current,
            )
        )
        if after:
            query = query.where(items.c.id > after)

        statement = _aggregated(query, items.c.id.name) if self._arrays else query

        def work(conn: Connection) -> tuple[Candidates, int]:
            return off_the_loop(conn.dialect, shaped, conn.execute(statement))

        def shaped(result: Result[Any]) -> tuple[Candidates, int]:
            lists = _columns(result, len(read), arrays=self._arrays)
            columns = dict(zip(read, lists, strict=True))
            pks = columns["item_pks"]
            if upto is not None and pks and max(pks) > upto:  # written since: left out
                at = [i for i, pk in enumerate(pks) if pk <= upto]
                columns = {name: [values[i] for i in at] for name, values in columns.items()}
            kinds = columns.pop("kinds")
            found = len(kinds)
            if scope.session is not None:
                columns["session_hashes"] = [scope.session.hash] * found
                columns["positions"] = columns["seqs"]
            for name in ("terms", "vectors", "wrapped_keys", "kek_ids"):
                columns.setdefault(name, [None] * found)
            columns["has_vector"] = [kind == 2 for kind in kinds]
            indexed = found - kinds.count(0)  # one row per item and model at most
            return Candidates.of(columns), indexed

        return await self._schema.db.read(work)

    async def stamp(self, scope: Scope, after: int = 0, upto: int | None = None) -> ScopeStamp:
        """How many live items there are in scope on main lines (what search indexes), the
        sums that change when one of them does, and the newest one's id (`ScopeStamp`); of
        the items whose row id is over `after` and at most `upto` only, if given. Every sum
        is of the row id, number and session row id the read already takes: on SQLite and
        MariaDB the items' search index holds them all, and the read stays on it."""
        items, sessions = self._schema.items, self._schema.sessions
        m = literal(MIX_MODULUS, BigInteger)
        place = (items.c.session_pk % m * literal(MIX_FACTOR, BigInteger) + items.c.seq % m) % m
        mixed = place * (items.c.id % m) % m  # as `ScopeStamp.mix`, in 63 bits everywhere
        sums = (items.c.id, items.c.seq, items.c.session_pk, mixed)
        query = (
            select(
                func.count(),
                *(func.coalesce(func.sum(column), 0) for column in sums),
                func.coalesce(func.max(items.c.id), 0),
            )
            .select_from(items)
            .join(sessions, sessions.c.id == self._session_of_item(after > 0))
            .where(self._searched(scope, after > 0))
        )
        if after:
            query = query.where(items.c.id > after)
        if upto is not None:
            query = query.where(items.c.id <= upto)

        def work(conn: Connection) -> ScopeStamp:
            live, *summed, newest = conn.execute(query).one()
            return ScopeStamp(int(live), tuple(map(int, summed)), int(newest))

        return await self._schema.db.read(work)

    async def vectors(
        self, item_pks: list[int], model_id: str
    ) -> dict[tuple[int, bytes | None], bytes]:
        """The stored vectors of `model_id` of these items (those still there), by item id
        and wrapped key: an id may name a newer item than the one asked about."""

        def work(conn: Connection) -> dict[tuple[int, bytes | None], bytes]:
            found: dict[tuple[int, bytes | None], bytes] = {}
            for start in range(0, len(item_pks), IN_BATCH):
                batch = {"model_id": model_id, "item_pks": item_pks[start : start + IN_BATCH]}
                off_the_loop(conn.dialect, add, conn.execute(self._vectors_of, batch), found)
            return found

        def add(result: Result[Any], found: dict[tuple[int, bytes | None], bytes]) -> None:
            pks, wrapped, vectors = _columns(result, 3, arrays=self._arrays)
            found.update(zip(zip(pks, wrapped, strict=True), vectors, strict=True))

        return await self._schema.db.read(work)

    @cached_property
    def _arrays(self) -> bool:
        """PostgreSQL: rows are read as arrays (see `_aggregated`) and ids given as one."""
        return self._schema.db.dialect_name == "postgresql"

    @cached_property
    def _vectors_of(self) -> Select[Any]:
        """The vectors of the items `item_pks` for model `model_id`. PostgreSQL is given the
        ids as one array: an `IN` list renders a placeholder per id at each execution, on
        the event loop's thread (tens of milliseconds per thousands of ids)."""
        index, items = self._schema.index, self._schema.items
        if self._arrays:
            ids = postgresql.ARRAY(index.c.item_pk.type)
            chosen = index.c.item_pk == func.any(bindparam("item_pks", type_=ids))
        else:
            chosen = index.c.item_pk.in_(bindparam("item_pks", expanding=True))
        query = (
            select(index.c.item_pk, items.c.wrapped_key, index.c.vector)
            .join(items, items.c.id == index.c.item_pk)
            .where(index.c.model_id == bindparam("model_id"), chosen)
        )
        return _aggregated(query, index.c.item_pk.name) if self._arrays else query

    async def hit_rows(
        self, item_pks: list[int], scope: Scope
    ) -> dict[int, tuple[SessionKey, StoredItem]]:
        """The items behind the hits that search still indexes in `scope` (`_searched`), with
        their sessions (and their owners, as the sessions' rows name them), by primary key."""
        items, sessions = self._schema.items, self._schema.sessions
        query = (
            self._schema.item_columns()
            .add_columns(sessions.c.session_id, sessions.c.user_id)
            .join(sessions, sessions.c.id == self._session_of_item(by_ids=True))
            .where(items.c.id.in_(item_pks), self._searched(scope, by_ids=True))
        )

        def work(conn: Connection) -> dict[int, tuple[SessionKey, StoredItem]]:
            found = {}
            for row in conn.execute(query):
                key = SessionKey.of(row[-2])
                key = key.owned_by(row[-1])
                found[row[0]] = (key, self._schema.stored(row[:-2]))
            return found

        return await self._schema.db.read(work)

    def _unindexed_where(self, model_id: str, scope: Scope) -> ColumnElement[bool]:
        """Live items in scope without a vector (or marker) of `model_id`; never the items a
        session wrote on its other branches (its companion row's): only main lines are
        searched."""
        items, index = self._schema.items, self._schema.index
        indexed = exists().where(index.c.item_pk == items.c.id, index.c.model_id == model_id)
        return and_(~indexed, self._searched(scope))

    async def count_unindexed(self, model_id: str, scope: Scope) -> int:
        """How many live items in scope have no vector of `model_id`."""
        items, sessions = self._schema.items, self._schema.sessions
        query = (
            select(func.count())
            .select_from(items)
            .join(sessions, sessions.c.id == items.c.session_pk)
            .where(self._unindexed_where(model_id, scope))
        )
        return await self._schema.db.read(lambda conn: int(conn.execute(query).scalar_one()))

    async def unindexed(
        self,
        model_id: str,
        batch: int,
        after: int,
        scope: Scope,
        *,
        new: bool = False,
        upto: int | None = None,
    ) -> list[Unindexed]:
        """Up to `batch` live items in scope without a vector of `model_id`, in order from
        just after `after`: in a session, by number (its index reads on from there); in a
        wider scope, by pk. With `upto`, only items whose pk is at most that.

        `new`: the session's items after `after` were just written, so none is looked for
        in the index (one indexed meanwhile is indexed again, in place). On fresh tables
        PostgreSQL plans that look-up as a scan of the whole index per item.
        """
        items, sessions = self._schema.items, self._schema.sessions
        cursor = items.c.seq if scope.session is not None else items.c.id
        where = (
            and_(self._in_scope(scope), sessions.c.parent_pk.is_(None))
            if new and scope.session is not None
            else self._unindexed_where(model_id, scope)
        )
        query = (
            self._schema.item_columns()
            .add_columns(items.c.session_pk, sessions.c.session_id)
            .join(sessions, sessions.c.id == items.c.session_pk)
            .where(where)
            .order_by(cursor)
            .limit(batch)
        )
        if after:  # not on the first page: PostgreSQL would AND a scan of the whole pk index
            query = query.where(cursor > after)
        if upto is not None:
            query = query.where(items.c.id <= upto)

        def work(conn: Connection) -> list[Unindexed]:
            keys: dict[str, SessionKey] = {}  # a batch is mostly of one session: hashed once
            found = []
            for row in conn.execute(query):
                key = keys.get(row[-1]) or keys.setdefault(row[-1], SessionKey.of(row[-1]))
                found.append(Unindexed(row[0], row[-2], key, self._schema.stored(row[:-2])))
            return found

        return await self._schema.db.read(work)

    async def replace_index(
        self,
        entries: list[tuple[int, int, NewItem]],
        *,
        moved: Sequence[int] = (),
        only_as: str | None = None,
    ) -> bool:
        """Index `(session_pk, seq, NewItem)` entries anew: their items' index rows of the
        entries' model are replaced (other models' rows stay, until `drop_other_models`).
        The items `moved` (their ids) lose their other models' rows in the same transaction:
        a reindex moves each from its old row to its new one at once, so that a search
        meanwhile finds it by one or the other, and once. With `only_as` (a model id), only
        if the database is indexed as that (`latest_model_id`, read in the transaction) or
        not at all: a store that has not seen a reindex elsewhere would undo it. Whether
        the rows went in.

        An item is known by its place: SQLite gives a deleted item's id to a new one, but
        never a session's id (the table says AUTOINCREMENT) nor a number within a session.
        An item removed (or replaced) meanwhile is skipped.
        """
        if not entries:
            return True
        return await self._schema.db.write(
            lambda conn: self._replace(conn, entries, moved, only_as)
        )

    def _replace(
        self,
        conn: Connection,
        entries: list[tuple[int, int, NewItem]],
        moved: Sequence[int],
        only_as: str | None,
    ) -> bool:
        if only_as is not None:
            if self._schema.db.dialect_name != "sqlite":  # whose write lock orders them
                conn.execute(self._version_held.with_for_update(read=True)).all()
            latest = conn.execute(self._latest_model).scalar_one_or_none()  # read after it
            if latest not in (None, only_as):
                raise Unchanged(False)  # rolled back: nothing written
        self._replace_rows(conn, entries)
        models = {item.model_id for _, _, item in entries if item.model_id is not None}
        if moved and len(models) == 1:
            index = self._schema.index
            others = index.c.model_id != models.pop()
            conn.execute(delete(index).where(index.c.item_pk.in_(list(moved)), others))
        return True

    def _replace_rows(self, conn: Connection, entries: list[tuple[int, int, NewItem]]) -> None:
        rows = [
            (session_pk, seq, item.model_id, item.terms, item.vector)
            for session_pk, seq, item in entries
            if item.model_id is not None
        ]
        if self._schema.db.dialect_name == "sqlite":
            self._index_upsert.run(conn, rows)
            return
        if self._schema.db.dialect_name == "postgresql":
            arrays = {f"{name}s": [row[i] for row in rows] for i, name in enumerate(INDEX_ROW)}
            self._index_upsert_at_once.run(conn, arrays)
            return
        # MySQL: the items still there are locked first (before the index rows, in the order
        # a delete's cascade takes), so that none is removed until this commits; by primary
        # key, as a removal locks an item's row before its `(session_pk, seq)` entry (locked
        # through that entry, a pop holding the row and waiting for the entry deadlocked).
        items, index = self._schema.items, self._schema.index
        places = {row[:2] for row in rows}
        at = select(items.c.id).where(tuple_(items.c.session_pk, items.c.seq).in_(list(places)))
        still = select(items.c.session_pk, items.c.seq, items.c.id).where(
            items.c.id.in_(list(conn.execute(at).scalars()))
        )
        hint = "FORCE INDEX (PRIMARY)"  # not a scan of that entry's index, which covers these
        still = still.with_hint(items, hint, self._schema.db.dialect_name)
        locked = conn.execute(still.with_for_update())
        found = {(s, seq): pk for s, seq, pk in locked if (s, seq) in places}
        models = {row[2] for row in rows}
        kept = list(found.values())
        conn.execute(delete(index).where(index.c.item_pk.in_(kept), index.c.model_id.in_(models)))
        values = [
            (found[(session_pk, seq)], model_id, terms, vector)
            for session_pk, seq, model_id, terms, vector in rows
            if (session_pk, seq) in found
        ]
        if values:
            self._index_insert.run_rows(conn, INDEX_COLUMNS, values)

    @prepared
    def _index_insert(self) -> ClauseElement:
        """The insert of index rows, compiled once per dialect (`Prepared`)."""
        return self._schema.index.insert().values(self._index_values)

    @cached_property
    def _index_upsert(self) -> PreparedRows:
        """SQLite: index rows, each in place of its item's row of the same model, for the
        items still at their places (`session_pk`, `seq`); many rows per statement, which
        takes the write lock before it looks."""
        items, index = self._schema.items, self._schema.index

        def upsert(given: Subquery) -> Insert:
            at = and_(items.c.session_pk == given.c.session_pk, items.c.seq == given.c.seq)
            row = select(items.c.id, given.c.model_id, given.c.terms, given.c.vector)
            insert = index.insert().prefix_with("OR REPLACE")
            return insert.from_select(INDEX_COLUMNS, row.join_from(given, items, at))

        return PreparedRows(upsert, self._index_row_types)

    @prepared
    def _index_upsert_at_once(self) -> ClauseElement:
        """PostgreSQL: a batch's index rows in one statement, from arrays (`session_pks`,
        `seqs`, ...), each in place of its item's row of the same model. The items still at
        those places are locked FOR KEY SHARE first, in the order a removal reaches them
        (session, then place): a removal waits for the commit, an item removed meanwhile is
        skipped, and neither holds one item while it waits for the other's next."""
        items, index, types = self._schema.items, self._schema.index, self._index_row_types
        arrays = [bindparam(f"{n}s", type_=postgresql.ARRAY(types[n])) for n in INDEX_ROW]
        given = func.unnest(*arrays).table_valued(*INDEX_ROW).render_derived()
        at = and_(items.c.session_pk == given.c.session_pk, items.c.seq == given.c.seq)
        rows = (
            select(items.c.id, given.c.model_id, given.c.terms, given.c.vector)
            .join_from(given, items, at)
            .order_by(items.c.session_pk, items.c.seq)
            .with_for_update(read=True, key_share=True, of=items)
        )
        upsert = postgresql.insert(index).from_select(INDEX_COLUMNS, rows)
        replaced = {name: upsert.excluded[name] for name in ("terms", "vector")}
        return upsert.on_conflict_do_update(
            index_elements=[index.c.item_pk, index.c.model_id], set_=replaced
        )

    @cached_property
    def _index_row_types(self) -> dict[str, Any]:
        """The column type of each value of an `INDEX_ROW`, in its order."""
        place = {name: self._schema.items.c[name].type for name in ("session_pk", "seq")}
        types = place | {name: self._schema.index.c[name].type for name in INDEX_COLUMNS}
        return {name: types[name] for name in INDEX_ROW}

    @cached_property
    def _index_values(self) -> dict[str, Any]:
        index = self._schema.index
        return {name: bindparam(name, type_=index.c[name].type) for name in INDEX_COLUMNS}

    async def latest_model_id(self) -> str | None:
        """The embedding model of the most recently indexed item, or None."""
        latest = self._latest_model
        return await self._schema.db.read(lambda conn: conn.execute(latest).scalar_one_or_none())

    @cached_property
    def _latest_model(self) -> Select[Any]:
        index = self._schema.index
        return select(index.c.model_id).order_by(index.c.id.desc()).limit(1)

    @cached_property
    def _version_held(self) -> Select[Any]:
        """The migrations' version row (one), the lock on the database's model: an index
        write reads the model once it holds the row in share mode (then, in a statement of
        its own, a snapshot taken after the wait), and a reindex's last step
        (`drop_other_models`) holds it alone: it waits for the index writes that read the
        model before it, and those after it read its model. Without it, one that read the
        old model as the reindex ended wrote its rows after, and made it the database's
        again. (On SQLite the write lock orders them so.)"""
        names = self._schema.models.names
        version = table(names.version_table, column_of("version_num"), schema=names.schema)
        return select(version.c.version_num)

    async def drop_other_models(self, model_id: str) -> int:
        """Delete vectors of every other embedding model; return how many. It holds the
        version row alone first (`_version_held`): the index writes that read the old model
        end before it, and it deletes their rows too."""
        index = self._schema.index
        held = self._version_held.with_for_update()
        statement = delete(index).where(index.c.model_id != model_id)

        def work(conn: Connection) -> int:
            conn.execute(held).all()
            return int(conn.execute(statement).rowcount)

        return await self._schema.db.write(work)
