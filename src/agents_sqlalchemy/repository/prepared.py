"""`Prepared`: a statement compiled once per dialect, then run straight on the driver's cursor.

Every protocol call runs a handful of small statements; SQLAlchemy's execution layer
(cache lookup, execution context, result objects) costs more than SQLite spends running
them. The statements are still SQLAlchemy's, compiled by each dialect and bound through
each type's own bind processor; only the execution is the DB-API's, with positional
parameters, as every supported driver takes them.

Example::

    tail = Prepared(select(items.c.seq).where(items.c.session_pk == bindparam("pk")))
    rows = tail.run(conn, {"pk": 7})          # a list of plain tuples

`PreparedRows` runs a statement over many rows given at once, as a table of values.

A statement is compiled at its first run. On an async driver that run is in a greenlet on
the caller's event loop, and compiling takes up to about 30 ms (a sealed pop; a bulk
insert of 512 rows more), so it is done in a worker thread the greenlet waits for: the
loop runs other tasks meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, partial
from itertools import chain
from typing import Any, TypeVar

from sqlalchemy import LargeBinary, bindparam, literal_column, select, union_all
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import Subquery
from sqlalchemy.types import TypeEngine

from ..aio import off_the_loop

#: A parameter set: by name, or in the statement's order.
Row = TypeVar("Row", Mapping[str, Any], tuple[Any, ...])
#: A type's bind processor: a value as the driver takes it.
Processor = Callable[[Any], Any]


@dataclass(frozen=True)
class _Bind:
    name: str
    default: Any
    process: Processor | None
    process_none: bool  # a type that stores None as something (JSON's null)


@dataclass(frozen=True)
class _Compiled:
    sql: str
    binds: tuple[_Bind, ...]  # each name once
    names: tuple[str, ...]  # the parameters' names, in order (a name may come again)

    def order(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(map(values.__getitem__, self.names))


def constant(count: int) -> Any:
    """`count` written into a statement's SQL, for a LIMIT: bound, it leaves PostgreSQL's
    plan cache guessing a tenth of the rows, and it may then plan the statement anew on
    every execution rather than use its generic plan (a sealed pop's read took 0.22 ms to
    bind, 0.03 ms with its LIMIT written).

    >>> print(select(literal_column("x")).limit(constant(1)))
    SELECT x
     LIMIT 1
    """
    return literal_column(str(int(count)))


class Prepared:
    """A statement run on the DB-API cursor of a SQLAlchemy connection, in its transaction.

    `statement` may be a function that builds it: it is then built at the first run, with
    its compilation (see `prepared`)."""

    def __init__(self, statement: ClauseElement | Callable[[], ClauseElement]) -> None:
        self._statement = statement
        self._by_dialect: dict[tuple[str, str], _Compiled] = {}

    def _compiled(self, dialect: Dialect) -> _Compiled:
        found = self._by_dialect.get((dialect.name, dialect.driver))
        if found is None:
            found = off_the_loop(dialect, self._compile, dialect)
            self._by_dialect[(dialect.name, dialect.driver)] = found
        return found

    def _compile(self, dialect: Dialect) -> _Compiled:
        statement = self._statement
        if not isinstance(statement, ClauseElement):
            statement = self._statement = statement()
        compiled = statement.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler)
        if not dialect.positional or compiled.positiontup is None:
            raise NotImplementedError(f"{dialect.name}+{dialect.driver}: named parameters")
        binds = tuple(
            _Bind(
                name,
                bind.effective_value,
                _processor(bind.type.dialect_impl(dialect), dialect),
                bind.type.should_evaluate_none,
            )
            for name, bind in compiled.binds.items()
        )
        return _Compiled(compiled.string, binds, tuple(compiled.positiontup))

    def _parameters(
        self,
        compiled: _Compiled,
        params: Mapping[str, Any],
        last: dict[str, tuple[Any, Any]] | None = None,
    ) -> tuple[Any, ...]:
        """The DB-API parameters: each value bound through its type's processor, once.

        `last` remembers each name's last value and its processed form, so the rows of one
        `run_many` sharing a value (their timestamps) process it once.
        """
        values: dict[str, Any] = {}
        for bind in compiled.binds:
            name = bind.name
            value = params.get(name, bind.default)
            if bind.process is not None and (value is not None or bind.process_none):
                seen = last.get(name) if last is not None else None
                if seen is not None and seen[0] is value:
                    value = seen[1]
                else:
                    processed = bind.process(value)
                    if last is not None:
                        last[name] = (value, processed)
                    value = processed
            values[name] = value
        return compiled.order(values)

    def run(self, conn: Connection, params: Mapping[str, Any]) -> list[Any]:
        """Execute with `params` (by bind name); the rows it returns, as tuples."""
        compiled = self._compiled(conn.dialect)
        return _execute(conn, compiled.sql, self._parameters(compiled, params))

    def run_many(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Execute once per parameter set (no rows returned)."""
        compiled = self._compiled(conn.dialect)
        last: dict[str, tuple[Any, Any]] = {}
        for part in _parts(conn, rows):
            _execute_many(conn, compiled.sql, [self._parameters(compiled, r, last) for r in part])

    def run_rows(
        self, conn: Connection, names: Sequence[str], rows: Sequence[tuple[Any, ...]]
    ) -> None:
        """`run_many` with each parameter set a tuple of values in the order of `names`:
        bulk inserts skip building a mapping per row, and converting types that need none."""
        compiled = self._compiled(conn.dialect)
        processors = {bind.name: bind.process for bind in compiled.binds}
        steps = [(names.index(name), processors[name]) for name in compiled.names]
        if steps != [(i, None) for i in range(len(names))]:
            rows = _laid_out(rows, steps)
        for part in _parts(conn, rows):
            _execute_many(conn, compiled.sql, part)


