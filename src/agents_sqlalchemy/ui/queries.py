"""Aggregates the session browser draws and `SessionStore` has no method for: the owners of
sessions, sessions and items made per day, and the bytes a page of sessions holds.

Each is one read-only `SELECT` on the store's own engine and tables (`store.engine`,
`store.tables`), over columns of the sessions and items tables only; nothing of an item's
content is read (sizes are counted by the database).

Example::

    users = await owners(store, after=None, limit=50)
    days = await made_per_day(store, "items", since=date(2026, 11, 1))
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Date,
    LargeBinary,
    and_,
    cast,
    column,
    func,
    literal,
    or_,
    select,
    table,
)
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.expression import TableClause

from ..database.units import database_errors
from ..models import MYSQL
from ..records import SessionInfo
from ..repository.schema import apart, exactly
from ..store import SessionStore
from ..types import SessionKey
from ..validation import check_user_id


@dataclass(frozen=True)
class Owner:
    """One user id and their sessions: how many, and when the latest was last active."""

    user_id: str
    sessions: int
    last_active: datetime


@asynccontextmanager
async def _connected(store: SessionStore) -> AsyncIterator[AsyncConnection]:
    """A connection of the store's engine; the driver's failures as `DatabaseError`."""
    with database_errors(store.engine.url, "the session browser's query"):
        async with store.engine.connect() as conn:
            yield conn


def _sessions(store: SessionStore) -> TableClause:
    names = store.tables
    return table(
        names.name("sessions"),
        column("id"),
        column("session_hash"),
        column("user_id"),
        column("created_at"),
        column("updated_at"),
        column("archived_at"),
        column("parent_pk"),
        schema=names.schema,
    )


def _items(store: SessionStore) -> TableClause:
    names = store.tables
    return table(
        names.name("items"),
        column("session_pk"),
        column("created_at"),
        column("expires_at"),
        column("payload"),
        column("ciphertext"),
        schema=names.schema,
    )


def _aware(value: Any) -> datetime:
    """A timestamp as read by a bare column: text on SQLite, naive UTC on MySQL."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if not isinstance(value, datetime):
        raise TypeError(f"not a timestamp: {value!r}")
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value


def _utc(value: datetime, dialect: str) -> Any:
    """A bound timestamp as the dialect stores it (naive UTC but on PostgreSQL)."""
    value = value.astimezone(timezone.utc)
    if dialect == "postgresql":
        return value
    if dialect == "sqlite":
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")  # as SQLAlchemy writes it
    return value.replace(tzinfo=None)


def _day(col: ColumnElement[Any], dialect: str) -> ColumnElement[Any]:
    """The UTC day of a stored timestamp."""
    if dialect == "postgresql":
        return cast(func.timezone("UTC", col), Date)
    return func.date(col)


async def owners(
    store: SessionStore,
    *,
    after: str | None,
    limit: int,
    archived: bool = False,
    prefix: str = "",
) -> tuple[list[Owner], str | None]:
    """A page of owners in id order, after `after`; and the id to pass for the next page.

    Archived sessions are counted only with `archived=True`; with `prefix`, only the ids
    that start with it (a range of the owners' index, `_after_every`, and their first
    characters equal to it). Either, if not a user id (NUL, too long), is a
    `ConfigurationError`: PostgreSQL's text could not even hold a NUL.
    """
    check_user_id(after)
    check_user_id(prefix or None)
    sessions = _sessions(store)
    mysql = store.engine.dialect.name in MYSQL
    user, owner = sessions.c.user_id, apart(sessions.c.user_id, mysql)
    conditions: list[ColumnElement[bool]] = [
        sessions.c.parent_pk.is_(None),
        user.is_not(None),
    ]
    if not archived:
        conditions.append(sessions.c.archived_at.is_(None))
    if after is not None:  # on MySQL, 'a ' is after 'a' by its length alone
        later = and_(user == after, func.length(user) > func.length(literal(after)))
        conditions.append(or_(user > after, later) if mysql else user > after)
    if prefix:  # MySQL pads with spaces: 'a\t1' sorts before 'a', not before 'a\x01'
        conditions.append(user >= (prefix + "\x01" if mysql else prefix))
        if (bound := _after_every(prefix)) is not None:
            conditions.append(user < bound)
        conditions.append(exactly(func.substr(user, 1, len(prefix)), prefix, mysql))
    query = (
        select(user, func.count(), func.max(sessions.c.updated_at))
        .where(and_(*conditions))
        .group_by(*owner)
        .order_by(*owner)
        .limit(limit + 1)
    )
    async with _connected(store) as conn:
        rows = (await conn.execute(query)).all()
    found = [Owner(str(row[0]), int(row[1]), _aware(row[2])) for row in rows[:limit]]
    return found, (found[-1].user_id if len(rows) > limit else None)


