"""What the compaction tests share: the `responses.compact` stand-in, a spy on our hooks, and
a scripted agent whose turns fill a session the way Runner does.

The stand-in is the only fake: the SDK's `OpenAIResponsesCompactionSession`, `Runner` and
`EncryptedSession` are the real ones, and the session is ours on a real database.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from agents import Agent, Runner
from agents.memory import OpenAIResponsesCompactionSession, Session
from agents.testing import ModelStep, ScriptedModel, assistant_message

from agents_sqlalchemy.session import StoreSession

#: What the stand-in returns for every compaction: a summary message and an opaque item.
SUMMARY: list[dict[str, Any]] = [
    {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "summary: the dog is called Mochi 🐶"}],
    },
    {"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque-compacted-state"},
]


class CompactEndpoint:
    """Stands in for `AsyncOpenAI().responses.compact`: records each call, returns `output`.

    `during` (if given) runs inside the call: between the SDK's snapshot and its replacement.
    """

    def __init__(
        self,
        output: list[dict[str, Any]] | None = None,
        during: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.output = SUMMARY if output is None else output
        self.during = during
        self.calls: list[dict[str, Any]] = []
        self.responses = self  # the SDK calls client.responses.compact(...)

    async def compact(self, **kwargs: Any) -> Any:
        self.calls.append(copy.deepcopy(kwargs))
        if self.during is not None:
            await self.during()
        return SimpleNamespace(output=copy.deepcopy(self.output), usage=None)


def compacting(
    session: Session, endpoint: CompactEndpoint, trigger: bool = True
) -> OpenAIResponsesCompactionSession:
    """The SDK's compaction wrapper over `session`; compacts after every turn if `trigger`."""
    return OpenAIResponsesCompactionSession(
        session.session_id,
        session,
        client=endpoint,  # type: ignore[arg-type]
        model="gpt-4.1",
        should_trigger_compaction=lambda context: trigger,
    )


@dataclass
class HookCalls:
    """What the SDK asked of our session while compacting."""

    snapshots: list[int] = field(default_factory=list)  # the limits asked for
    suffixes: list[bool] = field(default_factory=list)  # what replace_suffix returned
    replaced_all: list[int] = field(default_factory=list)  # items given to _atomic_replace_items
    cleared: int = 0  # clear_session calls: the non-atomic fallback

    def atomic(self) -> bool:
        """Whether every replacement went through a hook and none through clear + add."""
        return bool(self.suffixes or self.replaced_all) and self.cleared == 0


@pytest.fixture
def hooks(monkeypatch: pytest.MonkeyPatch) -> HookCalls:
    """Spy on our compaction hooks and on `clear_session` (the SDK's fallback path)."""
    calls = HookCalls()
    snapshot = StoreSession._get_compaction_snapshot
    replace_all = StoreSession._atomic_replace_items
    clear = StoreSession.clear_session

    async def spy_snapshot(self: StoreSession, limit: int, *, prune_prefix: Any = None) -> Any:
        calls.snapshots.append(limit)
        found = await snapshot(self, limit, prune_prefix=prune_prefix)
        if found is None:
            return None

        async def replace_suffix(start: int, output: list[Any]) -> bool:
            replaced = await found.replace_suffix(start, output)
            calls.suffixes.append(replaced)
            return bool(replaced)

        return dataclasses.replace(found, replace_suffix=replace_suffix)

    async def spy_replace_all(self: StoreSession, items: list[Any]) -> bool:
        calls.replaced_all.append(len(items))
        return await replace_all(self, items)

    async def spy_clear(self: StoreSession) -> None:
        calls.cleared += 1
        await clear(self)

    monkeypatch.setattr(StoreSession, "_get_compaction_snapshot", spy_snapshot)
    monkeypatch.setattr(StoreSession, "_atomic_replace_items", spy_replace_all)
    monkeypatch.setattr(StoreSession, "clear_session", spy_clear)
    return calls


def replying_agent(replies: int, tag: str = "reply") -> Agent:
    """An agent whose scripted model answers its next `replies` calls with "TAG N"."""
    model = ScriptedModel(
        [
            ModelStep(
                output=[assistant_message(f"{tag} {i}", item_id=f"msg_{tag}_{i}")],
                response_id=f"resp_{tag}_{i}",
            )
            for i in range(replies)
        ]
    )
    return Agent(name="assistant", model=model)


async def turns(session: Session, count: int, tag: str = "turn") -> None:
    """`count` Runner turns: each stores a user message and the scripted reply."""
    agent = replying_agent(count, tag)
    for i in range(count):
        await Runner.run(agent, f"{tag} {i}: tell me about Mochi", session=session)
