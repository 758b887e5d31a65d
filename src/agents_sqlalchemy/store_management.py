"""The store's session management: describe, list and remove sessions, purge items.

`SessionStore` inherits these methods; each is one call into `services/management.py`.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from .records import Removed, SessionInfo, SessionPage
from .services import Services
from .validation import session_key


class ManagementMethods:
    """Sessions as an operator sees them (mixed into `SessionStore`).

    Example::

        page = await store.list_sessions(user_id="alice", limit=20)
        await store.delete_user("alice")
    """

    _services: Services

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
    ) -> SessionPage:
        """A page of sessions, most recently active first; follow `page.next_cursor`.

        Filters: the owner, metadata values (all must match), and an activity window.
        Pages are keyset-paginated, so a page costs the same however many sessions exist.
        """
        return await self._services.management.list_sessions(
            user_id=user_id,
            metadata=metadata,
            updated_after=updated_after,
            updated_before=updated_before,
            limit=limit,
            cursor=cursor,
        )

    async def delete_session(self, session_id: str) -> Removed:
        """Delete a session: its items (and their keys), state and row."""
        return await self._services.management.delete(session_hash=session_key(session_id).hash)

    async def delete_user(self, user_id: str) -> Removed:
        """Delete every session of a user, e.g. for an erasure request."""
        return await self._services.management.delete(user_id=user_id)

    async def purge_inactive(self, older_than: timedelta) -> Removed:
        """Delete the sessions with no activity for `older_than`."""
        return await self._services.management.delete(inactive_for=older_than)

    async def purge_expired(self, *, batch_size: int = 1000) -> int:
        """Delete expired items (reads already hide them), in batches; return how many."""
        return await self._services.management.purge_expired(batch_size)