def _after_every(prefix: str) -> str | None:
    """The least text after every text that starts with `prefix`, in code point order: its
    last character that can be, moved on by one (None: every character is the last one).

    >>> _after_every("ab"), _after_every("a\U0010ffff"), _after_every("\ud7ff")
    ('ac', 'b', '\ue000')
    """
    for end in range(len(prefix) - 1, -1, -1):
        point = ord(prefix[end]) + 1
        if point <= 0x10FFFF:
            return prefix[:end] + chr(0xE000 if 0xD800 <= point <= 0xDFFF else point)
    return None


async def made_per_day(
    store: SessionStore, what: str, *, since: date, user_id: str | None = None
) -> list[tuple[date, int]]:
    """How many sessions (`what="sessions"`) or items (`"items"`) were made each UTC day
    from `since` on (days with none left out), oldest first; one owner's with `user_id`."""
    sessions = _sessions(store)
    dialect = store.engine.dialect.name
    start = _utc(datetime.combine(since, datetime.min.time(), timezone.utc), dialect)
    if what == "sessions":
        made = sessions.c.created_at
        source: Any = sessions
        conditions: list[ColumnElement[bool]] = [sessions.c.parent_pk.is_(None), made >= start]
    elif what == "items":
        items = _items(store)
        made = items.c.created_at
        conditions = [made >= start]
        source = items
        if user_id is not None:
            source = items.join(sessions, sessions.c.id == items.c.session_pk)
    else:
        raise ValueError(f"what is 'sessions' or 'items', not {what!r}")
    if user_id is not None:
        conditions.append(exactly(sessions.c.user_id, user_id, dialect in MYSQL))
    day = _day(made, dialect).label("day")
    query = (
        select(day, func.count())
        .select_from(source)
        .where(and_(*conditions))
        .group_by(day)
        .order_by(day)
    )
    async with _connected(store) as conn:
        rows = (await conn.execute(query)).all()
    return [(_as_date(row[0]), int(row[1])) for row in rows]


def _as_date(value: Any) -> date:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value)[:10])


async def sizes(store: SessionStore, infos: Sequence[SessionInfo]) -> dict[str, int]:
    """The bytes the live items of these sessions take as stored (payload or ciphertext),
    main line only; a session without live items is left out.

    The sessions are found by their ids' SHA-256, as the library finds them (an id as
    stored is not always the id: PostgreSQL's holds each NUL escaped).
    """
    if not infos:
        return {}
    by_hash = {SessionKey.of(info.session_id).hash: info.session_id for info in infos}
    sessions, items = _sessions(store), _items(store)
    dialect = store.engine.dialect.name
    now = _utc(datetime.now(timezone.utc), dialect)

    def length(column: Any) -> Any:  # in bytes: SQLite's length() of text counts characters
        if dialect == "postgresql":
            return func.octet_length(column)
        return func.length(cast(column, LargeBinary) if dialect == "sqlite" else column)

    stored = func.coalesce(length(items.c.payload), 0) + func.coalesce(
        length(items.c.ciphertext), 0
    )
    query = (
        select(sessions.c.session_hash, func.sum(stored))
        .select_from(items.join(sessions, sessions.c.id == items.c.session_pk))
        .where(sessions.c.session_hash.in_(list(by_hash)), sessions.c.parent_pk.is_(None))
        .where(or_(items.c.expires_at.is_(None), items.c.expires_at > now))
        .group_by(sessions.c.session_hash)
    )
    async with _connected(store) as conn:
        rows = (await conn.execute(query)).all()
    return {by_hash[str(row[0])]: int(row[1] or 0) for row in rows}


def days_back(days: int, today: date | None = None) -> date:
    """The first day of a window of `days` days ending today (UTC)."""
    today = today or datetime.now(timezone.utc).date()
    return today - timedelta(days=max(days, 1) - 1)
