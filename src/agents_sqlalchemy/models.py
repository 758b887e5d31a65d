"""Declarative models, built once per `TableNames` so an app chooses where they live.

Example::

    models = build_models(TableNames(prefix="chat_"))
    models.item.__table__.name        # "chat_items"
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, ClassVar, cast

from sqlalchemy import (
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, declared_attr, mapped_column

# MYSQL and UTCDateTime are imported from here by the repository too.
from .column_types import MYSQL as MYSQL
from .column_types import (
    NAMING_CONVENTION,
    TABLE_OPTIONS,
    ExactName,
    Id,
    LongBinary,
    LongText,
    SessionIdText,
    StoredJSON,
)
from .column_types import UTCDateTime as UTCDateTime
from .tables import TableNames


class SessionColumns:
    """One row per SDK session: identity, owner, metadata, state and the item sequence."""

    sessions_fullname: ClassVar[str]

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    # The SDK's id, any length and any Unicode (NUL too); looked up through its SHA-256.
    session_id: Mapped[str] = mapped_column(SessionIdText)
    session_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[str | None] = mapped_column(String(255))
    metadata_: Mapped[dict[str, Any] | None] = mapped_column("metadata", StoredJSON)
    # Per-session state: JSON in plaintext mode, sealed bytes with a key.
    state: Mapped[dict[str, Any] | None] = mapped_column(StoredJSON)
    sealed_state: Mapped[bytes | None] = mapped_column(LongBinary)
    # The last sequence number handed out; bumping it is the per-session write lock.
    next_seq: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # Set by `archive_inactive`/`archive_session`: listed only when asked for; items kept.
    archived_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    @declared_attr
    def parent_pk(cls) -> Mapped[int | None]:
        # Set on a branched session's companion row, which holds the items written on its
        # other branches; it is never listed and goes with its session.
        return mapped_column(ForeignKey(f"{cls.sessions_fullname}.id", ondelete="CASCADE"))

    @declared_attr.directive
    def __table_args__(cls) -> tuple[Any, ...]:
        # Keyset pages of sessions, most recently active first, overall and per user; and
        # the few companion rows (the others are left out of that index). A deleted
        # session's id is never given to a new one (SQLite would give the last one's again):
        # an item's place, its session's id and its number, then names it for good.
        companion = text("parent_pk IS NOT NULL")
        return (
            Index(None, "updated_at", "id"),
            Index(None, "user_id", "updated_at", "id"),
            Index(None, "parent_pk", sqlite_where=companion, postgresql_where=companion),
            TABLE_OPTIONS | {"sqlite_autoincrement": True},
        )


def _cascade(table: str, column: str = "id") -> Mapped[int]:
    return mapped_column(ForeignKey(f"{table}.{column}", ondelete="CASCADE"), nullable=False)


class ItemColumns:
    """One row per item, ordered within its session by `seq`."""

    __tablename__: str
    sessions_fullname: ClassVar[str]

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # With a key: the item's data key, wrapped by the key-encryption key `kek_id`; it goes
    # with the row. No index on `kek_id`: only a rotation looks for it, walking the ids.
    kek_id: Mapped[str | None] = mapped_column(String(64))
    wrapped_key: Mapped[bytes | None] = mapped_column(LargeBinary)
    # The item as compact JSON text, or (with a key) sealed under its own data key.
    payload: Mapped[str | None] = mapped_column(LongText)
    ciphertext: Mapped[bytes | None] = mapped_column(LongBinary)
    # On the first item of a batch appended with an idempotency key: the key's SHA-256 (hex),
    # so that a retry of that batch finds it and writes nothing.
    batch_key: Mapped[str | None] = mapped_column(String(64))

    @declared_attr
    def session_pk(cls) -> Mapped[int]:
        return _cascade(cls.sessions_fullname)

    @declared_attr.directive
    def __table_args__(cls) -> tuple[Any, ...]:
        # Unique per session, and the index every read walks, newest first; and the items
        # that expire (most never do, so the index leaves the others out).
        expiring = text("expires_at IS NOT NULL")
        return (
            UniqueConstraint("session_pk", "seq"),
            UniqueConstraint("session_pk", "batch_key"),
            Index(None, "expires_at", sqlite_where=expiring, postgresql_where=expiring),
            # What search reads of each live item of a session, from the index alone.
            Index(
                f"ix_{cls.__tablename__}_search", "session_pk", "seq", "expires_at", "created_at"
            ),
            TABLE_OPTIONS,
        )


class KeyringColumns:
    """Key-encryption keys: how to derive or reach each, and a verifier of the right key."""

    __table_args__ = TABLE_OPTIONS

    kek_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    salt: Mapped[bytes | None] = mapped_column(LargeBinary)
    params: Mapped[dict[str, Any] | None] = mapped_column(StoredJSON)
    verifier: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    retired_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class OwnerKeyColumns:
    """Owner keys (one or more per user, or per session without one): where each is kept.

    `kept` is what the owner key store gave back to hold (the key wrapped under the store's
    key `kek_id`, by default; a KMS ciphertext; nothing, for a key directory). A key with
    `replaces` is the successor of that one (a rotation), which goes once nothing uses it.
    """

    key_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str] = mapped_column(String(64))
    kept: Mapped[bytes | None] = mapped_column(LargeBinary)
    kek_id: Mapped[str | None] = mapped_column(String(64))
    replaces: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    retired_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    @declared_attr.directive
    def __table_args__(cls) -> tuple[Any, ...]:
        return (Index(None, "owner"), TABLE_OPTIONS)


class SearchIndexColumns:
    """What search keeps of an item, per embedding model: its terms and its vector.

    `terms` packs the item's distinct terms as 64-bit ids with their counts (keyed hashes
    in an encrypted store; `search.postings`); `vector` is sealed with the item's key
    when encrypted. Both NULL: the item has no text (it is indexed all the same).
    """

    items_fullname: ClassVar[str]

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    model_id: Mapped[str] = mapped_column(String(200))
    terms: Mapped[bytes | None] = mapped_column(LongBinary)
    vector: Mapped[bytes | None] = mapped_column(LongBinary)

    @declared_attr
    def item_pk(cls) -> Mapped[int]:
        return _cascade(cls.items_fullname)

    @declared_attr.directive
    def __table_args__(cls) -> tuple[Any, ...]:
        return (UniqueConstraint("item_pk", "model_id"), TABLE_OPTIONS)


class BranchColumns:
    """A named line of a session's history: "main" (the session's own items) or a branch.

    A deleted branch keeps its row (`deleted_at` set), so its name is never used again.
    """

    sessions_fullname: ClassVar[str]

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    name: Mapped[str] = mapped_column(ExactName())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Main's row, while the session never branched: its user messages through place
    # `counted` (the current user turn, for usage), kept without per-item rows.
    turns: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    counted: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")

    @declared_attr
    def session_pk(cls) -> Mapped[int]:
        return _cascade(cls.sessions_fullname)

    @declared_attr.directive
    def __table_args__(cls) -> tuple[Any, ...]:
        return (UniqueConstraint("session_pk", "name"), TABLE_OPTIONS)


class BranchItemColumns:
    """One item of a branch, by reference (never a copy): its place and its user turn."""

    branches_fullname: ClassVar[str]
    items_fullname: ClassVar[str]

    # The item's own sequence number: the order within every branch that holds it.
    seq: Mapped[int] = mapped_column(BigInteger)
    turn: Mapped[int] = mapped_column(Integer)
    is_user: Mapped[bool] = mapped_column(Boolean)

    @declared_attr
    def branch_pk(cls) -> Mapped[int]:
        return _cascade(cls.branches_fullname)

    @declared_attr
    def item_pk(cls) -> Mapped[int]:
        return _cascade(cls.items_fullname)

    @declared_attr.directive
    def __table_args__(cls) -> tuple[Any, ...]:
        # A branch's items in order, from its primary key; the cascade from items.
        return (PrimaryKeyConstraint("branch_pk", "seq"), Index(None, "item_pk"), TABLE_OPTIONS)


class TurnUsageColumns:
    """Token usage of one user turn of one branch, as the run's context last reported it."""

    sessions_fullname: ClassVar[str]
    branches_fullname: ClassVar[str]

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    turn: Mapped[int] = mapped_column(Integer)
    requests: Mapped[int] = mapped_column(BigInteger)
    input_tokens: Mapped[int] = mapped_column(BigInteger)
    output_tokens: Mapped[int] = mapped_column(BigInteger)
    total_tokens: Mapped[int] = mapped_column(BigInteger)
    input_details: Mapped[dict[str, Any] | None] = mapped_column(StoredJSON)
    output_details: Mapped[dict[str, Any] | None] = mapped_column(StoredJSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)

    @declared_attr
    def session_pk(cls) -> Mapped[int]:
        return _cascade(cls.sessions_fullname)

    @declared_attr
    def branch_pk(cls) -> Mapped[int]:
        return _cascade(cls.branches_fullname)

    @declared_attr.directive
    def __table_args__(cls) -> tuple[Any, ...]:
        # One row per turn of a branch; a session's rows; the store-wide sums by time.
        return (
            UniqueConstraint("branch_pk", "turn"),
            Index(None, "session_pk"),
            Index(None, "created_at"),
            TABLE_OPTIONS,
        )


