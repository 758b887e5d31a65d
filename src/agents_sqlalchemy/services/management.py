"""Sessions as an operator sees them: create, describe, list, archive, delete, purge.

Removals run in batches, one transaction each, and destroy the removed items' keys.

Example::

    management = Management(Sessions(schema), SearchIndex(schema), opener)
    page = await management.list_sessions(user_id="alice", limit=20)
    removed = await management.delete(user_id="alice")
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..errors import AgentsSQLAlchemyError, ConfigurationError, OwnerKeyError, partly_done
from ..records import Removed, SessionInfo, SessionPage, decode_cursor, encode_cursor
from ..repository import SearchIndex, Sessions, deleted_note
from ..types import SessionKey, owner_of
from ..validation import (
    check_flag,
    check_moment,
    check_range,
    check_user_id,
    metadata_filter,
    older_than,
)
from .opener import Opener
from .owners import Destroyed, Owners, note_keys_destroyed

DELETE_BATCH = 500


class Management:
    """Describes, lists and removes sessions; purges expired items."""

    def __init__(
        self, sessions: Sessions, index: SearchIndex, opener: Opener, owners: Owners
    ) -> None:
        self._sessions = sessions
        self._index = index
        self._opener = opener
        self._owners = owners

    async def info(self, key: SessionKey) -> SessionInfo | None:
        """How the session stands (owner, metadata, times, live item count), or None."""
        await self._opener.ready()
        row = await self._sessions.describe(key)
        return _info(row) if row else None

    async def indexed_model(self) -> str | None:
        """The `model_id` of the embedder that indexed the latest item, or None."""
        await self._opener.ready()
        return await self._index.latest_model_id()

    async def list_sessions(
        self,
        *,
        user_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        limit: int = 50,
        cursor: str | None = None,
        archived: bool | None = False,
        need_key: bool = True,
    ) -> SessionPage:
        """A keyset-paginated page of sessions, most recently active first.

        With `need_key=False`, a store without a key lists an encrypted database too:
        nothing listed is sealed (a key given is still checked).
        """
        check_range("limit", limit, 1, 1000)
        user_id, metadata = check_user_id(user_id), metadata_filter(metadata)
        check_moment("updated_after", updated_after)
        check_moment("updated_before", updated_before)
        if archived is not None:
            check_flag("archived", archived)
        await (self._opener.ready() if need_key else self._opener.schema_ready())
        rows = await self._sessions.list_sessions(
            user_id=user_id,
            metadata=metadata,
            updated_after=updated_after,
            updated_before=updated_before,
            after=decode_cursor(cursor) if cursor else None,
            limit=limit + 1,
            archived=archived,
        )
        page = [_info(row) for row in rows[:limit]]
        last = rows[limit - 1] if len(rows) > limit else None
        return SessionPage(page, encode_cursor(last.updated_at, last.id) if last else None)

    async def create_as(self, key: SessionKey, *, archived_at: datetime | None = None) -> bool:
        """Make the row of session `key` (its owner and metadata); False if the id exists."""
        await self._opener.ready()
        return await self._sessions.create_session(key, archived_at)

    async def archive_if(self, key: SessionKey, was: datetime, *, archive: bool) -> bool:
        """Archive the session now (or restore it) if its `archived_at` is still `was`;
        whether it was."""
        return await self._sessions.archive_if(key, was, archive=archive)

    async def archive(self, *, archive: bool = True, **where: Any) -> int:
        """Archive (or restore) the sessions matching `where`; return how many changed."""
        if "inactive_for" in where:
            where["inactive_for"] = older_than(where["inactive_for"])
        await self._opener.ready()
        condition = self._sessions.sessions_where(**where)
        return await self._sessions.archive_sessions(condition, archive=archive, batch=DELETE_BATCH)

    async def archive_one(self, key: SessionKey, *, archive: bool = True) -> bool:
        """Archive (or restore) one session; whether it changed."""
        await self._opener.ready()
        condition = self._sessions.sessions_where(session_hash=key.hash)
        changed = await self._sessions.archive_sessions(
            condition, archive=archive, batch=DELETE_BATCH, session_id=key.session_id
        )
        return bool(changed)

    async def delete_one(self, key: SessionKey) -> Removed:
        """Delete one session: its items (and their keys), state and row."""
        return (await self.delete_with_keys(session_hash=key.hash, session_id=key.session_id))[0]

    async def delete_all(self, *, confirm: bool) -> Removed:
        """Delete every session; refused unless `confirm` is True."""
        if confirm is not True:
            raise ConfigurationError("delete_all deletes every session: pass confirm=True")
        return await self.delete()

    async def delete(self, **where: Any) -> Removed:
        """Delete the sessions matching `where` (see `Sessions.sessions_where`)."""
        return (await self.delete_with_keys(**where))[0]

    async def delete_with_keys(
        self, session_id: str | None = None, **where: Any
    ) -> tuple[Removed, Destroyed]:
        """`delete`, and what became of owner keys: those of the deleted sessions that had
        no user, and with `user_id`, that user's (every session of theirs is gone).
        `session_id`: the one session `where` names, which a busy lock's error names."""
        if "user_id" in where and check_user_id(where["user_id"]) is None:
            raise ConfigurationError("delete_user needs a user id, got None")
        if "inactive_for" in where:
            where["inactive_for"] = older_than(where["inactive_for"])
        await self._opener.ready()
        await self._owners.finish_erasures(strict=False)  # another's key stops no erasure
        condition = self._sessions.sessions_where(**where)
        owners: set[str] | None = set()
        if where.get("user_id") is not None:
            owners = {owner_of(where["user_id"], "")}
            await self._refuse_keys_of_others(condition, where["user_id"])
        elif not where:  # every session: every owner's key
            owners = None
        async with self._opener.scrubbing():
            # A user's keys go first, in the key store, then their rows: a key store that
            # fails then leaves everything to try again (after the sessions, the rows that
            # name the key would be gone, and the key alive). So do the keys of sessions
            # without a user (their own owners) that the deletion takes whatever happens
            # meanwhile (one session, every session): their rows go just after the sessions.
            # Those of a condition a write can end (inactive_for) go after their sessions,
            # as does a key made meanwhile for a new session: the deletion retires them (no
            # write seals under them), and a key store that fails leaves them retired, for
            # the next deletion or rotation to finish (`finish_erasures`).
            first = Destroyed(0, None, None)
            if owners:
                first = await self._owners.destroy(owners, erasing=True)
            early, removed = Destroyed(0, None, None), None
            try:
                own: list[str] | None = []
                if "inactive_for" not in where:
                    own = None if owners is None else await self._sessions.own_owners(condition)
                early, done = await self._owners.destroy_first(own)
                sessions, items, keys = await self._sessions.delete_sessions(
                    condition, DELETE_BATCH, owners, session_id
                )
                removed = Removed(sessions=sessions, items=items)
                destroyed = first.and_then(early)
                destroyed = destroyed.and_then(await self._owners.destroyed(keys, done))
            except BaseException as exc:
                self._owners.left_some()  # the batches it committed retired their keys
                # What is done for good, in order: the keys destroyed before the sessions
                # (those destroyed first in the database go only with their rows, after
                # the sessions), then the sessions (a failure between batches notes its
                # own), before any key destroyed after them (noted as it failed).
                if removed is not None and isinstance(exc, AgentsSQLAlchemyError):
                    partly_done(exc, deleted_note(removed.sessions, removed.items), first=True)
                kept_outside = self._owners.kept_outside
                before = first.keys + (early.keys if kept_outside else 0)
                note_keys_destroyed(exc, before, first=True)
                raise
        return removed, destroyed

    async def _refuse_keys_of_others(self, condition: Any, user_id: str) -> None:
        """Raise `OwnerKeyError`, nothing deleted, if the user's items are wrapped by a key
        the owner keys table gives to someone else: its erasure would leave it alive."""
        if self._opener.kek is None:
            return
        found = await self._sessions.keys_of_others(condition, owner_of(user_id, ""))
        if found:
            raise OwnerKeyError(
                f"items of user {user_id[:80]!r} are wrapped by owner key {found[0]}, which the "
                "owner keys table gives to another owner: it was altered outside the library; "
                "nothing was deleted or destroyed (restore the table from a backup)"
            )

    async def purge_expired(self, batch_size: int) -> int:
        """Delete expired items (reads already hide them), in batches; return how many."""
        check_range("batch_size", batch_size, 1)
        await self._opener.ready()
        async with self._opener.scrubbing():
            return await self._sessions.purge_expired(batch_size)


def _info(row: Any) -> SessionInfo:
    return SessionInfo(
        session_id=row.session_id,
        user_id=row.user_id,
        metadata=dict(row.metadata or {}),
        created_at=row.created_at,
        updated_at=row.updated_at,
        item_count=row.item_count,
        archived_at=row.archived_at,
    )
