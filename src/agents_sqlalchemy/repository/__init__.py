"""The repository: every SQL statement of the library, one transaction per operation.

Writers to one session are serialised by bumping that session's `next_seq` first thing in
their transaction: the row lock on PostgreSQL, the database write lock on SQLite. The new
numbers give the batch its place, so no timestamp ever decides the order.

Example::

    repo = Repository(Database("agent.db"), build_models(TableNames()))
    await repo.ensure_schema(create=True)
    await repo.append(SessionKey.of("chat-1"), 1, lambda seq: [NewItem(payload="{}")], None)
"""

from ..aio import settle
from .base import NewItem, SessionKey, StoredItem, utcnow
from .items import ItemOps
from .keyring import KeyringOps
from .schema import SchemaOps
from .search import Candidates, Postings, Scope, SearchOps, Unindexed
from .sessions import SessionOps


class Repository(ItemOps, SessionOps, SearchOps, KeyringOps, SchemaOps):
    """Items, sessions, search index, keyring and schema of one set of tables in a database."""


__all__ = [
    "Candidates",
    "NewItem",
    "Postings",
    "Repository",
    "Scope",
    "SessionKey",
    "StoredItem",
    "Unindexed",
    "settle",
    "utcnow",
]
