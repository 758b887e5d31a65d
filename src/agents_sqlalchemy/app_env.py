"""Filters for an app's own Alembic `env.py`, so its autogenerate leaves our tables alone.

An app that runs `alembic revision --autogenerate` on the database that also holds this
library's tables would otherwise see them as unknown and write `drop_table` for each.

Example (the app's `env.py`)::

    from agents_sqlalchemy import TableNames
    from agents_sqlalchemy.app_env import LibraryTables

    ours = LibraryTables(TableNames(prefix="chat_"))
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        include_name=ours.include_name,
        include_object=ours.include_object,
    )
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .tables import ROLES, TableNames


class LibraryTables:
    """The tables of one or more `TableNames` (default: `TableNames()`), version table included.

    `include_name` and `include_object` have the signatures Alembic's `context.configure`
    expects and return False for our tables; `only_ours` is the opposite `include_name`,
    used by the library's own env.py.

    Example::

        ours = LibraryTables(TableNames(), TableNames(prefix="chat_"))
        ours.include_name("chat_items", "table", {"schema_name": None})    # False
        ours.include_name("app_users", "table", {"schema_name": None})     # True
    """

    def __init__(self, *tables: TableNames) -> None:
        self._tables = tables or (TableNames(),)
        self._names = {(names.schema, names.name(role)) for names in self._tables for role in ROLES}
        self._schemas = {names.schema for names in self._tables}

    def is_ours(self, name: str | None, schema: str | None) -> bool:
        """Whether a table (`schema` None: the default schema) is one of ours."""
        return (schema, name) in self._names or (
            schema is None and any((s, name) in self._names for s in self._schemas)
        )

    def include_name(self, name: str | None, type_: str, parent_names: Mapping[str, Any]) -> bool:
        """Alembic `include_name`: skip our tables when reflecting the app's database."""
        if type_ != "table":
            return True
        return not self.is_ours(name, parent_names.get("schema_name"))

    def include_object(
        self, obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
    ) -> bool:
        """Alembic `include_object`: skip our tables, reflected or in a metadata."""
        if type_ != "table":
            return True
        return not self.is_ours(name, getattr(obj, "schema", None))

    def only_ours(self, name: str | None, type_: str, parent_names: Mapping[str, Any]) -> bool:
        """Alembic `include_name` for the library's own env: our schema and tables only."""
        if type_ == "schema":
            return name is None or name in self._schemas
        if type_ == "table":
            return self.is_ours(name, parent_names.get("schema_name"))
        return True
