"""What every concern of the repository shares: the database, its tables, the statements
built once, the clock, and the claim of a session's places.

Example::

    schema = Schema(Database("agent.db"), build_models(TableNames()))
    items = Items(schema)
    sessions = Sessions(schema)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from functools import cached_property
from operator import itemgetter
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import (
    ColumnElement,
    Table,
    and_,
    bindparam,
    case,
    delete,
    func,
    literal,
    null,
    or_,
    select,
    tuple_,
    update,
)
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.sql import ClauseElement

from ..aio import off_the_loop
from ..database.units import Database
from ..errors import ConfigurationError, ConstraintError, OwnerKeyError, WrongKeyError
from ..models import MYSQL, Models
from ..types import NewItem, SessionKey, StoredItem, is_owner_key_id, owner_of
from .prepared import Prepared, PreparedRows, constant, prepared

T = TypeVar("T")
# The columns an append writes, in its parameter sets (sealed: and the item's wrapped key).
ITEM_COLUMNS = ("session_pk", "seq", "created_at", "expires_at", "payload", "ciphertext")
KEY_COLUMNS = ("kek_id", "wrapped_key")
SUPPORTED_DIALECTS = ("sqlite", "postgresql", *MYSQL)
# A unit of work of at most this many items is small: on a SQLite file the store opened, it
# runs on the caller's thread (see `Database.run`), where a thread hop would cost more.
SMALL = 64


def built_rows(
    conn: Connection, build: Callable[[int], Sequence[NewItem]], first: int, count: int
) -> Sequence[NewItem]:
    """`build(first)`: the rows of `count` new items numbered from `first`; for more than
    `SMALL` items, off the event loop (`off_the_loop`: sealing 1,000 held it about 13 ms)."""
    return off_the_loop(conn.dialect, build, first) if count > SMALL else build(first)


def exactly(column: ColumnElement[Any], value: Any, mysql: bool) -> ColumnElement[bool]:
    """SQL: `column` equals `value`, trailing spaces included. MySQL and MariaDB collations
    pad (`'a' = 'a '` is true even in `utf8mb4_bin`): there the lengths must be equal too,
    and the column's index still finds the rows."""
    if not mysql:
        same: ColumnElement[bool] = column == value
        return same
    given = value if isinstance(value, ColumnElement) else literal(value)
    return and_(column == given, func.length(column) == func.length(given))


def apart(column: ColumnElement[Any], mysql: bool) -> list[ColumnElement[Any]]:
    """What tells texts of `column` apart in GROUP BY and ORDER BY: the column, and on MySQL
    and MariaDB its length too (their collations pad: they group `'a'` with `'a '`)."""
    return [column, func.length(column)] if mysql else [column]


#: What `archived_at` says of a session an import is writing (out of listings): one it
#: keeps after the import failed is what an import stopped part-way left, which an import
#: again refuses (rather than skip it as imported) until it is deleted.
IMPORTING = datetime(1970, 1, 1, tzinfo=timezone.utc)
_IMPORTING_NAIVE = IMPORTING.replace(tzinfo=None)  # as SQLite and MySQL give it back


def is_importing(archived_at: datetime | None) -> bool:
    """Whether a session's `archived_at` (as a dialect gives it back) is `IMPORTING`."""
    if archived_at is None:
        return False
    if archived_at.tzinfo is not None:  # PostgreSQL's, in the connection's time zone
        archived_at = archived_at.astimezone(timezone.utc)
    return archived_at.replace(tzinfo=None) == _IMPORTING_NAIVE


def utcnow() -> datetime:
    """The repository's clock (tests move it)."""
    return datetime.now(timezone.utc)


class Claimed(NamedTuple):
    """A session's row, locked for this transaction, and its `next_seq` after the claim;
    `checked`: the owner key the claim found live and the session's owner's, if it looked
    (a sealed write), and then `user_id`, the session's user."""

    id: int
    next_seq: int
    checked: str | None = None
    user_id: str | None = None


