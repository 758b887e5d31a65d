"""A session's lines of history, as they are stored: which rows they have, how each is
found and locked, and the user turns of the main line.

The main line is the session's own items, read as they always are: a session that never
branches has no row in these tables but main's, made when it first records usage. Main's
row counts the user turns through a place (`turns` through `counted`), and each usage
record moves that count on over the items appended since, in the same transaction as the
append (`turn_now`). Items only ever join at the end, so the count grows by the new items
alone. The turns counted but no longer stored (`turns` less the user messages still stored
through `counted`: a purge took them) are the main line's `offset`: its stored items are
numbered after them, so a purge renumbers nothing and a later turn never takes the number
of a purged one, whose usage stays. A pop or a repair takes its user messages out of the
count (`popped`, `uncount`); a compaction or a clear starts it again (`count_again`).

When it first branches, the main line's turn structure (which items open a user turn) is
derived from the items themselves, after the offset (`sync_main`), and kept up to date
lazily from then on, under the session's lock, with the count following it; from then on
the structure is the truth. Another branch is a list of references (`branch_items`, see
`Branches`); its row's `turns` is the turn it was made after, which its items are
numbered after once it holds none (`first_turn`). Items written on a branch live in the
session's companion row (`sessions.parent_pk`), so the main line never sees them; they
take their sequence numbers from the session itself, so a place is unique across all its
lines and an item sealed for the session opens wherever it is referenced.

Example::

    lines = Lines(schema)
    # work(conn, session_pk, branch_pk, consistent): what it reads of the line
    rows = await lines.on_line(key, "main", work, opened)
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import cached_property
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import (
    JSON,
    Boolean,
    Text,
    and_,
    bindparam,
    case,
    cast,
    delete,
    exists,
    func,
    literal,
    literal_column,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.engine import Connection
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.dml import Update
from sqlalchemy.sql.expression import Select

from ..aio import OFF_LOOP, off_the_loop
from ..turns import MAIN, turn_numbers
from ..types import SessionKey, StoredItem
from .prepared import Prepared, prepared
from .schema import IMPORTING, MAX_SEQ, Schema

T = TypeVar("T")
#: Decodes stored items of a session and says which are user messages.
Opened = Callable[[Sequence[Sequence[Any]]], list[bool]]
#: Work on one line: (connection, session pk or None, branch pk or None, whether all its
#: reads agree: one snapshot, or under the session's lock) -> result.
LineWork = Callable[[Connection, Any, Any, bool], T]


class Gone:
    """The branch asked for has no live row (deleted, cleared, or never made)."""


GONE = Gone()
#: PostgreSQL: the version of a session's row, which every update of it changes (`xmin`).
#: Unqualified: used only where the sessions table is the one table in FROM.
row_version = cast(literal_column("xmin"), Text)
_STALE = object()


def companion_hash(key: SessionKey) -> str:
    """The lookup hash of a session's companion row; it hashes a byte no UTF-8 text holds
    (0xFF) first, so no session's own hash is ever this."""
    return hashlib.sha256(b"\xffbranches\x00" + key.session_id.encode()).hexdigest()


def user_flags(conn: Connection, opened: Opened, stored: list[StoredItem]) -> list[bool]:
    """`opened(stored)`: which stored items are user messages; for many, off the event loop
    (`off_the_loop`: decoding a 200,000-item history on it held it for seconds)."""
    return off_the_loop(conn.dialect, opened, stored) if len(stored) > OFF_LOOP else opened(stored)


def inserted(conn: Connection, statement: Any) -> int:
    """Run an INSERT of one row; its primary key (RETURNING, or the driver's last id)."""
    primary_key = conn.execute(statement).inserted_primary_key
    assert primary_key is not None
    return int(primary_key[0])


def branched(schema: Schema, session_pk: Any) -> Select[Any]:
    """The query of whether the session has a live branch besides main that holds items
    (it may share some of main's); one that holds none exists for no call, as the SDK's."""
    branches, refs = schema.branches, schema.branch_items
    return select(
        exists().where(
            branches.c.session_pk == session_pk,
            branches.c.name != MAIN,
            branches.c.deleted_at.is_(None),
            exists().where(refs.c.branch_pk == branches.c.id),
        )
    )


