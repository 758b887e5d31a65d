"""Branch SQL that writes: appends to a branch, removals off any line, branches made and
deleted. Every statement runs under the session's lock (its `next_seq` bump first).

An item leaves the database (and its key with it) only when no line holds it any more: off
the main line, an item a branch still holds moves to the session's companion row instead.

Example::

    name, source = await repo.create_branch(key, "main", 2, None, "draft", is_user)
    await repo.pop_line(key, name, decode, is_user)
    await repo.delete_branch(key, name)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any, TypeVar

from sqlalchemy import bindparam, delete, exists, literal, select, update
from sqlalchemy.engine import Connection

from ..errors import BranchError
from ..turns import MAIN, is_user, turn_numbers
from ..types import NewItem, SessionKey, StoredItem
from .branches import GONE, Gone, Opened
from .main_turns import Lines, MainTurnOps

T = TypeVar("T")


class BranchWriteOps(MainTurnOps):
    """Appends, removals and branch rows, each one transaction under the session's lock."""

    # -- writing ----------------------------------------------------------------------------

    def _insert_owned(
        self, conn: Connection, owner_pk: int, first: int, new: Sequence[NewItem], ttl: Any
    ) -> list[int]:
        """Insert items (and their keys) under `owner_pk` at `first`..., as an append does;
        their pks, in order."""
        now = self._now()
        self._insert_items(conn, owner_pk, first, new, now, now + ttl if ttl else None)
        placed = {"owner_pk": owner_pk, "first": first, "last": first + len(new) - 1}
        return list(conn.execute(self._placed_query, placed).scalars())

    @cached_property
    def _placed_query(self) -> Any:
        """The pks of an owner's items at places `first`..`last`, in order."""
        items = self._items
        return (
            select(items.c.id)
            .where(
                items.c.session_pk == bindparam("owner_pk"),
                items.c.seq.between(bindparam("first"), bindparam("last")),
            )
            .order_by(items.c.seq)
        )

    def _append_branch(
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
        refs = self._branch_items
        claimed = self._claim(conn, key, len(flags), self._now())
        branch_pk = self._branch_pk(conn, claimed.id, name)
        companion = self._companion(conn, key, claimed.id)
        if branch_pk is None or companion is None:
            return GONE
        first = claimed.next_seq - len(flags) + 1
        pks = self._insert_owned(conn, companion, first, build(first), ttl)
        last = conn.execute(self._last_ref_query, {"branch_pk": branch_pk}).one_or_none()
        turn = last.turn if last else 0
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
        items, refs, now = self._items, self._branch_items, self._now()
        if name == MAIN:  # a main line with its turn structure (see `pop_line`)
            branch_pk = self._main_pk(conn, session_pk, now)
            self._sync_main(conn, session_pk, branch_pk, opened)
            query = self._item_columns().add_columns(items.c.session_pk)
            query = query.where(items.c.session_pk == session_pk, self._live(now))
            row = conn.execute(query.order_by(items.c.seq.desc()).limit(1)).one_or_none()
        else:
            found = self._branch_pk(conn, session_pk, name)
            if found is None:
                return GONE
            branch_pk = found
            query = self._line_items(branch_pk).add_columns(items.c.session_pk)
            row = conn.execute(query.order_by(refs.c.seq.desc()).limit(1)).one_or_none()
        if row is None:
            return None
        placed = (refs.c.branch_pk == branch_pk, refs.c.seq == row.seq)
        turn = conn.execute(select(refs.c.turn).where(*placed)).scalar_one_or_none()
        conn.execute(delete(refs).where(*placed))
        held = conn.execute(select(exists().where(refs.c.item_pk == row.id))).scalar()
        on_main = row.session_pk == session_pk
        if name == MAIN and held:
            self._to_companion(conn, key, session_pk, row.id)
        elif not held and (name == MAIN or not on_main):
            conn.execute(delete(items).where(items.c.id == row.id))
        return row, branch_pk, turn if turn is not None else -1

    def _to_companion(self, conn: Connection, key: SessionKey, session_pk: int, pk: int) -> None:
        companion = self._companion(conn, key, session_pk, self._now())
        conn.execute(delete(self._index).where(self._index.c.item_pk == pk))
        conn.execute(update(self._items).where(self._items.c.id == pk).values(session_pk=companion))

    def _drop_empty_turn_usage(self, conn: Connection, branch_pk: int, turn: int) -> None:
        """A turn with no item left on its branch loses its usage row."""
        refs, usage = self._branch_items, self._turn_usage
        left = exists().where(refs.c.branch_pk == branch_pk, refs.c.turn == turn)
        if not conn.execute(select(left)).scalar():
            conn.execute(delete(usage).where(usage.c.branch_pk == branch_pk, usage.c.turn == turn))

    async def pop_line(
        self, key: SessionKey, name: str, decode: Callable[[StoredItem], T], opened: Opened
    ) -> T | Gone | None:
        """Remove and return the latest live item of a line; `GONE` for a dead branch."""

        def work(conn: Connection) -> T | Gone | None:
            if name == MAIN:  # one statement locks and says whether the session branched
                lines = self._lock_lines(conn, key)
                if lines is None:
                    return None
                session_pk = lines.session_pk
                if not lines.branched:
                    return self._pop_unbranched(conn, lines, decode)
            else:
                found = self._lock_existing(conn, key, self._now())
                if found is None:
                    return GONE
                session_pk = found
            taken = self._remove_tail(conn, key, session_pk, name, opened)
            if taken is None or isinstance(taken, Gone):
                return taken
            row, branch_pk, turn = taken
            self._drop_empty_turn_usage(conn, branch_pk, turn)
            # Decoded inside the transaction: a corrupt row raises and the removal rolls back.
            return decode(self._stored_of(row))

        return await self._db.write(work, session_id=key.session_id, small=True)

    def _pop_unbranched(
        self, conn: Connection, lines: Lines, decode: Callable[[StoredItem], T]
    ) -> T | None:
        """A session that never branched pops as it always did (with the append path's
        prepared statements): no line but main can hold its items. With usage recorded, the
        main line's count of user turns loses the item (`_popped`)."""
        stored = self._take_last_live(conn, lines.session_pk, self._now())
        if stored is None:
            return None
        # Decoded inside the transaction: a corrupt row raises and the delete rolls back.
        item = decode(stored)
        if lines.main_pk is not None:
            self._popped(conn, lines.session_pk, lines.main_pk, stored.seq, is_user(item))
        return item

    async def clear_lines(self, key: SessionKey) -> int:
        """Delete every item of every line, and the usage; branch names stay reserved."""

        def work(conn: Connection) -> int:
            now = self._now()
            session_pk = self._lock_existing(conn, key, now)
            if session_pk is None:
                return 0
            items = self._items
            removed = conn.execute(delete(items).where(items.c.session_pk == session_pk))
            main_pk = self._branch_pk(conn, session_pk, MAIN)
            if main_pk is None:
                return int(removed.rowcount)
            branches = self._branches
            conn.execute(
                update(branches).where(branches.c.id == main_pk).values(turns=0, counted=0)
            )
            companion = self._companion(conn, key, session_pk)
            if companion is not None:
                conn.execute(delete(items).where(items.c.session_pk == companion))
            usage = self._turn_usage
            conn.execute(delete(usage).where(usage.c.session_pk == session_pk))
            conn.execute(
                update(branches)
                .where(branches.c.session_pk == session_pk, branches.c.name != MAIN)
                .where(branches.c.deleted_at.is_(None))
                .values(deleted_at=now)
            )
            return int(removed.rowcount)

        return await self._db.write(work)

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
            now = self._now()
            session_pk = self._lock_existing(conn, key, now)
            source_pk = self._branch_pk(conn, session_pk, source) if source != MAIN else None
            used = source if source_pk is not None else MAIN
            if session_pk is not None and source_pk is None:
                source_pk = self._main_pk(conn, session_pk, now)
                self._sync_main(conn, session_pk, source_pk, opened)
            refs = self._branch_items
            opening = select(refs.c.seq).where(
                refs.c.branch_pk == source_pk, refs.c.turn == turn, refs.c.is_user
            )
            if session_pk is None or conn.execute(opening).first() is None:
                raise BranchError(f"Turn {turn} does not contain a user message in branch '{used}'")
            branch_pk, chosen = self._reserve(conn, session_pk, name, base, now)
            self._companion(conn, key, session_pk, now)
            copied = select(
                literal(branch_pk), refs.c.seq, refs.c.item_pk, refs.c.turn, refs.c.is_user
            ).where(refs.c.branch_pk == source_pk, refs.c.turn < turn)
            columns = ["branch_pk", "seq", "item_pk", "turn", "is_user"]
            conn.execute(refs.insert().from_select(columns, copied))
            return chosen, used

        return await self._db.write(work)

    def _reserve(
        self, conn: Connection, session_pk: int, name: str | None, base: str, now: datetime
    ) -> tuple[int, str]:
        """Insert the branch row under a name this session never used."""
        branches = self._branches
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
        made = branches.insert().values(session_pk=session_pk, name=chosen, created_at=now)
        return self._inserted(conn, made), chosen

    async def has_branches(self, key: SessionKey) -> bool:
        """Whether the session has a live branch besides main (one that may share items)."""
        branches = self._branches
        query = select(
            exists().where(
                branches.c.session_pk == self._session_pk(key).scalar_subquery(),
                branches.c.name != MAIN,
                branches.c.deleted_at.is_(None),
            )
        )
        return bool(await self._db.read(lambda conn: conn.execute(query).scalar()))

    async def delete_branch(self, key: SessionKey, name: str) -> bool:
        """Delete a branch (not main) that holds items; False if there is none such.

        Its references and usage go, and the items no line holds any more; its row stays,
        deleted, so the name is never used again.
        """

        def work(conn: Connection) -> bool:
            now = self._now()
            session_pk = self._lock_existing(conn, key, now)
            branch_pk = self._branch_pk(conn, session_pk, name) if session_pk else None
            refs, items, branches = self._branch_items, self._items, self._branches
            holds = exists().where(refs.c.branch_pk == branch_pk)
            if session_pk is None or branch_pk is None or not conn.execute(select(holds)).scalar():
                return False
            companion = self._companion(conn, key, session_pk)
            ours = select(refs.c.item_pk).where(refs.c.branch_pk == branch_pk)
            elsewhere = exists().where(refs.c.item_pk == items.c.id, refs.c.branch_pk != branch_pk)
            conn.execute(
                delete(items).where(
                    items.c.session_pk == companion, items.c.id.in_(ours), ~elsewhere
                )
            )
            conn.execute(delete(refs).where(refs.c.branch_pk == branch_pk))
            usage = self._turn_usage
            conn.execute(delete(usage).where(usage.c.branch_pk == branch_pk))
            conn.execute(update(branches).where(branches.c.id == branch_pk).values(deleted_at=now))
            return True

        return await self._db.write(work)
