"""Initial schema: sessions, items (and their keys), keyring, search index, branches, and
a view of the items in the Agents SDK's `agent_messages` layout.

Revision ID: 0001
Revises:
Create Date: 2025-01-01

Table names come from the migration context, never from the models: write
`name("items")` and `schema()` where autogenerate wrote a literal table name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of the model's types: SQLite only auto-increments an INTEGER PRIMARY KEY;
# on MySQL and MariaDB, TEXT and BLOB stop at 64 KB and DATETIME drops microseconds.
MYSQL = ("mysql", "mariadb")
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True).with_variant(mysql.DATETIME(fsp=6), *MYSQL)
LONG_TEXT = sa.Text().with_variant(mysql.LONGTEXT(), *MYSQL)
LONG_BINARY = sa.LargeBinary().with_variant(mysql.LONGBLOB(), *MYSQL)
# MySQL and MariaDB tables: InnoDB, utf8mb4 (emoji), binary collation (exact comparisons).
OPTIONS: dict[str, Any] = {
    f"{dialect}_{option}": value
    for dialect in MYSQL
    for option, value in (("engine", "InnoDB"), ("charset", "utf8mb4"), ("collate", "utf8mb4_bin"))
}


def name(role: str) -> str:
    """The configured name of a table role ("sessions", "items", ...)."""
    names: dict[str, str] = op.get_context().opts["agents_sqlalchemy_tables"]
    return names[role]


def schema() -> str | None:
    """The configured schema (None: the connection's default)."""
    schema_name: str | None = op.get_context().opts["agents_sqlalchemy_tables"]["schema"]
    return schema_name


def ref(role: str) -> str:
    """A foreign-key target: `[schema.]table.id`."""
    return f"{schema()}.{name(role)}.id" if schema() else f"{name(role)}.id"


# Constraint and index names, as the models' naming convention makes them.
def pk(table: str) -> str:
    return f"pk_{table}"


def fk(table: str, column: str) -> str:
    return f"fk_{table}_{column}"


def ix(table: str, *columns: str) -> str:
    return f"ix_{table}_{'_'.join(columns)}"


def uq(table: str, *columns: str) -> str:
    return f"uq_{table}_{'_'.join(columns)}"


def cascade(table: str, column: str, role: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        [column], [ref(role)], name=fk(table, column), ondelete="CASCADE"
    )


def index(table: str, *columns: str, **options: Any) -> None:
    op.create_index(ix(table, *columns), table, list(columns), schema=schema(), **options)


def upgrade() -> None:
    t = name("sessions")
    op.create_table(
        t,
        sa.Column("id", ID, nullable=False),
        sa.Column("session_id", LONG_TEXT, nullable=False),
        sa.Column("session_hash", sa.String(64), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=True),
        sa.Column("metadata", sa.JSON(), nullable=True),
        sa.Column("state", sa.JSON(), nullable=True),
        sa.Column("sealed_state", LONG_BINARY, nullable=True),
        sa.Column("next_seq", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.Column("archived_at", TIMESTAMP, nullable=True),
        sa.Column("parent_pk", ID, nullable=True),
        sa.PrimaryKeyConstraint("id", name=pk(t)),
        sa.UniqueConstraint("session_hash", name=uq(t, "session_hash")),
        cascade(t, "parent_pk", "sessions"),
        schema=schema(),
        sqlite_autoincrement=True,  # a deleted session's id is never given again
        **OPTIONS,
    )
    index(t, "updated_at", "id")
    index(t, "user_id", "updated_at", "id")
    # Only a branched session's companion row has a parent.
    companion = sa.text("parent_pk IS NOT NULL")
    index(t, "parent_pk", sqlite_where=companion, postgresql_where=companion)

    t = name("items")
    op.create_table(
        t,
        sa.Column("id", ID, nullable=False),
        sa.Column("session_pk", ID, nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("expires_at", TIMESTAMP, nullable=True),
        sa.Column("kek_id", sa.String(64), nullable=True),
        sa.Column("wrapped_key", sa.LargeBinary(), nullable=True),
        sa.Column("payload", LONG_TEXT, nullable=True),
        sa.Column("ciphertext", LONG_BINARY, nullable=True),
        sa.Column("batch_key", sa.String(64), nullable=True),
        sa.PrimaryKeyConstraint("id", name=pk(t)),
        cascade(t, "session_pk", "sessions"),
        sa.UniqueConstraint("session_pk", "seq", name=uq(t, "session_pk", "seq")),
        sa.UniqueConstraint("session_pk", "batch_key", name=uq(t, "session_pk", "batch_key")),
        schema=schema(),
        **OPTIONS,
    )
    # Most items never expire: the index holds only those that do.
    expiring = sa.text("expires_at IS NOT NULL")
    index(t, "expires_at", sqlite_where=expiring, postgresql_where=expiring)
    # What search reads of each live item of a session, from the index alone.
    columns = ["session_pk", "seq", "expires_at", "created_at"]
    op.create_index(f"ix_{t}_search", t, columns, schema=schema())

    t = name("keyring")
    op.create_table(
        t,
        sa.Column("kek_id", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("salt", sa.LargeBinary(), nullable=True),
        sa.Column("params", sa.JSON(), nullable=True),
        sa.Column("verifier", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("retired_at", TIMESTAMP, nullable=True),
        sa.PrimaryKeyConstraint("kek_id", name=pk(t)),
        schema=schema(),
        **OPTIONS,
    )

    t = name("search_index")
    op.create_table(
        t,
        sa.Column("id", ID, nullable=False),
        sa.Column("item_pk", ID, nullable=False),
        sa.Column("model_id", sa.String(200), nullable=False),
        sa.Column("terms", LONG_BINARY, nullable=True),
        sa.Column("vector", LONG_BINARY, nullable=True),
        sa.PrimaryKeyConstraint("id", name=pk(t)),
        cascade(t, "item_pk", "items"),
        sa.UniqueConstraint("item_pk", "model_id", name=uq(t, "item_pk", "model_id")),
        schema=schema(),
        **OPTIONS,
    )
    branches()


def branches() -> None:
    """Branches of a session, their items by reference, and token usage per turn."""
    t = name("branches")
    op.create_table(
        t,
        sa.Column("id", ID, nullable=False),
        sa.Column("session_pk", ID, nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("deleted_at", TIMESTAMP, nullable=True),
        sa.Column("turns", sa.Integer(), server_default="0", nullable=False),
        sa.Column("counted", sa.BigInteger(), server_default="0", nullable=False),
        sa.PrimaryKeyConstraint("id", name=pk(t)),
        cascade(t, "session_pk", "sessions"),
        sa.UniqueConstraint("session_pk", "name", name=uq(t, "session_pk", "name")),
        schema=schema(),
        **OPTIONS,
    )

    t = name("branch_items")
    op.create_table(
        t,
        sa.Column("branch_pk", ID, nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("item_pk", ID, nullable=False),
        sa.Column("turn", sa.Integer(), nullable=False),
        sa.Column("is_user", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("branch_pk", "seq", name=pk(t)),
        cascade(t, "branch_pk", "branches"),
        cascade(t, "item_pk", "items"),
        schema=schema(),
        **OPTIONS,
    )
    index(t, "item_pk")

    t = name("turn_usage")
    op.create_table(
        t,
        sa.Column("id", ID, nullable=False),
        sa.Column("session_pk", ID, nullable=False),
        sa.Column("branch_pk", ID, nullable=False),
        sa.Column("turn", sa.Integer(), nullable=False),
        sa.Column("requests", sa.BigInteger(), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("total_tokens", sa.BigInteger(), nullable=False),
        sa.Column("input_details", sa.JSON(), nullable=True),
        sa.Column("output_details", sa.JSON(), nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=pk(t)),
        cascade(t, "session_pk", "sessions"),
        cascade(t, "branch_pk", "branches"),
        sa.UniqueConstraint("branch_pk", "turn", name=uq(t, "branch_pk", "turn")),
        schema=schema(),
        **OPTIONS,
    )
    index(t, "session_pk")
    index(t, "created_at")
    messages_view()


def qualified(role: str) -> str:
    """`[schema.]name`, quoted as the database needs."""
    quote = op.get_context().dialect.identifier_preparer.quote
    schema_name = schema()
    return f"{quote(schema_name)}.{quote(name(role))}" if schema_name else quote(name(role))


def messages_view() -> None:
    """A read-only view in the layout of the SDK's `agent_messages` table: `id`,
    `session_id`, `message_data` (the item's JSON text) and `created_at`, for the live items
    of every session's main line (a plaintext store's; sealed items have no text to show).

    Queries written for the SDK's tables run against it with its name, e.g.
    `SELECT session_id, COUNT(*) FROM chat_messages_view GROUP BY session_id`.
    """
    dialect = op.get_context().dialect.name
    now = {
        "postgresql": "now()",
        "sqlite": "strftime('%Y-%m-%d %H:%M:%f', 'now')",  # as the naive UTC text stored
    }.get(dialect, "UTC_TIMESTAMP(6)")
    op.execute(
        f"CREATE VIEW {qualified('messages_view')} AS "
        "SELECT i.id AS id, s.session_id AS session_id, i.payload AS message_data, "
        "i.created_at AS created_at "
        f"FROM {qualified('items')} i JOIN {qualified('sessions')} s ON s.id = i.session_pk "
        "WHERE s.parent_pk IS NULL AND i.payload IS NOT NULL "
        f"AND (i.expires_at IS NULL OR i.expires_at > {now})"
    )


def downgrade() -> None:
    op.execute(f"DROP VIEW IF EXISTS {qualified('messages_view')}")
    roles = ("turn_usage", "branch_items", "branches", "search_index", "keyring")
    for role in (*roles, "items", "sessions"):
        op.drop_table(name(role), schema=schema())