@dataclass(frozen=True)
class Models:
    """The mapped classes of one `TableNames`, their `MetaData`, and their Core tables."""

    names: TableNames
    metadata: MetaData
    session: type[SessionColumns]
    item: type[ItemColumns]
    keyring: type[KeyringColumns]
    owner_key: type[OwnerKeyColumns]
    search_index: type[SearchIndexColumns]
    branch: type[BranchColumns]
    branch_item: type[BranchItemColumns]
    turn_usage: type[TurnUsageColumns]

    def table(self, mapped: type[Any]) -> Table:
        """The Core table of one of the classes above, for the repository's statements."""
        return cast(Table, mapped.__table__)

    @property
    def sessions(self) -> Table:
        return self.table(self.session)

    @property
    def items(self) -> Table:
        return self.table(self.item)

    def refusals(self) -> dict[str, str]:
        """What a refusal by one of these tables' constraints means, by the text naming the
        constraint in each database's message (its name; SQLite names the columns): what
        `Database` adds to the `ConstraintError` it raises."""
        items, sessions = self.items.name, self.sessions.name
        place = (
            f"its next_seq in {sessions} is behind a place its items hold in {items} (the "
            "row was changed outside the library); raise it to at least the session's highest "
            f"seq in {items} to write again (back where it was is best: a session never hands "
            "a number out twice)"
        )
        return {f"uq_{items}_session_pk_seq": place, f"{items}.session_pk, {items}.seq": place}


