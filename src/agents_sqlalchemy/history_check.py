"""What would make the model API refuse a history, and the history with it mended.

The Responses API answers 400 to a history that holds a tool output without its call (one
orphan, and every later turn of the session fails), a tool call without its output (an
interrupted turn: the process died between the model's call and the tool's answer), or one
item id twice (a batch written again after a retry). This module finds them in a list of
items and mends them; it reads and writes nothing (`session.check()` and `session.repair()`
apply it to a stored session, `repair_on_read=True` to every read).

What `repaired` does, keeping every other item as it was and in its order:

- an output whose call is nowhere in the history is dropped;
- a function or custom tool call never answered gets an output saying so
  (`INTERRUPTED_OUTPUT`), after the run of calls it belongs to; another kind of call
  never answered (computer, shell, patch, MCP approval) is dropped, with the reasoning
  item just before it when nothing else followed that reasoning;
- a later copy of an item id is dropped when it is the same item, else kept without its id.

Example::

    report = check_history(items)
    if not report.ok:
        print(report.summary())
        items = repaired(items).items
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

#: Each output type, and the type of the call it answers.
OUTPUT_OF: dict[str, str] = {
    "function_call_output": "function_call",
    "custom_tool_call_output": "custom_tool_call",
    "computer_call_output": "computer_call",
    "local_shell_call_output": "local_shell_call",
    "shell_call_output": "shell_call",
    "apply_patch_call_output": "apply_patch_call",
    "mcp_approval_response": "mcp_approval_request",
}
CALL_TYPES = frozenset(OUTPUT_OF.values())
# The calls an output can be made up for: their output is text.
ANSWERABLE = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
}
#: The output `repaired` gives a function or custom tool call that was never answered.
INTERRUPTED_OUTPUT = "[no result: the run stopped before this tool call was answered]"

Kind = Literal["orphan_output", "unanswered_call", "duplicate_id"]


@dataclass(frozen=True)
class HistoryProblem:
    """One thing the model API would refuse: its kind, where it is (0-based position in the
    history read), and the call or item id concerned."""

    kind: Kind
    index: int
    ref: str
    item_type: str

    def describe(self) -> str:
        """One line saying what is wrong, e.g. for a command line; items are counted from 1,
        as `sessions show` and the session browser number them."""
        where = f"item {self.index + 1}"
        if self.kind == "orphan_output":
            return f"{where}: {self.item_type} for call {self.ref!r}, which is not there"
        if self.kind == "unanswered_call":
            return f"{where}: {self.item_type} {self.ref!r} was never answered"
        return f"{where}: id {self.ref!r} ({self.item_type}) was already used"


@dataclass(frozen=True)
class HistoryReport:
    """What `check_history` (or `session.check()`) found; `ok` when nothing.

    Example::

        report = await session.check()
        report.ok, report.count("orphan_output"), report.summary()
    """

    problems: tuple[HistoryProblem, ...] = ()
    items_checked: int = 0

    @property
    def ok(self) -> bool:
        """Whether the model API would take this history."""
        return not self.problems

    def count(self, kind: Kind) -> int:
        """How many problems of one kind."""
        return sum(problem.kind == kind for problem in self.problems)

    def summary(self) -> str:
        """A short line: "healthy", or the counts of each kind found."""
        if self.ok:
            return f"healthy ({_items(self.items_checked)})"
        kinds: tuple[Kind, ...] = ("orphan_output", "unanswered_call", "duplicate_id")
        words = {
            "orphan_output": ("orphaned tool output", "orphaned tool outputs"),
            "unanswered_call": ("unanswered tool call", "unanswered tool calls"),
            "duplicate_id": ("duplicate item id", "duplicate item ids"),
        }
        parts = []
        for kind in kinds:
            number = self.count(kind)
            if number:
                parts.append(f"{number} {words[kind][number != 1]}")
        return ", ".join(parts) + f" ({_items(self.items_checked)})"


@dataclass(frozen=True)
class Repair:
    """A history mended by `repaired`: the items, the report of what was wrong, and where
    each item comes from (`origins[i]`: the index, in the history read, of the item that
    `items[i]` is, or of the call a made-up answer follows), so that each keeps its times."""

    items: list[Any]
    report: HistoryReport = field(default_factory=HistoryReport)
    origins: list[int] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return not self.report.ok


def _items(number: int) -> str:
    return f"{number} item" if number == 1 else f"{number} items"


def _type(item: Any) -> str:
    kind = item.get("type") if isinstance(item, Mapping) else None
    if kind is None and isinstance(item, Mapping) and "role" in item:
        return "message"
    return kind if isinstance(kind, str) else ""


def _call_ref(item: Mapping[str, Any], kind: str) -> str | None:
    """The id an output names its call by (or a call is named by), if it has one."""
    if kind in ("mcp_approval_request",):
        ref = item.get("id")
    elif kind == "mcp_approval_response":
        ref = item.get("approval_request_id")
    else:
        ref = item.get("call_id")
    return ref if isinstance(ref, str) and ref else None


def check_history(items: Sequence[Any]) -> HistoryReport:
    """The problems of `items` (in order) that the model API would refuse."""
    calls: dict[tuple[str, str], int] = {}
    for index, item in enumerate(items):
        kind = _type(item)
        if kind in CALL_TYPES and (ref := _call_ref(item, kind)) is not None:
            calls.setdefault((kind, ref), index)
    answered: set[tuple[str, str]] = set()
    seen_ids: set[str] = set()
    problems: list[HistoryProblem] = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            continue
        kind = _type(item)
        item_id = item.get("id")
        if isinstance(item_id, str) and item_id:
            if item_id in seen_ids:
                problems.append(HistoryProblem("duplicate_id", index, item_id, kind))
            seen_ids.add(item_id)
        call_kind = OUTPUT_OF.get(kind)
        if call_kind is None:
            continue
        ref = _call_ref(item, kind)
        if ref is None or (call_kind, ref) not in calls:
            problems.append(HistoryProblem("orphan_output", index, ref or "", kind))
        else:
            answered.add((call_kind, ref))
    for (kind, ref), index in calls.items():
        if (kind, ref) not in answered:
            problems.append(HistoryProblem("unanswered_call", index, ref, kind))
    problems.sort(key=lambda problem: problem.index)
    return HistoryReport(tuple(problems), len(items))


def repaired_tail(items: Sequence[Any], limit: int | None) -> list[Any]:
    """`items` (a read of the latest `limit`) mended, at most `limit` of them: outputs a
    repair adds past the limit keep the latest `limit`, mended again (an output whose call
    that cut off is dropped), so a limited read stays within its limit.

    >>> user = {"role": "user", "content": "refund B2"}
    >>> call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    >>> [item.get("type") for item in repaired_tail([user, call], 2)]
    ['function_call', 'function_call_output']
    """
    mended = repaired(items).items
    if limit is None or len(mended) <= limit:
        return mended
    return repaired(mended[len(mended) - limit :]).items


def repaired(items: Sequence[Any]) -> Repair:
    """`items` mended as the module says, with the report of what was wrong (the items are
    returned as they were, in a new list, when nothing was)."""
    report = check_history(items)
    if report.ok:
        return Repair(list(items), report, list(range(len(items))))
    drop: set[int] = set()
    strip_id: set[int] = set()
    answer_after: dict[int, list[Any]] = {}
    first_with_id: dict[str, int] = {}
    for index, item in enumerate(items):
        item_id = item.get("id") if isinstance(item, Mapping) else None
        if isinstance(item_id, str) and item_id:
            first_with_id.setdefault(item_id, index)
    for problem in report.problems:
        item = items[problem.index]
        if problem.kind == "orphan_output":
            drop.add(problem.index)
        elif problem.kind == "duplicate_id":
            same = items[first_with_id[problem.ref]] == item
            (drop if same else strip_id).add(problem.index)
        elif problem.item_type in ANSWERABLE:
            end = _end_of_calls(items, problem.index)
            answer_after.setdefault(end, []).append(
                {
                    "type": ANSWERABLE[problem.item_type],
                    "call_id": problem.ref,
                    "output": INTERRUPTED_OUTPUT,
                }
            )
        else:
            drop.add(problem.index)
            before = problem.index - 1
            if (
                before >= 0
                and _type(items[before]) == "reasoning"
                and not _feeds(items, before, drop)
            ):
                drop.add(before)
    mended: list[Any] = []
    origins: list[int] = []
    for index, item in enumerate(items):
        if index not in drop:
            if index in strip_id:
                item = {name: value for name, value in item.items() if name != "id"}
            mended.append(item)
            origins.append(index)
        answers = answer_after.get(index, ())
        mended.extend(answers)
        origins.extend([index] * len(answers))
    return Repair(mended, report, origins)


def _end_of_calls(items: Sequence[Any], index: int) -> int:
    """The last position of the run of tool calls that holds `index` (parallel calls stay
    together, their outputs after them)."""
    end = index
    while end + 1 < len(items) and _type(items[end + 1]) in CALL_TYPES:
        end += 1
    return end


def _feeds(items: Sequence[Any], reasoning: int, drop: set[int]) -> bool:
    """Whether the reasoning item at `reasoning` is still followed by a model item kept."""
    after = reasoning + 1
    while after < len(items) and after in drop:
        after += 1
    if after >= len(items):
        return False
    follower = items[after]
    kind = _type(follower)
    if kind == "message":
        return bool(follower.get("role") == "assistant")
    return kind not in ("reasoning", "")
