"""The management half of `SessionStore`'s façade: create, describe, list, archive and
remove sessions, and sum the token usage of every session.

`SessionStore` inherits these methods; each is one call into `services.management`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from .records import Removed, SessionInfo, SessionPage, UsageReport
from .services import Services
from .validation import session_key

if TYPE_CHECKING:
    from .store import SQLAlchemySession


class ManagementMethods:
    """Sessions as an operator sees them (mixed into `SessionStore`).

    Example::

        session = await store.create_session(user_id="alice")
        page = await store.list_sessions(user_id="alice", limit=20)
        await store.archive_inactive(older_than=timedelta(days=30))
        await store.delete_user("alice")
    """

    _services: Services
    if TYPE_CHECKING:
        session: Callable[..., SQLAlchemySession]

    async def create_session(
        self,
        *,
        user_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        **session_options: Any,
    ) -> SQLAlchemySession:
        """A new session with a fresh id (URL-safe, unguessable), listed from now on.

        `session.session_id` is the id to hand to the client; `session_options` are those
        of `store.session()` (`session_settings`, `ttl`).
        """
        session_id = await self._services.management.create(user_id, metadata)
        return self.session(session_id, user_id=user_id, metadata=metadata, **session_options)

    async def session_info(self, session_id: str) -> SessionInfo | None:
        """How the session stands (owner, metadata, times, live item count), or None."""
        return await self._services.management.info(session_key(session_id))

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
    ) -> SessionPage:
        """A page of sessions, most recently active first; follow `page.next_cursor`.

        Filters: the owner, metadata values (all must match), and an activity window.
        Pages are keyset-paginated, so a page costs the same however many sessions exist.
        Archived sessions are left out; `archived=True` lists only them, `None` both.
        """
        return await self._services.management.list_sessions(
            user_id=user_id,
            metadata=metadata,
            updated_after=updated_after,
            updated_before=updated_before,
            limit=limit,
            cursor=cursor,
            archived=archived,
        )

    async def delete_session(self, session_id: str) -> Removed:
        """Delete a session: its items (and their keys), state and row."""
        return await self._services.management.delete(session_hash=session_key(session_id).hash)

    async def delete_user(self, user_id: str) -> Removed:
        """Delete every session of a user, e.g. for an erasure request."""
        return await self._services.management.delete(user_id=user_id)

    async def purge_inactive(self, older_than: timedelta | float) -> Removed:
        """Delete the sessions with no activity for `older_than` (a timedelta or seconds,
        positive: `delete_all(confirm=True)` removes every session)."""
        return await self._services.management.delete(inactive_for=older_than)

    async def purge_expired(self, *, batch_size: int = 1000) -> int:
        """Delete expired items (reads already hide them), in batches; return how many."""
        return await self._services.management.purge_expired(batch_size)

    async def archive_inactive(self, older_than: timedelta | float) -> int:
        """Archive the sessions with no activity for `older_than` (a timedelta or seconds);
        return how many.

        Archived sessions keep their items and state and still read and write; they leave
        `list_sessions()` (see `archived=`) until `restore_session`. TTL, `purge_expired`,
        `purge_inactive` and `delete_user` apply to them as to any session.
        """
        return await self._services.management.archive(inactive_for=older_than)

    async def archive_session(self, session_id: str) -> bool:
        """Archive one session; False if it has no row or was archived already."""
        key = session_key(session_id)
        return bool(await self._services.management.archive(session_hash=key.hash))

    async def restore_session(self, session_id: str) -> bool:
        """Bring an archived session back into `list_sessions()`; False if it was not archived."""
        key = session_key(session_id)
        return bool(await self._services.management.archive(archive=False, session_hash=key.hash))

    async def delete_all(self, *, confirm: bool = False) -> Removed:
        """Delete every session of these tables, archived ones too; needs `confirm=True`."""
        return await self._services.management.delete_all(confirm=confirm)

    async def usage(
        self,
        *,
        user_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> UsageReport:
        """Token usage summed by the database per owner and UTC day, across sessions.

        `user_id` keeps one owner's sessions; `since`/`until` (timezone-aware) bound when
        each turn's usage was first recorded. `report.total` sums the rows.
        """
        return await self._services.branches.report(user_id=user_id, since=since, until=until)
