"""Turns, token usage and branches of a session: the SDK's `AdvancedSQLiteSession` API, on
every database and in encrypted mode.

`StoreSession` inherits these methods; they keep the names, arguments and results of the
SDK's class so that code moves over unchanged. The current branch is this object's own
(each session object starts on "main"); a branch deleted or cleared by anyone sends an
object standing on it back to "main" at its next call.

Example::

    await Runner.run(agent, "hi", session=session)          # usage recorded as it runs
    branch = await session.create_branch_from_turn(2)       # and switch to it
    await Runner.run(agent, "try this instead", session=session)
    await session.get_session_usage(branch_id=branch)
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import BranchError
from .records import TokenUsage
from .repository import GONE
from .services import Services
from .services.branches import Turn
from .store_options import session_limit
from .turns import MAIN, kind, matcher, preview, texts, tool_name, tool_usage, usage_values, used
from .types import SessionKey

if TYPE_CHECKING:
    from agents.memory import SessionSettings

T = TypeVar("T")
logger = logging.getLogger(__name__)


class BranchMethods:
    """Turns, token usage and branches: the methods of the SDK's `AdvancedSQLiteSession`.

    Example::

        turns = await session.get_conversation_turns()
        branch = await session.create_branch_from_turn(turns[-1]["turn"], "retry")
        await session.switch_to_branch("main")
        await session.get_turn_usage(branch_id=branch)
    """

    session_id: str
    session_settings: SessionSettings | None
    _key: SessionKey
    _services: Services
    _ttl: timedelta | None
    _branch: str = MAIN
    _logger: logging.Logger = logger

    def _live(self) -> Services:
        """The store's services, unless this session was closed (see `StoreSession`)."""
        raise NotImplementedError

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
        found = await call(name)
        if found is not GONE:
            return found
        if branch_id is not None:
            return missing
        self._forget(name)
        return await call(MAIN)

    # -- the protocol on any branch (StoreSession's methods come here off the hot path) ------

    async def _read_line(self, limit: int | None, branch_id: str | None) -> list[Any]:
        limit = session_limit(limit, self.session_settings)
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
            self._forget(name)
            await branches.append(self._key, MAIN, items, self._ttl, usage)

    async def _pop_line(self) -> Any | None:
        branches = self._live().branches
        return await self._on(None, lambda name: branches.pop(self._key, name), None)

    async def _clear_lines(self) -> None:
        await self._live().branches.clear(self._key)
        self._branch = MAIN

    async def _one_line(self) -> bool:
        """Whether the session is a single line, read and written here: compaction may then
        replace its items (on a branched session it would take items other branches hold)."""
        return self._branch == MAIN and not await self._services.branches.branched(self._key)

    # -- usage ------------------------------------------------------------------------------

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

    async def get_session_usage(self, branch_id: str | None = None) -> dict[str, int] | None:
        """Usage summed over one branch's turns, or over every branch's; None if none."""
        found = await self._live().branches.session_usage(self._key, branch_id or None)
        return None if found is None else _session_usage(found)

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

    async def _turns(self, branch_id: str | None, *, users_only: bool) -> list[Turn]:
        branches = self._live().branches
        found: list[Turn] = await self._on(
            branch_id, lambda name: branches.turns(self._key, name, users_only=users_only), []
        )
        return found

    async def get_conversation_turns(self, branch_id: str | None = None) -> list[dict[str, Any]]:
        """The user turns of a branch: number, content (a preview and in full), time."""
        return [
            _turn(number, item.get("content", ""), at, 100)
            for number, _, at, item in await self._turns(branch_id, users_only=True)
        ]

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

    async def get_conversation_by_turns(
        self, branch_id: str | None = None
    ) -> dict[int, list[dict[str, str | None]]]:
        """Every item of a branch by user turn: its kind and the tool it calls, if any."""
        grouped: dict[int, list[dict[str, str | None]]] = {}
        for number, _, _, item in await self._turns(branch_id, users_only=False):
            grouped.setdefault(number, []).append(
                {"type": kind(item), "tool_name": tool_name(item)}
            )
        return grouped

    async def get_tool_usage(
        self, branch_id: str | None = None
    ) -> list[tuple[str | None, int, int]]:
        """(tool, calls, user turn) of a branch, by turn."""
        rows = await self._turns(branch_id, users_only=False)
        return tool_usage([(number, item) for number, _, _, item in rows])

    # -- branches ---------------------------------------------------------------------------

    async def create_branch_from_turn(
        self, turn_number: int, branch_name: str | None = None
    ) -> str:
        """Start a branch from user turn `turn_number` of the current branch and switch to it.

        The branch holds the items before that turn, by reference: nothing is copied. Without
        a name it gets `branch_from_turn_<n>_<unix time>`; a name is never used twice in a
        session, even after its branch is deleted. Raises `BranchError` if the turn has no
        user message or the name was used.
        """
        branches = self._live().branches
        source = self._branch
        name, used_source = await branches.create(self._key, source, turn_number, branch_name)
        if used_source != source:
            self._forget(source)
        self._logger.debug("created branch %r from turn %s of %r", name, turn_number, used_source)
        self._branch = name
        return name

    async def create_branch_from_content(
        self, search_term: str, branch_name: str | None = None
    ) -> str:
        """Start a branch from the first user turn containing `search_term`."""
        matches = await self.find_turns_by_content(search_term)
        if not matches:
            raise BranchError(f"No user turns found containing '{search_term}'")
        return await self.create_branch_from_turn(matches[0]["turn"], branch_name)

    async def switch_to_branch(self, branch_id: str) -> None:
        """Read and write branch `branch_id` from now on (`BranchError` if it holds nothing)."""
        if branch_id != MAIN and not await self._live().branches.exists(self._key, branch_id):
            raise BranchError(f"Branch '{branch_id}' does not exist")
        self._logger.debug("switched from branch %r to %r", self._branch, branch_id)
        self._branch = branch_id

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
