"""The repository: every SQL statement of the library, one transaction per operation.

One `Schema` (the database, its tables, the statements all share, the clock and the
session claim) and one class per concern built on it: `Items`, `Compaction`, `Sessions`,
`Lines` and `Branches`, `Usage`, `SearchIndex`, `KeyringRows`, `Imports`. A concern that
needs another is given it when it is made.

Writers to one session are serialised by bumping that session's `next_seq` first thing in
their transaction: the row lock on PostgreSQL, the database write lock on SQLite. The new
numbers give the batch its place, so no timestamp ever decides the order.

Example::

    schema = Schema(Database("agent.db"), build_models(TableNames()))
    items = Items(schema)
    await items.append(SessionKey.of("chat-1"), 1, lambda seq: [NewItem(payload="{}")], None)
"""

from __future__ import annotations

from ..database.units import Database
from ..models import Models
from ..types import SessionKey, StoredItem
from .branches import Branches
from .compaction import Compaction
from .imports import Imports, SdkSource
from .items import Items
from .keyring import KeyringRows
from .lines import GONE, Gone, Lines, Opened
from .schema import Schema
from .search import SearchIndex
from .sessions import Sessions
from .usage import Usage


class Repository:
    """Every concern of one set of tables in a database, and their methods by name (the
    services' way in, until each is given the concerns it uses)."""

    def __init__(self, db: Database, models: Models, *, sealed: bool = False) -> None:
        schema = Schema(db, models, sealed=sealed)
        self.schema = schema
        self.items = items = Items(schema)
        self.compaction = compaction = Compaction(schema)
        self.sessions = sessions = Sessions(schema)
        self.lines = lines = Lines(schema)
        self.branches = branches = Branches(schema, lines)
        self.usage = usage = Usage(schema, items, lines, branches)
        self.search = search = SearchIndex(schema)
        self.keyring = keyring = KeyringRows(schema)
        self.imports = imports = Imports(schema)
        self.release_loop = db.release_loop
        self.append, self.read, self.pop, self.clear = (
            items.append,
            items.read,
            items.pop,
            items.clear,
        )
        self.tail = compaction.tail
        self.replace_tail = compaction.replace_tail
        self.replace_all = compaction.replace_all
        self.describe = sessions.describe
        self.list_sessions = sessions.list_sessions
        self.read_session_columns = sessions.read_session_columns
        self.update_session = sessions.update_session
        self.sessions_where = sessions.sessions_where
        self.create_session = sessions.create_session
        self.archive_sessions = sessions.archive_sessions
        self.delete_sessions = sessions.delete_sessions
        self.purge_expired = sessions.purge_expired
        self.read_branch = branches.read_branch
        self.line_items = branches.line_items
        self.branch_summaries = branches.branch_summaries
        self.branch_state = branches.branch_state
        self.pop_line = branches.pop_line
        self.clear_lines = branches.clear_lines
        self.create_branch = branches.create_branch
        self.has_branches = branches.has_branches
        self.delete_branch = branches.delete_branch
        self.append_with_usage = usage.append_with_usage
        self.record_usage = usage.record_usage
        self.turn_usage = usage.turn_usage
        self.session_usage = usage.session_usage
        self.usage_by_day = usage.usage_by_day
        self.candidates = search.candidates
        self.count_live = search.count_live
        self.count_unindexed = search.count_unindexed
        self.unindexed = search.unindexed
        self.replace_index = search.replace_index
        self.latest_model_id = search.latest_model_id
        self.drop_other_models = search.drop_other_models
        self.scrub = keyring.scrub
        self.keyring_rows = keyring.keyring_rows
        self.add_keyring = keyring.add_keyring
        self.count_keys = keyring.count_keys
        self.has_plaintext_items = keyring.has_plaintext_items
        self.rewrap_keys = keyring.rewrap_keys
        self.rewrap_states = keyring.rewrap_states
        self.finish_rotation = keyring.finish_rotation
        self.sdk_history = imports.sdk_history
        self.import_session = imports.import_session

    async def hit_rows(self, item_pks: list[int]) -> dict[int, tuple[SessionKey, StoredItem]]:
        """`SearchIndex.hit_rows`, looked up on each call."""
        return await self.search.hit_rows(item_pks)

    async def vectors(
        self, item_pks: list[int], model_id: str
    ) -> dict[tuple[int, bytes | None], bytes]:
        """`SearchIndex.vectors`, looked up on each call."""
        return await self.search.vectors(item_pks, model_id)


__all__ = [
    "GONE",
    "Branches",
    "Compaction",
    "Gone",
    "Imports",
    "Items",
    "KeyringRows",
    "Lines",
    "Opened",
    "Repository",
    "Schema",
    "SdkSource",
    "SearchIndex",
    "Sessions",
    "Usage",
]