def prepared(build: Callable[[Any], ClauseElement]) -> cached_property[Prepared]:
    """A method that builds a statement, as an attribute holding it `Prepared`: built at its
    first run, as it is compiled, off the event loop on an async driver (building a big
    statement takes as long as compiling it).

    Example::

        class Items:
            @prepared
            def _newest(self) -> Select[Any]:
                return select(items.c.seq).order_by(items.c.seq.desc()).limit(1)

            def newest(self, conn: Connection) -> int:
                return self._newest.run(conn, {})[0][0]
    """

    def made(owner: Any) -> Prepared:
        return Prepared(partial(build, owner))

    made.__doc__ = build.__doc__
    return cached_property(made)


#: What one `PreparedRows` execution holds at most, as every SQLite allows: bound values
#: (999 before version 3.32), and rows (the SELECTs of one UNION ALL).
BOUND_VALUES = 999
COMPOUND_ROWS = 500
#: Up to this many rows go in one statement of their exact size; more, in statements of a
#: power of two rows: few statements of different sizes for SQLite to prepare and cache.
EXACT_ROWS = 16


class PreparedRows:
    """A statement over many rows, run once per hundred or so of them where `executemany`
    runs once per row.

    `build(given)` makes the statement from `given`: the rows as a derived table (a UNION
    ALL of one SELECT of bound values per row) whose columns are `columns`; it is
    compiled once per dialect and number of rows. The statement must start with INSERT,
    not WITH: pysqlite opens the connection's transaction only before a statement whose
    first word says it writes, and a WITH statement would commit on its own.

    On SQLite one execution is one step of the engine, so the driver gives the GIL up and
    takes it back once per statement instead of once per row. Beside a thread that keeps
    the GIL busy (an app's event loop at work), each taking back waits for a switch while
    the write lock stays held: a 1,000-item append took 1.5 s that way with `executemany`
    and about 80 ms with this (8.6 and 4.7 ms with no such thread), an index row 1.5 to
    3.6 ms and 60 to 85 us (2.8 and 2.3 us).

    The SQL of `n` rows is that of one row with `n - 1` more SELECTs of the UNION ALL
    (`_RowsSql`): only one, two and three rows are compiled. SQLAlchemy took 70 ms to
    compile 128 rows, inside the write transaction that needed them first, which every
    other writer of the file then waited for.

    Example::

        copy = PreparedRows(
            lambda given: target.insert().from_select(["a", "b"], select(given)),
            {"a": Integer(), "b": String()},
        )
        copy.run(conn, [(1, "x"), (2, "y")])
    """

    def __init__(
        self, build: Callable[[Subquery], ClauseElement], columns: Mapping[str, TypeEngine[Any]]
    ) -> None:
        self._build = build
        self._columns = dict(columns)
        self._sql: dict[tuple[int, str, str], str] = {}  # by row count and dialect
        self._rows_sql: dict[tuple[str, str], _RowsSql | None] = {}  # by dialect
        self._steps: dict[tuple[str, str], list[tuple[int, Processor | None]]] = {}
        self.most_rows = max(1, min(BOUND_VALUES // len(self._columns), COMPOUND_ROWS))

    def run(self, conn: Connection, rows: Sequence[tuple[Any, ...]]) -> None:
        """Execute over `rows`, each a tuple of values in the order of `columns`."""
        dialect = conn.dialect
        steps = self._steps.get((dialect.name, dialect.driver))
        if steps is None:
            types = self._columns.values()
            steps = [(i, _processor(t.dialect_impl(dialect), dialect)) for i, t in enumerate(types)]
            self._steps[(dialect.name, dialect.driver)] = steps
        if any(p is not None for _, p in steps):
            rows = _laid_out(rows, steps)
        start = 0
        while start < len(rows):
            left = len(rows) - start
            size = left if left <= EXACT_ROWS else _power_of_two(min(left, self.most_rows))
            part = rows[start : start + size]
            _execute(conn, self._compiled(size, dialect), list(chain.from_iterable(part)))
            start += size

    def _compiled(self, count: int, dialect: Dialect) -> str:
        """The statement for `count` rows, whose parameters are their values row after row."""
        key = (count, dialect.name, dialect.driver)
        sql = self._sql.get(key)
        if sql is None:
            sql = self._sql[key] = off_the_loop(dialect, self._written, count, dialect)
        return sql

    def _written(self, count: int, dialect: Dialect) -> str:
        """`count` rows' SQL, from `_RowsSql` where the dialect writes each row alike."""
        key = (dialect.name, dialect.driver)
        if key not in self._rows_sql:
            self._rows_sql[key] = _RowsSql.of(self._compile(n, dialect) for n in (1, 2, 3))
        found = self._rows_sql[key]
        return found.sql(count) if found is not None else self._compile(count, dialect)

    def _compile(self, count: int, dialect: Dialect) -> str:
        types = self._columns.items()
        rows = [[bindparam(f"{n}_{i}", type_=t) for n, t in types] for i in range(count)]
        # Every row's columns named alike, so that each row is written alike (`_RowsSql`).
        named = [
            select(*(v.label(n) for v, n in zip(row, self._columns, strict=True))) for row in rows
        ]
        given = union_all(*named).subquery("given")
        compiled = Prepared(self._build(given))._compile(dialect)
        if compiled.names != tuple(value.key for row in rows for value in row):
            raise NotImplementedError("a PreparedRows statement binds only its rows' values")
        return compiled.sql


@dataclass(frozen=True)
class _RowsSql:
    """A `PreparedRows` statement for any number of rows: `head`, then `row` for each row
    after the first, then `tail`.

    Example::

        rows = _RowsSql.of([sql_of_1_row, sql_of_2_rows, sql_of_3_rows])
        rows.sql(128)  # what compiling 128 rows writes, in microseconds
    """

    head: str
    row: str
    tail: str

    @classmethod
    def of(cls, compiled: Iterable[str]) -> _RowsSql | None:
        """From the SQL of one, two and three rows; None where the rows are not written
        alike, one after another (parameters numbered across the statement)."""
        one, two, three = compiled
        start = next(
            (i for i, (a, b) in enumerate(zip(one, two, strict=False)) if a != b), len(one)
        )
        found = cls(one[:start], two[start : start + len(two) - len(one)], one[start:])
        return found if found.sql(2) == two and found.sql(3) == three else None

    def sql(self, count: int) -> str:
        return self.head + self.row * (count - 1) + self.tail


#: Parameter sets per `executemany` on an async driver. Their binding, and the driver's
#: own work before it sends, hold the event loop: 1,000 sealed items held it about 40 ms
#: on MariaDB. In parts, the loop runs between them, while the server works.
MANY_ROWS = 128
#: Characters of text and bytes of binary values per `executemany` on an async driver, at
#: most (a row larger goes alone): on MariaDB one part is one bulk command, which the
#: server refuses past its `max_allowed_packet` (16 MB by default; this is 4 MB of text at
#: worst), where asyncmy's text protocol split an INSERT of many rows at about 1 MB.
MANY_CHARACTERS = 1_000_000


def _parts(conn: Connection, rows: Sequence[Row]) -> Iterator[Sequence[Row]]:
    """`rows`, in parts of `MANY_ROWS` and `MANY_CHARACTERS` on an async driver, else
    whole."""
    if not conn.dialect.is_async:
        yield rows
        return
    start, size = 0, 0
    for end, row in enumerate(rows):
        values = row.values() if isinstance(row, Mapping) else row
        length = sum(len(v) for v in values if isinstance(v, (str, bytes)))
        if end > start and (end - start == MANY_ROWS or size + length > MANY_CHARACTERS):
            yield rows[start:end]
            start, size = end, 0
        size += length
    if start < len(rows):
        yield rows[start:]


def _power_of_two(count: int) -> int:
    """The largest power of two not above `count` (>= 1)."""
    return 1 << (count.bit_length() - 1)


def _laid_out(
    rows: Sequence[tuple[Any, ...]], steps: Sequence[tuple[int, Processor | None]]
) -> Sequence[tuple[Any, ...]]:
    """`rows` as the statement takes them: for each `(i, process)` of `steps`, the rows'
    value `i`, through `process` if there is one; done column by column."""
    if not rows:
        return rows
    columns = list(zip(*rows, strict=True))
    laid_out = (columns[i] if p is None else _bound(p, columns[i]) for i, p in steps)
    return list(zip(*laid_out, strict=True))


def _bound(process: Processor, values: Sequence[Any]) -> Sequence[Any]:
    """A column's values through its type's processor (None stays None); one value for the
    whole column, as an append's timestamps, is processed once."""
    first = values[0]
    if values.count(first) == len(values):
        return [None if first is None else process(first)] * len(values)
    return [None if value is None else process(value) for value in values]


def _execute(conn: Connection, sql: str, values: Sequence[Any]) -> list[Any]:
    """Execute once on the driver's cursor; the rows it returns, as tuples."""
    cursor = conn.connection.cursor()
    try:
        cursor.execute(sql, values)
        return list(cursor.fetchall()) if cursor.description else []
    except Exception as exc:
        _raise_wrapped(conn, exc, sql, values, cursor)
        raise
    finally:
        cursor.close()


def _processor(impl: TypeEngine[Any], dialect: Dialect) -> Processor | None:
    """The type's bind processor; none for binary values on pysqlite, which binds `bytes`
    as they are (the processor would only wrap each in a `memoryview`)."""
    if dialect.driver == "pysqlite" and isinstance(impl, LargeBinary):
        return None
    return impl.bind_processor(dialect)


def _execute_many(conn: Connection, sql: str, values: Sequence[tuple[Any, ...]]) -> None:
    cursor = conn.connection.cursor()
    try:
        cursor.executemany(sql, values)
    except Exception as exc:
        _raise_wrapped(conn, exc, sql, values, cursor)
        raise
    finally:
        cursor.close()


def _raise_wrapped(conn: Connection, exc: Exception, sql: str, values: Any, cursor: Any) -> None:
    """A driver's error as SQLAlchemy raises it from `execute`: a `DBAPIError`, with a lost
    connection noticed (the pool drops it and its siblings), so callers tell failures apart."""
    if isinstance(exc, conn.dialect.loaded_dbapi.Error):
        conn._handle_dbapi_exception(exc, sql, values, cursor, None)
