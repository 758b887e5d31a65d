"""Owner keys: a key per user (or per session without one) between the store's key and
the items' data keys, so that erasing one owner destroys one key. And on MySQL and MariaDB,
branch names in a collation that does not pad, so that "b" and "b " are two branches (a
downgrade short of base is then refused, changing nothing, while two names of a session
differ only so; one to base drops the table without changing it first).

A downgrade below this revision is refused, changing nothing, while the owner keys table
holds keys: they wrap the data keys of every item sealed since, which dropping them would
leave unreadable for good. A downgrade to base (which drops the items too) runs.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03

Table names come from the migration context, as in 0001.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.dialects import mysql

from agents_sqlalchemy.errors import SchemaError

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MYSQL = ("mysql", "mariadb")
TIMESTAMP = sa.DateTime(timezone=True).with_variant(mysql.DATETIME(fsp=6), *MYSQL)
OPTIONS: dict[str, Any] = {
    f"{dialect}_{option}": value
    for dialect in MYSQL
    for option, value in (("engine", "InnoDB"), ("charset", "utf8mb4"), ("collate", "utf8mb4_bin"))
}


def _tables() -> dict[str, Any]:
    tables: dict[str, Any] = op.get_context().opts["agents_sqlalchemy_tables"]
    return tables


def upgrade() -> None:
    table, schema = _tables()["owner_keys"], _tables()["schema"]
    dialect = op.get_bind().dialect
    if dialect.name in MYSQL and _made_before(table, schema):
        # MySQL and MariaDB commit each DDL statement: an upgrade stopped after making the
        # table (killed, or its ALTER waiting on a lock) left it; this one goes on from it.
        _branch_names(mysql.VARCHAR(255, collation=_no_pad(dialect)))
        return
    op.create_table(
        table,
        sa.Column("key_id", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("kept", sa.LargeBinary(), nullable=True),
        sa.Column("kek_id", sa.String(64), nullable=True),
        sa.Column("replaces", sa.String(64), nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("retired_at", TIMESTAMP, nullable=True),
        sa.PrimaryKeyConstraint("key_id", name=f"pk_{table}"),
        schema=schema,
        **OPTIONS,
    )
    op.create_index(f"ix_{table}_owner", table, ["owner"], schema=schema)
    if dialect.name in MYSQL:
        _branch_names(mysql.VARCHAR(255, collation=_no_pad(dialect)))


def _no_pad(dialect: Any) -> str:
    """The binary collation that does not pad, MariaDB's or MySQL's."""
    return "utf8mb4_nopad_bin" if getattr(dialect, "is_mariadb", False) else "utf8mb4_0900_bin"


def _made_before(table: str, schema: str | None) -> bool:
    """Whether the owner keys table, with its index, is there already (offline: no)."""
    if context.is_offline_mode():
        return False
    found = sa.inspect(op.get_bind())
    if not found.has_table(table, schema=schema):
        return False
    if not any(index["name"] == f"ix_{table}_owner" for index in found.get_indexes(table, schema)):
        op.create_index(f"ix_{table}_owner", table, ["owner"], schema=schema)
    return True


def downgrade() -> None:
    to_base = context.get_revision_argument() is None  # 0001's downgrade drops the rest
    _refuse_while_owner_keys_are_kept()
    if op.get_bind().dialect.name in MYSQL and not to_base:
        _refuse_names_that_pad_alike()
        _branch_names(mysql.VARCHAR(255, collation="utf8mb4_bin"))
    op.drop_table(_tables()["owner_keys"], schema=_tables()["schema"])


def _refuse_names_that_pad_alike() -> None:
    """`SchemaError` before any change where two branch names of a session differ only by
    trailing spaces: 0001's collation pads, and would find them one name twice."""
    if context.is_offline_mode():
        return
    name, session_pk = sa.column("name", sa.String), sa.column("session_pk", sa.Integer)
    branches = sa.table(_tables()["branches"], session_pk, name, schema=_tables()["schema"])
    padded = sa.func.rtrim(branches.c.name)
    twins = (
        sa.select(branches.c.session_pk, padded)
        .group_by(branches.c.session_pk, padded)
        .having(sa.func.count() > 1)
    )
    found = op.get_bind().execute(twins).all()
    if found:
        raise SchemaError(
            f"refusing to downgrade below revision {revision}: {len(found)} session(s) have "
            "branch names that differ only by trailing spaces (such as 'b' and 'b '), which "
            "revision 0001 reads as one name; nothing was changed. Where both are live, "
            "delete one (delete_branch); a deleted branch keeps its name, so where one is "
            "deleted already, only deleting the session (delete_session) or a downgrade to "
            "base goes past this"
        )


def _branch_names(kind: Any) -> None:
    op.alter_column(
        _tables()["branches"],
        "name",
        type_=kind,
        existing_nullable=False,
        schema=_tables()["schema"],
    )


def _refuse_while_owner_keys_are_kept() -> None:
    """`SchemaError` before any change when the owner keys table holds keys and the
    downgrade stops short of base (offline SQL cannot look)."""
    if context.is_offline_mode() or context.get_revision_argument() is None:
        return
    table = sa.table(_tables()["owner_keys"], schema=_tables()["schema"])
    kept = op.get_bind().execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
    if kept:
        raise SchemaError(
            f"refusing to downgrade below revision {revision}: {table.name} holds {kept} "
            "owner key(s), which wrap the data keys of every item sealed since that "
            "revision; dropping them would leave those items unreadable for good, even "
            "after upgrading again. Nothing was changed. To downgrade, first carry out "
            "what must be kept (`export_user`, `agents-sqlalchemy users export`) and "
            "remove the sealed sessions (`erase_user`, `delete_session`, `agents-sqlalchemy "
            "users erase`) until that table is empty; or downgrade to base, which drops "
            "every table of the library with its data"
        )
