"""`Prepared`: a statement compiled once per dialect, then run straight on the driver's cursor.

Every protocol call runs a handful of small statements; SQLAlchemy's execution layer
(cache lookup, execution context, result objects) costs more than SQLite spends running
them. The statements are still SQLAlchemy's, compiled by each dialect and bound through
each type's own bind processor; only the execution is the DB-API's, with positional
parameters, as every supported driver takes them.

Example::

    tail = Prepared(select(items.c.seq).where(items.c.session_pk == bindparam("pk")))
    rows = tail.run(conn, {"pk": 7})          # a list of plain tuples
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler


@dataclass(frozen=True)
class _Compiled:
    sql: str
    names: tuple[str, ...]
    defaults: dict[str, Any]
    processors: dict[str, Callable[[Any], Any]]
    none_processed: frozenset[str]  # types that store None as something (JSON's null)


class Prepared:
    """A statement run on the DB-API cursor of a SQLAlchemy connection, in its transaction."""

    def __init__(self, statement: ClauseElement) -> None:
        self._statement = statement
        self._by_dialect: dict[tuple[str, str], _Compiled] = {}

    def _compiled(self, dialect: Dialect) -> _Compiled:
        found = self._by_dialect.get((dialect.name, dialect.driver))
        if found is None:
            compiled = self._statement.compile(dialect=dialect)
            assert isinstance(compiled, SQLCompiler)
            if not dialect.positional or compiled.positiontup is None:
                raise NotImplementedError(f"{dialect.name}+{dialect.driver}: named parameters")
            binds = compiled.binds
            processors: dict[str, Callable[[Any], Any]] = {}
            for name, bind in binds.items():
                processor = bind.type.dialect_impl(dialect).bind_processor(dialect)
                if processor is not None:
                    processors[name] = processor
            found = _Compiled(
                compiled.string,
                tuple(compiled.positiontup),
                {name: bind.effective_value for name, bind in binds.items()},
                processors,
                frozenset(name for name, bind in binds.items() if bind.type.should_evaluate_none),
            )
            self._by_dialect[(dialect.name, dialect.driver)] = found
        return found

    def _parameters(self, compiled: _Compiled, params: Mapping[str, Any]) -> tuple[Any, ...]:
        values = []
        for name in compiled.names:
            value = params[name] if name in params else compiled.defaults[name]
            processor = compiled.processors.get(name)
            if processor is not None and (value is not None or name in compiled.none_processed):
                value = processor(value)
            values.append(value)
        return tuple(values)

    def run(self, conn: Connection, params: Mapping[str, Any]) -> list[Any]:
        """Execute with `params` (by bind name); the rows it returns, as tuples."""
        compiled = self._compiled(conn.dialect)
        values = self._parameters(compiled, params)
        cursor = conn.connection.cursor()
        try:
            cursor.execute(compiled.sql, values)
            return list(cursor.fetchall()) if cursor.description else []
        except Exception as exc:
            _raise_wrapped(conn, exc, compiled.sql, values, cursor)
            raise
        finally:
            cursor.close()

    def run_many(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Execute once per parameter set (no rows returned)."""
        compiled = self._compiled(conn.dialect)
        values = [self._parameters(compiled, row) for row in rows]
        cursor = conn.connection.cursor()
        try:
            cursor.executemany(compiled.sql, values)
        except Exception as exc:
            _raise_wrapped(conn, exc, compiled.sql, values, cursor)
            raise
        finally:
            cursor.close()

    def run_rows(
        self, conn: Connection, names: Sequence[str], rows: Sequence[tuple[Any, ...]]
    ) -> None:
        """`run_many` with each parameter set a tuple of values in the order of `names`:
        bulk inserts skip building a mapping per row, and converting types that need none."""
        compiled = self._compiled(conn.dialect)
        steps = [(names.index(name), compiled.processors.get(name)) for name in compiled.names]
        if any(p is not None for _, p in steps) or [i for i, _ in steps] != [*range(len(names))]:
            rows = [
                tuple(
                    p(row[i]) if p is not None and row[i] is not None else row[i] for i, p in steps
                )
                for row in rows
            ]
        cursor = conn.connection.cursor()
        try:
            cursor.executemany(compiled.sql, rows)
        except Exception as exc:
            _raise_wrapped(conn, exc, compiled.sql, rows, cursor)
            raise
        finally:
            cursor.close()


def _raise_wrapped(conn: Connection, exc: Exception, sql: str, values: Any, cursor: Any) -> None:
    """A driver's error as SQLAlchemy raises it from `execute`: a `DBAPIError`, with a lost
    connection noticed (the pool drops it and its siblings), so callers tell failures apart."""
    if isinstance(exc, conn.dialect.loaded_dbapi.Error):
        conn._handle_dbapi_exception(exc, sql, values, cursor, None)