def count_again(schema: Schema, session_pk: Any) -> Update:
    """The update that makes the main line's next usage record count its user turns again
    from the start: after its counted items went (a compaction, a clear)."""
    lines = schema.branches
    return (
        update(lines)
        .where(lines.c.session_pk == session_pk, lines.c.name == MAIN)
        .values(turns=0, counted=0)
    )


def uncount(conn: Connection, schema: Schema, session_pk: Any, users: Sequence[int]) -> None:
    """The user messages at places `users` leave the main line to come back after its last
    place (a repair's): its count forgets those it counted, so every turn keeps its number."""
    main = schema.branches
    row = conn.execute(
        select(main.c.id, main.c.counted).where(
            main.c.session_pk == session_pk, main.c.name == MAIN
        )
    ).one_or_none()
    if row is not None and (gone := sum(seq <= row.counted for seq in users)):
        conn.execute(update(main).where(main.c.id == row.id).values(turns=main.c.turns - gone))


class LockedSession(NamedTuple):
    """A session's row locked for a removal: its pk, whether it ever branched, its main row,
    its user (a sealed store's reads check the owner by it)."""

    session_pk: int
    branched: bool
    main_pk: int | None
    user_id: str | None


class Peeked(NamedTuple):
    """A session as a removal without its lock saw it: its pk, its row's version, whether it
    ever branched, its main row, its user, and its latest live item (None if none) with
    that item's row version."""

    session_pk: int
    version: str
    branched: bool
    main_pk: int | None
    user_id: str | None
    item_pk: int | None
    stored: StoredItem | None
    item_version: str | None


