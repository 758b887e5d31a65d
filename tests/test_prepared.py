"""`PreparedRows`: many rows per statement, each statement inside the caller's transaction.

pysqlite opens a transaction only before a statement it sees is a write (one that starts
with INSERT, UPDATE, DELETE or REPLACE): a statement starting with WITH would commit on
its own. Read from a second connection, on a real file.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, func, select

from agents_sqlalchemy.repository.prepared import PreparedRows


def test_rows_over_several_statements_are_one_transaction_s_own(tmp_path: Path) -> None:
    path = tmp_path / "rows.db"
    engine = create_engine(f"sqlite:///{path}")
    metadata = MetaData()
    target = Table("target", metadata, Column("a", Integer), Column("b", String))
    metadata.create_all(engine)
    copy = PreparedRows(
        lambda given: target.insert().from_select(["a", "b"], select(given)),
        {"a": Integer(), "b": String()},
    )
    rows = [(n, f"row {n}") for n in range(copy.most_rows * 2 + 1)]

    def seen_elsewhere() -> int:
        with sqlite3.connect(path) as other:
            count: int = other.execute("SELECT count(*) FROM target").fetchone()[0]
        return count

    with engine.connect() as conn:
        copy.run(conn, rows)
        assert seen_elsewhere() == 0  # nothing committed before the transaction is
        conn.rollback()
    assert seen_elsewhere() == 0
    with engine.connect() as conn:
        copy.run(conn, rows)
        conn.commit()
        assert conn.execute(select(target.c.a, target.c.b).order_by(target.c.a)).all() == rows
        assert conn.execute(select(func.count()).select_from(target)).scalar() == len(rows)
    engine.dispose()
