"""Branches of a session: reads and writes on any line, branches made, listed and deleted.

A branch is a list of references (`branch_items`) to items the session stores: creating
one copies the source's references before the chosen turn, never a payload. Every write
runs under the session's lock (its `next_seq` bump first). An item leaves the database
(and its key with it) only when no line holds it any more: off the main line, an item a
branch still holds moves to the session's companion row instead.

A session that never branched has no turn structure, and reading its turns writes none:
they are derived in memory from its items (`Branches._made`).

Example::

    branches = Branches(schema, Lines(schema))
    name, source = await branches.create_branch(key, "main", 2, None, "draft", is_user)
    await branches.read_branch(key, name, limit=None)
    await branches.pop_line(key, name, decode, is_user)
    await branches.delete_branch(key, name)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import bindparam, case, delete, exists, func, literal, or_, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.sql import ClauseElement, ColumnElement, Select

from ..aio import off_loop, off_the_loop
from ..caches import add_bounded, let_go
from ..database.units import Unchanged
from ..errors import AgentsSQLAlchemyError, BranchError
from ..turns import MAIN, is_user, turn_numbers
from ..types import BranchSummary, LineItems, NewItem, SessionKey, StoredItem
from .lines import (
    GONE,
    Gone,
    Lines,
    LineWork,
    LockedSession,
    Opened,
    Peeked,
    branched,
    count_again,
    inserted,
)
from .prepared import Prepared, prepared
from .schema import ARRAY_ROWS, MorePages, Schema, built_rows, page_rows

T = TypeVar("T")
#: How many times a pop without the lock reads again after a write got in before it.
UNLOCKED_TRIES = 4
#: Sessions a store remembers as its last pop without the lock left them, for the next pop
#: (one round trip instead of two) ...
SESSIONS_REMEMBERED = 1000
#: ... when the item then latest is at most this big, stored.
ITEM_BYTES = 16 * 1024
#: Items per page where PostgreSQL reads a line's turns (`Branches._pages`):
#: fewer than a full read's `ARRAY_ROWS`, as asyncpg decodes each page on the event loop,
#: and these rows have five columns, two of them times (a full page held it 12 to 20 ms).
MAIN_PAGE = ARRAY_ROWS // 4


class _Locked:
    """A pop to make under the session's lock."""


LOCKED = _Locked()


