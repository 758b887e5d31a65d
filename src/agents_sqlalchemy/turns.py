"""What a turn is made of, read from the items themselves: pure functions, no I/O.

A user turn starts at each user message; items before the first one belong to turn 0. The
kinds and tool names follow the Agents SDK's `AdvancedSQLiteSession`, so the reports of
`get_conversation_by_turns` and `get_tool_usage` read the same.

>>> kind({"role": "user", "content": "hi"}), kind({"type": "function_call", "name": "f"})
('user', 'function_call')
>>> tool_name({"type": "function_call", "name": "lookup", "namespace": "crm"})
'crm.lookup'
>>> turn_numbers([True, False, True], start=0)
[1, 1, 2]
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from .errors import ConfigurationError
from .validation import check_range

MAIN = "main"
#: (user turn, opens the turn, written at, item) of one item of a branch.
Turn = tuple[int, bool, datetime, Any]

# Item types that are a call of a tool: each counts once in `get_tool_usage`.
TOOL_CALLS = frozenset(
    {
        "tool_call",
        "function_call",
        "computer_call",
        "file_search_call",
        "web_search_call",
        "code_interpreter_call",
        "tool_search_call",
        "custom_tool_call",
        "mcp_call",
        "mcp_approval_request",
        "shell_call",
        "apply_patch_call",
    }
)
# Built-in calls without a `name`: their type names the tool.
_NAMED_BY_TYPE = frozenset(
    {
        "computer_call",
        "file_search_call",
        "web_search_call",
        "code_interpreter_call",
        "shell_call",
        "apply_patch_call",
    }
)
_TOOL_SEARCH = frozenset({"tool_search_call", "tool_search_output"})


def is_user(item: Any) -> bool:
    """Whether an item is a user message: the start of a user turn."""
    return isinstance(item, dict) and item.get("role") == "user"


def turn_numbers(user_flags: Iterable[bool], start: int) -> list[int]:
    """The user turn of each item after `start` turns: a user message opens the next one."""
    numbers = []
    for user in user_flags:
        start += user
        numbers.append(start)
    return numbers


def kind(item: Any) -> str:
    """ "user", "assistant", the item's `type`, or "other"."""
    if isinstance(item, dict):
        if item.get("role") in ("user", "assistant"):
            return str(item["role"])
        if item.get("type"):
            return str(item["type"])
    return "other"


def tool_name(item: Any) -> str | None:
    """The tool an item calls (or answers), as the SDK's `AdvancedSQLiteSession` names it."""
    if not isinstance(item, dict):
        return None
    item_type = item.get("type")
    if item_type in ("mcp_call", "mcp_approval_request") and "server_label" in item:
        label, name = item.get("server_label"), item.get("name")
        if name and label:
            return f"{label}.{name}"
        return str(label or name) if (label or name) else None
    if item_type in _TOOL_SEARCH:
        return "tool_search"
    if item_type in _NAMED_BY_TYPE:
        return str(item_type)
    if "name" in item and item["name"] is not None:
        name = str(item["name"])
        namespace = item.get("namespace")
        # A namespace equal to the name is the SDK's deferred top-level shape: the bare name.
        if namespace is None or not str(namespace) or str(namespace) == name or not name:
            return name
        return f"{namespace}.{name}"
    return None


def tool_calls(numbered: Iterable[tuple[int, Any]]) -> list[tuple[int, str, str | None]]:
    """(turn, kind, tool) of each `(turn, item)` that calls a tool or answers a tool search:
    what `tool_usage` counts, in tuples of text and numbers (the garbage collector stops
    tracking those; it walks a pair holding an item at every full collection).

    >>> tool_calls([(1, {"role": "user"}), (1, {"type": "function_call", "name": "f"})])
    [(1, 'function_call', 'f')]
    """
    found = []
    for turn, item in numbered:
        item_kind = kind(item)
        if item_kind in TOOL_CALLS or item_kind == "tool_search_output":
            found.append((turn, item_kind, tool_name(item)))
    return found


def tool_usage(calls: Sequence[tuple[int, str, str | None]]) -> list[tuple[str | None, int, int]]:
    """(tool, calls, turn) for the `tool_calls` of a line, by turn then tool name.

    Every call counts once; a tool-search output counts only when its turn has no
    tool-search call of its own (an output-only history still shows the search).
    """
    counts: Counter[tuple[int, str | None]] = Counter()
    searched = {turn for turn, item_kind, _ in calls if item_kind == "tool_search_call"}
    for turn, item_kind, name in calls:
        if item_kind != "tool_search_output" or turn not in searched:
            counts[(turn, name)] += 1
    ordered = sorted(counts.items(), key=lambda entry: (entry[0][0], entry[0][1] or ""))
    return [(name, count, turn) for (turn, name), count in ordered]


def texts(content: Any) -> list[str]:
    """The text of a message's content: the string, or the `text` of each part."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [str(part.get("text", "")) for part in content if isinstance(part, dict)]
    return []


def matcher(term: str) -> re.Pattern[str]:
    """Literal, case-insensitive for ASCII letters only (as SQLite's LIKE, which the SDK uses).

    >>> bool(matcher("CATS").search("cats")), bool(matcher("É").search("é"))
    (True, False)
    """
    if not isinstance(term, str):
        raise ConfigurationError(f"a search term is a string, got {term!r:.80}")
    return re.compile(re.escape(term), re.IGNORECASE | re.ASCII)


def preview(content: Any, max_length: int | None = None) -> str:
    """A message's content as a string, cut to `max_length` characters with "..."."""
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    if max_length is not None and len(text) > max_length:
        return text[:max_length] + "..."
    return text


def usage_values(usage: Any) -> dict[str, Any] | None:
    """The columns of a turn's usage from an SDK `Usage` (None for None); a count that is
    not a whole number from 0 to 2**63 - 1 raises `ConfigurationError`."""
    if usage is None:
        return None
    values: dict[str, Any] = {
        name: check_range(f"usage.{name}", getattr(usage, name, 0) or 0, 0)
        for name in ("requests", "input_tokens", "output_tokens", "total_tokens")
    }
    values["input_details"] = _details(getattr(usage, "input_tokens_details", None))
    values["output_details"] = _details(getattr(usage, "output_tokens_details", None))
    return values


def used(values: dict[str, Any] | None) -> bool:
    """Whether usage values count anything (a run's context before its first model call
    counts nothing)."""
    return values is not None and any(
        values[name] for name in ("requests", "input_tokens", "output_tokens", "total_tokens")
    )


def _details(details: Any) -> dict[str, Any] | None:
    """Token details as JSON (its set values), as the SDK's class keeps them."""
    if not details:
        return None
    dump = getattr(details, "model_dump", None)
    found = dump(mode="json") if callable(dump) else dict(vars(details))
    return {name: value for name, value in found.items() if value is not None}
