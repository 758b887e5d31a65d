"""What a session of ours does: the Agents SDK's session protocol, and the per-session extras.

`SQLAlchemySession` (in `store.py`, beside the store that mints it) adds only how one is
built; everything it does is here, each call a step into the store's services. Turns,
token usage and branches come from `BranchMethods` (`session_branches.py`).

The four protocol methods take the Runner's context as `wrapper=`: the SDK passes it to a
session whose four methods all accept it, and a session records each turn's token usage
from it as the run goes.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine

from .aio import run_blocking
from .errors import StoreClosedError
from .records import SearchHit
from .search import SearchMode
from .services import Services
from .session_branches import BranchMethods
from .store_options import default_settings, session_limit
from .turns import MAIN
from .types import Scope
from .validation import session_key, ttl_delta

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings

    from .store import SessionStore

_PROTOCOL = ("get_items", "add_items", "pop_item", "clear_session")
S = TypeVar("S", bound="StoreSession")


class StoreSession(BranchMethods):
    """One conversation of a `SessionStore`, as the SDK's `Session` protocol sees it."""

    def __init__(
        self,
        session_id: str,
        store: SessionStore,
        services: Services,
        *,
        user_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        ttl: float | timedelta | None = None,
        owns_store: bool = False,
    ) -> None:
        self._key = session_key(session_id, user_id, metadata)
        self.session_id = session_id
        self._store = store
        self._services = services
        self._ttl = ttl_delta(ttl)
        # The store's settings as they are now (None: the SDK's defaults, made with the SDK
        # when first read); this session's own are checked and resolved at once.
        self._settings_base = store._session_settings
        self._settings: SessionSettings | None = None
        self._settings_made = False
        if session_settings is not None:
            self.session_settings = self._resolved(session_settings)
        # A session built the SDK's way holds a share of its (shared) store; see `close`.
        self._owns_store = owns_store
        self._closed = False

    @property
    def session_settings(self) -> SessionSettings | None:
        """The store's settings with this session's own over them (made on first use: a
        session that only writes never loads the SDK)."""
        if not self._settings_made:
            self.session_settings = self._resolved(None)
        return self._settings

    @session_settings.setter
    def session_settings(self, value: SessionSettings | None) -> None:
        self._settings, self._settings_made = value, True

    def _resolved(self, own: SessionSettings | dict[str, Any] | None) -> SessionSettings:
        return (self._settings_base or default_settings()).resolve(own)

    @property
    def store(self) -> SessionStore:
        """The store that keeps this session."""
        return self._store

    @property
    def engine(self) -> AsyncEngine:
        """The engine for the running event loop."""
        return self._live().db.engine

    async def get_items(
        self, limit: int | None = None, branch_id: str | None = None, *, wrapper: Any = None
    ) -> list[TResponseInputItem]:
        """Items in order; `limit=n` gives the latest n (the settings' limit when None).

        They are the current branch's, or `branch_id`'s ("main" for the session's own).
        """
        if branch_id is None and self._branch == MAIN:
            limit = session_limit(limit, self.session_settings)
            return await self._live().conversation.read(self._key, limit)
        return await self._read_line(limit, branch_id)

    async def add_items(self, items: list[TResponseInputItem], *, wrapper: Any = None) -> None:
        """Append items to the current branch, all or nothing (with the run's usage so far)."""
        if wrapper is None and self._branch == MAIN:
            await self._live().conversation.append(self._key, items, self._ttl)
        else:
            await self._append_line(items, wrapper)

    async def pop_item(self, *, wrapper: Any = None) -> TResponseInputItem | None:
        """Remove and return the current branch's latest item, or None when there is none.

        An item that another branch still holds stays stored for it.
        """
        item: TResponseInputItem | None = await self._pop_line()
        return item

    async def clear_session(self, *, wrapper: Any = None) -> None:
        """Delete every item of every branch (their keys too) and the usage; back to main."""
        await self._clear_lines()

    # -- the SDK's compaction hooks (private names of openai-agents 0.24; README "Compaction")

    async def _get_compaction_snapshot(
        self, limit: int, *, prune_prefix: Callable[[Any], bool] | None = None
    ) -> Any:
        """For `OpenAIResponsesCompactionSession`: the latest `limit` items, and a
        `replace_suffix(start, output)` that swaps items from `start` on in one transaction
        (False, nothing changed, if the tail moved meanwhile). None: not offered."""
        import agents.memory.session as sdk_session  # loaded by the SDK's caller already

        snapshot = getattr(sdk_session, "_CompactionSnapshot", None)
        if snapshot is None or not self._owns_storage() or not await self._one_line():
            return None
        conversation = self._live().conversation
        items, tail = await conversation.tail(self._key, limit)

        async def replace_suffix(start: int, output: list[TResponseInputItem]) -> bool:
            return await conversation.replace_tail(self._key, tail, start, output, prune_prefix)

        return snapshot(items, tail.complete, replace_suffix)

    async def _atomic_replace_items(self, items: list[TResponseInputItem]) -> bool:
        """For `OpenAIResponsesCompactionSession`: replace the whole history in one transaction."""
        if not self._owns_storage() or not await self._one_line():
            return False
        await self._live().conversation.replace_all(self._key, items, self._ttl)
        return True

    def _owns_storage(self) -> bool:
        """False for a subclass that overrides the protocol: a replacement would bypass it."""
        cls = type(self)
        return all(getattr(cls, name) is getattr(StoreSession, name) for name in _PROTOCOL)

    # -- beyond the protocol: search, owner, metadata, state -----------------------------------

    async def search(
        self,
        query: str,
        *,
        limit: int = 5,
        mode: SearchMode = "hybrid",
        min_score: float | None = None,
    ) -> list[TResponseInputItem]:
        """The items of this session that best answer `query`, most relevant first.

        Only items with evidence are returned (a query term, or a vector standing out
        among the session's); none is an answer. `min_score` keeps instead every item whose
        score reaches it; queries hold at most `search.MAX_QUERY_CHARS` characters
        (`QueryTooLongError`).

        Example::

            await session.search("what is the dog called?", limit=1)
            # [{'role': 'user', 'content': 'remember my dog is called Mochi'}]
        """
        hits = await self.search_hits(query, limit=limit, mode=mode, min_score=min_score)
        return [hit.item for hit in hits]  # type: ignore[misc]

    async def search_hits(
        self,
        query: str,
        *,
        limit: int = 5,
        mode: SearchMode = "hybrid",
        min_score: float | None = None,
    ) -> list[SearchHit]:
        """`search`, with each item's place and scores (`SearchHit`)."""
        searcher = self._live().search()
        return await searcher.search(Scope(session=self._key), query, limit, mode, min_score)

    async def get_metadata(self) -> dict[str, Any]:
        """This session's metadata ({} if none)."""
        return await self._live().conversation.metadata(self._key)

    async def update_metadata(self, values: dict[str, Any]) -> dict[str, Any]:
        """Merge `values` into the metadata (None removes a name); return the result."""
        return await self._live().conversation.update_metadata(self._key, values)

    async def set_user_id(self, user_id: str | None) -> None:
        """Give this session to another owner (None: to nobody)."""
        await self._live().conversation.set_user_id(self._key, user_id)

    async def get_state(self, name: str, default: Any = None) -> Any:
        """One named state value (JSON), or `default`."""
        return (await self._live().conversation.state(self._key)).get(name, default)

    async def set_state(self, name: str, value: Any) -> None:
        """Set one named state value; `value` must be JSON-serialisable."""
        await self._live().conversation.change_state(self._key, name, value)

    async def delete_state(self, name: str) -> None:
        """Remove one named state value (no error if absent)."""
        await self._live().conversation.change_state(self._key, name, delete=True)

    # -- lifetime ------------------------------------------------------------------------------

    def _live(self) -> Services:
        if self._closed:
            raise StoreClosedError(
                f"session {self.session_id[:80]!r} was closed: nothing was read or written"
            )
        return self._services

    @property
    def closed(self) -> bool:
        """Whether `close()` was called on this session."""
        return self._closed

    async def close(self) -> None:
        """Release what this session owns; later calls on it raise `StoreClosedError`.

        A session built the SDK's way (`SQLAlchemySession(id, url)`, `from_url`, `engine=`)
        shares its store with the other sessions built on the same database and tables:
        the last of them to close closes the store (an engine the app passed stays open).
        A session from `store.session(...)` owns nothing: its store stays open.
        """
        if self._closed:
            return
        self._closed = True
        if self._owns_store:
            await self._store._release()

    async def __aenter__(self: S) -> S:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def __enter__(self: S) -> S:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        run_blocking(self.close)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.session_id!r}, store={self._store!r})"