@cache
def build_models(names: TableNames) -> Models:
    """Return the models for `names`; the same names always give the same classes."""

    class Base(DeclarativeBase):
        metadata = MetaData(schema=names.schema, naming_convention=NAMING_CONVENTION)

    def fullname(role: str) -> str:
        return f"{names.schema}.{names.name(role)}" if names.schema else names.name(role)

    class SessionRow(SessionColumns, Base):
        __tablename__ = names.name("sessions")
        sessions_fullname = fullname("sessions")

    class ItemRow(ItemColumns, Base):
        __tablename__ = names.name("items")
        sessions_fullname = fullname("sessions")

    class KeyringRow(KeyringColumns, Base):
        __tablename__ = names.name("keyring")

    class OwnerKeyRow(OwnerKeyColumns, Base):
        __tablename__ = names.name("owner_keys")

    class SearchIndexRow(SearchIndexColumns, Base):
        __tablename__ = names.name("search_index")
        items_fullname = fullname("items")

    class BranchRow(BranchColumns, Base):
        __tablename__ = names.name("branches")
        sessions_fullname = fullname("sessions")

    class BranchItemRow(BranchItemColumns, Base):
        __tablename__ = names.name("branch_items")
        branches_fullname = fullname("branches")
        items_fullname = fullname("items")

    class TurnUsageRow(TurnUsageColumns, Base):
        __tablename__ = names.name("turn_usage")
        sessions_fullname = fullname("sessions")
        branches_fullname = fullname("branches")

    return Models(
        names=names,
        metadata=Base.metadata,
        session=SessionRow,
        item=ItemRow,
        keyring=KeyringRow,
        owner_key=OwnerKeyRow,
        search_index=SearchIndexRow,
        branch=BranchRow,
        branch_item=BranchItemRow,
        turn_usage=TurnUsageRow,
    )
