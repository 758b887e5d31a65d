"""How long one big session holds the event loop: a 1 ms ticker on the same loop while
another task reads, searches, appends or pops on a session of many items.

Each operation runs again and again for at least `--window` seconds (once if it takes
longer), so that a call of a few milliseconds meets as many ticks as a long one. Prints,
per database and mode, the ticker's p50/p99/longest lag (ms) over that window, how many
calls ran and the median call's time. The target (issue: no stall whatever the session's
size) is a p99 under 20 ms.

    python -m benchmarks.loop_lag --items 200000            # SQLite, and PostgreSQL if
    AGENTS_SQLALCHEMY_PG_URL=... python -m benchmarks.loop_lag   # a server is named
    python -m benchmarks.loop_lag --markdown docs/benchmarks/loop-lag.md   # for the docs
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from agents_sqlalchemy import SessionStore

from .databases import PG_URL_ENV, postgres_database, sqlite_database

TICK = 0.001
WORDS = [
    "disk",
    "full",
    "deploy",
    "lunch",
    "invoice",
    "dog",
    "rollout",
    "volume",
    "space",
    "friday",
]


async def ticking(
    operation: Callable[[], Awaitable[Any]], window: float
) -> tuple[list[float], list[float], int]:
    """Run `operation` beside a 1 ms ticker, again until `window` seconds have passed; the
    ticker's lags (ms), each call's time (s), and how many full garbage collections ran
    meanwhile (each walks every object of the process, every thread held)."""
    lags: list[float] = []
    calls: list[float] = []
    full: list[int] = []
    done = asyncio.Event()

    def watch(phase: str, info: dict[str, Any]) -> None:
        if phase == "stop" and info["generation"] == 2:
            full.append(1)

    async def ticker() -> None:
        while not done.is_set():
            before = time.perf_counter()
            await asyncio.sleep(TICK)
            lags.append((time.perf_counter() - before - TICK) * 1000)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    lags.clear()  # the ticker's start is not the operation's
    end = time.perf_counter() + window
    gc.callbacks.append(watch)
    try:
        while not calls or time.perf_counter() < end:
            start = time.perf_counter()
            await operation()
            calls.append(time.perf_counter() - start)
    finally:
        gc.callbacks.remove(watch)
    done.set()
    await task
    return lags, calls, len(full)


def item(i: int) -> Any:
    words = " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(8))
    return {"role": "user" if i % 2 else "assistant", "content": f"note {i}: {words}"}


async def measure(
    url: str, items: int, key: str | None, window: float
) -> list[tuple[str, list[float], list[float], int]]:
    async with SessionStore(url, create_tables=True, key=key, search=False) as store:
        session = store.session("big", user_id="u")
        for start in range(0, items, 50_000):
            await session.add_items([item(i) for i in range(start, min(items, start + 50_000))])
    rows = []
    async with SessionStore(url, key=key) as store:  # the load indexed nothing: all of it
        lags, calls, full = await ticking(lambda: store.reindex(batch_size=2_000), 0.0)
        rows.append(("reindex()", lags, calls, full))
        session = store.session("big", user_id="u")
        extra = [item(i) for i in range(1_000)]
        # As in an app that runs agents: the SDK, whose compaction calls the snapshot, is
        # loaded (the snapshot's first call would otherwise time its import).
        importlib.import_module("agents.memory.session")
        for name, operation in (
            ("get_items()", session.get_items),
            ("get_items(limit=20)", lambda: session.get_items(limit=20)),
            ("session.search", lambda: session.search("why was the disk full?")),
            ("store.search (user)", lambda: store.search("invoice for the dog", user_id="u")),
            ("list_branches()", session.list_branches),
            ("get_conversation_by_turns()", session.get_conversation_by_turns),
            ("session.check()", session.check),
            ("compaction snapshot (whole)", lambda: session._get_compaction_snapshot(items + 1)),
            ("repair()", session.repair),
            ("export_user", lambda: exported(store)),
            ("add_items(1,000)", lambda: session.add_items(extra)),
            ("pop_item()", session.pop_item),
            # Encrypted, the worker then forgets what the pop may have left in memory.
            ("pop_item(), flush()", lambda: popped_and_flushed(store, session)),
        ):
            await store.flush()  # what the previous operation left to the worker is its own
            lags, calls, full = await ticking(operation, window)
            rows.append((name, lags, calls, full))
    return rows


async def exported(store: SessionStore) -> int:
    """The user's export, read through as a web response would send it: its size."""
    return sum([len(line) async for line in store.export_user("u")])


async def popped_and_flushed(store: SessionStore, session: Any) -> None:
    await session.pop_item()
    await store.flush()


def line(name: str, lags: list[float], calls: list[float], full: int) -> str:
    late = p99(lags)
    return (
        f"  {name:<28} {len(calls):5} calls of {statistics.median(calls) * 1000:9.1f} ms"
        "   ticker lag p50 "
        f"{statistics.median(lags or [0.0]):6.2f}  p99 {late:8.2f}  max {max(lags or [0.0]):8.2f}"
        f" ms   {full:3} full GCs   {'PASS' if late < 20 else 'MISS'} (p99 < 20 ms)"
    )


def p99(lags: list[float]) -> float:
    ordered = sorted(lags) or [0.0]
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument(
        "--window", type=float, default=1.0, help="seconds each operation runs again (1)"
    )
    parser.add_argument("--markdown", help="also write the figures to this Markdown file")
    args = parser.parse_args()
    table: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        databases = [sqlite_database(Path(tmp))]
        if os.environ.get(PG_URL_ENV):
            databases.append(postgres_database(os.environ[PG_URL_ENV]))
        for database in databases:
            for mode, key in (("plaintext", None), ("encrypted", "a passphrase")):
                async with AsyncExitStack() as stack:
                    location = await stack.enter_async_context(database.fresh(f"lag_{mode}"))
                    print(f"{database.label}, {mode}, one session of {args.items:,} items:")
                    found = await measure(location.url, args.items, key, args.window)
                    for name, lags, calls, full in found:
                        print(line(name, lags, calls, full), flush=True)
                        late = p99(lags)
                        took = statistics.median(calls)
                        table.append(
                            f"| {database.label}, {mode} | `{name}` | {len(calls):,} | "
                            f"{took * 1000:,.1f} | "
                            f"{statistics.median(lags or [0.0]):.2f} | {late:.2f} | "
                            f"{max(lags or [0.0]):.2f} | {full} | "
                            f"{'PASS' if late < 20 else 'MISS'} |"
                        )
    if args.markdown:
        command = f"python -m benchmarks.loop_lag --items {args.items} --window {args.window:g}"
        started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        lines = [
            "<!-- Generated by python -m benchmarks.loop_lag --markdown: do not edit by hand. -->",
            "",
            f"One run of `{command}`, {started}: a 1 ms ticker's lag (ms) on the event loop "
            f"while another task runs the operation on a session of {args.items:,} items, "
            f"again and again for {args.window:g} s (once if it takes longer): the calls "
            "that ran, the median call's time, the ticker's lag over them all, and the "
            "full garbage collections meanwhile.",
            "",
            "| database | operation | calls | call ms | lag p50 | lag p99 | lag max "
            "| full GCs | p99 < 20 ms |",
            "|---|---|---:|---:|---:|---:|---:|---:|---|",
            *table,
        ]
        text = "\n".join(lines) + "\n"
        await asyncio.to_thread(Path(args.markdown).write_text, text, encoding="utf-8")


if __name__ == "__main__":
    asyncio.run(main())
