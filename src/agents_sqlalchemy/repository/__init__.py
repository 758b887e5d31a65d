"""The repository: every SQL statement of the library, one transaction per operation.

Writers to one session are serialised by bumping that session's `next_seq` first thing in
their transaction: the row lock on PostgreSQL, the database write lock on SQLite. The new
numbers give the batch its place, so no timestamp ever decides the order.

Example::

    repo = Repository(Database("agent.db"), build_models(TableNames()))
    await repo.append(SessionKey.of("chat-1"), 1, lambda seq: [NewItem(payload="{}")], None)
"""

from .branches import GONE
from .compaction import CompactionOps
from .imports import ImportOps, SdkSource
from .items import ItemOps
from .keyring import KeyringOps
from .search import SearchOps
from .sessions import SessionOps
from .usage import UsageOps


class Repository(ItemOps, CompactionOps, SessionOps, SearchOps, KeyringOps, ImportOps, UsageOps):
    """Items, sessions, search index, keyring, imports, compaction, branches and usage of one
    set of tables in a database."""


__all__ = ["GONE", "Repository", "SdkSource"]
