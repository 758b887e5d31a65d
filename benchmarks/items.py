"""The items the benchmark stores: realistic 4-item turns of a tool-using agent."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any, cast

from agents.items import TResponseInputItem

_PROSE = (
    "the forecast for tomorrow shows light rain in the morning clearing by noon with "
    "temperatures around sixteen degrees and a gentle breeze from the west while the "
    "evening stays dry so an umbrella is useful only before lunch please check again "
    "later because conditions near the coast can change quickly during the afternoon"
)
_WORDS = _PROSE.split()
_CITIES = ("Paris", "Berlin", "Lisbon", "Oslo", "Kyoto", "Lima", "Cairo", "Quito")


def _text(n: int, words: int) -> str:
    return " ".join(_WORDS[(n * 7 + i) % len(_WORDS)] for i in range(words))


def make_turn(n: int) -> list[TResponseInputItem]:
    """The 4 items of one turn: user message, function_call, its output, assistant message."""
    city = _CITIES[n % len(_CITIES)]
    call_id = f"call_{n:08d}{'x' * 16}"
    items: list[dict[str, Any]] = [
        {"role": "user", "content": f"Turn {n}: what is the weather in {city}? " + _text(n, 12)},
        {
            "type": "function_call",
            "id": f"fc_{n:08d}{'a' * 40}",
            "call_id": call_id,
            "name": "get_weather",
            "arguments": f'{{"city": "{city}", "units": "metric", "days": {1 + n % 5}}}',
            "status": "completed",
        },
        {
            "type": "function_call_output",
            "call_id": call_id,
            "output": (
                f'{{"city": "{city}", "temperature_c": {10 + n % 20}, "conditions": '
                f'"{_text(n + 3, 20)}", "wind_kmh": {n % 40}}}'
            ),
        },
        {
            "type": "message",
            "id": f"msg_{n:08d}{'b' * 40}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": _text(n + 5, 40), "annotations": []}],
        },
    ]
    return cast(list[TResponseInputItem], items)


@functools.lru_cache(maxsize=16)
def make_items(count: int, start: int = 0) -> list[TResponseInputItem]:
    """``count`` items made of consecutive turns from turn ``start`` (cached: don't mutate)."""
    items: list[TResponseInputItem] = []
    turn = start
    while len(items) < count:
        items.extend(make_turn(turn))
        turn += 1
    return items[:count]


def item_at(index: int, start: int = 0) -> TResponseInputItem:
    """Item ``index`` (from 0) of the items that ``make_items(..., start)`` would give."""
    return make_turn(start + index // 4)[index % 4]


def batches(count: int, size: int, start: int = 0) -> Iterator[list[TResponseInputItem]]:
    """The same items as ``make_items(count, start)``, made on the fly ``size`` at a time.

    For sessions too big to keep in memory twice (1,000,000 items are about 0.5 GB).
    """
    batch: list[TResponseInputItem] = []
    turn: list[TResponseInputItem] = []
    for index in range(count):
        if index % 4 == 0 or not turn:
            turn = make_turn(start + index // 4)
        batch.append(turn[index % 4])
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