#: Values per array at most where PostgreSQL reads many rows as arrays: asyncpg decodes a
#: row at once, on the event loop (16,384 strings: a few ms), and a value holds 1 GB at most.
ARRAY_ROWS = 16384


class MorePages(Exception):
    """A read in pages found more than one outside one snapshot: read it again in one
    (`Database.read`'s `snapshot`), where the pages agree."""


def page_rows(arrays: Sequence[Any], sealed: bool = False) -> list[tuple[Any, ...]]:
    """A page read as an array per column (`Statements.read_page`: a sealed page's followed
    by the owner), its first column the place, as rows in order of place. The arrays take
    the rows in one order, which the statement does not promise to be by place: sorted
    here if it is not."""
    seqs = arrays[0]
    rows = list(zip(*(arrays[:-1] if sealed else arrays), strict=True))
    if seqs != sorted(seqs):
        rows.sort(key=itemgetter(0))
    return rows


#: How many different `get_items(limit=n)` limits get a read of their own (`read_tail`).
TAIL_LIMITS = 16
#: Past every place: the end of a session's range in the `(session_pk, seq)` index.
MAX_SEQ = 2**63 - 1


class Statements:
    """The statements every protocol call runs, with bound parameters, built once per tables.

    SQLAlchemy caches their compiled form per dialect; a statement object built anew each
    call would cost more in building and cache-key hashing than the database spends on it.
    """

    def __init__(self, schema: Schema) -> None:
        items, sessions = schema.items, schema.sessions
        now = bindparam("now", type_=items.c.expires_at.type)
        live = or_(items.c.expires_at.is_(None), items.c.expires_at > now)
        session_pk = (
            select(sessions.c.id)
            .where(sessions.c.session_hash == bindparam("session_hash"))
            .scalar_subquery()
        )
        columns = schema.item_columns()
        # Reads select exactly the columns of a `StoredItem`, so rows are used as they come.
        stored = schema.item_columns(with_id=False, other_kek=True)
        in_session = stored.where(items.c.session_pk == session_pk, live)
        self.read_all = Prepared(in_session.order_by(items.c.seq))
        # A sealed read's owner check: the user the session's row names now, read on its own
        # (`Schema.owned`), or after the columns of a tail read or a page (one round trip).
        user_id = select(sessions.c.user_id).where(
            sessions.c.session_hash == bindparam("session_hash")
        )
        self.user_of = Prepared(user_id)
        owner = [user_id.scalar_subquery().label("user_id")] if schema.sealed else []
        # PostgreSQL: the next `ARRAY_ROWS` items after place `after`, as an array per column.
        # asyncpg makes a record per row read, which the garbage collector tracks into its
        # oldest generation: a read of 200,000 rows brought two full collections of over
        # 100 ms each, the event loop held; strings and bytes in arrays give it nothing.
        # Every array takes the rows in the order they come, the same for all (`page_rows`
        # checks that it is by place): an aggregate's own ORDER BY sorts its input again,
        # once per column.
        self.read_page: Prepared | None = None
        if schema.db.dialect_name == "postgresql":
            page = (
                in_session.where(items.c.seq > bindparam("after", type_=items.c.seq.type))
                .order_by(items.c.seq)
                .limit(ARRAY_ROWS)
                .subquery()
            )
            self.read_page = Prepared(select(*map(func.array_agg, page.c), *owner))
        self._schema, self._owner = schema, owner
        self._live_stored, self._session_pk = stored.where(live), session_pk
        self._tails: dict[int, Prepared] = {}
        self._any_tail = self._tail(bindparam("limit"))
        # A session's items not expired at `now`, with their ids (a pop reads the newest).
        self.live_items = columns.where(live)
        last_live = schema.newest(self.live_items, bindparam("session_pk"), 1)
        self.last_live = Prepared(last_live)
        self.delete_item = Prepared(delete(items).where(items.c.id == bindparam("item_pk")))
        # An item taken in one statement, its wrapped key with it (where RETURNING exists).
        last_id = last_live.with_only_columns(last_live.selected_columns[0])
        self.delete_last_live = Prepared(
            delete(items)
            .where(items.c.id == last_id.scalar_subquery())
            .returning(*stored.selected_columns)
        )
        written = ITEM_COLUMNS + KEY_COLUMNS if schema.sealed else ITEM_COLUMNS
        self.written = written
        self._items = items
        self._inserts: dict[tuple[str, ...], Prepared] = {}
        self.insert_item_rows = PreparedRows(  # SQLite: many items per statement
            lambda given: items.insert().from_select(written, select(given)),
            {name: items.c[name].type for name in written},
        )
        touched_at = bindparam("now", type_=sessions.c.updated_at.type)
        self.lock = Prepared(  # the parameter is named "hash": an UPDATE reserves column names
            update(sessions)
            .where(sessions.c.session_hash == bindparam("hash"))
            .values(updated_at=touched_at)
            .returning(sessions.c.id)
        )
        self.touch = Prepared(  # MySQL's lock: by id, after SELECT ... FOR UPDATE
            update(sessions).where(sessions.c.id == bindparam("pk")).values(updated_at=touched_at)
        )

    def insert_items(self, names: tuple[str, ...]) -> Prepared:
        """The insert of items' columns `names` (of `written`), the others left NULL: MariaDB
        inserts many rows in one bulk command only if no column is NULL in every row."""
        found = self._inserts.get(names)
        if found is None:
            items = self._items
            found = self._inserts[names] = Prepared(
                items.insert().values({n: bindparam(n, type_=items.c[n].type) for n in names})
            )
        return found

    def read_tail(self, limit: int) -> Prepared:
        """The read of a session's last `limit` live items, newest first (and, sealed, the
        session's owner). On PostgreSQL the first `TAIL_LIMITS` limits asked are written
        into their SQL (`constant`), so each is planned once; other limits, and other
        databases, bind it."""
        if self._schema.db.dialect_name != "postgresql":
            return self._any_tail
        found = self._tails.get(limit)
        if found is None:
            if len(self._tails) >= TAIL_LIMITS:
                return self._any_tail
            found = self._tails[limit] = self._tail(constant(limit))
        return found

    def _tail(self, limit: Any) -> Prepared:
        tail = self._schema.newest(self._live_stored, self._session_pk, limit)
        return Prepared(tail.add_columns(*self._owner))


