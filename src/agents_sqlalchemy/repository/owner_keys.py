"""Owner keys' rows: which keys each owner has, and what the database holds of each.

Example::

    rows = OwnerKeyRows(schema)
    await rows.add({"key_id": "o...", "owner": owner, "kept": wrapped, "kek_id": kek_id})
    live = await rows.live_of(owner)          # newest first
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import bindparam, delete, exists, select, update
from sqlalchemy.engine import Connection

from ..errors import OwnerKeyError
from .keyring import KeyringRows
from .schema import Schema

# Ids per IN (...) list: well under every dialect's bound-parameter limit.
IN_BATCH = 500
#: Where owner keys are kept, by whether it is outside the database.
_KEPT = {
    False: "in it (stores opened without owner_keys=)",
    True: "outside it (in an owner_keys= store: a KeyDirectory, a KMS)",
}


class OwnerKeyRows:
    """Rows of the owner keys table; the store's key-encryption key opens none of them
    unless the store keeps owner keys in the database (`kept` is then the wrapped key)."""

    def __init__(self, schema: Schema) -> None:
        self._schema = schema
        self._table = schema.owner_keys

    async def live_of(self, owner: str) -> list[Any]:
        """The owner's keys that are not retired, newest first."""
        table = self._table
        query = (
            select(table)
            .where(table.c.owner == owner, table.c.retired_at.is_(None))
            .order_by(table.c.created_at.desc(), table.c.key_id)
        )
        return await self._schema.db.read(lambda conn: list(conn.execute(query)))

    async def kept_outside(self, limit: int) -> list[str]:
        """Ids of up to `limit` keys the rows name as kept in an app's key store (none of
        them here), newest first."""
        table = self._table
        query = (
            select(table.c.key_id)
            .where(table.c.kept.is_(None))
            .order_by(table.c.created_at.desc(), table.c.key_id)
            .limit(limit)
        )
        return await self._schema.db.read(lambda conn: list(conn.execute(query).scalars()))

    async def named(self, key_ids: Iterable[str]) -> set[str]:
        """Which of these keys items still name (their data keys wrapped by them)."""
        items, wanted = self._schema.items, sorted(set(key_ids))

        def work(conn: Connection) -> set[str]:
            found = set[str]()
            for start in range(0, len(wanted), IN_BATCH):
                chunk = wanted[start : start + IN_BATCH]
                named = select(items.c.kek_id).where(items.c.kek_id.in_(chunk)).distinct()
                found |= set(conn.execute(named).scalars())
            return found

        return await self._schema.db.read(work)

    async def sealed_states(self, batch: int = IN_BATCH) -> AsyncIterator[bytes]:
        """Every session's sealed state, read `batch` sessions at a time (a scan: for a
        rotation, which is rare)."""
        keyring = KeyringRows(self._schema)
        upto = await keyring.last_session_id()
        after: int | None = 0
        while after is not None:
            states, after = await keyring.sealed_states(after, batch, upto)
            for _, state in states:
                yield state

    async def by_ids(self, key_ids: Iterable[str]) -> list[Any]:
        """The rows of these keys (those that still exist)."""
        return await self._schema.db.read(lambda conn: self._where_in(conn, "key_id", key_ids))

    async def retired(self, *, replaced: bool) -> list[Any]:
        """The retired keys that a live key replaces (a rotation's old ones), or that none
        does (`replaced=False`: left by a deletion, see `Owners.finish_erasures`)."""
        table, successor = self._table, self._table.alias("successor")
        live_successor = exists().where(
            successor.c.replaces == table.c.key_id, successor.c.retired_at.is_(None)
        )
        query = select(table).where(
            table.c.retired_at.is_not(None), live_successor if replaced else ~live_successor
        )
        return await self._schema.db.read(lambda conn: list(conn.execute(query)))

    async def of_owners(self, owners: Iterable[str]) -> list[Any]:
        """Every key of these owners, retired ones included."""
        return await self._schema.db.read(lambda conn: self._where_in(conn, "owner", owners))

    def _where_in(self, conn: Connection, column: str, values: Iterable[str]) -> list[Any]:
        wanted, found = sorted(set(values)), list[Any]()
        for start in range(0, len(wanted), IN_BATCH):
            chunk = wanted[start : start + IN_BATCH]
            found += conn.execute(select(self._table).where(self._table.c[column].in_(chunk)))
        return found

    async def add(self, row: dict[str, Any], *, sealing_kek: str | None) -> None:
        """Insert a new key's row; kept under the store's key `sealing_kek`, only while
        that key is the keyring's active one (a rotation may have retired it). Refused
        (`OwnerKeyError`) where the database keeps its owner keys the other way (in it, or
        outside it): a store opened with another `owner_keys=` than the others."""

        def work(conn: Connection) -> None:
            self._schema.refuse_retired_kek(conn, sealing_kek)
            # Any one row tells (the rows are all of one kind): `kek_id` is set where the key
            # is kept in the database. (A scan for one of the other kind read every row.)
            outside = row["kek_id"] is None  # where this store keeps its new key
            found = conn.execute(select(self._table.c.kek_id).limit(1)).first()
            if found is not None and (found[0] is None) != outside:
                raise OwnerKeyError(
                    f"this database keeps its owner keys {_KEPT[not outside]}, and this store "
                    f"{_KEPT[outside]}: open it with the same owner_keys= as the stores that "
                    "made them; nothing was written"
                )
            conn.execute(self._table.insert().values(created_at=self._schema.now(), **row))

        await self._schema.db.write(work)

    async def delete(self, key_ids: Iterable[str]) -> int:
        """Delete these keys' rows; how many there were."""
        wanted = sorted(set(key_ids))

        def work(conn: Connection) -> int:
            count = 0
            for start in range(0, len(wanted), IN_BATCH):
                chunk = wanted[start : start + IN_BATCH]
                gone = conn.execute(delete(self._table).where(self._table.c.key_id.in_(chunk)))
                count += int(gone.rowcount)
            return count

        return await self._schema.db.write(work)

    async def every(self) -> list[Any]:
        """Every owner key's row (a rotation's walk)."""
        query = select(self._table).order_by(self._table.c.created_at)
        return await self._schema.db.read(lambda conn: list(conn.execute(query)))

    async def retire(self, key_ids: Iterable[str]) -> None:
        """Retire these keys: from now on no write seals under them."""
        wanted, table, now = sorted(set(key_ids)), self._table, self._schema.now()

        def work(conn: Connection) -> None:
            for start in range(0, len(wanted), IN_BATCH):
                chunk = wanted[start : start + IN_BATCH]
                retiring = update(table).where(table.c.key_id.in_(chunk))
                conn.execute(retiring.values(retired_at=now))

        await self._schema.db.write(work)

    async def keyed_by(self, kek_id: str) -> list[Any]:
        """The keys the database keeps wrapped under the store's key `kek_id`."""
        table = self._table
        query = select(table).where(table.c.kek_id == kek_id)
        return await self._schema.db.read(lambda conn: list(conn.execute(query)))

    async def rekeep(
        self, rows: Sequence[Any], rewrap: Callable[[bytes], bytes], kek_id: str
    ) -> None:
        """Re-wrap the kept keys of `rows` under the store's key `kek_id` (a rotation)."""
        table = self._table

        def work(conn: Connection) -> None:
            statement = (
                update(table)
                .where(table.c.key_id == bindparam("k"))
                .values(kept=bindparam("kept"), kek_id=kek_id)
            )
            changes = [{"k": row.key_id, "kept": rewrap(bytes(row.kept))} for row in rows]
            if changes:
                conn.execute(statement, changes)

        await self._schema.db.write(work)
