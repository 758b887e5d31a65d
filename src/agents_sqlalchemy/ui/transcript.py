"""A page of a transcript as the browser shows it: numbered items grouped in user turns,
each tool call paired with its output, reasoning apart, failures marked, and the items
that would make the model API refuse the history (`history_check`) marked too.

Pure functions over the items `session.get_items()` returns; the template escapes
everything they hold.

>>> page = shape(
...     [
...         {"role": "user", "content": "weather?"},
...         {"type": "function_call", "name": "lookup", "call_id": "c1", "arguments": "{}"},
...         {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
...     ],
...     first=1,
...     numbers=[1, 1, 1],
... )
>>> [(e.position, e.turn, e.kind) for e in page], page[1].output.text
([(1, 1, 'message'), (2, 1, 'tool_call')], 'sunny')
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..history_check import HistoryReport
from ..shown_text import UNSAFE

# Calls whose output is a separate item with the same call_id.
_CALLS = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "computer_call",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
        "tool_search_call",
    }
)
_OUTPUTS = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "computer_call_output",
        "local_shell_call_output",
        "shell_call_output",
        "apply_patch_call_output",
        "tool_search_output",
    }
)
# Calls that carry their own result (and error).
_SELF_CONTAINED = frozenset(
    {"mcp_call", "web_search_call", "file_search_call", "code_interpreter_call"}
)
_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text"})
_FAILED_STATUS = frozenset({"failed", "incomplete", "error"})
# How the Agents SDK words a tool that raised (its default failure_error_function).
_ERROR_PREFIXES = ("An error occurred while running the tool", "Error:", "Error running tool")


@dataclass
class Entry:
    """One item on the page; a paired tool output hangs from its call as `output`."""

    position: int
    turn: int
    kind: str  # message, tool_call, tool_output, reasoning, other
    label: str
    text: str = ""
    tool: str | None = None
    arguments: str | None = None
    call_id: str | None = None
    failed: bool = False
    starts_turn: bool = False
    output: Entry | None = None
    raw: str = ""
    usage: dict[str, Any] | None = field(default=None)
    problem: str | None = None  # why the model API would refuse the history, if it would


def pretty(value: Any) -> str:
    """JSON indented for reading, non-ASCII kept; a JSON string is parsed first.

    >>> pretty('{"a": 1}')
    '{\\n  "a": 1\\n}'
    """
    if not isinstance(value, str):
        return json.dumps(value, ensure_ascii=False, indent=2, default=repr)
    try:
        parsed = json.loads(value)
        return value if isinstance(parsed, str) else pretty(parsed)
    except (ValueError, RecursionError):  # not JSON, or nested past Python's stack
        return value


def raw_json(item: Any) -> str:
    """An item as its JSON view shows it: `pretty`, with every character that `clean`
    escapes written as a JSON escape (the same JSON): a control or a reversing character in
    an id would otherwise pass for other text.

    >>> raw_json({"call_id": "call_\\u202eabc"})
    '{\\n  "call_id": "call_\\\\u202eabc"\\n}'
    """
    return UNSAFE.sub(lambda found: f"\\u{ord(found.group()):04x}", pretty(item))


def content_text(content: Any) -> str:
    """A message's content as text: strings, text parts, placeholders for the rest."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return pretty(content)
    parts = []
    for part in content:
        if not isinstance(part, Mapping):
            parts.append(pretty(part))
        elif part.get("type") in _TEXT_PARTS:
            parts.append(str(part.get("text", "")))
        elif part.get("type") == "refusal":
            parts.append(f"(refused) {part.get('refusal', '')}")
        elif part.get("type") == "input_image":
            parts.append("[image]")
        elif part.get("type") == "input_file":
            parts.append(f"[file: {part.get('filename') or part.get('file_id') or ''}]")
        else:
            parts.append(pretty(part))
    return "\n".join(parts)


def failed(item: Mapping[str, Any]) -> bool:
    """Whether a tool call or output says it failed: an error status or field, or the
    SDK's wording of a tool that raised."""
    if str(item.get("status") or "") in _FAILED_STATUS or item.get("error"):
        return True
    output = item.get("output")
    if isinstance(output, str):
        return output.lstrip().startswith(_ERROR_PREFIXES)
    return isinstance(output, Mapping) and bool(output.get("error"))


