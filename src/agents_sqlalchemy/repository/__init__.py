"""The repository: every SQL statement of the library, one transaction per operation.

One `Schema` (the database, its tables, the statements all share, the clock and the
session claim) and one class per concern built on it: `Items`, `Compaction`, `Sessions`,
`Lines` and `Branches`, `Usage`, `SearchIndex`, `KeyringRows`, `OwnerKeyRows`, `Imports`.
A concern that needs another is given it when it is made.

Writers to one session are serialised by bumping that session's `next_seq` first thing in
their transaction: the row lock on PostgreSQL, the database write lock on SQLite. The new
numbers give the batch its place, so no timestamp ever decides the order.

Each service is given the concerns it uses (see `services.Services.build`).

Example::

    schema = Schema(Database("agent.db"), build_models(TableNames()))
    items = Items(schema)
    await items.append(SessionKey.of("chat-1"), 1, lambda seq: [NewItem(payload="{}")], None)
"""

from __future__ import annotations

from .branches import Branches
from .compaction import Compaction
from .imports import Imports, SdkSource
from .items import Items
from .keyring import KeyringRows
from .lines import GONE, Gone, Lines, Opened
from .owner_keys import OwnerKeyRows
from .schema import IMPORTING, Schema, is_importing
from .search import SearchIndex
from .sessions import Sessions, deleted_note
from .usage import Usage

__all__ = [
    "GONE",
    "IMPORTING",
    "Branches",
    "Compaction",
    "Gone",
    "Imports",
    "Items",
    "KeyringRows",
    "Lines",
    "Opened",
    "OwnerKeyRows",
    "Schema",
    "SdkSource",
    "SearchIndex",
    "Sessions",
    "Usage",
    "deleted_note",
    "is_importing",
]