class Branches:
    """Reads of branches and turns (the main line's structure brought up to date first);
    appends, removals and branch rows, each one transaction under the session's lock."""

    def __init__(self, schema: Schema, lines: Lines) -> None:
        self._schema = schema
        self._lines = lines
        # PostgreSQL: sessions as this store's last pop without the lock left them, by hash.
        self._left: dict[str, Peeked] = {}

    def _line_items(
        self, branch_pk: Any, now: datetime | ColumnElement[datetime], *, users_only: bool = False
    ) -> Any:
        """A branch's items live at `now`, with their turn, user flag and time."""
        items, refs = self._schema.items, self._schema.branch_items
        query = (
            self._schema.item_columns()
            .add_columns(refs.c.turn, refs.c.is_user, items.c.created_at)
            .join(refs, refs.c.item_pk == items.c.id)
            .where(refs.c.branch_pk == branch_pk, self._schema.live(now))
        )
        return query.where(refs.c.is_user) if users_only else query

    def _read_line(
        self,
        conn: Connection,
        session_pk: int,
        branch_pk: int | None,
        *,
        users_only: bool,
        consistent: bool,
    ) -> _LineRead:
        """A line's rows, to make into `LineItems` after the unit of work (`_made`): main's
        own items where it has no structure (`branch_pk` None: its turns are derived from
        them), else the branch's references. `consistent`: in a unit whose reads agree
        (else a read of more than one page raises `MorePages`)."""
        now, items, refs = self._schema.now(), self._schema.items, self._schema.branch_items
        params: dict[str, Any]
        counters = self._lines.counters(conn, session_pk) if branch_pk is None else None
        if self._schema.db.dialect_name == "postgresql":
            page, params = self._main_page, {"session_pk": session_pk}
            if branch_pk is not None:  # the branch's references, live at `now`
                page, params = self._line_page(users_only), {"branch_pk": branch_pk, "now": now}
            rows, size = self._pages(conn, page, params, consistent)
            return _LineRead(rows, size, counters, now)
        if branch_pk is None:
            query = select(*self._main_columns).where(items.c.session_pk == session_pk)
            query = query.order_by(items.c.seq)
        else:
            query = self._line_items(branch_pk, now, users_only=users_only)
            query = query.order_by(refs.c.seq)
        # In a worker thread on an async driver, whose unit of work runs on the event loop:
        # the driver has the rows already (an engine that streams results is refused).
        found = off_the_loop(conn.dialect, _plain_rows, conn.execute(query))
        return _LineRead(found, len(found), counters, now)

    def _made(self, read: _LineRead, opened: Opened, users_only: bool) -> LineItems:
        """`_read_line`'s rows as `LineItems`: main's items numbered here (after the turns
        purged: as the stored structure numbers them, see `Lines.offset`, expired items
        counted too) and, `users_only`, its user messages kept; or a branch's references as
        numbered (read `users_only` already)."""
        if read.counters is None:
            line = self._line_columns(read.rows)
            _drop(read.rows)
            return line
        width, flagged = self._schema.width - 1, self._flagged  # a `StoredItem`'s columns
        rows: list[tuple[Any, ...]] = []
        created, ends, flags = [], [], []
        for row in read.rows:
            rows.append(tuple(row[:width]))
            created.append(row[width])
            ends.append(row[width + 1])
            if flagged:
                flags.append(bool(row[width + 2]))
        if not flagged:
            flags = opened(rows)
        turns, counted = read.counters
        held = sum(flag for row, flag in zip(rows, flags, strict=True) if row[0] <= counted)
        line = LineItems(rows, turn_numbers(flags, max(0, turns - held)), flags, created)
        now = read.now
        if any(end is not None and end <= now for end in ends):
            line = line.picked(i for i, end in enumerate(ends) if end is None or end > now)
        _drop(read.rows)
        return line.only_users() if users_only else line

    @cached_property
    def _flagged(self) -> bool:
        """Whether the database tells user messages where it reads their JSON (plaintext:
        `Lines.json_role`); else they are decoded to tell."""
        return self._lines.json_role(self._schema.items.c.payload) is not None

    @cached_property
    def _main_columns(self) -> list[Any]:
        """What `_read_line` reads of main's own items: their `StoredItem` columns, when
        each was written and expires, and whether it is a user message (`_flagged`)."""
        items = self._schema.items
        stored = self._schema.item_columns(with_id=False).selected_columns
        columns = [*stored, items.c.created_at, items.c.expires_at]
        role = self._lines.json_role(items.c.payload)
        if role is not None:
            columns.append(func.coalesce(role == "user", False).label("is_user"))
        return columns

    def _pages(
        self, conn: Connection, page: Prepared, params: dict[str, Any], consistent: bool
    ) -> tuple[Iterable[Sequence[Any]], int]:
        """PostgreSQL: the rows `page` reads, made as they are iterated, and how many. It
        reads them a page at a time: `MAIN_PAGE` rows from the place `after`, as an array
        per column, the first the place (asyncpg then makes no record per row, see
        `Statements.read_page`). More than one page, not `consistent`: `MorePages`."""
        pages: list[Any] = []
        after = -1
        while True:
            [arrays] = page.run(conn, params | {"after": after})
            if arrays[0] is None:
                break
            pages.append(arrays)
            if len(arrays[0]) < MAIN_PAGE:
                break
            if not consistent:
                raise MorePages()
            after = max(arrays[0])
        return _drained(pages), sum(len(arrays[0]) for arrays in pages)

    @prepared
    def _main_page(self) -> ClauseElement:
        """The `_pages` of main's own items (`_main_columns`), by their places."""
        items = self._schema.items
        where = items.c.session_pk == bindparam("session_pk", type_=items.c.session_pk.type)
        return _arrays(select(*self._main_columns).where(where), items.c.seq)

    def _line_page(self, users_only: bool) -> Prepared:
        """The `_pages` of a branch's live items (or its user messages), by the places of
        its references: each the place, then as `_line_items` lays it out past its id."""
        return self._user_pages if users_only else self._all_pages

    @prepared
    def _all_pages(self) -> ClauseElement:
        return self._paged_line(users_only=False)

    @prepared
    def _user_pages(self) -> ClauseElement:
        return self._paged_line(users_only=True)

    def _paged_line(self, *, users_only: bool) -> ClauseElement:
        """`_line_page`'s statement: `_line_items`, each reference's place in its item's
        id's stead."""
        items, refs = self._schema.items, self._schema.branch_items
        line = self._line_items(
            bindparam("branch_pk", type_=refs.c.branch_pk.type),
            bindparam("now", type_=items.c.expires_at.type),
            users_only=users_only,
        )
        placed = line.with_only_columns(refs.c.seq, *line.selected_columns[1:])
        return _arrays(placed, refs.c.seq)

    def _line_columns(self, found: Iterable[Any]) -> LineItems:
        """Rows of `_line_items` (or of `_line_page`) as `LineItems`."""
        width = self._schema.width
        line = LineItems([], [], [], [])
        for row in found:
            line.rows.append(row[1:width])
            line.turns.append(row[width])
            line.users.append(bool(row[width + 1]))
            line.created.append(row[width + 2])
        return line

    async def read_branch(self, key: SessionKey, name: str, limit: int | None) -> list[Any] | Gone:
        """A branch's live items in order (the latest `limit`), as rows laid out like
        `StoredItem`, or `GONE`; never main. One prepared statement, unless it finds nothing."""
        all_rows, tail = self._branch_reads

        def work(conn: Connection) -> list[Any] | Gone:
            params: dict[str, Any] = {
                "session_hash": key.hash,
                "name": name,
                "now": self._schema.now(),
            }
            if limit is None:
                rows = all_rows.run(conn, params)
            else:
                rows = tail.run(conn, params | {"limit": limit})[::-1]
            if rows:
                return rows
            session_pk = conn.execute(self._schema.session_pk(key)).scalar_one_or_none()
            alive = (
                session_pk is not None and self._lines.branch_pk(conn, session_pk, name) is not None
            )
            return rows if alive else GONE

        return await self._schema.db.read(work)

    @cached_property
    def _branch_reads(self) -> tuple[Prepared, Prepared]:
        """A live branch's live items, all of them in order, or the latest `limit`."""
        items, refs, branches, sessions = (
            self._schema.items,
            self._schema.branch_items,
            self._schema.branches,
            self._schema.sessions,
        )
        branch_pk = (
            select(branches.c.id)
            .join(sessions, sessions.c.id == branches.c.session_pk)
            .where(
                sessions.c.session_hash == bindparam("session_hash"),
                self._schema.equals(branches.c.name, bindparam("name")),
                branches.c.deleted_at.is_(None),
            )
            .scalar_subquery()
        )
        now = bindparam("now", type_=items.c.expires_at.type)
        stored = (
            self._schema.item_columns(with_id=False)
            .join(refs, refs.c.item_pk == items.c.id)
            .where(
                refs.c.branch_pk == branch_pk,
                or_(items.c.expires_at.is_(None), items.c.expires_at > now),
            )
        )
        latest = stored.order_by(refs.c.seq.desc()).limit(bindparam("limit"))
        return Prepared(stored.order_by(refs.c.seq)), Prepared(latest)

    async def line_items(
        self, key: SessionKey, name: str, opened: Opened, *, users_only: bool = False
    ) -> LineItems | Gone:
        """Every live item of a branch (main included) with its turn, or `GONE`. Read in one
        unit of work, decoded after it."""

        def work(
            conn: Connection, session_pk: Any, branch_pk: Any, consistent: bool
        ) -> _LineRead | None:
            if not session_pk:
                return None
            return self._read_line(
                conn, session_pk, branch_pk, users_only=users_only, consistent=consistent
            )

        read = await self._paged_on_line(key, name, work, opened)
        if isinstance(read, Gone):
            return read
        if read is None:
            return LineItems([], [], [], [])
        return await off_loop(read.size, self._made, read, opened, users_only)

    async def branch_summaries(self, key: SessionKey, opened: Opened) -> list[BranchSummary]:
        """The branches that hold live items, main first if it does, then by creation."""

        def work(
            conn: Connection, session_pk: Any, main_pk: Any, consistent: bool
        ) -> list[BranchSummary] | _LineRead:
            if session_pk is None:
                return []
            if main_pk is None:  # never branched: main only, summed here or decoded after
                if self._flagged:
                    return self._unbranched_summary(conn, session_pk)
                return self._read_line(
                    conn, session_pk, None, users_only=False, consistent=consistent
                )
            found = self._summaries(conn, session_pk)
            found.insert(0, self._main_summary(conn, session_pk, main_pk))
            return [summary for summary in found if summary.items]

        found = await self._paged_on_line(key, MAIN, work, opened)
        if not isinstance(found, _LineRead):  # summed by the database
            return found
        main = await off_loop(found.size, self._made, found, opened, False)
        if not main.rows:
            return []
        return [BranchSummary(MAIN, len(main.rows), sum(main.users), main.created[0])]

    async def _paged_on_line(
        self, key: SessionKey, name: str, work: LineWork[T], opened: Opened
    ) -> T:
        """`Lines.on_line`, again in one snapshot if `work` read a line of more than one
        page (`MorePages`), so that its pages agree."""
        try:
            return await self._lines.on_line(key, name, work, opened)
        except MorePages:
            return await self._lines.on_line(key, name, work, opened, snapshot=True)

    def _unbranched_summary(self, conn: Connection, session_pk: int) -> list[BranchSummary]:
        """The main line of a session never branched, if it holds live items, summed by the
        database, which tells its user messages where it reads their JSON (`_flagged`)."""
        items = self._schema.items
        role = self._lines.json_role(items.c.payload)
        held = func.coalesce(func.sum(case((role == "user", 1), else_=0)), 0)
        count, user_count, first = conn.execute(
            select(func.count(), held, func.min(items.c.created_at)).where(
                items.c.session_pk == session_pk, self._schema.live(self._schema.now())
            )
        ).one()
        return [BranchSummary(MAIN, count, int(user_count), first)] if count else []

    def _main_summary(self, conn: Connection, session_pk: int, main_pk: int) -> BranchSummary:
        schema = self._schema
        items, refs, live = schema.items, schema.branch_items, schema.live(schema.now())
        count, first = conn.execute(
            select(func.count(), func.min(items.c.created_at)).where(
                items.c.session_pk == session_pk, live
            )
        ).one()
        users = conn.execute(
            select(func.count())
            .select_from(refs.join(items, items.c.id == refs.c.item_pk))
            .where(refs.c.branch_pk == main_pk, refs.c.is_user, live)
        ).scalar_one()
        return BranchSummary(MAIN, count, users, first)

    async def other_summaries(self, key: SessionKey) -> list[BranchSummary]:
        """The branches besides main that hold live items, oldest first (counted by the
        database: nothing is read of the items)."""

        def work(conn: Connection) -> list[BranchSummary]:
            session_pk = conn.execute(self._schema.session_pk(key)).scalar_one_or_none()
            return [] if session_pk is None else self._summaries(conn, session_pk)

        return await self._schema.db.read(work)

    def _summaries(self, conn: Connection, session_pk: int) -> list[BranchSummary]:
        branches, refs, items = self._schema.branches, self._schema.branch_items, self._schema.items
        users = func.sum(case((refs.c.is_user, 1), else_=0))
        query = (
            select(branches.c.name, func.count(), users, branches.c.created_at)
            .select_from(
                branches.join(refs, refs.c.branch_pk == branches.c.id).join(
                    items, items.c.id == refs.c.item_pk
                )
            )
            .where(
                branches.c.session_pk == session_pk,
                branches.c.name != MAIN,
                branches.c.deleted_at.is_(None),
                self._schema.live(self._schema.now()),
            )
            .group_by(branches.c.id, branches.c.name, branches.c.created_at)
            .order_by(branches.c.created_at, branches.c.id)
        )
        return [
            BranchSummary(row[0], row[1], int(row[2] or 0), row[3]) for row in conn.execute(query)
        ]

    async def branch_state(self, key: SessionKey, name: str) -> bool | Gone:
        """Whether live branch `name` (not main) holds an item; `GONE` if it is not live."""
        refs = self._schema.branch_items

        def work(conn: Connection, session_pk: Any, branch_pk: Any, consistent: bool) -> bool:
            return bool(
                conn.execute(select(exists().where(refs.c.branch_pk == branch_pk))).scalar()
            )

        return await self._lines.on_line(key, name, work, None)

    # -- writing ----------------------------------------------------------------------------

    def _insert_owned(
        self,
        conn: Connection,
        owner_pk: int,
        first: int,
        new: Sequence[NewItem],
        ttl: Any,
        checked: str | None,
    ) -> list[int]:
        """Insert items (and their keys) under `owner_pk` at `first`..., as an append does
        (`checked`: the owner key the claim checked); their pks, in order."""
        now = self._schema.now()
        expires_at = now + ttl if ttl else None
        self._schema.insert_items(conn, owner_pk, first, new, now, expires_at, checked=checked)
        placed = {"owner_pk": owner_pk, "first": first, "last": first + len(new) - 1}
        return list(conn.execute(self._placed_query, placed).scalars())

    @cached_property
    def _placed_query(self) -> Any:
        """The pks of an owner's items at places `first`..`last`, in order."""
        items = self._schema.items
        return (
            select(items.c.id)
            .where(
                items.c.session_pk == bindparam("owner_pk"),
                items.c.seq.between(bindparam("first"), bindparam("last")),
            )
            .order_by(items.c.seq)
        )

    def append_in(
        self,
        conn: Connection,
        key: SessionKey,
        name: str,
        build: Callable[[int], Sequence[NewItem]],
        flags: list[bool],
        ttl: timedelta | None,
    ) -> tuple[int, int] | Gone:
        """Append to branch `name` (not main) under the session's lock: (session pk, branch
        pk), or `GONE`."""
        refs = self._schema.branch_items
        claimed = self._schema.claim(conn, key, len(flags), self._schema.now())
        branch_pk = self._lines.branch_pk(conn, claimed.id, name)
        companion = self._lines.companion(conn, key, claimed.id)
        if branch_pk is None or companion is None:
            return GONE
        first = claimed.next_seq - len(flags) + 1
        new = built_rows(conn, build, first, len(flags))
        pks = self._insert_owned(conn, companion, first, new, ttl, claimed.checked)
        last = self._lines.last_ref(conn, branch_pk)
        turn = last.turn if last else self._lines.first_turn(conn, branch_pk)
        conn.execute(
            refs.insert(),
            [
                {"branch_pk": branch_pk, "seq": first + i, "item_pk": pk, "turn": n, "is_user": f}
                for i, (pk, f, n) in enumerate(
                    zip(pks, flags, turn_numbers(flags, turn), strict=True)
                )
            ],
        )
        return claimed.id, branch_pk

    def _remove_tail(
        self, conn: Connection, key: SessionKey, session_pk: int, name: str, opened: Opened
    ) -> tuple[Any, int, int] | Gone | None:
        """Take the latest live item off a line: (its row, branch pk, turn), None if empty.

        Off the main line, an item another branch holds moves to the companion row (its
        search index goes: only the main line is searched); off a branch, an item goes when
        no line holds it any more. Either way its key goes with it.
        """
        items, refs, now = self._schema.items, self._schema.branch_items, self._schema.now()
        if name == MAIN:  # a main line with its turn structure (see `pop_line`)
            branch_pk = self._lines.main_pk(conn, session_pk, now)
            self._lines.sync_main(conn, session_pk, branch_pk, opened)
            query = self._schema.item_columns().add_columns(items.c.session_pk)
            query = query.where(items.c.session_pk == session_pk, self._schema.live(now))
            row = conn.execute(query.order_by(items.c.seq.desc()).limit(1)).one_or_none()
        else:
            found = self._lines.branch_pk(conn, session_pk, name)
            if found is None:
                return GONE
            branch_pk = found
            query = self._line_items(branch_pk, self._schema.now())
            query = query.add_columns(items.c.session_pk)
            row = conn.execute(query.order_by(refs.c.seq.desc()).limit(1)).one_or_none()
        if row is None:
            return None
        placed = (refs.c.branch_pk == branch_pk, refs.c.seq == row.seq)
        ref = conn.execute(select(refs.c.turn, refs.c.is_user).where(*placed)).one_or_none()
        conn.execute(delete(refs).where(*placed))
        if name == MAIN and ref is not None:
            self._lines.lose(conn, session_pk, branch_pk, row.seq, bool(ref.is_user))
        held = conn.execute(select(exists().where(refs.c.item_pk == row.id))).scalar()
        on_main = row.session_pk == session_pk
        if name == MAIN and held:
            self._to_companion(conn, key, session_pk, row.id)
        elif not held and (name == MAIN or not on_main):
            conn.execute(delete(items).where(items.c.id == row.id))
        return row, branch_pk, ref.turn if ref is not None else -1

    def _to_companion(self, conn: Connection, key: SessionKey, session_pk: int, pk: int) -> None:
        companion = self._lines.companion(conn, key, session_pk, self._schema.now())
        conn.execute(delete(self._schema.index).where(self._schema.index.c.item_pk == pk))
        conn.execute(
            update(self._schema.items)
            .where(self._schema.items.c.id == pk)
            .values(session_pk=companion)
        )

    def _drop_empty_turn_usage(self, conn: Connection, branch_pk: int, turn: int) -> None:
        """A turn with no item left on its branch loses its usage row."""
        refs, usage = self._schema.branch_items, self._schema.turn_usage
        left = exists().where(refs.c.branch_pk == branch_pk, refs.c.turn == turn)
        if not conn.execute(select(left)).scalar():
            conn.execute(delete(usage).where(usage.c.branch_pk == branch_pk, usage.c.turn == turn))

    async def pop_line(
        self,
        key: SessionKey,
        name: str,
        decode: Callable[[SessionKey, StoredItem], T],
        opened: Opened,
    ) -> T | Gone | None:
        """Remove and return the latest live item of a line, `decode(key with its owner,
        row)`; `GONE` for a dead branch."""
        if name == MAIN and self._schema.db.dialect_name == "postgresql":
            taken = await self._schema.db.write(
                lambda conn: self._pop_unlocked(conn, key, decode),
                session_id=key.session_id,
                one_statement=True,
            )
            if not isinstance(taken, _Locked):
                return taken

        def work(conn: Connection) -> T | Gone | None:
            taken = take(conn)
            if taken is None or isinstance(taken, Gone):
                raise Unchanged(taken)  # nothing taken: no activity (the lock's touch undone)
            return taken

        def take(conn: Connection) -> T | Gone | None:
            if name == MAIN:  # one statement locks and says whether the session branched
                lines = self._lines.lock_lines(conn, key)
                if lines is None:
                    return None
                session_pk = lines.session_pk
                if not lines.branched:
                    return self._pop_unbranched(conn, key, lines, decode)
            else:
                found = self._schema.lock_existing(conn, key, self._schema.now())
                if found is None:
                    return GONE
                session_pk = found
            taken = self._remove_tail(conn, key, session_pk, name, opened)
            if taken is None or isinstance(taken, Gone):
                return taken
            row, branch_pk, turn = taken
            self._drop_empty_turn_usage(conn, branch_pk, turn)
            # Decoded inside the transaction: a corrupt row raises and the removal rolls back.
            return decode(self._schema.owned(conn, key), self._schema.stored_of(row))

        return await self._schema.db.write(work, session_id=key.session_id, small=True)

    def _pop_unlocked(
        self, conn: Connection, key: SessionKey, decode: Callable[[SessionKey, StoredItem], T]
    ) -> T | _Locked | None:
        """PostgreSQL: a session that never branched pops without its lock, where no BEGIN
        and COMMIT are needed (`Database.write`'s `one_statement`). Its latest item is read
        with the version of its row and decoded (a corrupt row raises, and nothing
        changed), then removed by one statement that commits by itself if that version
        still stands (`Lines.take_unchanged`); if it does not, that statement's own view
        of the session is the next try's. The statement also reads the session as it
        leaves it, which this store keeps: the next pop of the session starts from there,
        in one round trip instead of two (`_left`; its statement's checks make a stale one
        cost nothing but the read it saved). `LOCKED`: a branched session, or one written
        to all along, pops under its lock."""
        seen = self._left.pop(key.hash, None)  # never branched, with an item
        remembered = seen is not None
        if seen is None:
            seen = self._lines.peek(conn, key, self._schema.now())
        for _ in range(UNLOCKED_TRIES):
            if seen is None or seen.stored is None:
                return None
            if seen.branched:
                return LOCKED
            try:
                item = decode(self._schema.with_owner(key, seen.user_id), seen.stored)
            except AgentsSQLAlchemyError:
                if not remembered:
                    raise
                # What this store remembered may be out of date: read the session as it is.
                remembered, seen = False, self._lines.peek(conn, key, self._schema.now())
                continue
            now = self._schema.now()
            removed, seen = self._lines.take_unchanged(conn, key, seen, is_user(item), now)
            remembered = False
            if removed:
                self._leave(key, seen)
                return item
        return LOCKED

    def forget_remembered(self) -> None:
        """Forget how the pops left every session (a removal in an encrypted store: what
        is kept holds a sealed item, which the store's key still opens)."""
        self._left = {}

    def _leave(self, key: SessionKey, left: Peeked | None) -> None:
        """Remember the session as a pop left it, if it has an item and it is small."""
        stored = None if left is None else left.stored
        if stored is not None and len(stored.body or b"") <= ITEM_BYTES:
            add_bounded(self._left, {key.hash: left}, SESSIONS_REMEMBERED)

    def _pop_unbranched(
        self,
        conn: Connection,
        key: SessionKey,
        lines: LockedSession,
        decode: Callable[[SessionKey, StoredItem], T],
    ) -> T | None:
        """A session that never branched pops as it always did (with the append path's
        prepared statements): no line but main can hold its items. With usage recorded, the
        main line's count of user turns loses the item (`Lines.popped`)."""
        stored = self._schema.take_last_live(conn, lines.session_pk, self._schema.now())
        if stored is None:
            return None
        # Decoded inside the transaction: a corrupt row raises and the delete rolls back.
        item = decode(self._schema.with_owner(key, lines.user_id), stored)
        if lines.main_pk is not None:
            self._lines.popped(conn, lines.session_pk, lines.main_pk, stored.seq, is_user(item))
        return item

    async def clear_lines(self, key: SessionKey) -> int:
        """Delete every item of every line, and the usage; branch names stay reserved."""

        def work(conn: Connection) -> int:
            now = self._schema.now()
            session_pk = self._schema.lock_existing(conn, key, now)
            if session_pk is None:
                return 0
            items = self._schema.items
            removed = conn.execute(delete(items).where(items.c.session_pk == session_pk)).rowcount
            main_pk = self._lines.branch_pk(conn, session_pk, MAIN)
            if main_pk is None:
                if not removed:
                    raise Unchanged(0)  # an empty session cleared: no activity
                return int(removed)
            conn.execute(count_again(self._schema, session_pk))
            branches = self._schema.branches
            companion = self._lines.companion(conn, key, session_pk)
            if companion is not None:
                conn.execute(delete(items).where(items.c.session_pk == companion))
            usage = self._schema.turn_usage
            conn.execute(delete(usage).where(usage.c.session_pk == session_pk))
            conn.execute(
                update(branches)
                .where(branches.c.session_pk == session_pk, branches.c.name != MAIN)
                .where(branches.c.deleted_at.is_(None))
                .values(deleted_at=now)
            )
            return int(removed)

        return await self._schema.db.write(work, session_id=key.session_id)

    # -- branches ---------------------------------------------------------------------------

    async def create_branch(
        self,
        key: SessionKey,
        source: str,
        turn: int,
        name: str | None,
        base: str,
        opened: Opened,
    ) -> tuple[str, str]:
        """A new branch with the source's items before user turn `turn`: (name, source).

        `name` None takes `base`, or `base_2`, `base_3`... whichever was never used. A source
        branch deleted meanwhile means the main line, as for every implicit branch.
        """

        def work(conn: Connection) -> tuple[str, str]:
            now = self._schema.now()
            session_pk = self._schema.lock_existing(conn, key, now)
            source_pk = self._lines.branch_pk(conn, session_pk, source) if source != MAIN else None
            used = source if source_pk is not None else MAIN
            if session_pk is not None and source_pk is None:
                source_pk = self._lines.main_pk(conn, session_pk, now)
                self._lines.sync_main(conn, session_pk, source_pk, opened)
            refs, items = self._schema.branch_items, self._schema.items
            opening = (  # a live user message: an expired one is no turn of the history
                select(refs.c.seq)
                .join(items, items.c.id == refs.c.item_pk)
                .where(refs.c.branch_pk == source_pk, refs.c.turn == turn, refs.c.is_user)
                .where(self._schema.live(now))
            )
            if session_pk is None or conn.execute(opening).first() is None:
                raise BranchError(f"Turn {turn} does not contain a user message in branch '{used}'")
            branch_pk, chosen = self._reserve(conn, session_pk, name, base, now, turn - 1)
            self._lines.companion(conn, key, session_pk, now)
            copied = select(
                literal(branch_pk), refs.c.seq, refs.c.item_pk, refs.c.turn, refs.c.is_user
            ).where(refs.c.branch_pk == source_pk, refs.c.turn < turn)
            columns = ["branch_pk", "seq", "item_pk", "turn", "is_user"]
            conn.execute(refs.insert().from_select(columns, copied))
            return chosen, used

        return await self._schema.db.write(work, session_id=key.session_id)

    def _reserve(
        self,
        conn: Connection,
        session_pk: int,
        name: str | None,
        base: str,
        now: datetime,
        before: int,
    ) -> tuple[int, str]:
        """Insert the branch row under a name this session never used; its items, once it
        holds none, are numbered after turn `before` (`turns`)."""
        branches = self._schema.branches
        taken = {
            MAIN,
            *conn.execute(
                select(branches.c.name).where(branches.c.session_pk == session_pk)
            ).scalars(),
        }
        if name is not None and name in taken:
            raise BranchError(f"Branch ID '{name}' has already been used. Choose a new branch ID.")
        chosen, suffix = name or base, 1
        while chosen in taken:
            suffix += 1
            chosen = f"{base}_{suffix}"
        made = branches.insert().values(
            session_pk=session_pk, name=chosen, created_at=now, turns=before
        )
        return inserted(conn, made), chosen

    async def has_branches(self, key: SessionKey) -> bool:
        """Whether the session has a live branch besides main that holds items (`branched`)."""
        query = branched(self._schema, self._schema.session_pk(key).scalar_subquery())
        return bool(await self._schema.db.read(lambda conn: conn.execute(query).scalar()))

    async def delete_branch(self, key: SessionKey, name: str) -> int | None:
        """Delete a branch (not main) that holds items; how many items went with it (those
        no line holds any more), None if there is no such branch.

        Its references and usage go; its row stays, deleted, so the name is never used again.
        """

        def work(conn: Connection) -> int | None:
            now = self._schema.now()
            session_pk = self._schema.lock_existing(conn, key, now)
            branch_pk = self._lines.branch_pk(conn, session_pk, name) if session_pk else None
            refs, items, branches = (
                self._schema.branch_items,
                self._schema.items,
                self._schema.branches,
            )
            holds = exists().where(refs.c.branch_pk == branch_pk)
            if session_pk is None or branch_pk is None or not conn.execute(select(holds)).scalar():
                return None
            companion = self._lines.companion(conn, key, session_pk)
            ours = select(refs.c.item_pk).where(refs.c.branch_pk == branch_pk)
            elsewhere = exists().where(refs.c.item_pk == items.c.id, refs.c.branch_pk != branch_pk)
            removed = conn.execute(
                delete(items).where(
                    items.c.session_pk == companion, items.c.id.in_(ours), ~elsewhere
                )
            ).rowcount
            conn.execute(delete(refs).where(refs.c.branch_pk == branch_pk))
            usage = self._schema.turn_usage
            conn.execute(delete(usage).where(usage.c.branch_pk == branch_pk))
            conn.execute(update(branches).where(branches.c.id == branch_pk).values(deleted_at=now))
            return int(removed)

        return await self._schema.db.write(work, session_id=key.session_id)