class Schema:
    """The database and the Core tables of one `Models`, with what every concern shares:
    the statements built once, the clock, the claim of a session's places and its lock.

    Example::

        schema = Schema(Database("agent.db"), build_models(TableNames()), sealed=False)
        claimed = schema.claim(conn, SessionKey.of("chat-1"), 2, schema.now())
    """

    def __init__(self, db: Database, models: Models, *, sealed: bool = False) -> None:
        if db.dialect_name not in SUPPORTED_DIALECTS:
            raise ConfigurationError(
                f"unsupported database {db.dialect_name!r}: use SQLite, PostgreSQL, MySQL or "
                "MariaDB"
            )
        self.db = db
        self.models = models
        # Whether items carry ciphertext and wrapped keys rather than JSON text.
        self.sealed = sealed
        self.sessions: Table = models.sessions
        self.items: Table = models.items
        self.index: Table = models.table(models.search_index)
        self.branches: Table = models.table(models.branch)
        self.branch_items: Table = models.table(models.branch_item)
        self.turn_usage: Table = models.table(models.turn_usage)
        self.keyring: Table = models.table(models.keyring)
        self.owner_keys: Table = models.table(models.owner_key)
        # MySQL and MariaDB: no ON CONFLICT, no UPDATE ... RETURNING, no RETURNING at all on
        # MySQL; their branches are named `mysql`.
        self.mysql = db.dialect_name in MYSQL
        # The key-encryption key this store seals with (set when its keyring is opened):
        # a sealed write checks, in its transaction, that it is still the active one.
        self.sealing_kek: str | None = None

    def refuse_retired_kek(self, conn: Connection, kek_id: str | None) -> None:
        """Raise `WrongKeyError` (the transaction then rolls back) unless `kek_id` is the
        keyring's active row: a rotation, maybe in another process, retired the key this
        store seals with, and what it sealed now would open with neither key.

        A locking read on a server: a rotation's retiring `UPDATE` waits for the writers
        that saw the row active (their items are then there for it to re-wrap), and a
        writer after it sees the row retired. On SQLite the write lock, held since the
        claim, orders them the same way.
        """
        if kek_id is None:
            return
        if conn.execute(self._active_kek, {"kek_id": kek_id}).first() is None:
            raise WrongKeyError(
                "the key this store seals with was rotated away (rotate_key or "
                "`agents-sqlalchemy rotate-key`, perhaps in another process): nothing was "
                "written; open the store again with the new key"
            )

    def refuse_foreign_owner(self, conn: Connection, session_pk: int, key_id: str | None) -> None:
        """Raise `OwnerKeyError` (the transaction then rolls back) unless owner key `key_id`
        is live and belongs to the session's owner as its row says now: the session may
        have been given to another user since this store looked (`set_user_id`, maybe in
        another process), or the owner erased. The caller looks again and retries."""
        found = self._owner_of_session.run(conn, {"pk": session_pk, "key_id": key_id})
        user_id, root_hash, key_owner = found[0] if found else (None, "", None)
        _refuse_unless_owned(user_id, root_hash, key_owner)

    def hold_owner_key(self, conn: Connection, key_id: str, owner: str) -> None:
        """Raise `OwnerKeyError` (the transaction then rolls back) unless owner key `key_id`
        is live and `owner`'s; on a server its row is share-locked till the commit, against
        its destruction (its owner erased) or retirement. What a write re-wraps under a key
        other than its session's owner's (`set_user_id`) is checked so."""
        found = conn.execute(select(self._live_owner()), {"key_id": key_id}).scalar()
        if found != owner:
            raise OwnerKeyError(
                "the owner key this store looked up was destroyed (its owner erased) or "
                "retired since: nothing was written"
            )

    @prepared
    def _owner_of_session(self) -> ClauseElement:
        """`_owned_columns` of the session's row, by its id."""
        sessions = self.sessions
        return select(*self._owned_columns()).where(sessions.c.id == bindparam("pk"))

    @prepared
    def _claimed_owned(self) -> ClauseElement:
        """MySQL: `claimed_statement` with `_owned_columns`."""
        sessions = self.sessions
        found = select(sessions.c.id, sessions.c.next_seq, *self._owned_columns()).where(
            sessions.c.session_hash == bindparam("session_hash")
        )
        return found.with_for_update()

    def _owned_columns(self) -> list[Any]:
        """A session row's user id, the hash its owner key is bound to (a companion row's
        parent's), and the owner of owner key `key_id` if it is live (else NULL). On a
        server the key's row is share-locked by its own subquery: against a retirement, and
        not for writing, which a `FOR UPDATE` of the whole statement would do (every writer
        of the owner would then wait for the others)."""
        sessions = self.sessions
        parent = sessions.alias("parent")
        parent_hash = select(parent.c.session_hash).where(parent.c.id == sessions.c.parent_pk)
        root_hash = func.coalesce(parent_hash.scalar_subquery(), sessions.c.session_hash)
        return [sessions.c.user_id, root_hash, self._live_owner()]

    def _live_owner(self) -> Any:
        """SQL: the owner of owner key `key_id` if it is live, else NULL (its row
        share-locked on a server)."""
        return self._live_key().scalar_subquery()

    def _live_key(self) -> Any:
        """A select of the owner of owner key `key_id` if it is live (its row share-locked on
        a server, against a retirement)."""
        keys = self.owner_keys
        owner = select(keys.c.owner).where(
            keys.c.key_id == bindparam("key_id"), keys.c.retired_at.is_(None)
        )
        return owner if self.db.dialect_name == "sqlite" else owner.with_for_update(read=True)

    @cached_property
    def _active_kek(self) -> Any:
        keyring = self.keyring
        query = select(keyring.c.kek_id).where(
            keyring.c.kek_id == bindparam("kek_id"), keyring.c.retired_at.is_(None)
        )
        return query if self.db.dialect_name == "sqlite" else query.with_for_update(read=True)

    def now(self) -> datetime:
        """The repository's clock: `utcnow` of this module, which tests move."""
        return utcnow()

    def equals(self, column: ColumnElement[Any], value: Any) -> ColumnElement[bool]:
        """SQL: `column` equals `value` exactly, on every dialect (see `exactly`)."""
        return exactly(column, value, self.mysql)

    def live(self, now: datetime | ColumnElement[datetime]) -> ColumnElement[bool]:
        """SQL: the item has not expired at `now`."""
        expires_at = self.items.c.expires_at
        return or_(expires_at.is_(None), expires_at > now)

    def session_pk(self, key: SessionKey) -> Any:
        """A select of the session's row id, by its hash."""
        return select(self.sessions.c.id).where(self.sessions.c.session_hash == key.hash)

    def claim(self, conn: Connection, key: SessionKey, count: int, now: datetime) -> Claimed:
        """Take the session's write lock and `count` sequence numbers, creating its row if new.

        The first statement of every write: on PostgreSQL, MySQL and MariaDB it locks the
        session's row, on SQLite it takes the database's write lock. Returns the row's `id`
        and `next_seq`. A sealed write's key (`key.sealing`) is checked by the claim's own
        statements (`refuse_foreign_owner`'s check, a statement fewer) and named `checked`.

        The order of locks, against `erase_user`'s deadlocks: on PostgreSQL the owner key's
        row is share-locked before the session's (the one-statement append can lock in no
        other order, and the erasure locks them so too); on MySQL and MariaDB, after it, as
        every write and the erasure there do.
        """
        values = self.claim_values(key, count, now)
        if key.sealing is None:
            if self.mysql and not conn.dialect.insert_returning:
                # MySQL: the upsert locks the row; reading it back sees our own change.
                self._claim_statement.run(conn, values)
                session_pk, next_seq, _ = self.claimed_statement.run(conn, values)[0]
                found = Claimed(session_pk, next_seq)
            elif self.mysql:  # MariaDB returns the row its upsert locked: a round trip fewer
                found = Claimed(*self._claim_returning.run(conn, values)[0])
            else:
                found = Claimed(*self._claim_statement.run(conn, values)[0])
            return self.placed(key, found, count)
        values["key_id"] = key.sealing
        if self.mysql:
            self._claim_statement.run(conn, values)
            [(session_pk, next_seq, user_id, *owned)] = self._claimed_owned.run(conn, values)
            _refuse_unless_owned(user_id, *owned)
        else:  # on PostgreSQL no row when the key is not live
            claimed = self._claim_owned.run(conn, values)
            session_pk, next_seq, user_id, key_owner = claimed[0] if claimed else (0, 0, None, None)
            _refuse_unless_owned(user_id, key.hash, key_owner)
        return self.placed(key, Claimed(session_pk, next_seq, key.sealing, user_id), count)

    def placed(self, key: SessionKey, claimed: Claimed, count: int) -> Claimed:
        """`claimed`, unless its `count` places start below 1, where no item ever goes: the
        session's `next_seq` was set below 0 outside the library, and the items would have
        gone before all others (out of sight on PostgreSQL). Then `ConstraintError`, and
        the write rolls back."""
        if count and claimed.next_seq < count:
            raise self.set_below_zero(key)
        return claimed

    def set_below_zero(self, key: SessionKey) -> ConstraintError:
        """The refusal of a write to a session whose `next_seq` is below 0 (see `placed`)."""
        sessions, items = self.sessions.name, self.items.name
        return ConstraintError(
            f"session {key.session_id[:80]!r}: its next_seq in {sessions} was set below 0 "
            f"(the row was changed outside the library); raise it to at least the session's "
            f"highest seq in {items} to write again; nothing was written"
        )

    @staticmethod
    def claim_values(key: SessionKey, count: int, now: datetime) -> dict[str, Any]:
        """The parameters of `claim_upsert`."""
        return {
            "session_id": key.session_id,
            "session_hash": key.hash,
            "user_id": key.user_id,
            "metadata": key.metadata,
            "count": count,
            "now": now,
        }

    @prepared
    def _claim_statement(self) -> Any:
        """`claim`'s upsert, built once: building it took longer than running it."""
        return self.claim_upsert

    @prepared
    def _claim_returning(self) -> Any:
        """MariaDB: `claim_upsert` returning the row's `id` and `next_seq`, as on SQLite and
        PostgreSQL (MySQL has no `RETURNING`)."""
        sessions = self.sessions
        return self.claim_upsert.returning(sessions.c.id, sessions.c.next_seq)

    @cached_property
    def claim_upsert(self) -> Any:
        """The upsert that creates a session's row or bumps its `next_seq` by `count`
        (returning `id` and `next_seq`, except on MySQL)."""
        return self._upsert()

    @cached_property
    def placing_upsert(self) -> Any:
        """`claim_upsert` that claims nothing (returns no row) where `next_seq` is below 0:
        for a write in one statement, which no transaction rolls back (see `placed`)."""
        return self._upsert(placing=True)

    def _upsert(self, beside: Any = None, *, placing: bool = False) -> Any:
        """`claim_upsert`; on SQLite and PostgreSQL, with the row to insert read beside the
        rows of `beside` (a CTE) if given: none there, no claim; `placing`: none either where
        `next_seq` is below 0."""
        sessions = self.sessions
        count = bindparam("count", type_=sessions.c.next_seq.type)
        now = bindparam("now", type_=sessions.c.updated_at.type)
        row = {
            "session_id": bindparam("session_id", type_=sessions.c.session_id.type),
            "session_hash": bindparam("session_hash", type_=sessions.c.session_hash.type),
            "user_id": bindparam("user_id", type_=sessions.c.user_id.type),
            "metadata": bindparam("metadata", type_=sessions.c.metadata.type),
            "next_seq": count,
            "created_at": now,
            "updated_at": now,
        }
        bump = {"next_seq": sessions.c.next_seq + count, "updated_at": now}
        if self.mysql:
            return mysql.insert(sessions).values(**row).on_duplicate_key_update(**bump)
        upsert = postgresql.insert if self.db.dialect_name == "postgresql" else sqlite.insert
        inserted = upsert(sessions)
        if beside is None:
            inserted = inserted.values(**row)
        else:
            source = select(*(value.label(name) for name, value in row.items()))
            inserted = inserted.from_select(list(row), source.select_from(beside))
        return inserted.on_conflict_do_update(
            index_elements=[sessions.c.session_hash],
            set_=bump,
            where=sessions.c.next_seq >= 0 if placing else None,
        ).returning(sessions.c.id, sessions.c.next_seq)

    @cached_property
    def _claim_owned(self) -> Prepared:
        """SQLite and PostgreSQL: `claim_upsert` returning the row's user too, and the owner
        of owner key `key_id` if it is live (else NULL). The key is bound to the session's
        own hash: a row claimed by a session's key is never a companion row (whose hash holds
        a byte no text does).

        On SQLite the write lock, held from this statement on, keeps them so. On PostgreSQL
        the key's row is share-locked (against a retirement) by a first CTE, which the row
        to insert is read beside: before the session's row is locked."""
        user_id = self.sessions.c.user_id
        if self.db.dialect_name == "sqlite":
            return Prepared(self.claim_upsert.returning(user_id, self._live_owner()))
        live = self._live_key().cte("live_key")
        owner = select(live.c.owner).scalar_subquery()
        return Prepared(self._upsert(live).returning(user_id, owner))

    @prepared
    def claimed_statement(self) -> ClauseElement:
        """The session's id, `next_seq` and `user_id`, its row locked (MySQL's claim and lock)."""
        sessions = self.sessions
        found = select(sessions.c.id, sessions.c.next_seq, sessions.c.user_id).where(
            sessions.c.session_hash == bindparam("session_hash")
        )
        return found.with_for_update()

    def lock_existing(self, conn: Connection, key: SessionKey, now: datetime) -> int | None:
        """Take the session's write lock if it has a row, as an activity; its primary key."""
        if self.mysql:  # no UPDATE ... RETURNING: lock the row, then touch it
            locked = self.claimed_statement.run(conn, {"session_hash": key.hash})
            if not locked:
                return None
            pk = int(locked[0][0])
            self.statements.touch.run(conn, {"pk": pk, "now": now})
            return pk
        found = self.statements.lock.run(conn, {"hash": key.hash, "now": now})
        return int(found[0][0]) if found else None

    def owned(self, conn: Connection, key: SessionKey) -> SessionKey:
        """`key` with the owner its session's row names now (`owner_of`), in a sealed
        store, where reads check that each item is that owner's; else (or with no row yet)
        `key` unchanged."""
        if not self.sealed:
            return key
        found = self.statements.user_of.run(conn, {"session_hash": key.hash})
        return self.with_owner(key, found[0][0]) if found else key

    def with_owner(self, key: SessionKey, user_id: str | None) -> SessionKey:
        """`key` with the owner of a session whose row names `user_id` (sealed stores)."""
        return key.owned_by(user_id) if self.sealed else key

    def take_last_live(self, conn: Connection, session_pk: int, now: datetime) -> StoredItem | None:
        """Delete the session's latest live item and return it, its wrapped key with it: one
        `DELETE ... RETURNING` on SQLite and PostgreSQL, else a read and a delete by primary
        key (MariaDB ran a `DELETE` whose subquery reads its own table, on a long session,
        as a scan of the whole table). Decode it in the same transaction: a corrupt row
        raises and the delete rolls back."""
        statements, params = self.statements, {"session_pk": session_pk, "now": now}
        if conn.dialect.delete_returning and not self.mysql:
            taken = statements.delete_last_live.run(conn, params)
            return StoredItem(*taken[0]) if taken else None
        found = statements.last_live.run(conn, params)
        if not found:
            return None
        statements.delete_item.run(conn, {"item_pk": found[0][0]})
        return self.stored(found[0])

    @cached_property
    def statements(self) -> Statements:
        """The hot path's statements, built once: building one costs more than running it."""
        return Statements(self)

    def insert_items(
        self,
        conn: Connection,
        session_pk: int,
        first_seq: int,
        new: Sequence[NewItem],
        created_at: datetime,
        expires_at: datetime | None,
        *,
        checked: str | None = None,
    ) -> None:
        """Insert items numbered from `first_seq`, sealed ones with their wrapped keys, under
        a key checked in this transaction (`checked`: the owner key the claim checked)."""
        if self.sealed and new:
            kek_id = new[0].kek_id
            if not is_owner_key_id(kek_id):
                self.refuse_retired_kek(conn, kek_id)
            elif kek_id != checked:
                self.refuse_foreign_owner(conn, session_pk, kek_id)
        if self.db.dialect_name == "sqlite":
            keys = self.sealed
            self.statements.insert_item_rows.run(
                conn,
                [
                    (session_pk, seq, created_at, expires_at, item.payload, item.ciphertext)
                    + ((item.kek_id, item.wrapped_key) if keys else ())
                    for seq, item in enumerate(new, first_seq)
                ],
            )
            return
        rows = [
            {
                "session_pk": session_pk,
                "seq": seq,
                "created_at": created_at,
                "expires_at": expires_at,
                "payload": item.payload,
                "ciphertext": item.ciphertext,
                "kek_id": item.kek_id,
                "wrapped_key": item.wrapped_key,
            }
            for seq, item in enumerate(new, first_seq)
        ]
        statements = self.statements
        given = tuple(n for n in statements.written if any(row[n] is not None for row in rows))
        statements.insert_items(given).run_many(conn, rows)

    def newest(self, query: Any, session_pk: Any, count: Any, last: Any = None) -> Any:
        """`query`'s rows (items) of the session `session_pk`, newest first, `count` at most
        (an int is written into the SQL, see `constant`); with `last`, those at places up
        to it only.

        PostgreSQL finds them at the end of a range of the `(session_pk, seq)` index, and
        checks the session after. Asked for a session's rows by equality, it guesses their
        number from the average session (without statistics yet, from a default): guessing
        few, it read and sorted the whole of a big session (a tail of 20 on 20,000 items:
        4.2 ms; 0.15 ms by the range)."""
        items = self.items
        count = constant(count) if isinstance(count, int) else count
        if self.db.dialect_name != "postgresql":
            mine = query.where(items.c.session_pk == session_pk)
            if last is not None:
                mine = mine.where(items.c.seq <= last)
            return mine.order_by(items.c.seq.desc()).limit(count)
        end = tuple_(session_pk, literal(MAX_SEQ, items.c.seq.type) if last is None else last)
        found = (
            query.add_columns(items.c.session_pk.label("holder"))
            .where(tuple_(items.c.session_pk, items.c.seq) <= end)
            .order_by(items.c.session_pk.desc(), items.c.seq.desc())
            .limit(count)
            .subquery()
        )
        kept = [found.c[column.name] for column in query.selected_columns]
        return select(*kept).where(found.c.holder == session_pk).order_by(found.c.seq.desc())

    def item_columns(self, *, with_id: bool = True, other_kek: bool = False) -> Any:
        """A select of an item's columns, laid out as `StoredItem` (after its id).

        `other_kek`: the kek_id only where it is not the reader's (the `current_kek`
        parameter), else NULL: a full read then makes no 64-character string per row. A
        row whose kek_id is NULL (no sealed row's is) reads as '', which names no key.
        """
        items = self.items
        first = [items.c.id] if with_id else []
        if not self.sealed:
            return select(*first, items.c.seq, items.c.payload)
        kek_id: Any = items.c.kek_id
        if other_kek:
            current = bindparam("current_kek", None, type_=kek_id.type)
            other = func.coalesce(kek_id, "")
            kek_id = case((kek_id == current, null()), else_=other).label("kek_id")
        return select(*first, items.c.seq, items.c.ciphertext, items.c.wrapped_key, kek_id)

    @property
    def width(self) -> int:
        """How many columns `item_columns` selects with the id (others may follow them)."""
        return 5 if self.sealed else 3

    def stored(self, row: Any) -> StoredItem:
        """A row of `item_columns` (with the id) as a `StoredItem`."""
        if not self.sealed:
            return StoredItem(row[1], row[2])
        _, seq, ciphertext, wrapped_key, kek_id = row
        return StoredItem(seq, ciphertext, wrapped_key, kek_id)

    def stored_of(self, row: Any) -> StoredItem:
        """The `StoredItem` of a row of `item_columns` that other columns follow."""
        return self.stored(row[: self.width])


def _refuse_unless_owned(user_id: str | None, root_hash: str, key_owner: str | None) -> None:
    """`OwnerKeyError` unless a live owner key's owner (`key_owner`, None if not live) is the
    owner of the session whose row names `user_id` (its owner key bound to `root_hash`)."""
    if key_owner is None or owner_of(user_id, root_hash) != key_owner:
        raise OwnerKeyError(
            "the session's owner changed, or its owner key was destroyed, since this "
            "store looked: nothing was written"
        )
