"""What one session of 1,000,000 items costs in memory: built by ``add_items`` in calls of
100,000 (the most one call takes), then read whole by ``get_items()``, then its latest 20
(the mean of ten reads, after a first one).

Per database (SQLite, and PostgreSQL when ``AGENTS_SQLALCHEMY_PG_URL`` is set) and mode
(plaintext, encrypted), in a fresh process each (a process that has read big sessions keeps
memory in its allocators and reuses it): the process's resident memory before each step,
and its peak during it (the kernel's high-water mark, reset before each step; Linux only),
with the time the step took. Items are 80-100 byte messages.

    python -m benchmarks.million                         # SQLite, and PostgreSQL if named
    python -m benchmarks.million --items 200000 --markdown docs/benchmarks/million.md
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from agents_sqlalchemy import SessionStore
from agents_sqlalchemy.validation import MAX_BATCH_ITEMS

from .databases import PG_URL_ENV, postgres_database, sqlite_database
from .loop_lag import item
from .report import render_table

MIB = 1024
TAILS = 10  # tail reads timed, after one: their mean is given


def _kib(name: str) -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(name + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {name} in /proc/self/status")


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w", encoding="ascii") as clear_refs:
        clear_refs.write("5")


async def _measured(step: Any) -> dict[str, float]:
    """Run `step()` with the peak of resident memory reset before it."""
    _reset_peak()
    before = _kib("VmRSS")
    started = time.perf_counter()
    await step()
    took = time.perf_counter() - started
    return {"before": before / MIB, "peak": _kib("VmHWM") / MIB, "seconds": took}


async def child(url: str, items: int, key: str | None) -> dict[str, dict[str, float]]:
    """In this process: build the session, read it whole, read its tail; each step measured."""
    found: dict[str, dict[str, float]] = {}
    async with SessionStore(url, create_tables=True, key=key, search=False) as store:
        session = store.session("million")
        await session.get_items(limit=1)  # the store opened (a passphrase's scrypt: 128 MiB)

        async def build() -> None:
            for start in range(0, items, MAX_BATCH_ITEMS):
                stop = min(items, start + MAX_BATCH_ITEMS)
                await session.add_items([item(i) for i in range(start, stop)])

        found["build"] = await _measured(build)
        held: list[Any] = []

        async def read_all() -> None:
            held.extend(await session.get_items())

        found["read"] = await _measured(read_all)
        found["read"]["held"] = _kib("VmRSS") / MIB
        if len(held) != items:
            raise AssertionError(f"read {len(held)} items, wrote {items}")
        held.clear()

        async def tail() -> None:
            for _ in range(TAILS):
                await session.get_items(limit=20)

        await session.get_items(limit=20)  # the first statement after the build plans it
        found["tail"] = await _measured(tail)
        found["tail"]["seconds"] /= TAILS
    return found


async def main_async(args: argparse.Namespace) -> int:
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory() as scratch:
        databases = [sqlite_database(Path(scratch))]
        if os.environ.get(PG_URL_ENV):
            databases.append(postgres_database(os.environ[PG_URL_ENV]))
        for database in databases:
            for mode, key in (("plaintext", None), ("encrypted", "a passphrase")):
                async with AsyncExitStack() as stack:
                    location = await stack.enter_async_context(database.fresh(f"m_{mode}"))
                    command = [sys.executable, "-m", "benchmarks.million", "--child"]
                    command += [location.url, str(args.items), key or ""]
                    done = await asyncio.to_thread(
                        subprocess.run, command, capture_output=True, text=True, check=True
                    )
                    found = json.loads(done.stdout.strip().splitlines()[-1])
                label = f"{database.label}, {mode}"
                build, read, tail = found["build"], found["read"], found["tail"]
                rows.append(
                    [
                        label,
                        f"{build['seconds']:.1f}",
                        f"{build['peak'] - build['before']:,.0f}",
                        f"{read['seconds']:.1f}",
                        f"{read['peak'] - read['before']:,.0f}",
                        f"{read['held'] - read['before']:,.0f}",
                        f"{tail['seconds'] * 1000:.3f}",
                    ]
                )
                print(f"  .. {label}: done", file=sys.stderr, flush=True)
    header = [
        f"{args.items:,} items",
        "build s",
        "build peak MiB",
        "full read s",
        "full read peak MiB",
        "items held MiB",
        "tail 20 ms",
    ]
    table = render_table(header, rows)
    print(table)
    if args.markdown is not None:
        write_markdown(Path(args.markdown), args.items, header, rows)
    return 0


def write_markdown(path: Path, items: int, header: list[str], rows: list[list[str]]) -> None:
    lines = [
        "<!-- Generated by python -m benchmarks.million --markdown: do not edit by hand. -->",
        "",
        f"One run of `python -m benchmarks.million --items {items}`, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; peaks are above the "
        "process's resident memory before each step.",
        "",
        "| " + " | ".join(header) + " |",
        "|---|" + "---:|" * (len(header) - 1),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        url, items, key = sys.argv[2], int(sys.argv[3]), sys.argv[4] or None
        print(json.dumps(asyncio.run(child(url, items, key))))
        return 0
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--markdown", help="also write the table to this Markdown file")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
