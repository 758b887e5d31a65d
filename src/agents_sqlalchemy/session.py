"""What a session of ours is: the Agents SDK's session protocol, its compaction hooks, and
the per-session extras (search, owner, metadata, state), turns, token usage and branches.

`StoreSession` is built by a store (`SessionStore.session`, or the SDK's way through
`SQLAlchemySession`) from what it uses: the store's services, the settings it starts from,
and what to call when it is closed. Each call is a step into those services.

The four protocol methods take the Runner's context as `wrapper=`: the SDK passes it to a
session whose four methods all accept it, and a session records each turn's token usage
from it as the run goes. Turns, usage and branches keep the names, arguments and results
of the SDK's `AdvancedSQLiteSession`, so code moves over unchanged. The current branch is
this object's own (each session object starts on "main"); a branch deleted or cleared by
anyone sends an object standing on it back to "main" at its next call.

Example::

    session = store.session("user-123")
    await Runner.run(agent, "hi", session=session)          # usage recorded as it runs
    branch = await session.create_branch_from_turn(1)       # and switch to it
    await session.get_session_usage(branch_id=branch)

Session settings: the SDK's `SessionSettings` is imported only when settings are made:
importing the SDK loads all of `agents` (seconds), and many processes make no session.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine

from .aio import off_loop, run_blocking
from .errors import BranchError, ConfigurationError, StoreClosedError
from .history_check import HistoryReport, check_history, repaired_tail
from .records import SearchHit, TokenUsage
from .repository import GONE
from .search import SEARCH_MODES, SearchMode
from .services import Services
from .telemetry import current, detached, traced
from .turns import (
    MAIN,
    Turn,
    kind,
    matcher,
    preview,
    texts,
    tool_calls,
    tool_name,
    tool_usage,
    usage_values,
    used,
)
from .types import WHOLE, Scope
from .validation import check_flag, check_range, session_key, state_name, storable, ttl_delta

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings

T = TypeVar("T")
logger = logging.getLogger(__name__)

_PROTOCOL = ("get_items", "add_items", "pop_item", "clear_session")
S = TypeVar("S", bound="StoreSession")


class StoreSession:
    """One conversation of a store, as the SDK's `Session` protocol sees it, with its extras.

    Example::

        session = store.session("user-123", user_id="alice")
        await session.add_items([{"role": "user", "content": "hi"}])
        await session.get_items(limit=20)
        turns = await session.get_conversation_turns()
        await session.create_branch_from_turn(turns[-1]["turn"], "retry")
    """

    #: The SDK's `SQLAlchemySession` hooks a subclass may override; ours encodes items itself.
    _SDK_HOOKS = ("_serialize_item", "_deserialize_item")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass overriding the SDK's item hooks is refused: they would never be called,
        and items meant to be changed on their way in (redacted) would be stored as given."""
        super().__init_subclass__(**kwargs)
        if hooks := [name for name in cls._SDK_HOOKS if name in vars(cls)]:
            raise TypeError(
                f"{cls.__name__} overrides {' and '.join(hooks)}, which this library never "
                "calls (it encodes items itself): items would be stored as given. Change "
                "items in add_items and get_items instead, or wrap the session (as the SDK's "
                "EncryptedSession does)"
            )

    _logger: logging.Logger = logger

    def __init__(
        self,
        session_id: str,
        services: Services,
        *,
        settings: SessionSettings | dict[str, Any] | None = None,
        release: Callable[[], Awaitable[None]] | None = None,
        user_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        ttl: float | timedelta | None = None,
        repair_on_read: bool = False,
    ) -> None:
        self._key = session_key(session_id, user_id, metadata)
        self.session_id = session_id
        self._services = services
        self._ttl = ttl_delta(ttl)
        self._branch = MAIN
        self.repair_on_read = check_flag("repair_on_read", repair_on_read)
        # The store's settings as they are now and this session's own (checked at once; a
        # dict of a limit stays a dict): the SDK's `SessionSettings` is made of them only
        # when `session_settings` is read, so a process that never runs the SDK never loads it.
        self._settings_base = settings
        self._settings_own = settings_option(session_settings)
        self._settings: SessionSettings | None = None
        self._settings_made = False
        # A session built the SDK's way holds a share of its (shared) store; see `close`.
        self._release = release
        self._closed = False
        self._adopted = False  # see `_adopt`

    @property
    def session_settings(self) -> SessionSettings | None:
        """The store's settings with this session's own over them (made on first use: a
        session that only writes never loads the SDK)."""
        if not self._settings_made:
            base = sdk_settings(self._settings_base) or default_settings()
            self.session_settings = base.resolve(sdk_settings(self._settings_own))
        return self._settings

    @session_settings.setter
    def session_settings(self, value: SessionSettings | None) -> None:
        self._settings, self._settings_made = value, True

    def _limit(self, limit: int | None) -> int | None:
        """`limit` if given, else the settings' (read as they are, without making them)."""
        if limit is not None:
            return limit
        if self._settings_made:  # a dict too: the SDK's own sessions take one
            return settings_limit(self._settings)
        own = settings_limit(self._settings_own)
        return own if own is not None else settings_limit(self._settings_base)

    @property
    def engine(self) -> AsyncEngine:
        """The engine for the running event loop."""
        return self._live().db.engine

    @traced("read")
    async def get_items(
        self, limit: int | None = None, branch_id: str | None = None, *, wrapper: Any = None
    ) -> list[TResponseInputItem]:
        """Items in order; `limit=n` gives the latest n (the settings' limit when None).

        They are the current branch's, or `branch_id`'s ("main" for the session's own).
        """
        if not self._adopted:
            await self._adopt()
        if branch_id is None and self._branch == MAIN:
            items = await self._live().conversation.read(self._key, self._limit(limit))
        else:
            items = await self._read_line(limit, branch_id)
        return repaired_tail(items, self._limit(limit)) if self.repair_on_read else items

    @traced("append")
    async def add_items(
        self,
        items: list[TResponseInputItem],
        *,
        wrapper: Any = None,
        idempotency_key: str | None = None,
    ) -> None:
        """Append items to the current branch, all or nothing (with the run's usage so far).

        An append commits whole or not at all, even when its caller is cancelled: once it
        has started, cancelling the call does not stop the commit. To retry safely after a
        cancellation, a timeout or a lost connection, name the batch: a session that holds
        a batch of this `idempotency_key` already is left as it is, so the batch is stored
        once however often it is sent (the key is kept with the batch's first item, on the
        main line; on another branch, or with `wrapper=`, a key is `ConfigurationError`).

        Example::

            await session.add_items(items, idempotency_key=f"turn-{turn_id}")
        """
        if not self._adopted:
            await self._adopt()
        if wrapper is None and self._branch == MAIN:
            conversation = self._live().conversation
            await conversation.append(self._key, items, self._ttl, idempotency_key)
        elif idempotency_key is not None:
            raise ConfigurationError(
                "idempotency_key is taken on the main line without wrapper= (a run's usage): "
                "switch to 'main', or append without it; nothing was written"
            )
        else:
            await self._append_line(items, wrapper)

    @traced("pop", removed=lambda item: int(item is not None))
    async def pop_item(self, *, wrapper: Any = None) -> TResponseInputItem | None:
        """Remove and return the current branch's latest item, or None when there is none.

        An item that another branch still holds stays stored for it. Once started, a pop
        completes even if its caller is cancelled; the item is then removed and returned to
        nobody (as the SDK's own sessions do).
        """
        if not self._adopted:
            await self._adopt()
        item: TResponseInputItem | None = await self._pop_line()
        return item

    @traced("clear")
    async def clear_session(self, *, wrapper: Any = None) -> None:
        """Delete every item of every branch (their keys too) and the usage; back to main."""
        if not self._adopted:
            await self._adopt()
        await self._clear_lines()

    async def _adopt(self) -> None:
        """On first use: a session with history in the SDK's own tables and none here is
        imported or refused (`services.adoption`), never used as a new, empty one."""
        await self._live().adoption.check(self._key, self._ttl)
        self._adopted = True

    # -- history health (history_check.py) -----------------------------------------------------

    @traced("check")
    async def check(self, branch_id: str | None = None) -> HistoryReport:
        """What in the current branch's history (or `branch_id`'s) the model API would
        refuse: tool outputs without their call, calls never answered, an item id used twice.

        Example::

            report = await session.check()
            if not report.ok:
                print(report.summary())      # "1 orphaned tool output (12 items)"
                await session.repair()
        """
        if (self._branch if branch_id is None else branch_id) == MAIN:
            return await self._live().conversation.check(self._key)
        items = await self._read_line(WHOLE, branch_id)
        return await off_loop(len(items), check_history, items)

    @traced("repair")
    async def repair(self) -> HistoryReport:
        """Mend what `check()` finds, in one transaction, keeping every other item; return
        what was wrong (`report.ok`: nothing was). See `history_check` for what is done.

        A session with branches is left as it is (`BranchError`): a repair would change
        items other branches hold.
        """
        if not await self._one_line():
            raise BranchError(
                f"session {self.session_id[:80]!r} has branches: repair works on a session "
                "without them (delete the branches it no longer needs first)"
            )
        return await self._live().conversation.repair(self._key)

    # -- the SDK's compaction hooks (private names of openai-agents 0.24; README "Compaction")

    @traced("compaction_snapshot")
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
            probe = self._services.db.telemetry
            key = self._key
            with probe.operation("replace_tail", session_id=key.session_id, user_id=key.user_id):
                return await conversation.replace_tail(self._key, tail, start, output, prune_prefix)

        return snapshot(items, tail.complete, replace_suffix)

    @traced("replace_all")
    async def _atomic_replace_items(self, items: list[TResponseInputItem]) -> bool:
        """For `OpenAIResponsesCompactionSession`: replace the whole history in one transaction."""
        if not self._owns_storage() or not await self._one_line():
            return False
        return await self._live().conversation.replace_all(self._key, items, self._ttl)

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
        score reaches it; `limit` is 1 to 1,000; queries hold at most
        `search.MAX_QUERY_CHARS` characters (`QueryTooLongError`).

        Example::

            await session.search("what is the dog called?", limit=1)
            # [{'role': 'user', 'content': 'remember my dog is called Mochi'}]
        """
        hits = await self.search_hits(query, limit=limit, mode=mode, min_score=min_score)
        return [hit.item for hit in hits]  # type: ignore[misc]

    @traced("search", search=SEARCH_MODES)
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

    @traced("get_metadata", sessions=True)
    async def get_metadata(self) -> dict[str, Any]:
        """This session's metadata ({} if none)."""
        return await self._live().conversation.metadata(self._key)

    @traced("update_metadata", sessions=True)
    async def update_metadata(self, values: dict[str, Any]) -> dict[str, Any]:
        """Merge `values` into the metadata (None removes a name); return the result."""
        return await self._live().conversation.update_metadata(self._key, values)

    @traced("set_user_id", sessions=True, user_argument="user_id")
    async def set_user_id(self, user_id: str | None) -> None:
        """Give this session to another owner (None: to nobody)."""
        await self._live().conversation.set_user_id(self._key, user_id)

    @traced("get_state", sessions=True)
    async def get_state(self, name: str, default: Any = None) -> Any:
        """One named state value (JSON), or `default`."""
        return (await self._live().conversation.state(self._key)).get(state_name(name), default)

    @traced("set_state", sessions=True)
    async def set_state(self, name: str, value: Any) -> None:
        """Set one named state value; `value` must be JSON-serialisable."""
        await self._live().conversation.change_state(self._key, name, value)

    @traced("delete_state", sessions=True)
    async def delete_state(self, name: str) -> None:
        """Remove one named state value (no error if absent)."""
        await self._live().conversation.change_state(self._key, name, delete=True)

    # -- turns, token usage and branches (the SDK's AdvancedSQLiteSession API) -----------

    @property
    def current_branch_id(self) -> str:
        """The branch this session object reads and writes ("main" until it switches)."""
        return self._branch

    @property
    def _current_branch_id(self) -> str:
        """The SDK class's name for `current_branch_id`."""
        return self._branch

    def _forget(self, name: str) -> None:
        """Branch `name` is gone (deleted or cleared): back to main if this object was on it."""
        if self._branch == name:
            self._logger.info("branch %r no longer exists: back on 'main'", name)
            self._branch = MAIN

    async def _on(
        self, branch_id: str | None, call: Callable[[str], Awaitable[Any]], missing: T
    ) -> Any:
        """`call(branch)` on `branch_id` or the current branch; `missing` for a dead branch
        asked by name, the main line's answer when the current branch died."""
        name = self._branch if branch_id is None else branch_id
        if not storable(name):  # no branch has a name no database stores
            return missing
        found = await call(name)
        if found is not GONE:
            return found
        if branch_id is not None:
            return missing
        self._forget(name)
        return await call(MAIN)

    # -- the protocol on any branch (the methods above come here off the hot path) ----------

    async def _read_line(self, limit: int | None, branch_id: str | None) -> list[Any]:
        limit = self._limit(limit)
        conversation, branches = self._live().conversation, self._live().branches

        async def read(name: str) -> Any:
            if name == MAIN:
                return await conversation.read(self._key, limit)
            return await branches.read(self._key, name, limit)

        found: list[Any] = await self._on(branch_id, read, [])
        return found

    async def _append_line(self, items: list[Any], wrapper: Any) -> None:
        usage = usage_values(getattr(wrapper, "usage", None))
        usage = usage if used(usage) else None
        name = self._branch
        if name == MAIN and usage is None:
            await self._live().conversation.append(self._key, items, self._ttl)
            return
        branches = self._live().branches
        if not await branches.append(self._key, name, items, self._ttl, usage):
            self._forget(name)  # as the SDK's session does after a clear elsewhere
            await branches.append(self._key, MAIN, items, self._ttl, usage)

    async def _pop_line(self) -> Any | None:
        branches = self._live().branches
        return await self._on(None, lambda name: branches.pop(self._key, name), None)

    async def _clear_lines(self) -> None:
        removed = await self._live().branches.clear(self._key)
        if (operation := current()) is not None:
            operation.removed(removed)
        self._branch = MAIN

    async def _one_line(self) -> bool:
        """Whether the session is a single line, read and written here: compaction may then
        replace its items (on a branched session it would take items other branches hold)."""
        return self._branch == MAIN and not await self._services.branches.branched(self._key)

    # -- usage ------------------------------------------------------------------------------

    @traced("store_run_usage")
    async def store_run_usage(self, result: Any) -> None:
        """Record a run's token usage on the current user turn of the current branch.

        Sessions record it themselves as the Runner goes (it hands them its context), so
        this is only needed for runs made without one; recording a run again replaces its
        figures, it never adds them twice.
        """
        values = usage_values(getattr(getattr(result, "context_wrapper", None), "usage", None))
        if values is not None:
            branches = self._live().branches
            await self._on(None, lambda name: branches.record(self._key, name, values), False)

    @traced("get_session_usage")
    async def get_session_usage(self, branch_id: str | None = None) -> dict[str, int] | None:
        """Usage summed over one branch's turns, or over every branch's; None if none."""
        found = await self._live().branches.session_usage(self._key, branch_id or None)
        return None if found is None else _session_usage(found)

    @traced("get_turn_usage")
    async def get_turn_usage(
        self, user_turn_number: int | None = None, branch_id: str | None = None
    ) -> list[dict[str, Any]] | dict[str, Any]:
        """Usage of one turn (a dict, {} if none) or of every turn (a list) of a branch."""
        branches = self._live().branches
        rows: list[dict[str, Any]] = await self._on(
            branch_id, lambda name: branches.turn_usage(self._key, name, user_turn_number), []
        )
        shaped = [_turn_usage(row) for row in rows]
        if user_turn_number is None:
            return shaped
        if not shaped:
            return {}
        del shaped[0]["user_turn_number"]
        return shaped[0]

    # -- turns ------------------------------------------------------------------------------

    async def _turns(
        self,
        branch_id: str | None,
        *,
        users_only: bool,
        shape: Callable[[list[Turn]], list[Any]] | None = None,
    ) -> list[Any]:
        """A branch's items with their turns (`Turn`), or what `shape` makes of them."""
        branches = self._live().branches
        found: list[Any] = await self._on(
            branch_id,
            lambda name: branches.turns(self._key, name, users_only=users_only, shape=shape),
            [],
        )
        return found

    @traced("get_conversation_turns")
    async def get_conversation_turns(self, branch_id: str | None = None) -> list[dict[str, Any]]:
        """The user turns of a branch: number, content (a preview and in full), time."""
        return [
            _turn(number, item.get("content", ""), at, 100)
            for number, _, at, item in await self._turns(branch_id, users_only=True)
        ]

    @traced("find_turns_by_content")
    async def find_turns_by_content(
        self, search_term: str, branch_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The user turns whose text contains `search_term` (literally; ASCII letters in
        any case), matched in memory: nothing of it is stored beside the items."""
        pattern = matcher(search_term)
        return [
            _turn(number, item.get("content", ""), at, None)
            for number, _, at, item in await self._turns(branch_id, users_only=True)
            if any(pattern.search(text) for text in texts(item.get("content", "")))
        ]

    @traced("get_conversation_by_turns")
    async def get_conversation_by_turns(
        self, branch_id: str | None = None
    ) -> dict[int, list[dict[str, str | None]]]:
        """Every item of a branch by user turn: its kind and the tool it calls, if any."""
        parts = await self._turns(branch_id, users_only=False, shape=_kinds)
        return await off_loop(sum(map(len, parts)), _by_turns, parts)

    @traced("get_tool_usage")
    async def get_tool_usage(
        self, branch_id: str | None = None
    ) -> list[tuple[str | None, int, int]]:
        """(tool, calls, user turn) of a branch, by turn."""
        calls = await self._turns(branch_id, users_only=False, shape=_tool_calls)
        return await off_loop(len(calls), tool_usage, calls)

    # -- branches ---------------------------------------------------------------------------

    @traced("create_branch")
    async def create_branch_from_turn(
        self, turn_number: int, branch_name: str | None = None
    ) -> str:
        """Start a branch from user turn `turn_number` of the current branch and switch to it.

        The branch holds the items before that turn, by reference: nothing is copied. Without
        a name it gets `branch_from_turn_<n>_<unix time>`; a name is never used twice in a
        session, even after its branch is deleted. Raises `BranchError` if the turn has no
        user message or the name was used.
        """
        return await self._branch_from(turn_number, branch_name)

    @traced("create_branch")
    async def create_branch_from_content(
        self, search_term: str, branch_name: str | None = None
    ) -> str:
        """Start a branch from the first user turn containing `search_term`."""
        with detached():  # the turns it looks in are not read for the caller
            matches = await self.find_turns_by_content(search_term)
        if not matches:
            raise BranchError(f"No user turns found containing '{search_term}'")
        return await self._branch_from(matches[0]["turn"], branch_name)

    async def _branch_from(self, turn_number: int, branch_name: str | None) -> str:
        """`create_branch_from_turn`, within the operation that calls it."""
        branches = self._live().branches
        source = self._branch
        name, used_source = await branches.create(self._key, source, turn_number, branch_name)
        if used_source != source:
            self._forget(source)
        self._logger.debug("created branch %r from turn %s of %r", name, turn_number, used_source)
        self._branch = name
        return name

    @traced("switch_branch")
    async def switch_to_branch(self, branch_id: str) -> None:
        """Read and write branch `branch_id` from now on (`BranchError` if it holds nothing)."""
        if branch_id != MAIN and not await self._live().branches.exists(self._key, branch_id):
            raise BranchError(f"Branch '{branch_id}' does not exist")
        self._logger.debug("switched from branch %r to %r", self._branch, branch_id)
        self._branch = branch_id

    @traced("delete_branch")
    async def delete_branch(self, branch_id: str, force: bool = False) -> None:
        """Delete a branch, its usage, and the items no other branch holds (their keys too).

        "main" cannot be deleted, nor the current branch without `force=True` (which moves
        this object to "main" first). The name stays reserved.
        """
        if not isinstance(branch_id, str) or not branch_id.strip():
            raise BranchError("Branch ID cannot be empty")
        if branch_id == MAIN:
            raise BranchError("Cannot delete the 'main' branch")
        branches = self._live().branches
        if branch_id == self._branch:
            if not force:
                raise BranchError(
                    f"Cannot delete current branch '{branch_id}'. "
                    "Use force=True or switch branches first"
                )
            if not await branches.exists(self._key, branch_id):
                raise BranchError(f"Branch '{branch_id}' does not exist")
            self._branch = MAIN
        if not await branches.delete(self._key, branch_id):
            raise BranchError(f"Branch '{branch_id}' does not exist")
        self._logger.debug("deleted branch %r", branch_id)

    @traced("list_branches")
    async def list_branches(self) -> list[dict[str, Any]]:
        """The branches that hold items: id, item count, user turns, current or not, since."""
        branches = self._live().branches
        if self._branch != MAIN and not await branches.alive(self._key, self._branch):
            self._forget(self._branch)
        return [
            {
                "branch_id": summary.name,
                "message_count": summary.items,
                "user_turns": summary.user_turns,
                "is_current": summary.name == self._branch,
                "created_at": summary.created_at,
            }
            for summary in await branches.summaries(self._key)
        ]

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
        if self._release is not None:
            await self._release()

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
        return f"{type(self).__name__}({self.session_id!r})"


def _tool_calls(rows: list[Turn]) -> list[tuple[int, str, str | None]]:
    """The items that call tools, as `tool_usage` counts them."""
    return tool_calls((number, item) for number, _, _, item in rows)


def _kinds(rows: list[Turn]) -> list[dict[int, list[dict[str, str | None]]]]:
    """Each item's kind and the tool it calls, if any, by user turn: one mapping for all
    `rows` (a pair per item would hold the collector up, see `tool_calls`)."""
    grouped: dict[int, list[dict[str, str | None]]] = {}
    for number, _, _, item in rows:
        grouped.setdefault(number, []).append({"type": kind(item), "tool_name": tool_name(item)})
    return [grouped]


def _by_turns(
    parts: list[dict[int, list[dict[str, str | None]]]],
) -> dict[int, list[dict[str, str | None]]]:
    """The `_kinds` of a line's slices, together."""
    grouped: dict[int, list[dict[str, str | None]]] = {}
    for part in parts:
        for number, described in part.items():
            if number in grouped:  # a turn that spans two slices
                grouped[number] += described
            else:
                grouped[number] = described
    return grouped


def _turn(number: int, content: Any, at: Any, preview_length: int | None) -> dict[str, Any]:
    return {
        "turn": number,
        "content": preview(content, preview_length),
        "full_content": content,
        "timestamp": at,
        "can_branch": True,
    }


def _session_usage(usage: TokenUsage) -> dict[str, int]:
    return {
        "requests": usage.requests,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "total_turns": usage.turns,
    }


def _turn_usage(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "user_turn_number": row["turn"],
        "requests": row["requests"],
        "input_tokens": row["input_tokens"],
        "output_tokens": row["output_tokens"],
        "total_tokens": row["total_tokens"],
        "input_tokens_details": row["input_details"],
        "output_tokens_details": row["output_details"],
    }


def settings_option(
    value: SessionSettings | dict[str, Any] | None,
) -> SessionSettings | dict[str, Any] | None:
    """Session settings checked as the SDK checks them; None stays None.

    A dict that sets only `limit` (None or a whole number >= 0) is kept as it is, so no SDK
    is loaded for it; anything else is coerced by the SDK (its `TypeError` for an unknown
    name, as its own sessions raise; a value it refuses is a `ConfigurationError`).

    >>> settings_option({"limit": 20})
    {'limit': 20}
    """
    if value is None:
        return None
    if isinstance(value, dict) and set(value) <= {"limit"}:
        limit = value.get("limit")
        if limit is None or (isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0):
            return dict(value)
    from agents.memory.session_settings import SessionSettings, coerce_session_settings
    from pydantic import ValidationError

    if not isinstance(value, (dict, SessionSettings)):
        raise ConfigurationError(
            f"session_settings must be a SessionSettings or a dict, got {value!r:.80}"
        )
    try:
        settings = coerce_session_settings(value)
    except ValidationError as exc:  # {"limit": 2.5}
        raise ConfigurationError(f"session_settings refused: {exc}") from exc
    if settings is not None and settings.limit is not None:  # the SDK takes {"limit": -1}
        check_range("session_settings limit", settings.limit, 0)
    return settings


def sdk_settings(value: SessionSettings | dict[str, Any] | None) -> SessionSettings | None:
    """The SDK's `SessionSettings` of checked settings (None stays None)."""
    if value is None or not isinstance(value, dict):
        return value
    from agents.memory.session_settings import coerce_session_settings

    return coerce_session_settings(value)


def default_settings() -> SessionSettings:
    """The SDK's default session settings (no limit)."""
    from agents.memory import SessionSettings

    return SessionSettings()


def settings_limit(settings: SessionSettings | dict[str, Any] | None) -> int | None:
    """The limit checked settings set (None: none).

    >>> settings_limit(None), settings_limit({"limit": 3})
    (None, 3)
    """
    if settings is None:
        return None
    limit = settings.get("limit") if isinstance(settings, dict) else settings.limit
    return None if limit is None else int(limit)
