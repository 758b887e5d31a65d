"""The repository: every SQL statement of the library, one transaction per operation.

Writers to one session are serialised by bumping that session's `next_seq` first thing in
their transaction: the row lock on PostgreSQL, the database write lock on SQLite. The new
numbers give the batch its place, so no timestamp ever decides the order.

Example::

    repo = Repository(Database("agent.db"), build_models(TableNames()))
    await repo.append(SessionKey.of("chat-1"), 1, lambda seq: [NewItem(payload="{}")], None)
"""

from .compaction import CompactionOps
from .imports import ImportOps, SdkSource
from .items import ItemOps
from .keyring import KeyringOps
from .search import SearchOps
from .sessions import SessionOps


class Repository(ItemOps, CompactionOps, SessionOps, SearchOps, KeyringOps, ImportOps):
    """Items, sessions, search index, keyring and imports of one set of tables in a database."""


__all__ = ["Repository", "SdkSource"]
