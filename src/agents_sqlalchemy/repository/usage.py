"""Usage SQL: appends that record a run's token usage, and usage per turn, session, user, day.

A turn's usage row holds what the run's context last reported for that turn of that branch
(the SDK's `store_run_usage` semantics): recording it again replaces it, so a run recorded
as it goes and once more at its end counts once.

Example::

    usage = Usage(schema, items, lines, branches)
    await usage.record_usage(key, "main", {"requests": 1, ...}, opened)
    await usage.usage_by_day(user_id="alice", since=None, until=None)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, datetime, timedelta
from functools import cached_property
from typing import Any

from sqlalchemy import ColumnElement, Date, Table, bindparam, cast, func, select
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import Connection

from ..database.units import Unchanged
from ..turns import MAIN
from ..types import NewItem, SessionKey
from .branches import Branches
from .items import Items
from .lines import GONE, Gone, Lines, Opened
from .prepared import prepared
from .schema import SMALL, Schema, apart

USAGE_COLUMNS = ("requests", "input_tokens", "output_tokens", "total_tokens")
# What recording a turn's usage again replaces.
REPLACED = (*USAGE_COLUMNS, "input_details", "output_details")


class Usage:
    """Token usage per turn of a branch, written with the items or on its own."""

    def __init__(self, schema: Schema, items: Items, lines: Lines, branches: Branches) -> None:
        self._schema = schema
        self._items = items
        self._lines = lines
        self._branches = branches

    def _upsert(
        self, table: Table, values: dict[str, Any], key: list[Any], replaced: list[str]
    ) -> Any:
        """INSERT `values`, or on a duplicate `key` set the `replaced` columns to the new
        row's: ON CONFLICT on SQLite and PostgreSQL, ON DUPLICATE KEY on MySQL/MariaDB."""
        if self._schema.mysql:
            statement = mysql.insert(table).values(values)
            return statement.on_duplicate_key_update(
                {name: statement.inserted[name] for name in replaced}
            )
        insert = (
            postgresql.insert if self._schema.db.dialect_name == "postgresql" else sqlite.insert
        )
        upsert = insert(table).values(values)
        return upsert.on_conflict_do_update(
            index_elements=key, set_={name: upsert.excluded[name] for name in replaced}
        )

    def _record(
        self, conn: Connection, session_pk: int, branch_pk: int, values: dict[str, Any]
    ) -> bool:
        """Put `values` on a branch's current (latest) turn, as its structure says; False if
        it has none."""
        last = self._lines.last_ref(conn, branch_pk)
        if last is None:
            return False
        self._put_usage(conn, session_pk, branch_pk, last.turn, values)
        return True

    def _put_usage(
        self, conn: Connection, session_pk: int, branch_pk: int, turn: int, values: dict[str, Any]
    ) -> None:
        """One upsert of a turn's usage row."""
        now = self._schema.now()
        row: dict[str, Any] = {"session_pk": session_pk, "branch_pk": branch_pk, "turn": turn}
        row |= {"created_at": now, "updated_at": now} | dict.fromkeys(REPLACED)
        self._usage_upsert.run(conn, row | values)

    @prepared
    def _usage_upsert(self) -> Any:
        """Insert a turn's usage, or replace its figures (the first record's time stays)."""
        usage = self._schema.turn_usage
        named = ("session_pk", "branch_pk", "turn", "created_at", "updated_at", *REPLACED)
        values = {name: bindparam(name, type_=usage.c[name].type) for name in named}
        key = [usage.c.branch_pk, usage.c.turn]
        return self._upsert(usage, values, key, [*REPLACED, "updated_at"])

    def _record_main(
        self,
        conn: Connection,
        session_pk: int,
        last: int,
        flags: list[bool],
        usage: dict[str, Any],
        opened: Opened,
    ) -> bool:
        """Bring the main line's turns up to place `last` and put `usage` on its current
        turn: counted on main's row while the session never branched (one row per turn, none
        per item), else through its structure."""
        placed = self._lines.turn_now(conn, session_pk, last, flags, opened)
        if placed is not None:
            self._put_usage(conn, session_pk, *placed, usage)
            return True
        main_pk = self._lines.main_pk(conn, session_pk, self._schema.now())
        self._lines.sync_main(conn, session_pk, main_pk, opened)
        return self._record(conn, session_pk, main_pk, usage)

    async def append_with_usage(
        self,
        key: SessionKey,
        name: str,
        build: Callable[[int], Sequence[NewItem]],
        flags: list[bool],
        ttl: timedelta | None,
        usage: dict[str, Any] | None,
        opened: Opened,
        *,
        importing: bool = False,
    ) -> bool:
        """Append to a line and, with `usage`, record it on the line's current turn, in one
        transaction; False (nothing written) when branch `name` is gone, or, `importing`,
        when the session is no longer marked as being imported (deleted meanwhile: the
        append made it again, and is rolled back)."""

        def work(conn: Connection) -> bool:
            if name != MAIN:
                appended = self._branches.append_in(conn, key, name, build, flags, ttl)
                if isinstance(appended, Gone):
                    raise Unchanged(False)  # nor the session's row, if the lock made it
                if usage is not None:
                    self._record(conn, *appended, usage)
            else:
                count = len(flags)
                session_pk, next_seq = self._items.append_in(conn, key, count, build, ttl)
                if usage is not None:
                    self._record_main(conn, session_pk, next_seq, flags, usage, opened)
            # Checked on the row the append has locked (as every write takes its locks).
            if importing and not self._lines.marked(conn, key):
                raise Unchanged(False)
            return True

        small = len(flags) <= SMALL
        return await self._schema.db.write(work, session_id=key.session_id, small=small)

    async def begin_after(
        self, key: SessionKey, turns: int, usage: dict[int, dict[str, Any]], name: str = MAIN
    ) -> bool:
        """A line of an imported session that holds no item yet: numbered after `turns`
        turns it does not hold (`Lines.number_after`), with the usage of those turns (by
        turn); False if the session is no longer marked as being imported (deleted
        meanwhile)."""

        def work(conn: Connection) -> bool:
            session_pk = self._lines.lock(conn, key)
            if session_pk is None or not self._lines.marked(conn, key):
                return False
            line_pk = self._lines.number_after(conn, session_pk, turns, name)
            for turn, values in sorted(usage.items()):
                self._put_usage(conn, session_pk, line_pk, turn, values)
            return True

        return await self._schema.db.write(work, session_id=key.session_id)

    async def record_usage(
        self, key: SessionKey, name: str, values: dict[str, Any], opened: Opened
    ) -> bool | Gone:
        """Record usage on a line's current turn: False if it has no turn, `GONE` if the
        branch is."""

        def work(conn: Connection) -> bool | Gone:
            session_pk = self._lines.lock(conn, key)
            if name != MAIN:
                branch_pk = self._lines.branch_pk(conn, session_pk, name) if session_pk else None
                if session_pk is None or branch_pk is None:
                    return GONE
                return self._record(conn, session_pk, branch_pk, values)
            if session_pk is None:
                return False
            last = conn.execute(self._main_end_query, {"session_pk": session_pk}).one()
            if last.seq is None:  # no item: no turn to put it on
                return False
            return self._record_main(conn, session_pk, last.next_seq, [], values, opened)

        return await self._schema.db.write(work, session_id=key.session_id)

    @cached_property
    def _main_end_query(self) -> Any:
        """The session's last place handed out, and its last item's (None: it has none)."""
        sessions, items = self._schema.sessions, self._schema.items
        latest = select(func.max(items.c.seq)).where(items.c.session_pk == sessions.c.id)
        return select(sessions.c.next_seq, latest.scalar_subquery().label("seq")).where(
            sessions.c.id == bindparam("session_pk")
        )

    async def turn_usage(
        self, key: SessionKey, name: str, turn: int | None
    ) -> list[dict[str, Any]] | Gone:
        """A branch's usage rows by turn (one turn's with `turn`), or `GONE`."""
        usage = self._schema.turn_usage
        columns = [usage.c.turn, *(usage.c[name] for name in USAGE_COLUMNS)]
        columns += [usage.c.input_details, usage.c.output_details]

        def work(
            conn: Connection, session_pk: Any, branch_pk: Any, consistent: bool
        ) -> list[dict[str, Any]]:
            query = select(*columns).where(usage.c.branch_pk == branch_pk)
            if turn is not None:
                query = query.where(usage.c.turn == turn)
            return [dict(row._mapping) for row in conn.execute(query.order_by(usage.c.turn))]

        return await self._lines.on_line(key, name, work, None)

    async def session_usage(self, key: SessionKey, name: str | None) -> dict[str, int] | Gone:
        """Sums and turn count of a session's usage: one branch's, or all branches'."""
        usage = self._schema.turn_usage
        sums = [func.sum(usage.c[column]) for column in USAGE_COLUMNS]
        query = select(*sums, func.count())

        def work(
            conn: Connection, session_pk: Any, branch_pk: Any, consistent: bool
        ) -> dict[str, int]:
            where = (
                usage.c.session_pk == session_pk if name is None else usage.c.branch_pk == branch_pk
            )
            row = conn.execute(query.where(where)).one()
            return {
                **{c: int(v or 0) for c, v in zip(USAGE_COLUMNS, row[:4], strict=True)},
                "turns": row[-1],
            }

        return await self._lines.on_line(key, name or MAIN, work, None)

    def _day(self) -> ColumnElement[Any]:
        created = self._schema.turn_usage.c.created_at
        if self._schema.db.dialect_name != "postgresql":  # naive UTC (text on SQLite, DATETIME)
            return func.date(created)
        return cast(func.timezone("UTC", created), Date)

    async def usage_by_day(
        self, *, user_id: str | None, since: datetime | None, until: datetime | None
    ) -> list[tuple[str | None, date, dict[str, int]]]:
        """Usage summed per owner and UTC day (of each turn's first record), by day."""
        usage, sessions = self._schema.turn_usage, self._schema.sessions
        day = self._day().label("day")
        sums = [func.sum(usage.c[column]) for column in USAGE_COLUMNS]
        query = (
            select(sessions.c.user_id, day, func.count(), *sums)
            .select_from(usage.join(sessions, sessions.c.id == usage.c.session_pk))
            .group_by(*apart(sessions.c.user_id, self._schema.mysql), day)
            .order_by(day, *apart(sessions.c.user_id, self._schema.mysql))
        )
        if user_id is not None:
            query = query.where(self._schema.equals(sessions.c.user_id, user_id))
        if since is not None:
            query = query.where(usage.c.created_at >= since)
        if until is not None:
            query = query.where(usage.c.created_at < until)

        def work(conn: Connection) -> list[tuple[str | None, date, dict[str, int]]]:
            return [
                (
                    row[0],
                    row[1] if isinstance(row[1], date) else date.fromisoformat(row[1]),
                    {
                        "turns": row[2],
                        **{c: int(v or 0) for c, v in zip(USAGE_COLUMNS, row[3:], strict=True)},
                    },
                )
                for row in conn.execute(query)
            ]

        return await self._schema.db.read(work)