class Lines:
    """The rows of a session's lines: found, locked, made on first need; the main line's
    turn structure brought up to date, or its user turns counted while it has none."""

    def __init__(self, schema: Schema) -> None:
        self._schema = schema

    # -- locating ---------------------------------------------------------------------------

    def marked(self, conn: Connection, key: SessionKey) -> bool:
        """Whether the session's row is there and marked `IMPORTING` (a write checks it on
        the row it has locked)."""
        sessions = self._schema.sessions
        query = select(sessions.c.id).where(
            sessions.c.session_hash == key.hash, sessions.c.archived_at == IMPORTING
        )
        return conn.execute(query).first() is not None

    def lock(self, conn: Connection, key: SessionKey) -> int | None:
        """Take the session's write lock without counting it as activity; its pk or None."""
        if self._schema.mysql:  # no UPDATE ... RETURNING: SELECT ... FOR UPDATE locks the row
            found = self._schema.claimed_statement.run(conn, {"session_hash": key.hash})
            return int(found[0][0]) if found else None
        pk: int | None = conn.execute(self._lock_statement, {"hash": key.hash}).scalar_one_or_none()
        return pk

    @cached_property
    def _lock_statement(self) -> Any:
        sessions = self._schema.sessions
        return (
            update(sessions)
            .where(sessions.c.session_hash == bindparam("hash"))
            .values(next_seq=sessions.c.next_seq)
            .returning(sessions.c.id)
        )

    def branch_pk(self, conn: Connection, session_pk: Any, name: str) -> int | None:
        """The live branch `name` of a session (main included, once it has a row)."""
        found = conn.execute(self._branch_pk_query, {"session_pk": session_pk, "name": name})
        pk: int | None = found.scalar_one_or_none()
        return pk

    # The statements of the paths a Runner takes on every append are built once: building
    # one costs more than running it.
    @cached_property
    def _branch_pk_query(self) -> Any:
        branches = self._schema.branches
        return select(branches.c.id).where(
            branches.c.session_pk == bindparam("session_pk"),
            self._schema.equals(branches.c.name, bindparam("name")),
            branches.c.deleted_at.is_(None),
        )

    @cached_property
    def _last_ref_query(self) -> Any:
        """A branch's last reference: its place and user turn."""
        refs = self._schema.branch_items
        return (
            select(refs.c.seq, refs.c.turn)
            .where(refs.c.branch_pk == bindparam("branch_pk"))
            .order_by(refs.c.seq.desc())
            .limit(1)
        )

    def last_ref(self, conn: Connection, branch_pk: int) -> Any:
        """A branch's last reference (`seq`, `turn`), or None if it holds none."""
        return conn.execute(self._last_ref_query, {"branch_pk": branch_pk}).one_or_none()

    def main_pk(self, conn: Connection, session_pk: int, now: datetime) -> int:
        """The main line's row, made on first need."""
        found = self.branch_pk(conn, session_pk, MAIN)
        if found is not None:
            return found
        made = self._schema.branches.insert().values(
            session_pk=session_pk, name=MAIN, created_at=now
        )
        return inserted(conn, made)

    def companion(
        self, conn: Connection, key: SessionKey, session_pk: int, now: datetime | None = None
    ) -> int | None:
        """The companion row holding the items of the session's other branches; with `now`,
        made if missing (owned by the session's owner, so its erasure takes it too)."""
        sessions = self._schema.sessions
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
            pk = inserted(conn, made)
        return pk

    # -- the main line's turns --------------------------------------------------------------

    def _main_stale(self, conn: Connection, session_pk: int, main_pk: int) -> bool:
        """Whether the main line's turn structure lacks some of its items (a session that
        has none is read without one: see `Branches._made`)."""
        row = conn.execute(self._ends_query, {"session_pk": session_pk, "branch_pk": main_pk})
        newest, known = row.one()
        return bool(newest != known)

    @cached_property
    def _ends_query(self) -> Any:
        """The main line's newest place, and the newest its turn structure knows."""
        items, refs = self._schema.items, self._schema.branch_items
        newest = select(func.max(items.c.seq)).where(items.c.session_pk == bindparam("session_pk"))
        known = select(func.max(refs.c.seq)).where(refs.c.branch_pk == bindparam("branch_pk"))
        return select(newest.scalar_subquery(), known.scalar_subquery())

    def sync_main(self, conn: Connection, session_pk: int, main_pk: int, opened: Opened) -> None:
        """Add the main line's newer items to its turn structure. Items only ever join at
        the end, with higher numbers, so the structure's last place says where to start.

        JSON items are told apart by the database (`role` of the JSON text) in one
        statement; sealed ones are opened here to see which are user messages.
        """
        items, refs = self._schema.items, self._schema.branch_items
        last = self.last_ref(conn, main_pk)
        after, turn = (last.seq, last.turn) if last else (0, self.offset(conn, session_pk, opened))
        end: tuple[int, int] | None = None  # the last reference added: (turn, seq)
        if self._derive_statement is not None:
            where = {"main_pk": main_pk, "session_pk": session_pk, "after": after, "turn": turn}
            if conn.execute(self._derive_statement, where).rowcount:
                last = self.last_ref(conn, main_pk)
                end = (last.turn, last.seq)
        else:
            newer = self._schema.item_columns().where(
                items.c.session_pk == session_pk, items.c.seq > after
            )
            found = conn.execute(newer.order_by(items.c.seq)).all()
            stored = [self._schema.stored_of(row) for row in found]
            flags = user_flags(conn, opened, stored)
            numbers = turn_numbers(flags, turn)
            values = [
                {"branch_pk": main_pk, "seq": item.seq, "item_pk": row[0], "turn": n, "is_user": f}
                for row, item, f, n in zip(found, stored, flags, numbers, strict=True)
            ]
            if values:
                conn.execute(refs.insert(), values)
                end = (values[-1]["turn"], values[-1]["seq"])
        if end is not None:  # the count follows the structure (`offset`, should every item go)
            turns, seq = end
            conn.execute(self._count_update, {"main_pk": main_pk, "new_turns": turns, "upto": seq})

    def number_after(self, conn: Connection, session_pk: int, turns: int, name: str = MAIN) -> int:
        """Number the items of a line that holds none after `turns` turns it does not hold (a
        history whose first turns were purged before it was exported, a branch emptied and
        written again); the line's pk."""
        if name != MAIN:
            branches = self._schema.branches
            branch_pk = self.branch_pk(conn, session_pk, name)
            assert branch_pk is not None and self.last_ref(conn, branch_pk) is None
            conn.execute(update(branches).where(branches.c.id == branch_pk).values(turns=turns))
            return branch_pk
        main_pk = self.main_pk(conn, session_pk, self._schema.now())
        conn.execute(self._count_update, {"main_pk": main_pk, "new_turns": turns, "upto": 0})
        return main_pk

    def first_turn(self, conn: Connection, branch_pk: int) -> int:
        """The turn a branch (not main) that holds no item numbers its next items after:
        the one before the turn it was made from (its older turns may all be purged)."""
        branches = self._schema.branches
        found = conn.execute(select(branches.c.turns).where(branches.c.id == branch_pk))
        return int(found.scalar_one())

    def counters(self, conn: Connection, session_pk: int) -> tuple[int, int]:
        """Main's count: (`turns`, through place `counted`); (0, 0) before its row."""
        main = self._schema.branches
        found = conn.execute(
            select(main.c.turns, main.c.counted).where(
                main.c.session_pk == session_pk, main.c.name == MAIN
            )
        ).one_or_none()
        return (0, 0) if found is None else (int(found.turns), int(found.counted))

    def offset(self, conn: Connection, session_pk: int, opened: Opened) -> int:
        """The user turns main counted that it no longer stores (a purge took them): its
        stored items are numbered after them."""
        turns, counted = self.counters(conn, session_pk)
        return max(0, turns - self._users_between(conn, session_pk, 0, counted + 1, opened))

    @cached_property
    def _derive_statement(self) -> Any:
        """For JSON items, where the dialect reads JSON: the turns of the main line's items
        after place `after`, derived in the database (a running count of user messages)."""
        items, refs = self._schema.items, self._schema.branch_items
        role = self.json_role(items.c.payload)
        if role is None:
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
        other = self._schema.branches.alias("other")
        return exists().where(other.c.session_pk == session_pk, other.c.name != MAIN)

    def _main_line(self, conn: Connection, session_pk: int) -> int | None:
        """The main row's pk if the main line has a turn structure (the session branched)."""
        found = conn.execute(self._main_line_query, {"session_pk": session_pk})
        pk: int | None = found.scalar_one_or_none()
        return pk

    @cached_property
    def _main_line_query(self) -> Any:
        branches = self._schema.branches
        return select(branches.c.id).where(
            branches.c.session_pk == bindparam("session_pk"),
            branches.c.name == MAIN,
            self._branched(branches.c.session_pk),
        )

    def json_role(self, payload: Any) -> Any:
        """SQL for the `role` of an item's JSON text (as text), where the items are plain
        (a sealed store's have no JSON text: None) and the dialect reads every JSON text the
        library stores: SQLite and PostgreSQL, once each escaped NUL is read as another
        control character (SQLite's JSON functions cut a text at a NUL, so that a role
        "user\\u0000" read as "user"; PostgreSQL's refuse to de-escape `\\u0000` anywhere
        in the text). Not MySQL or MariaDB, whose JSON functions stop at 32 levels of
        nesting, where items may have 128: Python reads them."""
        if self._schema.sealed:
            return None
        readable = func.replace(payload, "\\u0000", "\\u0001")
        if self._schema.db.dialect_name == "sqlite":
            return func.json_extract(readable, "$.role")
        if self._schema.db.dialect_name == "postgresql":
            return func.json_extract_path_text(cast(readable, JSON), "role")
        return None

    def _fresh_main(self, conn: Connection, key: SessionKey, opened: Opened) -> tuple[Any, Any]:
        """Under the session's lock: (session pk, main pk) with the main line's turns known."""
        session_pk = self.lock(conn, key)
        if session_pk is None:
            return None, None
        main_pk = self.main_pk(conn, session_pk, self._schema.now())
        self.sync_main(conn, session_pk, main_pk, opened)
        return session_pk, main_pk

    async def on_line(
        self,
        key: SessionKey,
        name: str,
        work: LineWork[T],
        opened: Opened | None,
        *,
        snapshot: bool = False,
    ) -> T:
        """Run `work(conn, session_pk, branch_pk, consistent)` on branch `name`, or `GONE`.

        With `opened`, `work` gets main's turn structure: brought up to date first (read as
        it is when nothing is new, else in a write under the session's lock). A session that
        never branched has none, and a read writes none: `work` gets a None main pk (and a
        None session pk for a session that holds nothing yet). Without `opened`, `work` gets
        main's row whenever there is one (it holds the main line's usage).

        `snapshot`: in one snapshot (`Database.read`), where all that `work` reads agrees,
        as a read in pages needs (`MorePages`). `consistent` tells `work` whether it does:
        in one snapshot, or under the session's lock.
        """

        def attempt(conn: Connection) -> Any:
            session_pk = conn.execute(self._schema.session_pk(key)).scalar_one_or_none()
            if name != MAIN or not opened:
                branch_pk = self.branch_pk(conn, session_pk, name) if session_pk else None
                if name == MAIN or branch_pk is not None:
                    return work(conn, session_pk, branch_pk, snapshot)
                return GONE
            if session_pk is None:
                return work(conn, None, None, snapshot)
            main_pk = self._main_line(conn, session_pk)
            if main_pk is not None and self._main_stale(conn, session_pk, main_pk):
                return _STALE
            return work(conn, session_pk, main_pk, snapshot)

        def refresh(conn: Connection) -> T:
            assert opened is not None
            return work(conn, *self._fresh_main(conn, key, opened), True)

        result: T = await self._schema.db.read(attempt, snapshot=snapshot)
        if result is _STALE:
            return await self._schema.db.write(refresh, session_id=key.session_id)
        return result

    # -- locking for a removal --------------------------------------------------------------

    def lock_lines(self, conn: Connection, key: SessionKey) -> LockedSession | None:
        """Take the session's write lock (an activity) and learn, in the same statement,
        whether it ever branched, which main row holds its usage and its user; None if it
        has no row."""
        now = self._schema.now()
        if self._schema.mysql:  # no UPDATE ... RETURNING: touch the row (the lock), then read
            # After the lock: a plain read in the locking statement would fix the snapshot of
            # a REPEATABLE READ transaction before the lock was granted.
            self._lines_touch.run(conn, {"hash": key.hash, "now": now})
            found = self._lines_select.run(conn, {"hash": key.hash})
        else:
            found = self._lines_lock.run(conn, {"hash": key.hash, "now": now})
        if not found:
            return None
        pk, branched, main_pk, user_id = found[0]
        main_pk = None if main_pk is None else int(main_pk)
        return LockedSession(int(pk), bool(branched), main_pk, user_id)

    def _lines_columns(self, session_pk: Any = None) -> list[Any]:
        """The session's pk, whether it branched, its main row, its user. Its lines are
        found by `session_pk`, else by the session's hash, each name unambiguous in its own
        query: SQLite's RETURNING names columns without their table."""
        sessions, branches = self._schema.sessions, self._schema.branches
        if session_pk is None:
            owner = self._schema.sessions.alias("owner")
            owned = select(owner.c.id).where(owner.c.session_hash == bindparam("hash"))
            session_pk = owned.scalar_subquery()
        of_session = branches.c.session_pk == session_pk
        other = exists().where(of_session, branches.c.name != MAIN)
        main = select(branches.c.id).where(of_session, branches.c.name == MAIN)
        return [sessions.c.id, other, main.scalar_subquery(), sessions.c.user_id]

    @cached_property
    def _touched(self) -> Update:
        """The session's row marked active: the write lock on it."""
        sessions = self._schema.sessions
        return (
            update(sessions)
            .where(sessions.c.session_hash == bindparam("hash"))
            .values(updated_at=bindparam("now", type_=sessions.c.updated_at.type))
        )

    @prepared
    def _lines_lock(self) -> ClauseElement:
        return self._touched.returning(*self._lines_columns())

    @prepared
    def _lines_touch(self) -> ClauseElement:
        return self._touched

    @prepared
    def _lines_select(self) -> ClauseElement:
        sessions = self._schema.sessions
        found = select(*self._lines_columns()).where(sessions.c.session_hash == bindparam("hash"))
        return found

    # -- counting ---------------------------------------------------------------------------

    def turn_now(
        self, conn: Connection, session_pk: int, last: int, flags: list[bool], opened: Opened
    ) -> tuple[int, int] | None:
        """Under the session's lock, with the main line's items through place `last` written
        (`flags`: which of the latest are user messages): (main pk, current user turn) with
        the count moved on; None if the session branched (its structure says)."""
        if self._count_statement is not None:
            found = self._count_statement.run(conn, {"sp": session_pk, "upto": last})
            if found:
                return int(found[0][0]), int(found[0][1])
        row = conn.execute(self._count_query, {"session_pk": session_pk}).one_or_none()
        if row is None:
            made = self._schema.branches.insert().values(
                session_pk=session_pk, name=MAIN, created_at=self._schema.now()
            )
            main_pk, turns, counted = inserted(conn, made), 0, 0
        elif row.branched:
            return None
        else:
            main_pk, turns, counted = row.id, row.turns, row.counted
        first = last - len(flags) + 1
        turns += self._users_between(conn, session_pk, counted, first, opened) + sum(flags)
        conn.execute(self._count_update, {"main_pk": main_pk, "new_turns": turns, "upto": last})
        return main_pk, turns

    @cached_property
    def _count_query(self) -> Any:
        main = self._schema.branches
        return select(
            main.c.id,
            main.c.turns,
            main.c.counted,
            self._branched(main.c.session_pk).label("branched"),
        ).where(main.c.session_pk == bindparam("session_pk"), main.c.name == MAIN)

    @cached_property
    def _count_update(self) -> Any:
        main = self._schema.branches
        return (
            update(main)
            .where(main.c.id == bindparam("main_pk"))
            .values(turns=bindparam("new_turns"), counted=bindparam("upto"))
        )

    @cached_property
    def _count_statement(self) -> Prepared | None:
        """For JSON items where the dialect reads JSON and updates with RETURNING: the count
        moved on in the database, in one statement; nothing when the session has no main
        row yet or branched (MySQL cannot read the table it updates in a subquery)."""
        items, main = self._schema.items, self._schema.branches
        role = self.json_role(items.c.payload)
        if role is None or self._schema.mysql:
            return None
        added = (
            select(func.count())
            .where(
                items.c.session_pk == main.c.session_pk,
                items.c.seq > main.c.counted,
                items.c.seq <= bindparam("upto"),
                role == "user",
            )
            .scalar_subquery()
        )
        return Prepared(
            update(main)
            .where(
                main.c.session_pk == bindparam("sp"),
                main.c.name == MAIN,
                ~self._branched(main.c.session_pk),
            )
            .values(
                turns=main.c.turns + added,
                counted=bindparam("upto", type_=main.c.counted.type),
            )
            .returning(main.c.id, main.c.turns)
        )

    def _users_between(
        self, conn: Connection, session_pk: int, after: int, before: int, opened: Opened
    ) -> int:
        """How many of the main line's items placed after `after` and before `before` are
        user messages (told by the database for JSON items, else opened here)."""
        if before - after <= 1:
            return 0
        items = self._schema.items
        between = (items.c.session_pk == session_pk, items.c.seq > after, items.c.seq < before)
        role = self.json_role(items.c.payload)
        if role is not None:
            query = select(func.count()).where(*between, role == "user")
            return int(conn.execute(query).scalar_one())
        rows = conn.execute(self._schema.item_columns().where(*between).order_by(items.c.seq)).all()
        return sum(user_flags(conn, opened, [self._schema.stored_of(row) for row in rows]))

    # -- removals ---------------------------------------------------------------------------

    def popped(self, conn: Connection, session_pk: int, main_pk: int, seq: int, user: bool) -> None:
        """The item at `seq` left a main line without structure whose usage is recorded: the
        count loses it (`lose`); the usage of a turn no longer there goes."""
        self.lose(conn, session_pk, main_pk, seq, user)
        main, usage = self._schema.branches, self._schema.turn_usage
        turns = select(main.c.turns).where(main.c.id == main_pk).scalar_subquery()
        gone = self._turns_gone(turns, literal(user, Boolean), literal(session_pk), literal(seq))
        conn.execute(delete(usage).where(usage.c.branch_pk == main_pk, gone))

    def lose(self, conn: Connection, session_pk: int, main_pk: int, seq: int, user: bool) -> None:
        """The item at `seq` left the main line: its count loses it (one turn fewer for a
        user message) and, if it was the last counted, stops at the item before it."""
        self._pop_count.run(conn, {"sp": session_pk, "main_pk": main_pk, "at": seq, "u": user})

    def _turns_gone(self, turns: Any, user: Any, session_pk: Any, at: Any) -> Any:
        """The usage rows of a main line left without a turn by the removal of its item at
        place `at`: past its `turns` when a user message went, and turn 0's (what came
        before the first user message) once no item is left before `at`."""
        usage, items = self._schema.turn_usage, self._schema.items.alias("before_it")
        earlier = _any_seq(items, items.c.session_pk == session_pk, items.c.seq < at)
        return or_(and_(user, usage.c.turn > turns), and_(usage.c.turn == 0, turns == 0, ~earlier))

    @prepared
    def _pop_count(self) -> ClauseElement:
        return self._count_loses

    @cached_property
    def _count_loses(self) -> Update:
        """`popped`'s count: the main row `main_pk` loses the item at place `at` (`u`: a user
        message) of session `sp`."""
        main, items = self._schema.branches, self._schema.items
        at = bindparam("at", type_=main.c.counted.type)
        before = select(func.max(items.c.seq)).where(
            items.c.session_pk == bindparam("sp"), items.c.seq < at
        )
        user = case((bindparam("u", type_=Boolean), 1), else_=0)
        # MySQL assigns left to right: `turns` first, while `counted` is still the old one.
        return (
            update(main)
            .where(main.c.id == bindparam("main_pk"), main.c.counted >= at)
            .ordered_values(
                (main.c.turns, main.c.turns - user),
                (
                    main.c.counted,
                    case(
                        (main.c.counted == at, func.coalesce(before.scalar_subquery(), 0)),
                        else_=main.c.counted,
                    ),
                ),
            )
        )

    # -- a removal without the lock (PostgreSQL) --------------------------------------------

    def peek(self, conn: Connection, key: SessionKey, now: datetime) -> Peeked | None:
        """The session and its latest live item as they stand, its lock not taken; None if
        the session has no row."""
        found = self._peek.run(conn, {"hash": key.hash, "now": now})
        return self._peeked(found[0]) if found else None

    def take_unchanged(
        self, conn: Connection, key: SessionKey, seen: Peeked, user: bool, now: datetime
    ) -> tuple[bool, Peeked | None]:
        """Remove `seen`'s item, and from the main line's count (`popped`), in one statement
        that commits by itself, if the session's row is still the version `seen` read and
        the item is as `seen` read it: the same row version, live, and the newest.

        Every writer changes the session's row (its write lock), so then nothing was written
        since, and `seen` is the session as it is. Whether it removed the item, and the
        session as that statement left it (`peek`'s view, its latest item the one before
        the removed one): what the next removal starts from, with no read of its own. If
        the session's row changed, or the item did (an expired one purged, a row altered
        outside the library), nothing was removed, and the row is marked active only."""
        assert seen.stored is not None
        params = {
            "hash": key.hash,
            "sp": seen.session_pk,
            "seen": seen.version,
            "now": now,
            "item_pk": seen.item_pk,
            "item_seen": seen.item_version,
            "main_pk": seen.main_pk,
            "at": seen.stored.seq,
            "u": user,
        }
        taking = self._take_unchanged if seen.main_pk is not None else self._take_uncounted
        rows = taking.run(conn, params)
        if not rows:  # the session's row is gone
            return False, None
        [(removed, version, *found)] = rows
        after = self._peeked(found)
        return bool(removed), after._replace(version=version) if removed else after

    def _peeked(self, row: Any) -> Peeked:
        """A row of `_seen` as a `Peeked`."""
        width = self._schema.width
        pk, version, branched, main_pk, user_id, *item = row
        stored = None if item[0] is None else self._schema.stored(item[:width])
        return Peeked(
            int(pk),
            version,
            bool(branched),
            None if main_pk is None else int(main_pk),
            user_id,
            item[0],
            stored,
            item[width],
        )

    def _seen(self, last: Any = None) -> Select[Any]:
        """The session's `_lines_columns` with its row's version (`xmin`, which every update
        of the row changes), and the columns and row version of its latest live item (at a
        place up to `last`, if given)."""
        sessions = self._schema.sessions
        pk, *lines = self._lines_columns(sessions.c.id)
        version = row_version.label("version")
        row = select(pk, version, *lines).where(sessions.c.session_hash == bindparam("hash"))
        session = row.subquery("session")
        # The item is found by the hash again: a table in FROM cannot see its neighbour.
        owned = select(sessions.c.id).where(sessions.c.session_hash == bindparam("hash"))
        live = self._schema.statements.live_items.add_columns(row_version.label("item_version"))
        newest = self._schema.newest(live, owned.scalar_subquery(), 1, last=last)
        latest = newest.subquery("latest")
        return select(*session.c, *latest.c).select_from(session.outerjoin(latest, true()))

    @prepared
    def _peek(self) -> ClauseElement:
        """`peek`'s read (`_seen`)."""
        return self._seen()

    @prepared
    def _take_unchanged(self) -> ClauseElement:
        """`take_unchanged`'s statement: the row marked active if still at version `seen`,
        then the item removed if as seen and counted out (`_count_loses`), then the usage
        of a turn it leaves empty (`_turns_gone`); how many items it removed (none, or one), the
        row's new version, and the session as `_seen` finds it after the removal."""
        return self._taking(counted=True)

    @prepared
    def _take_uncounted(self) -> ClauseElement:
        """`_take_unchanged` for a session whose main line has no row (it never counted its
        turns nor recorded usage: nothing to count out): two parts fewer to plan and run
        (a pop on PostgreSQL took 0.22 ms of the server's with them, 0.15 ms without). A
        row made meanwhile changed the session's version: nothing is removed then."""
        return self._taking(counted=False)

    def _taking(self, *, counted: bool) -> ClauseElement:
        """The statements of `_take_unchanged`, with or without the count and the usage."""
        sessions, items = self._schema.sessions, self._schema.items
        main, usage = self._schema.branches, self._schema.turn_usage
        sp = bindparam("sp", type_=items.c.session_pk.type)  # the session's pk
        unchanged = (
            update(sessions)
            .where(
                sessions.c.id == sp,
                row_version == bindparam("seen", type_=Text),
            )
            .values(updated_at=bindparam("now", type_=sessions.c.updated_at.type))
            .returning(sessions.c.id, row_version.label("version"))
            .cte("unchanged")
        )
        at = bindparam("at", type_=items.c.seq.type)
        now = bindparam("now", type_=items.c.expires_at.type)

        def live(table: Any) -> Any:
            return or_(table.c.expires_at.is_(None), table.c.expires_at > now)

        later = items.alias("later")
        newer = _any_seq(later, later.c.session_pk == sp, later.c.seq > at, live(later))
        taken = (
            delete(items)
            .where(
                items.c.id == bindparam("item_pk"),
                row_version == bindparam("item_seen", type_=Text),
                items.c.session_pk.in_(select(unchanged.c.id)),
                live(items),
                ~newer,
            )
            .returning(items.c.id)
            .cte("taken")
        )
        # All of it sees the database as the statement began: the removed item is still
        # there, so the latest item after it is the latest one before its place.
        last = case((exists(select(taken)), at - 1), else_=MAX_SEQ)
        after = self._seen(last).subquery("after")
        removed = select(func.count()).select_from(taken).scalar_subquery()
        version = select(unchanged.c.version).scalar_subquery()
        if not counted:
            return select(removed, version, *after.c).add_cte(taken)
        counting = (
            self._count_loses.where(exists(select(taken))).returning(main.c.turns).cte("counted")
        )
        turns_now = func.coalesce(
            select(counting.c.turns).scalar_subquery(),
            select(main.c.turns).where(main.c.id == bindparam("main_pk")).scalar_subquery(),
        )
        gone = self._turns_gone(turns_now, bindparam("u", type_=Boolean), sp, at)
        past = (
            delete(usage)
            .where(usage.c.branch_pk == bindparam("main_pk"), gone, exists(select(taken)))
            .cte("past")
        )
        return select(removed, version, *after.c).add_cte(past)


def _any_seq(items: Any, *where: Any) -> Any:
    """SQL: whether an items row of one session matches `where`, asked as `max(seq) IS NOT
    NULL`, which every database answers from the (session_pk, seq) index. Asked as EXISTS,
    PostgreSQL's generic plan of a prepared statement (from its sixth run on a connection)
    expects a session to hold many rows, so it scans the whole items table for the first:
    a pop that found none there took 37 ms beside 200,000 items of other sessions (1 ms
    this way)."""
    return select(func.max(items.c.seq)).where(*where).scalar_subquery().is_not(None)
