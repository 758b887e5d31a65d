"""Scripted runs of the Agents SDK's Runner: a weather tool and model steps of known usage."""

from __future__ import annotations

from agents import function_tool
from agents.testing import ModelStep, assistant_message, function_call
from agents.usage import Usage


@function_tool
def lookup(city: str) -> str:
    """Look the weather up."""
    return f"sunny in {city}"


def usage(requests: int, tokens: int) -> Usage:
    return Usage(
        requests=requests,
        input_tokens=tokens,
        output_tokens=tokens // 10,
        total_tokens=tokens + tokens // 10,
    )


def steps(n: int) -> list[ModelStep]:
    """A tool call, then an answer: two model calls of distinct usage per run."""
    return [
        ModelStep([function_call("lookup", {"city": "Oslo"}, call_id=f"call-{n}")], usage(1, 100)),
        ModelStep([assistant_message(f"answer {n}")], usage(1, 7 * n)),
    ]
