"""SDK items as a person reads them: `[12] user: text`, `[14] tool call name({...})`.

Messages and reasoning summaries are shown whole; tool arguments, tool outputs and items
of unknown types are cut at `max_chars` with a note. Control characters (terminal escapes)
are shown escaped, never sent to the terminal.

Example::

    for line in transcript(items, first=12, max_chars=600):
        click.echo(line)
    # [12] user: What is the weather in Zürich?
    #
    # [13] tool call lookup_weather({"city": "Zürich"})
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import click

from ..shown_text import UNSAFE_LINE, clean, escaped

# Colours of each kind of entry (dropped when the output is not a terminal).
_STYLES: dict[str, dict[str, Any]] = {
    "user": {"fg": "cyan", "bold": True},
    "assistant": {"fg": "green", "bold": True},
    "system": {"fg": "magenta", "bold": True},
    "developer": {"fg": "magenta", "bold": True},
    "tool": {"fg": "yellow"},
    "reasoning": {"fg": "bright_black"},
}
_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text"})
_TOOL_OUTPUTS = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "computer_call_output",
        "local_shell_call_output",
        "shell_call_output",
        "apply_patch_call_output",
    }
)


@dataclass(frozen=True)
class Entry:
    """One item in words: a label (`user:`, `tool call`), its body, and the label's style."""

    label: str
    body: str
    style: str = ""


def shell_words(texts: Iterable[str]) -> str | None:
    """`texts` as words of a shell command that hands the program each text as it is,
    joined by spaces; None if one holds a NUL, which no command line can carry.

    A word is quoted as `shlex.quote` does; one holding what `one_line` escapes is written
    in bash's `$'...'`, so that the command stays one line and shows no control character.

    >>> print(shell_words(["it's $(id)", "two\\nlines"]))
    'it'"'"'s $(id)' $'two\\x0alines'
    """
    words = []
    for text in texts:
        if "\x00" in text:
            return None
        if UNSAFE_LINE.search(text) is None:
            words.append(shlex.quote(text))
        else:
            inner = text.replace("\\", "\\\\").replace("'", "\\'")
            words.append(f"$'{UNSAFE_LINE.sub(escaped, inner)}'")
    return " ".join(words)


def compact(value: Any) -> str:
    """JSON on one line, non-ASCII kept readable.

    >>> compact({"city": "Zürich", "n": [1, 2]})
    '{"city": "Zürich", "n": [1, 2]}'
    """
    return json.dumps(value, ensure_ascii=False, default=repr)


def cut(text: str, max_chars: int) -> str:
    """`text`, or its first `max_chars` characters and a note of how much was left out.

    >>> cut("abcdefgh", 3)
    'abc… [+5 characters; --max-chars 0 shows all]'
    """
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}… [+{len(text) - max_chars:,} characters; --max-chars 0 shows all]"


def describe(item: Any, max_chars: int = 600) -> Entry:
    """The entry of one SDK item (message, tool call or output, reasoning, anything else).

    >>> describe({"role": "user", "content": "hi"})
    Entry(label='user:', body='hi', style='user')
    >>> describe({"type": "function_call", "name": "f", "arguments": '{"a":1}'}).body
    'f({"a": 1})'
    """
    if not isinstance(item, Mapping):
        return Entry("item:", cut(compact(item), max_chars))
    kind = item.get("type")
    if kind == "message" or (kind is None and "role" in item):
        role = str(item.get("role") or "message")
        return Entry(f"{role}:", _content(item.get("content"), max_chars), role)
    if kind in ("function_call", "custom_tool_call"):
        arguments = item.get("arguments", item.get("input", ""))
        return Entry("tool call", f"{item.get('name')}({_data(arguments, max_chars)})", "tool")
    if kind == "mcp_call":
        name = f"{item.get('server_label')}.{item.get('name')}"
        body = f"{name}({_data(item.get('arguments', ''), max_chars)})"
        if item.get("output") is not None or item.get("error") is not None:
            body += f"\n→ {_data(item.get('output') or item.get('error'), max_chars)}"
        return Entry("tool call", body, "tool")
    if kind in _TOOL_OUTPUTS:
        output = item.get("output")
        if isinstance(output, list):
            return Entry("tool result:", _content(output, max_chars), "tool")
        return Entry("tool result:", _data(output, max_chars), "tool")
    if kind == "reasoning":
        texts = _texts(item.get("summary")) or _texts(item.get("content"))
        return Entry("reasoning:", "\n".join(texts) or "(no summary)", "reasoning")
    if kind == "web_search_call":
        action = item.get("action")
        query = action.get("query") if isinstance(action, Mapping) else None
        return Entry("web search:", str(query) if query else cut(compact(action), max_chars))
    if kind == "file_search_call":
        return Entry("file search:", "; ".join(map(str, item.get("queries") or [])))
    rest = {key: value for key, value in item.items() if key != "type"}
    return Entry(f"{kind or 'item'}:", cut(compact(rest), max_chars))


def transcript(items: Iterable[Any], *, first: int = 1, max_chars: int = 600) -> Iterator[str]:
    """Lines of the items' blocks, numbered from `first`, a blank line between blocks.

    A body's later lines are indented under its first, so each block reads as one.
    """
    for position, item in enumerate(items, start=first):
        if position > first:
            yield ""
        entry = describe(item, max_chars)
        number = f"[{position}]"
        label = click.style(entry.label, **_STYLES.get(entry.style, {}))
        lines = clean(entry.body).split("\n")
        yield f"{number} {label} {lines[0]}".rstrip()
        indent = " " * (len(number) + 1)
        yield from (f"{indent}{line}".rstrip() for line in lines[1:])


def _content(content: Any, max_chars: int) -> str:
    """A message's content: its text, with images, files and other parts as placeholders."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else cut(compact(content), max_chars)
    return "\n".join(_part(part, max_chars) for part in content)


def _part(part: Any, max_chars: int) -> str:
    if not isinstance(part, Mapping):
        return cut(compact(part), max_chars)
    kind = part.get("type")
    if kind in _TEXT_PARTS:
        return str(part.get("text", ""))
    if kind == "refusal":
        return f"(refused) {part.get('refusal', '')}"
    if kind == "input_image":
        url = part.get("image_url")
        where = url if isinstance(url, str) and not url.startswith("data:") else None
        where = where or part.get("file_id")
        return f"[image: {where}]" if where else "[image]"
    if kind == "input_file":
        name = part.get("filename") or part.get("file_id") or part.get("file_url")
        return f"[file: {name}]" if name else "[file]"
    if kind == "input_audio":
        return "[audio]"
    return cut(compact(part), max_chars)


def _data(value: Any, max_chars: int) -> str:
    """Tool data on one line: a JSON string is re-written compactly, other text kept."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return cut(value, max_chars)
        return cut(compact(parsed) if isinstance(parsed, (dict, list)) else value, max_chars)
    return cut(compact(value), max_chars)


def _texts(parts: Any) -> list[str]:
    if not isinstance(parts, list):
        return []
    return [str(p.get("text")) for p in parts if isinstance(p, Mapping) and p.get("text")]
