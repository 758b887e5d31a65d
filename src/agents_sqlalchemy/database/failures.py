"""What a database failure means for the unit of work that met it, on each database.

- `busy`: a lock wait ran past `lock_timeout` (PostgreSQL `lock_not_available`, InnoDB's
  lock wait timeout, SQLite's busy timeout). The transaction is rolled back, not retried.
- `deadlock`: the database chose this transaction as a deadlock victim and rolled it back
  whole (InnoDB's gap locks make them common when new rows go in side by side): retried.
- `disconnect`: the connection was gone (a server restart, a pooler recycling it). Nothing
  was committed if it happened before the commit was sent (or, for a statement that commits
  by itself, before it was sent: `never_sent`): retried once.

Example::

    kind = failure_kind("mysql", exc)       # "busy", "deadlock", "disconnect" or None
"""

from __future__ import annotations

import re
from typing import Literal

from sqlalchemy.exc import DBAPIError

Kind = Literal["busy", "deadlock", "disconnect"]

# SQLSTATE codes of PostgreSQL.
_PG_BUSY = {"55P03"}  # lock_not_available (lock_timeout)
_PG_DEADLOCK = {"40P01", "40001"}  # deadlock_detected, serialization_failure
# Server error numbers of MySQL and MariaDB.
_MYSQL_BUSY = {1205, 3572}  # lock wait timeout; NOWAIT
_MYSQL_DEADLOCK = {1213}
_MYSQL_DISCONNECT = {2006, 2013, 2055, 1927, 4031}  # gone away, lost, killed, idle-closed
_PG_RAISED = "P0001"  # raise_exception: a trigger's (or function's) RAISE EXCEPTION
_MYSQL_RAISED = 1644  # ER_SIGNAL_EXCEPTION: a trigger's SIGNAL SQLSTATE '45000'
# SQLite result codes.
_SQLITE_BUSY = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED


def pg_code(exc: DBAPIError) -> str | None:
    """A PostgreSQL driver error's SQLSTATE (asyncpg's `sqlstate`, psycopg's `pgcode`)."""
    return getattr(exc.orig, "sqlstate", None) or getattr(exc.orig, "pgcode", None)


def mysql_number(exc: DBAPIError) -> int | None:
    """A MySQL/MariaDB driver error's number (its first argument)."""
    args = getattr(exc.orig, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def failure_kind(dialect: str, exc: DBAPIError) -> Kind | None:
    """What `exc` means for a unit of work on `dialect` (None: an ordinary failure)."""
    if exc.connection_invalidated:
        return "disconnect"
    orig = exc.orig
    if dialect == "postgresql":
        code = pg_code(exc)
        return "busy" if code in _PG_BUSY else "deadlock" if code in _PG_DEADLOCK else None
    if dialect in ("mysql", "mariadb"):
        number = mysql_number(exc)
        if number in _MYSQL_BUSY:
            return "busy"
        if number in _MYSQL_DEADLOCK:
            return "deadlock"
        return "disconnect" if number in _MYSQL_DISCONNECT else None
    if dialect == "sqlite":
        code = getattr(orig, "sqlite_errorcode", None)
        if (code is not None and code & 0xFF in _SQLITE_BUSY) or "database is locked" in str(orig):
            return "busy"
    return None


def never_sent(exc: DBAPIError) -> bool:
    """Whether the driver refused the statement before sending anything: asyncpg says so
    with an `InterfaceError` (its connection known closed) or an `InternalClientError`
    about its protocol's state (a connection the server dropped while it was idle); a
    connection lost in the middle of a statement is a `ConnectionDoesNotExistError`."""
    cause: BaseException | None = exc.orig
    while cause is not None:
        kind = type(cause)
        if kind.__module__.startswith("asyncpg"):
            if kind.__name__ == "InterfaceError":
                return True
            if kind.__name__ == "InternalClientError" and "cannot switch to state" in str(cause):
                return True
        cause = cause.__cause__ or cause.__context__
    return False


def raised_by_trigger(dialect: str, exc: DBAPIError) -> bool:
    """Whether a trigger (or function) of the database raised `exc` to refuse the statement:
    PostgreSQL's RAISE EXCEPTION, MySQL's SIGNAL. SQLite's RAISE(ABORT) is a constraint
    failure already (`IntegrityError`)."""
    if dialect == "postgresql":
        return pg_code(exc) == _PG_RAISED
    if dialect in ("mysql", "mariadb"):
        return mysql_number(exc) == _MYSQL_RAISED
    return False


#: How each database names the table it did not find, in its message.
_MISSING_TABLE = {
    "postgresql": re.compile(r'relation "([^"]+)" does not exist'),
    "mysql": re.compile(r"Table '([^']+)' doesn't exist"),
    "mariadb": re.compile(r"Table '([^']+)' doesn't exist"),
    "sqlite": re.compile(r"no such table: (\S+)"),
}


def missing_table(dialect: str, exc: DBAPIError) -> str | None:
    """The table `exc` says is not there (without its schema), or None: PostgreSQL's
    `undefined_table`, MySQL's 1146, SQLite's "no such table".

    It may be any table a statement reached: an app's trigger's or `begin` listener's too."""
    if dialect == "postgresql" and pg_code(exc) != "42P01":
        return None
    if dialect in ("mysql", "mariadb") and mysql_number(exc) != 1146:
        return None
    pattern = _MISSING_TABLE.get(dialect)
    found = pattern.search(str(exc.orig)) if pattern is not None else None
    return None if found is None else found.group(1).rsplit(".", 1)[-1]


_NOT_UTF8 = re.compile(r"Could not decode to UTF-8 column '([^']+)'")


def not_utf8(dialect: str, exc: DBAPIError) -> str | None:
    """The column whose stored text SQLite's driver could not decode (a value written
    outside the library as TEXT that is not UTF-8), or None. Its message quotes the text,
    which may be an item's: only the column is kept."""
    if dialect != "sqlite":
        return None
    found = _NOT_UTF8.search(str(exc.orig))
    return None if found is None else found.group(1)
