"""Declarative models, built once per `TableNames` so an app chooses where they live.

Example::

    models = build_models(TableNames(prefix="chat_"))
    models.item.__table__.name        # "chat_items"
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cache
from typing import Any, ClassVar, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Dialect,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, declared_attr, mapped_column
from sqlalchemy.types import TypeDecorator

from .tables import TableNames

# Constraint names include the table name, so they follow custom table names.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s",
    "pk": "pk_%(table_name)s",
}

# SQLite only auto-increments an INTEGER PRIMARY KEY.
Id = BigInteger().with_variant(Integer(), "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored in UTC and always read back timezone-aware, on every dialect."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime: pass a timezone-aware value")
        value = value.astimezone(timezone.utc)
        # SQLite keeps text: store naive UTC so that text order is time order.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)


class SessionColumns:
    """One row per SDK session: identity, owner, metadata and the item sequence counter."""

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    # The SDK's id, any length and any Unicode; looked up through its SHA-256.
    session_id: Mapped[str] = mapped_column(Text)
    session_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[str | None] = mapped_column(String(255), index=True)
    metadata_: Mapped[dict[str, Any] | None] = mapped_column("metadata", JSON)
    # The last sequence number handed out; bumping it is the per-session write lock.
    next_seq: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


class ItemColumns:
    """One row per item, ordered within its session by `seq`."""

    sessions_fullname: ClassVar[str]

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, index=True)
    # The item as compact JSON text.
    payload: Mapped[str] = mapped_column(Text)

    @declared_attr
    def session_pk(cls) -> Mapped[int]:
        return mapped_column(
            ForeignKey(f"{cls.sessions_fullname}.id", ondelete="CASCADE"), nullable=False
        )

    @declared_attr.directive
    def __table_args__(cls) -> tuple[Any, ...]:
        # Unique per session and the index every read walks, newest first.
        return (UniqueConstraint("session_pk", "seq"),)


@dataclass(frozen=True)
class Models:
    """The mapped classes and their `MetaData` for one `TableNames`."""

    names: TableNames
    metadata: MetaData
    session: type[SessionColumns]
    item: type[ItemColumns]
    # The same tables, for the repository's Core statements.
    sessions: Table
    items: Table


@cache
def build_models(names: TableNames) -> Models:
    """Return the models for `names`; the same names always give the same classes."""

    class Base(DeclarativeBase):
        metadata = MetaData(schema=names.schema, naming_convention=NAMING_CONVENTION)

    class SessionRow(SessionColumns, Base):
        __tablename__ = names.sessions_table

    sessions = cast(Table, SessionRow.__table__)

    class ItemRow(ItemColumns, Base):
        __tablename__ = names.items_table
        sessions_fullname = sessions.fullname

    return Models(
        names=names,
        metadata=Base.metadata,
        session=SessionRow,
        item=ItemRow,
        sessions=sessions,
        items=cast(Table, ItemRow.__table__),
    )
