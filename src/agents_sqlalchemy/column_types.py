"""Column types and table options every model shares, on every dialect.

`models.py` builds the tables from them; the names are re-exported there.

Example::

    UTCDateTime().process_result_value(datetime(2026, 1, 1), sqlite_dialect)  # UTC, aware
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Dialect, Integer, LargeBinary, String, Text
from sqlalchemy.dialects import mysql
from sqlalchemy.types import TypeDecorator, TypeEngine

from .errors import ConfigurationError, CorruptItemError

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

# MySQL and MariaDB (a URL names either dialect): TEXT and BLOB stop at 64 KB, so items and
# sealed bytes take the LONG kinds; timestamps keep microseconds; every table is InnoDB in
# utf8mb4 (emoji) with a binary collation, so text compares as on the other databases.
MYSQL = ("mysql", "mariadb")
LongText = Text().with_variant(mysql.LONGTEXT(), *MYSQL)
LongBinary = LargeBinary().with_variant(mysql.LONGBLOB(), *MYSQL)
TABLE_OPTIONS = {
    f"{dialect}_{option}": value
    for dialect in MYSQL
    for option, value in (("engine", "InnoDB"), ("charset", "utf8mb4"), ("collate", "utf8mb4_bin"))
}


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored in UTC and always read back timezone-aware, on every dialect."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name in MYSQL:  # DATETIME keeps whole seconds unless told otherwise
            return dialect.type_descriptor(mysql.DATETIME(fsp=6))
        return dialect.type_descriptor(self.impl)

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ConfigurationError("naive datetime: pass a timezone-aware value")
        value = value.astimezone(timezone.utc)
        # SQLite keeps text and MySQL's DATETIME has no zone: store naive UTC in both.
        return value.replace(tzinfo=None) if dialect.name in ("sqlite", *MYSQL) else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)


# PostgreSQL text cannot hold NUL: there a NUL of a session id is stored as this noncharacter
# (which Unicode keeps for internal use) and "0", and the noncharacter itself is doubled.
_ESCAPE = "\uffff"
_ESCAPED = re.compile(f"{_ESCAPE}(.)", re.DOTALL)


def no_pad_collation(dialect: Dialect) -> str:
    """The binary collation of MySQL or MariaDB that does not pad: `'b'` and `'b '` differ,
    in comparisons and in unique keys (`utf8mb4_bin` pads)."""
    return "utf8mb4_nopad_bin" if getattr(dialect, "is_mariadb", False) else "utf8mb4_0900_bin"


class ExactName(TypeDecorator[str]):
    """A short name that a unique key tells apart exactly: on MySQL and MariaDB, a
    VARCHAR(255) in the binary collation that does not pad (see `no_pad_collation`).

    >>> from sqlalchemy.dialects import mysql
    >>> ExactName().load_dialect_impl(mysql.dialect()).collation
    'utf8mb4_0900_bin'
    """

    impl = String(255)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name in MYSQL:
            return mysql.VARCHAR(255, collation=no_pad_collation(dialect))
        return dialect.type_descriptor(String(255))


class SessionIdText(TypeDecorator[str]):
    """The SDK's session id as text, any character included, NUL too, on every dialect.

    SQLite and MySQL/MariaDB store it as it is; PostgreSQL with each NUL as U+FFFF "0"
    (and each U+FFFF doubled), which reads back as the id given.

    >>> from sqlalchemy.dialects import postgresql
    >>> SessionIdText().process_bind_param("a\\x00b", postgresql.dialect())
    'a\\uffff0b'
    """

    impl = Text()
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        # Not through `type_descriptor`: on PostgreSQL that makes TEXT a VARCHAR.
        return mysql.LONGTEXT() if dialect.name in MYSQL else Text()

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        if value is None or dialect.name != "postgresql":
            return value
        if "\x00" in value or _ESCAPE in value:
            return value.replace(_ESCAPE, _ESCAPE * 2).replace("\x00", f"{_ESCAPE}0")
        return value

    def process_result_value(self, value: str | None, dialect: Dialect) -> str | None:
        if value is None or dialect.name != "postgresql" or _ESCAPE not in value:
            return value
        return _ESCAPED.sub(lambda m: "\x00" if m.group(1) == "0" else m.group(1), value)


class StoredJSON(TypeDecorator[Any]):
    """A JSON object (or NULL) whose stored value, if changed outside the library into what
    is not JSON (a SQLite file does not check it) or into JSON that is not an object, reads
    as a `CorruptItemError` instead of the parser's error or a value of another kind.

    >>> from sqlalchemy.dialects import sqlite
    >>> read = StoredJSON().result_processor(sqlite.dialect(), None)
    >>> read('{"channel": "web"}')
    {'channel': 'web'}
    """

    impl = JSON
    cache_ok = True

    def result_processor(self, dialect: Dialect, coltype: object) -> Any:
        parse = self.impl_instance.dialect_impl(dialect).result_processor(dialect, coltype)

        def read(value: Any) -> Any:
            try:
                found = value if parse is None else parse(value)
            except ValueError as exc:
                raise CorruptItemError(
                    "a stored JSON value (a session's metadata or state, a usage's details) "
                    f"does not parse ({exc}): it was changed outside the library"
                ) from None
            if found is not None and not isinstance(found, dict):
                raise CorruptItemError(
                    "a stored JSON value (a session's metadata or state, a usage's details) "
                    f"is a JSON {type(found).__name__}, not an object: it was changed outside "
                    "the library"
                )
            return found

        return read