def describe(item: Any, position: int, turn: int) -> Entry:
    """The entry of one item."""
    raw = raw_json(item)
    if not isinstance(item, Mapping):
        return Entry(position, turn, "other", "item", raw, raw=raw)
    kind = item.get("type")
    if kind == "message" or (kind is None and "role" in item):
        role = str(item.get("role") or "message")
        return Entry(position, turn, "message", role, content_text(item.get("content")), raw=raw)
    if kind in _CALLS or kind in _SELF_CONTAINED or kind == "mcp_approval_request":
        name = item.get("name") or kind
        if kind == "mcp_call" and item.get("server_label"):
            name = f"{item['server_label']}.{item.get('name')}"
        arguments = item.get("arguments", item.get("input", item.get("action")))
        entry = Entry(
            position,
            turn,
            "tool_call",
            "tool call",
            tool=str(name),
            arguments=pretty(arguments) if arguments is not None else None,
            call_id=str(item["call_id"]) if item.get("call_id") is not None else None,
            failed=failed(item),
            raw=raw,
        )
        if kind in _SELF_CONTAINED and (item.get("output") or item.get("error")):
            result = item.get("output") or item.get("error")
            entry.output = Entry(
                position, turn, "tool_output", "result", pretty(result), failed=entry.failed
            )
        return entry
    if kind in _OUTPUTS:
        output = item.get("output")
        text = content_text(output) if isinstance(output, list) else pretty(output)
        call_id = str(item["call_id"]) if item.get("call_id") is not None else None
        return Entry(
            position,
            turn,
            "tool_output",
            "tool output",
            text,
            call_id=call_id,
            failed=failed(item),
            raw=raw,
        )
    if kind == "reasoning":
        summary = content_text(item.get("summary")) or content_text(item.get("content"))
        return Entry(position, turn, "reasoning", "reasoning", summary or "(no summary)", raw=raw)
    return Entry(position, turn, "other", str(kind or "item"), raw, raw=raw)


def problems_at(report: HistoryReport) -> dict[int, str]:
    """What `check()` found, by the position (from 1) of the item concerned, in words.

    >>> from ..history_check import check_history
    >>> problems_at(check_history([{"type": "function_call_output", "call_id": "c9"}]))
    {1: "the output of call 'c9', which is not in the history"}
    """
    words = {
        "orphan_output": "the output of call {ref!r}, which is not in the history",
        "unanswered_call": "call {ref!r} is never answered",
        "duplicate_id": "id {ref!r} is used by an earlier item",
    }
    found: dict[int, str] = {}
    for problem in report.problems:
        note = words[problem.kind].format(ref=problem.ref)
        at = problem.index + 1
        found[at] = f"{found[at]}; {note}" if at in found else note
    return found


def turn_numbers(items: Sequence[Any], turns: int) -> list[int]:
    """The user turn of each item of the latest `len(items)` items of a line whose last user
    turn is number `turns` (0: before the first user message).

    >>> turn_numbers([{"role": "assistant"}, {"role": "user"}, {"type": "x"}], turns=5)
    [4, 5, 5]
    """
    numbers = [0] * len(items)
    current = turns
    for index in range(len(items) - 1, -1, -1):
        numbers[index] = max(current, 0)
        item = items[index]
        if isinstance(item, Mapping) and item.get("role") == "user":
            current -= 1
    return numbers


def shape(
    items: Sequence[Any],
    *,
    first: int,
    numbers: Sequence[int],
    usage: Mapping[int, dict[str, Any]] | None = None,
    problems: Mapping[int, str] | None = None,
) -> list[Entry]:
    """The entries of items numbered from `first`, in user turns `numbers` (see
    `turn_numbers`); outputs whose call came before them hang from it.

    `usage` maps a user turn to its token usage, shown at the turn's first message;
    `problems` (see `problems_at`) what the model API would refuse, by position.
    """
    usage = usage or {}
    problems = problems or {}
    entries: list[Entry] = []
    calls: dict[str, Entry] = {}
    for offset, (item, turn) in enumerate(zip(items, numbers, strict=True)):
        entry = describe(item, first + offset, turn)
        entry.problem = problems.get(entry.position)
        if isinstance(item, Mapping) and item.get("role") == "user":
            entry.starts_turn = True
            entry.usage = usage.get(turn)
        if entry.kind == "tool_call" and entry.call_id is not None:
            calls[entry.call_id] = entry
        call = calls.get(entry.call_id or "") if entry.kind == "tool_output" else None
        if call is not None and call.output is None:
            call.output = entry
            call.failed = call.failed or entry.failed
            continue
        entries.append(entry)
    return entries
