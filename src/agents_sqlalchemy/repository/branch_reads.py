"""Branch SQL that reads: a branch's items, a line's turns, the branches of a session.

A session that never branched has no turn structure, and reading its turns writes none:
they are derived in memory from its items (`_derived_main`).

Example::

    await repo.read_branch(key, "retry", limit=20)
    await repo.branch_summaries(key, is_user)
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from sqlalchemy import bindparam, case, exists, func, or_, select
from sqlalchemy.engine import Connection

from ..turns import MAIN, turn_numbers
from ..types import BranchItem, BranchSummary, SessionKey
from .branches import GONE, BranchOps, Gone, Opened
from .prepared import Prepared


class BranchReadOps(BranchOps):
    """Reads of branches and turns; the main line's structure is brought up to date first."""

    def _derived_main(self, conn: Connection, session_pk: int, opened: Opened) -> list[BranchItem]:
        """The main line's live items with their turns, derived in memory (numbered over
        every item, expired ones too, as the stored structure numbers them)."""
        items, now = self._items, self._now()
        query = self._item_columns().add_columns(items.c.created_at, items.c.expires_at)
        rows = conn.execute(query.where(items.c.session_pk == session_pk).order_by(items.c.seq))
        found = [(row, self._stored_of(row)) for row in rows]
        flags = opened([stored for _, stored in found])
        width = self._width
        return [
            BranchItem(turn, flag, row[width], stored)
            for (row, stored), flag, turn in zip(found, flags, turn_numbers(flags, 0), strict=True)
            if row[width + 1] is None or row[width + 1] > now
        ]

    def _branch_item(self, row: Any) -> BranchItem:
        width = self._width
        return BranchItem(row[width], bool(row[width + 1]), row[width + 2], self._stored_of(row))

    async def read_branch(self, key: SessionKey, name: str, limit: int | None) -> list[Any] | Gone:
        """A branch's live items in order (the latest `limit`), as rows laid out like
        `StoredItem`, or `GONE`; never main. One prepared statement, unless it finds nothing."""
        all_rows, tail = self._branch_reads

        def work(conn: Connection) -> list[Any] | Gone:
            params: dict[str, Any] = {"session_hash": key.hash, "name": name, "now": self._now()}
            if limit is None:
                rows = all_rows.run(conn, params)
            else:
                rows = tail.run(conn, params | {"limit": limit})[::-1]
            if rows:
                return rows
            session_pk = conn.execute(self._session_pk(key)).scalar_one_or_none()
            alive = session_pk is not None and self._branch_pk(conn, session_pk, name) is not None
            return rows if alive else GONE

        return await self._db.read(work)

    @cached_property
    def _branch_reads(self) -> tuple[Prepared, Prepared]:
        """A live branch's live items, all of them in order, or the latest `limit`."""
        items, refs, branches, sessions = (
            self._items,
            self._branch_items,
            self._branches,
            self._sessions,
        )
        branch_pk = (
            select(branches.c.id)
            .join(sessions, sessions.c.id == branches.c.session_pk)
            .where(
                sessions.c.session_hash == bindparam("session_hash"),
                branches.c.name == bindparam("name"),
                branches.c.deleted_at.is_(None),
            )
            .scalar_subquery()
        )
        now = bindparam("now", type_=items.c.expires_at.type)
        stored = (
            self._item_columns(with_id=False)
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
    ) -> list[BranchItem] | Gone:
        """Every live item of a branch (main included) with its turn, or `GONE`."""

        def work(conn: Connection, session_pk: Any, branch_pk: Any) -> list[BranchItem]:
            if branch_pk is None:
                found = self._derived_main(conn, session_pk, opened) if session_pk else []
                return [row for row in found if row.is_user or not users_only]
            query = self._line_items(branch_pk, users_only=users_only)
            rows = conn.execute(query.order_by(self._branch_items.c.seq)).all()
            return [self._branch_item(row) for row in rows]

        return await self.on_line(key, name, work, opened)

    async def branch_summaries(self, key: SessionKey, opened: Opened) -> list[BranchSummary]:
        """The branches that hold live items, main first if it does, then by creation."""

        def work(conn: Connection, session_pk: Any, main_pk: Any) -> list[BranchSummary]:
            if session_pk is None:
                return []
            if main_pk is None:  # never branched: main only, its turns read in memory
                main = self._derived_main(conn, session_pk, opened)
                if not main:
                    return []
                users = sum(row.is_user for row in main)
                return [BranchSummary(MAIN, len(main), users, main[0].created_at)]
            found = self._summaries(conn, session_pk)
            found.insert(0, self._main_summary(conn, session_pk, main_pk))
            return [summary for summary in found if summary.items]

        return await self.on_line(key, MAIN, work, opened)

    def _main_summary(self, conn: Connection, session_pk: int, main_pk: int) -> BranchSummary:
        items, refs, live = self._items, self._branch_items, self._live(self._now())
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

    def _summaries(self, conn: Connection, session_pk: int) -> list[BranchSummary]:
        branches, refs, items = self._branches, self._branch_items, self._items
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
                self._live(self._now()),
            )
            .group_by(branches.c.id, branches.c.name, branches.c.created_at)
            .order_by(branches.c.created_at, branches.c.id)
        )
        return [
            BranchSummary(row[0], row[1], int(row[2] or 0), row[3]) for row in conn.execute(query)
        ]

    async def branch_state(self, key: SessionKey, name: str) -> bool | Gone:
        """Whether live branch `name` (not main) holds an item; `GONE` if it is not live."""
        refs = self._branch_items

        def work(conn: Connection, session_pk: Any, branch_pk: Any) -> bool:
            return bool(
                conn.execute(select(exists().where(refs.c.branch_pk == branch_pk))).scalar()
            )

        return await self.on_line(key, name, work, None)
