"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}

Table names come from the migration context, never from the models: write
`name("items")` and `schema()` where autogenerate wrote a literal table name.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
${imports if imports else ""}
revision: str = ${repr(up_revision)}
down_revision: str | Sequence[str] | None = ${repr(down_revision)}
branch_labels: str | Sequence[str] | None = ${repr(branch_labels)}
depends_on: str | Sequence[str] | None = ${repr(depends_on)}


def name(role: str) -> str:
    """The configured name of a table role ("sessions", "items", ...)."""
    names: dict[str, str] = op.get_context().opts["agents_sqlalchemy_tables"]
    return names[role]


def schema() -> str | None:
    """The configured schema (None: the connection's default)."""
    schema_name: str | None = op.get_context().opts["agents_sqlalchemy_tables"]["schema"]
    return schema_name


def upgrade() -> None:
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    ${downgrades if downgrades else "pass"}
