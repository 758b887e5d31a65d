"""Realistic SDK items for tests: what Runner really stores."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

USER = {"role": "user", "content": "Remember: my dog is called Mochi 🐶, né à Zürich."}
FUNCTION_CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "lookup_weather",
    "arguments": '{"city": "Zürich", "units": "metric"}',
    "status": "completed",
}
FUNCTION_OUTPUT = {
    "type": "function_call_output",
    "call_id": "call_1",
    "output": '{"temp_c": 21.5, "sky": "☀️"}',
}
REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "The user wants the weather; call the tool."}],
    "encrypted_content": "gAAAAABo-opaque-blob==",
}
ASSISTANT = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "status": "completed",
    "content": [
        {
            "type": "output_text",
            "text": "It is 21.5 °C and sunny.",
            "annotations": [],
            "logprobs": [],
        }
    ],
}
MULTIPART = {
    "role": "user",
    "content": [
        {"type": "input_text", "text": "What is in this picture? 日本語も"},
        {
            "type": "input_image",
            "image_url": "data:image/png;base64,iVBORw0KGgo=",
            "detail": "auto",
        },
    ],
}
NESTED = {
    "type": "function_call_output",
    "call_id": "call_2",
    "output": [{"type": "input_text", "text": "nested"}],
    "extra": {"a": [1, 2.5, None, True, {"b": "quote ' and \" and \\ backslash"}]},
}

ALL: list[dict[str, Any]] = [
    USER,
    REASONING,
    FUNCTION_CALL,
    FUNCTION_OUTPUT,
    ASSISTANT,
    MULTIPART,
    NESTED,
]


def message(text: str) -> dict[str, Any]:
    """A plain user message."""
    return {"role": "user", "content": text}


def texts(items: Iterable[Any]) -> list[str]:
    """The text of every message-like item, in order (a string content, or each text part of
    a list, such as a summary's input_text)."""
    out = []
    for item in items:
        content = item.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out.extend(part["text"] for part in content if "text" in part)
    return out
