"""Branch SQL: a session's lines of history, sharing its stored items by reference.

The main line is the session's own items, read as they always are: a session that never
branches has no row in these tables but main's, made when it first records usage, which
counts its user turns (`main_turns.py`). Its turn structure (which items open a user turn)
is derived from the items when it first branches and kept up to date lazily from then on,
under the session's lock.
Another branch is a list of references (`branch_items`): creating one copies the source's
references before the chosen turn, never a payload. Items written on a branch live in the
session's companion row (`sessions.parent_pk`), so the main line never sees them; they take
their sequence numbers from the session itself, so a place is unique across all its lines
and an item sealed for the session opens wherever it is referenced.

Example::

    repo = Repository(Database("agent.db"), build_models(TableNames()))
    name, source = await repo.create_branch(key, "main", 2, None, "draft", is_user)
    await repo.read_branch(key, name, limit=None)
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime
from functools import cached_property
from typing import Any, TypeVar

from sqlalchemy import JSON, Table, bindparam, case, cast, exists, func, select, update
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import Connection

from ..turns import MAIN, turn_numbers
from ..types import SessionKey, StoredItem
from .base import RepositoryBase

T = TypeVar("T")
#: Decodes stored items of a session and says which are user messages.
Opened = Callable[[list[StoredItem]], list[bool]]
#: Work on one line: (connection, session pk or None, branch pk or None) -> result.
LineWork = Callable[[Connection, Any, Any], T]


class Gone:
    """The branch asked for has no live row (deleted, cleared, or never made)."""


GONE = Gone()
_STALE = object()


def companion_hash(key: SessionKey) -> str:
    """The lookup hash of a session's companion row; it hashes a byte no UTF-8 text holds
    (0xFF) first, so no session's own hash is ever this."""
    return hashlib.sha256(b"\xffbranches\x00" + key.session_id.encode()).hexdigest()