def _arrays(query: Select[Any], place: Any) -> Select[Any]:
    """`query`'s next `MAIN_PAGE` rows after `place` `after`, in one row of an array per
    column (see `Branches._pages`)."""
    after = bindparam("after", type_=place.type)
    page = query.where(place > after).order_by(place).limit(MAIN_PAGE).subquery()
    return select(*map(func.array_agg, page.c))


class _LineRead(NamedTuple):
    """A line's rows as a unit of work read them (`Branches._read_line`), `size` of them,
    made into `LineItems` after it: decoding holds no lock or connection. `counters`: main's
    (`Lines.counters`) where its turns are derived from its own items, read at `now`; None
    for a branch's references, numbered already."""

    rows: Iterable[Sequence[Any]]
    size: int
    counters: tuple[int, int] | None
    now: datetime


def _plain_rows(result: Iterable[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """A result's rows as plain tuples, which the garbage collector stops tracking (a row of
    SQLAlchemy's it tracks, and walks at every full collection while it is held)."""
    return [tuple(row) for row in result]


def _drained(pages: list[Any]) -> Iterator[tuple[Any, ...]]:
    """The rows of PostgreSQL's pages of arrays, each page let go once its rows are made."""
    while pages:
        yield from page_rows(pages.pop(0))


def _drop(rows: Iterable[Any]) -> None:
    """Let go of a line's rows read, in the worker thread that made them into items
    (`let_go`), not on the event loop with the unit's result. PostgreSQL's are no list but
    `_drained`, which lets go of its pages itself."""
    if isinstance(rows, list):
        let_go(rows)
