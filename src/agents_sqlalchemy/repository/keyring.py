"""Keyring SQL: the key-encryption-key rows, re-wrapping data keys during a rotation, and
the scrub that leaves no bytes of destroyed keys in a SQLite file.

Example::

    keys = KeyringRows(schema)
    rows = await keys.keyring_rows()
    await keys.scrub()
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from sqlalchemy import bindparam, column, delete, func, select, table, update
from sqlalchemy.engine import Connection

from ..database.locks import advisory_lock
from .schema import Schema


class KeyringRows:
    """Rows of the keyring table, and the item keys and sealed states they wrap.

    Example::

        keyring = KeyringRows(schema)
        rows = await keyring.keyring_rows()
    """

    def __init__(self, schema: Schema) -> None:
        self._schema = schema

    def seal_with(self, kek_id: str | None) -> None:
        """The key-encryption key this store seals with from now on: every sealed write
        checks, in its own transaction, that it is still the keyring's active one."""
        self._schema.sealing_kek = kek_id

    @property
    def scrubs(self) -> bool:
        """Whether `scrub` has anything to do: only a SQLite file keeps a WAL of its own."""
        return self._schema.db.dialect_name == "sqlite"

    async def scrub(self) -> None:
        """Leave no bytes of deleted rows in a SQLite file's WAL: checkpoint and truncate it.

        Deleted content is zeroed in the database pages (`secure_delete`); the WAL still holds
        older copies of those pages until it is checkpointed and truncated. No-op elsewhere.
        """
        db = self._schema.db
        if self.scrubs:
            await db.read(
                lambda conn: conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").all()
            )

    async def keyring_rows(self) -> list[dict[str, Any]]:
        """Every keyring row, oldest first, as mappings."""
        query = select(self._schema.keyring).order_by(self._schema.keyring.c.created_at)
        return await self._schema.db.read(
            lambda conn: [dict(row._mapping) for row in conn.execute(query)]
        )

    async def add_keyring(self, row: dict[str, Any], *, retire: str | None = None) -> bool:
        """Insert a keyring row and make it the active one.

        With `retire`, that kek_id is retired in the same transaction (a rotation starts);
        without, the row goes in only if no row is active yet (two stores racing to create
        the keyring: one wins, and the other opens the winner's). Returns whether it went in.
        """
        return await self._schema.db.write(lambda conn: self._add(conn, row, retire))

    def _add(self, conn: Connection, row: dict[str, Any], retire: str | None) -> bool:
        keyring = self._schema.keyring
        self._lock_keyring(conn)
        if retire is not None:
            conn.execute(
                update(keyring)
                .where(keyring.c.kek_id == retire)
                .values(retired_at=row["created_at"])
            )
        elif conn.execute(select(keyring.c.kek_id).where(keyring.c.retired_at.is_(None))).first():
            return False
        conn.execute(keyring.insert(), row)
        return True

    def _lock_keyring(self, conn: Connection) -> None:
        """Serialise keyring writers: an advisory lock on PostgreSQL, the write lock on SQLite.

        MySQL and MariaDB have no lock that ends with the transaction but row locks, and the
        keyring may have no row yet: the migrations' version row (there at head) is locked.
        """
        if conn.dialect.name == "postgresql":
            advisory_lock(conn, f"agents_sqlalchemy.keyring:{self._schema.keyring.fullname}")
        elif self._schema.mysql:
            names = self._schema.models.names
            version = table(names.version_table, column("version_num"), schema=names.schema)
            conn.execute(select(version.c.version_num).with_for_update())
        else:
            conn.execute(update(self._schema.keyring).values(kind=self._schema.keyring.c.kind))

    async def count_keys(self, kek_ids: Collection[str]) -> int:
        """How many item keys are wrapped by one of `kek_ids` (a scan: rotations are rare)."""
        items = self._schema.items
        query = select(func.count()).select_from(items).where(items.c.kek_id.in_(list(kek_ids)))
        return await self._schema.db.read(lambda conn: int(conn.execute(query).scalar_one()))

    async def keyless_data(self) -> str | None:
        """What shows the database was used without a key: "items" (stored as JSON text),
        "sessions" (a store with a key makes the keyring before its first session), or
        None."""
        items, sessions = self._schema.items, self._schema.sessions
        found = (
            ("items", select(items.c.id).where(items.c.payload.is_not(None)).limit(1)),
            ("sessions", select(sessions.c.id).limit(1)),
        )

        def work(conn: Connection) -> str | None:
            return next((what for what, query in found if conn.execute(query).first()), None)

        return await self._schema.db.read(work)

    async def has_sealed_data(self) -> bool:
        """Whether anything sealed is stored (an item, a state, an owner key): a database
        holding it has a keyring."""
        items, sessions = self._schema.items, self._schema.sessions
        owner_keys = self._schema.owner_keys
        found = (
            select(items.c.id).where(items.c.ciphertext.is_not(None)).limit(1),
            select(sessions.c.id).where(sessions.c.sealed_state.is_not(None)).limit(1),
            select(owner_keys.c.key_id).limit(1),
        )
        return await self._schema.db.read(
            lambda conn: any(conn.execute(query).first() is not None for query in found)
        )

    async def last_item_id(self) -> int:
        """The highest item id (0 with no item): where a walk of `rewrap_keys` may end."""
        query = select(func.coalesce(func.max(self._schema.items.c.id), 0))
        return await self._schema.db.read(lambda conn: int(conn.execute(query).scalar_one()))

    async def last_session_id(self) -> int:
        """The highest session id (0 with no session)."""
        query = select(func.coalesce(func.max(self._schema.sessions.c.id), 0))
        return await self._schema.db.read(lambda conn: int(conn.execute(query).scalar_one()))

    async def rewrap_keys(
        self,
        old: Collection[str],
        rewrap: Callable[[str, list[bytes]], tuple[str, list[bytes]]],
        after: int,
        batch: int,
        upto: int,
    ) -> tuple[int, int | None]:
        """Re-wrap the keys wrapped by one of `old` among the `batch` items after id `after`
        (up to id `upto`), in one transaction (`rewrap(kek_id, keys)` gives the new kek_id
        and keys); return how many, and the last id seen (None: no item is left).

        A walk over the primary key, a window at a time: `kek_id` has no index (it would
        cost every append), and a window bounds the time each transaction holds the lock.
        """
        return await self._schema.db.write(
            lambda conn: self._rewrap_keys(conn, set(old), rewrap, after, batch, upto)
        )

    def _rewrap_keys(
        self,
        conn: Connection,
        old: set[str],
        rewrap: Callable[[str, list[bytes]], tuple[str, list[bytes]]],
        after: int,
        batch: int,
        upto: int,
    ) -> tuple[int, int | None]:
        items = self._schema.items
        self._lock_keyring(conn)
        window = conn.execute(
            select(items.c.id, items.c.kek_id, items.c.wrapped_key)
            .where(items.c.id > after, items.c.id <= upto)
            .order_by(items.c.id)
            .limit(batch)
        ).all()
        if not window:
            return 0, None
        by_kek: dict[str, list[Any]] = {}
        for row in window:
            if row.kek_id in old and row.wrapped_key is not None:
                by_kek.setdefault(row.kek_id, []).append(row)
        changes = []
        for kek_id, rows in by_kek.items():
            new_id, wrapped = rewrap(kek_id, [bytes(row.wrapped_key) for row in rows])
            changes += [
                {"pk": row.id, "old": kek_id, "k": new_id, "w": value}
                for row, value in zip(rows, wrapped, strict=True)
            ]
        if changes:  # an item re-wrapped meanwhile (`set_user_id`) is left as it is now
            conn.execute(
                update(items)
                .where(items.c.id == bindparam("pk"), items.c.kek_id == bindparam("old"))
                .values(kek_id=bindparam("k"), wrapped_key=bindparam("w")),
                changes,
            )
        return len(changes), window[-1].id

    async def wrapped_keys(
        self, after: int, batch: int, upto: int
    ) -> tuple[list[tuple[str, int, str | None, bytes | None]], int | None]:
        """The sealed items among the `batch` after item id `after` (up to id `upto`), each
        as (session id, seq, kek_id, wrapped key), and the last id seen (None: no item is
        left): what a rotation checks before it changes anything."""
        items, sessions = self._schema.items, self._schema.sessions
        query = (
            select(items.c.id, sessions.c.session_id, items.c.seq, items.c.kek_id)
            .add_columns(items.c.wrapped_key, items.c.ciphertext.is_not(None))
            .join(sessions, sessions.c.id == items.c.session_pk)
            .where(items.c.id > after, items.c.id <= upto)
            .order_by(items.c.id)
            .limit(batch)
        )
        rows = await self._schema.db.read(lambda conn: conn.execute(query).all())
        if not rows:
            return [], None
        found = [
            (row[1], row[2], row[3], None if row[4] is None else bytes(row[4]))
            for row in rows
            if row[5]
        ]
        return found, rows[-1][0]

    async def sealed_states(
        self, after: int, batch: int, upto: int
    ) -> tuple[list[tuple[str, bytes]], int | None]:
        """The sealed states of the `batch` sessions after id `after` (up to id `upto`),
        each as (session id, state), and the last id seen (None: no session is left)."""
        sessions = self._schema.sessions
        query = (
            select(sessions.c.id, sessions.c.session_id, sessions.c.sealed_state)
            .where(sessions.c.id > after, sessions.c.id <= upto)
            .where(sessions.c.sealed_state.is_not(None))
            .order_by(sessions.c.id)
            .limit(batch)
        )
        rows = await self._schema.db.read(lambda conn: conn.execute(query).all())
        if not rows:
            return [], None
        return [(row[1], bytes(row[2])) for row in rows], rows[-1][0]

    async def rewrap_states(
        self, rewrap: Callable[[bytes], bytes], after: int, batch: int
    ) -> int | None:
        """Re-wrap sealed states of sessions with id > `after`; return the last id, or None.

        Read without a lock: a state written after the read is left as it is (a write seals
        under a live key, never a retired one), where writing the re-wrapped old one back
        undid the write."""
        return await self._schema.db.write(
            lambda conn: self._rewrap_states(conn, rewrap, after, batch)
        )

    def _rewrap_states(
        self, conn: Connection, rewrap: Callable[[bytes], bytes], after: int, batch: int
    ) -> int | None:
        sessions = self._schema.sessions
        self._lock_keyring(conn)
        rows = conn.execute(
            select(sessions.c.id, sessions.c.sealed_state)
            .where(sessions.c.id > after, sessions.c.sealed_state.is_not(None))
            .order_by(sessions.c.id)
            .limit(batch)
        ).all()
        for row in rows:
            read = bytes(row.sealed_state)
            rewrapped = rewrap(read)
            if rewrapped != read:  # a state written meanwhile is newer, and sealed anew
                conn.execute(
                    update(sessions)
                    .where(sessions.c.id == row.id, sessions.c.sealed_state == read)
                    .values(sealed_state=rewrapped)
                )
        return rows[-1].id if rows else None

    async def finish_rotation(self, old: str | None, owner_keys: Collection[str] = ()) -> bool:
        """Delete the retired keyring row `old` if no item key refers to it, nor to one of
        the retired owner keys `owner_keys` (the caller destroys those then)."""
        return await self._schema.db.write(lambda conn: self._finish(conn, old, owner_keys))

    def _finish(self, conn: Connection, old: str | None, owner_keys: Collection[str]) -> bool:
        self._lock_keyring(conn)
        items = self._schema.items
        gone = [*([] if old is None else [old]), *owner_keys]
        if not gone:
            return True
        if conn.execute(select(items.c.id).where(items.c.kek_id.in_(gone)).limit(1)).first():
            return False
        if old is not None:
            keyring = self._schema.keyring
            conn.execute(delete(keyring).where(keyring.c.kek_id == old))
        return True
