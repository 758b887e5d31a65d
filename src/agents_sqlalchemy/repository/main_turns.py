"""The main line's user turns without per-item rows, while a session has never branched.

Recording a turn's usage needs the number of the current user turn. A session that never
branched keeps no turn structure (`branch_items`): its main row counts the user messages
through a place instead (`turns` through `counted`), and each usage record moves that count
on over the items appended since, in the same transaction as the append. Items only ever
join at the end, so the count grows by the new items alone; a removal of the counted place
(compaction, a purge) makes the next record count again from the start. The first branch
derives the full structure from the items themselves (`_sync_main`), and from then on the
structure is the truth.

Example::

    placed = repo._turn_now(conn, session_pk, last=12, flags=[True, False], opened=opened)
    if placed is not None:   # never branched: (main pk, current user turn)
        main_pk, turn = placed
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, NamedTuple

from sqlalchemy import Boolean, bindparam, case, delete, exists, func, or_, select, update
from sqlalchemy.engine import Connection

from ..turns import MAIN
from ..types import SessionKey
from .branch_reads import BranchReadOps
from .branches import Opened
from .prepared import Prepared


class Lines(NamedTuple):
    """A session's row locked for a removal: its pk, whether it ever branched, its main row."""

    session_pk: int
    branched: bool
    main_pk: int | None


class MainTurnOps(BranchReadOps):
    """The counted user turns of a main line that has no turn structure."""

    # -- locking for a removal --------------------------------------------------------------

    def _lock_lines(self, conn: Connection, key: SessionKey) -> Lines | None:
        """Take the session's write lock (an activity) and learn, in the same statement,
        whether it ever branched and which main row holds its usage; None if it has no row."""
        now = self._now()
        if self._mysql:  # no UPDATE ... RETURNING: lock the row, touch it, then read
            # After the lock: a plain read in the locking statement would fix the snapshot of
            # a REPEATABLE READ transaction before the lock was granted.
            session_pk = self._lock_existing(conn, key, now)
            found = [] if session_pk is None else self._lines_select.run(conn, {"hash": key.hash})
        else:
            found = self._lines_lock.run(conn, {"hash": key.hash, "now": now})
        if not found:
            return None
        pk, branched, main_pk = found[0]
        return Lines(int(pk), bool(branched), None if main_pk is None else int(main_pk))

    def _lines_columns(self) -> list[Any]:
        """The session's pk, whether it branched, its main row. Found by the session's hash,
        each name unambiguous in its own query: SQLite's RETURNING names columns without
        their table."""
        sessions, branches = self._sessions, self._branches
        owner = self._sessions.alias("owner")
        owner_pk = select(owner.c.id).where(owner.c.session_hash == bindparam("hash"))
        of_session = branches.c.session_pk == owner_pk.scalar_subquery()
        other = exists().where(of_session, branches.c.name != MAIN)
        main = select(branches.c.id).where(of_session, branches.c.name == MAIN)
        return [sessions.c.id, other, main.scalar_subquery()]

    @cached_property
    def _lines_lock(self) -> Prepared:
        sessions = self._sessions
        return Prepared(
            update(sessions)
            .where(sessions.c.session_hash == bindparam("hash"))
            .values(updated_at=bindparam("now", type_=sessions.c.updated_at.type))
            .returning(*self._lines_columns())
        )

    @cached_property
    def _lines_select(self) -> Prepared:
        sessions = self._sessions
        found = select(*self._lines_columns()).where(sessions.c.session_hash == bindparam("hash"))
        return Prepared(found)

    # -- counting ---------------------------------------------------------------------------

    def _turn_now(
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
            made = self._branches.insert().values(
                session_pk=session_pk, name=MAIN, created_at=self._now()
            )
            main_pk, turns, counted = self._inserted(conn, made), 0, 0
        elif row.branched:
            return None
        else:
            main_pk, turns, counted = row.id, row.turns, row.counted
            if not row.intact:
                turns, counted = 0, 0
        first = last - len(flags) + 1
        turns += self._users_between(conn, session_pk, counted, first, opened) + sum(flags)
        conn.execute(self._count_update, {"main_pk": main_pk, "new_turns": turns, "upto": last})
        return main_pk, turns

    def _intact(self, main: Any) -> Any:
        """SQL: whether the item at the main row's counted place is still stored."""
        items = self._items.alias("counted_item")  # not the items a count reads around it
        held = (
            exists()
            .where(items.c.session_pk == main.c.session_pk, items.c.seq == main.c.counted)
            .correlate(main)
        )
        return or_(main.c.counted == 0, held)

    @cached_property
    def _count_query(self) -> Any:
        main = self._branches
        return select(
            main.c.id,
            main.c.turns,
            main.c.counted,
            self._intact(main).label("intact"),
            self._branched(main.c.session_pk).label("branched"),
        ).where(main.c.session_pk == bindparam("session_pk"), main.c.name == MAIN)

    @cached_property
    def _count_update(self) -> Any:
        main = self._branches
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
        items, main = self._items, self._branches
        role = self._json_role(items.c.payload)
        if role is None or self._sealed or self._mysql:
            return None
        intact = self._intact(main)
        start = case((intact, main.c.counted), else_=0)
        added = (
            select(func.count())
            .where(
                items.c.session_pk == main.c.session_pk,
                items.c.seq > start,
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
                turns=case((intact, main.c.turns), else_=0) + added,
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
        items = self._items
        between = (items.c.session_pk == session_pk, items.c.seq > after, items.c.seq < before)
        role = self._json_role(items.c.payload)
        if role is not None and not self._sealed:
            query = select(func.count()).where(*between, role == "user")
            return int(conn.execute(query).scalar_one())
        rows = conn.execute(self._item_columns().where(*between).order_by(items.c.seq)).all()
        return sum(opened([self._stored_of(row) for row in rows]))

    # -- removals ---------------------------------------------------------------------------

    def _popped(
        self, conn: Connection, session_pk: int, main_pk: int, seq: int, user: bool
    ) -> None:
        """The item at `seq` left a main line without structure whose usage is recorded: the
        count loses it (one turn fewer for a user message) and, if it was the last counted,
        stops at the item before it; the usage of a turn no longer there goes."""
        self._pop_count.run(conn, {"sp": session_pk, "main_pk": main_pk, "at": seq, "u": user})
        if user:
            main, usage = self._branches, self._turn_usage
            turns = select(main.c.turns).where(main.c.id == main_pk).scalar_subquery()
            conn.execute(delete(usage).where(usage.c.branch_pk == main_pk, usage.c.turn > turns))

    @cached_property
    def _pop_count(self) -> Prepared:
        main, items = self._branches, self._items
        at = bindparam("at", type_=main.c.counted.type)
        before = select(func.max(items.c.seq)).where(
            items.c.session_pk == bindparam("sp"), items.c.seq < at
        )
        user = case((bindparam("u", type_=Boolean), 1), else_=0)
        # MySQL assigns left to right: `turns` first, while `counted` is still the old one.
        return Prepared(
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