class BranchOps(RepositoryBase):
    """Branches of a session: their items by reference, the main line's turns, removal."""

    @cached_property
    def _branches(self) -> Table:
        return self._models.table(self._models.branch)

    @cached_property
    def _branch_items(self) -> Table:
        return self._models.table(self._models.branch_item)

    @cached_property
    def _turn_usage(self) -> Table:
        return self._models.table(self._models.turn_usage)

    def _upsert(
        self, table: Table, values: dict[str, Any], key: list[Any], replaced: list[str]
    ) -> Any:
        """INSERT `values`, or on a duplicate `key` set the `replaced` columns to the new
        row's: ON CONFLICT on SQLite and PostgreSQL, ON DUPLICATE KEY on MySQL/MariaDB."""
        if self._mysql:
            statement = mysql.insert(table).values(values)
            return statement.on_duplicate_key_update(
                {name: statement.inserted[name] for name in replaced}
            )
        insert = postgresql.insert if self._db.dialect_name == "postgresql" else sqlite.insert
        upsert = insert(table).values(values)
        return upsert.on_conflict_do_update(
            index_elements=key, set_={name: upsert.excluded[name] for name in replaced}
        )

    # -- locating ---------------------------------------------------------------------------

    def _lock(self, conn: Connection, key: SessionKey) -> int | None:
        """Take the session's write lock without counting it as activity; its pk or None."""
        if self._mysql:  # no UPDATE ... RETURNING: SELECT ... FOR UPDATE locks the row
            found = self._claimed_statement.run(conn, {"session_hash": key.hash})
            return int(found[0][0]) if found else None
        pk: int | None = conn.execute(self._lock_statement, {"hash": key.hash}).scalar_one_or_none()
        return pk

    @cached_property
    def _lock_statement(self) -> Any:
        sessions = self._sessions
        return (
            update(sessions)
            .where(sessions.c.session_hash == bindparam("hash"))
            .values(next_seq=sessions.c.next_seq)
            .returning(sessions.c.id)
        )

    def _branch_pk(self, conn: Connection, session_pk: Any, name: str) -> int | None:
        """The live branch `name` of a session (main included, once it has a row)."""
        found = conn.execute(self._branch_pk_query, {"session_pk": session_pk, "name": name})
        pk: int | None = found.scalar_one_or_none()
        return pk

    # The statements of the paths a Runner takes on every append are built once: building
    # one costs more than running it.
    @cached_property
    def _branch_pk_query(self) -> Any:
        branches = self._branches
        return select(branches.c.id).where(
            branches.c.session_pk == bindparam("session_pk"),
            branches.c.name == bindparam("name"),
            branches.c.deleted_at.is_(None),
        )

    @cached_property
    def _last_ref_query(self) -> Any:
        """A branch's last reference: its place and user turn."""
        refs = self._branch_items
        return (
            select(refs.c.seq, refs.c.turn)
            .where(refs.c.branch_pk == bindparam("branch_pk"))
            .order_by(refs.c.seq.desc())
            .limit(1)
        )

    def _main_pk(self, conn: Connection, session_pk: int, now: datetime) -> int:
        """The main line's row, made on first need."""
        found = self._branch_pk(conn, session_pk, MAIN)
        if found is not None:
            return found
        made = self._branches.insert().values(session_pk=session_pk, name=MAIN, created_at=now)
        return self._inserted(conn, made)

    def _inserted(self, conn: Connection, statement: Any) -> int:
        """Run an INSERT of one row; its primary key (RETURNING, or the driver's last id)."""
        primary_key = conn.execute(statement).inserted_primary_key
        assert primary_key is not None
        return int(primary_key[0])

    def _companion(
        self, conn: Connection, key: SessionKey, session_pk: int, now: datetime | None = None
    ) -> int | None:
        """The companion row holding the items of the session's other branches; with `now`,
        made if missing (owned by the session's owner, so its erasure takes it too)."""
        sessions = self._sessions
        hashed = companion_hash(key)
        found = select(sessions.c.id).where(sessions.c.session_hash == hashed)
        pk: int | None = conn.execute(found).scalar_one_or_none()
        if pk is None and now is not None:
            owner = conn.execute(select(sessions.c.user_id).where(sessions.c.id == session_pk))
            made = sessions.insert().values(
                session_id=key.session_id,
                session_hash=hashed,
                user_id=owner.scalar(),
                parent_pk=session_pk,
                next_seq=0,
                created_at=now,
                updated_at=now,
            )
            pk = self._inserted(conn, made)
        return pk

    # -- the main line's turns --------------------------------------------------------------

    def _main_stale(self, conn: Connection, session_pk: int, main_pk: int) -> bool:
        """Whether the main line's turn structure lacks some of its items (a session that
        has none is read without one: see `_derived_main`)."""
        row = conn.execute(self._ends_query, {"session_pk": session_pk, "branch_pk": main_pk})
        newest, known = row.one()
        return bool(newest != known)

    @cached_property
    def _ends_query(self) -> Any:
        """The main line's newest place, and the newest its turn structure knows."""
        items, refs = self._items, self._branch_items
        newest = select(func.max(items.c.seq)).where(items.c.session_pk == bindparam("session_pk"))
        known = select(func.max(refs.c.seq)).where(refs.c.branch_pk == bindparam("branch_pk"))
        return select(newest.scalar_subquery(), known.scalar_subquery())

    def _sync_main(self, conn: Connection, session_pk: int, main_pk: int, opened: Opened) -> None:
        """Add the main line's newer items to its turn structure. Items only ever join at
        the end, with higher numbers, so the structure's last place says where to start.

        JSON items are told apart by the database (`role` of the JSON text) in one
        statement; sealed ones are opened here to see which are user messages.
        """
        items, refs = self._items, self._branch_items
        last = conn.execute(self._last_ref_query, {"branch_pk": main_pk}).one_or_none()
        after, turn = (last.seq, last.turn) if last else (0, 0)
        if self._derive_statement is not None:
            where = {"main_pk": main_pk, "session_pk": session_pk, "after": after, "turn": turn}
            conn.execute(self._derive_statement, where)
            return
        newer = self._item_columns().where(items.c.session_pk == session_pk, items.c.seq > after)
        found = conn.execute(newer.order_by(items.c.seq)).all()
        stored = [self._stored_of(row) for row in found]
        flags = opened(stored)
        values = [
            {"branch_pk": main_pk, "seq": item.seq, "item_pk": row[0], "turn": n, "is_user": f}
            for row, item, f, n in zip(found, stored, flags, turn_numbers(flags, turn), strict=True)
        ]
        if values:
            conn.execute(refs.insert(), values)

    @cached_property
    def _derive_statement(self) -> Any:
        """For JSON items, where the dialect reads JSON: the turns of the main line's items
        after place `after`, derived in the database (a running count of user messages)."""
        items, refs = self._items, self._branch_items
        role = self._json_role(items.c.payload)
        if role is None or self._sealed:
            return None
        user = case((role == "user", 1), else_=0)
        newer = (items.c.session_pk == bindparam("session_pk"), items.c.seq > bindparam("after"))
        rows = select(items.c.id, items.c.seq, user.label("u")).where(*newer).subquery()
        running = func.sum(rows.c.u).over(order_by=rows.c.seq)
        main_pk = bindparam("main_pk", type_=refs.c.branch_pk.type)
        turn = bindparam("turn", type_=refs.c.turn.type)
        derived = select(main_pk, rows.c.seq, rows.c.id, running + turn, rows.c.u == 1)
        columns = ["branch_pk", "seq", "item_pk", "turn", "is_user"]
        return refs.insert().from_select(columns, derived)

    def _branched(self, session_pk: Any) -> Any:
        """SQL: whether the session ever had a branch besides main (then its main line has
        a turn structure, kept even after its branches are deleted)."""
        other = self._branches.alias("other")
        return exists().where(other.c.session_pk == session_pk, other.c.name != MAIN)

    def _main_line(self, conn: Connection, session_pk: int) -> int | None:
        """The main row's pk if the main line has a turn structure (the session branched)."""
        found = conn.execute(self._main_line_query, {"session_pk": session_pk})
        pk: int | None = found.scalar_one_or_none()
        return pk

    @cached_property
    def _main_line_query(self) -> Any:
        branches = self._branches
        return select(branches.c.id).where(
            branches.c.session_pk == bindparam("session_pk"),
            branches.c.name == MAIN,
            self._branched(branches.c.session_pk),
        )

    def _json_role(self, payload: Any) -> Any:
        """SQL for the `role` of an item's JSON text (as text), where the dialect has one."""
        if self._db.dialect_name == "sqlite":
            return func.json_extract(payload, "$.role")
        if self._db.dialect_name == "postgresql":
            return func.json_extract_path_text(cast(payload, JSON), "role")
        if self._mysql:
            return func.json_unquote(func.json_extract(payload, "$.role"))
        return None

    def _fresh_main(self, conn: Connection, key: SessionKey, opened: Opened) -> tuple[Any, Any]:
        """Under the session's lock: (session pk, main pk) with the main line's turns known."""
        session_pk = self._lock(conn, key)
        if session_pk is None:
            return None, None
        main_pk = self._main_pk(conn, session_pk, self._now())
        self._sync_main(conn, session_pk, main_pk, opened)
        return session_pk, main_pk

    async def on_line(
        self, key: SessionKey, name: str, work: LineWork[T], opened: Opened | None
    ) -> T:
        """Run `work(conn, session_pk, branch_pk)` on branch `name`, or return `GONE`.

        With `opened`, `work` gets main's turn structure: brought up to date first (read as
        it is when nothing is new, else in a write under the session's lock). A session that
        never branched has none, and a read writes none: `work` gets a None main pk (and a
        None session pk for a session that holds nothing yet). Without `opened`, `work` gets
        main's row whenever there is one (it holds the main line's usage).
        """

        def attempt(conn: Connection) -> Any:
            session_pk = conn.execute(self._session_pk(key)).scalar_one_or_none()
            if name != MAIN or not opened:
                branch_pk = self._branch_pk(conn, session_pk, name) if session_pk else None
                if name == MAIN or branch_pk is not None:
                    return work(conn, session_pk, branch_pk)
                return GONE
            if session_pk is None:
                return work(conn, None, None)
            main_pk = self._main_line(conn, session_pk)
            if main_pk is not None and self._main_stale(conn, session_pk, main_pk):
                return _STALE
            return work(conn, session_pk, main_pk)

        def refresh(conn: Connection) -> T:
            assert opened is not None
            return work(conn, *self._fresh_main(conn, key, opened))

        result = await self._db.read(attempt)
        return await self._db.write(refresh) if result is _STALE else result

    # -- reading ----------------------------------------------------------------------------

    def _line_items(self, branch_pk: Any, *, users_only: bool = False) -> Any:
        """A branch's live items in order, with their turn, user flag and time."""
        items, refs = self._items, self._branch_items
        query = (
            self._item_columns()
            .add_columns(refs.c.turn, refs.c.is_user, items.c.created_at)
            .join(refs, refs.c.item_pk == items.c.id)
            .where(refs.c.branch_pk == branch_pk, self._live(self._now()))
        )
        return query.where(refs.c.is_user) if users_only else query

    @property
    def _width(self) -> int:
        """How many columns `_item_columns` selects (others may follow them)."""
        return 6 if self._sealed else 3

    def _stored_of(self, row: Any) -> StoredItem:
        return self._stored(row[: self._width])
