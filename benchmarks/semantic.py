"""A first search with a cold semantic model, timed in a process of its own.

The parent (``oneoffs.semantic_search``) runs this module twice on a fresh database:

    python -m benchmarks.semantic build URL EMBEDDER ITEMS
    python -m benchmarks.semantic search URL EMBEDDER CALLS

``build`` adds ITEMS items to one session with that embedder and waits until they are
indexed; ``search`` then opens a new store in a new process (so the model loads cold),
times its first ``session.search`` from the store's construction, then CALLS more. Each
prints one JSON object on its last line; ``{"skipped": why}`` when the embedder is not
available (``embedder_by_name`` raised).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from typing import Any

from .core import p95
from .items import make_items
from .search_workload import SEARCH_QUERIES

SESSION = "semantic"


async def build(url: str, name: str, count: int) -> dict[str, Any]:
    from agents_sqlalchemy import SessionStore
    from agents_sqlalchemy.search import embedder_by_name

    try:
        embedder = embedder_by_name(name)
    except Exception as exc:
        return {"skipped": f"embedder_by_name({name!r}) raised {exc!r}"}
    started = time.perf_counter()
    async with SessionStore(url, create_tables=True, embedder=embedder) as store:
        await store.session(SESSION).add_items(make_items(count, start=8_000_000))
        await store.flush()
    return {"index_rate": count / (time.perf_counter() - started), "model": embedder.model_id}


async def search(url: str, name: str, calls: int) -> dict[str, Any]:
    started = time.perf_counter()
    from agents_sqlalchemy import SessionStore

    imported = time.perf_counter()
    async with SessionStore(url, embedder=name) as store:
        session = store.session(SESSION)
        first_hits = await session.search(SEARCH_QUERIES[0])
        first = time.perf_counter()
        durations = []
        for n in range(calls):
            query = SEARCH_QUERIES[(n + 1) % len(SEARCH_QUERIES)]
            before = time.perf_counter()
            await session.search(query)
            durations.append((time.perf_counter() - before) * 1000.0)
    return {
        "import_ms": (imported - started) * 1000.0,
        "first_ms": (first - imported) * 1000.0,
        "p50_ms": statistics.median(durations),
        "p95_ms": p95(durations),
        "first_hits": len(first_hits),
    }


def main(argv: list[str]) -> int:
    mode, url, name, number = argv
    work = build(url, name, int(number)) if mode == "build" else search(url, name, int(number))
    print(json.dumps(asyncio.run(work)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
