"""Scale benchmark: this library on a PostgreSQL of a million sessions and ten million items.

Two fresh databases in one run, loaded alike (``scale_load.py``: a server-side fast import
of exactly the rows the library writes for plaintext items with search off, then
``VACUUM (ANALYZE)``, then a read-back check through the library): a small one of 100
sessions and 1,000 items, and a big one (``--sessions``, ``--items``; 10 items each). On
both, with a store opened with ``search=False``, in this order:

    get_items(limit=20)   of random sessions, 7 rounds of 30 calls alternating the databases
    list_sessions         page 1 and page 100 (20 a page, reached by cursor), overall and
                          one user's (the heavy user: every 10th session)
    add_items             a 4-item turn to random existing sessions, rounds as above
    purge_expired         5% of the items expired (every 20th session's) -> items/s
    delete_user           a user with 1,000 sessions (10,000 items) -> ms
    sizes                 pg_relation_size, pg_indexes_size, pg_total_relation_size of the
                          big database's items and sessions tables, MiB per million items

Targets (issue 14): get_items(limit=20) and add_items on the big database within 1.5x of
the small one; list_sessions page 100 within 1.5x of page 1, overall and per user.

Run it with ``make bench-scale`` (it starts a throwaway PostgreSQL and stops it on exit),
or with ``AGENTS_SQLALCHEMY_PG_URL`` set to a server whose role may create databases::

    python benchmarks/bench_scale.py                                      # 1M / 10M
    python benchmarks/bench_scale.py --sessions 10000 --items 100000      # about a minute
    python benchmarks/bench_scale.py --keep                               # keep the big database

The full size takes 1.5 to 4 minutes on a 2-core machine, as busy as it is (the load most
of it), and some 5 GB of disk.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from contextlib import AsyncExitStack
from pathlib import Path

if __package__ in (None, ""):  # run as a file: import the package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from agents_sqlalchemy import SessionStore
from benchmarks.cli import load_average, version_of
from benchmarks.core import Report
from benchmarks.databases import PG_URL_ENV, Database, postgres_database
from benchmarks.report import fmt, render_table
from benchmarks.runner import log
from benchmarks.scale import Loaded, Row, appends, erase_user, listing, purge, sizes, tail_reads
from benchmarks.scale_load import Layout, check_loaded, load

SMALL = Layout(100, 1000)


def print_rows(rows: list[Row], small: Layout, big: Layout) -> list[bool]:
    header = [
        "operation",
        f"small ({small.items:,} items)",
        f"big ({big.items:,} items)",
        "big/small",
        "target",
        "verdict",
    ]
    lines = []
    for row in rows:
        ratio = row.big / row.small if row.big is not None and row.small else None
        verdict = "" if row.met is None else ("PASS" if row.met else "MISS")
        lines.append(
            [
                f"{row.what} ({row.unit})",
                fmt(row.small, row.unit),
                fmt(row.big, row.unit),
                fmt(ratio, "x"),
                row.target,
                verdict,
            ]
        )
    print(render_table(header, lines))
    return [row.met for row in rows if row.met is not None]


async def open_loaded(
    stack: AsyncExitStack, label: str, layout: Layout, database: Database
) -> Loaded:
    """A fresh database, its tables made by the library, loaded and checked."""
    location = await stack.enter_async_context(database.fresh(f"scale_{label}"))
    store = SessionStore(location.url, create_tables=True, search=False)
    await stack.enter_async_context(store)
    await store.list_sessions(limit=1)  # the first call makes the tables
    seconds = await load(location.url, layout, log=log)
    log(f"{label}: {layout.sessions:,} sessions, {layout.items:,} items in {seconds:.1f} s")
    problems = await check_loaded(store, layout)
    if problems:
        raise SystemExit("the library reads the loaded rows differently:\n" + "\n".join(problems))
    return Loaded(label, store, layout, location.url)


async def main_async(args: argparse.Namespace) -> int:
    url = os.environ.get(PG_URL_ENV)
    if not url:
        print(f"{PG_URL_ENV} is not set: run `make bench-scale`", file=sys.stderr)
        return 2
    big_layout = Layout(args.sessions, args.items)
    big_layout.check()
    database = postgres_database(url)
    print(
        f"agents-sqlalchemy scale benchmark: {big_layout.sessions:,} sessions, "
        f"{big_layout.items:,} items"
    )
    print(
        f"openai-agents-sqlalchemy {version_of('openai-agents-sqlalchemy')}, "
        f"{os.cpu_count()} CPUs; {await database.describe()}"
    )
    print(f"Before the run: {load_average()}")
    started = time.perf_counter()
    report = Report()
    async with AsyncExitStack() as stack:
        dbs = [
            await open_loaded(stack, "small", SMALL, database),
            await open_loaded(stack, "big", big_layout, database),
        ]
        size_rows = await sizes(dbs)
        log(f"after the load: {load_average()}")
        rows = await tail_reads(dbs, args.rounds, report)
        rows += await listing(dbs, report)
        rows += await appends(dbs, args.rounds, report)
        rows += await purge(dbs, report)
        rows += await erase_user(dbs, report)
        if args.keep:
            print("kept: " + ", ".join(db.url for db in dbs))
            stack.pop_all()
    print()
    outcomes = print_rows(rows + size_rows, SMALL, big_layout)
    for note in report.notes:
        print(f"NOTE: {note}")
    print(
        f"\nTargets: {sum(outcomes)} PASS, {len(outcomes) - sum(outcomes)} MISS. "
        f"Total time: {time.perf_counter() - started:.1f} s; after the run: {load_average()}"
    )
    failed = bool(report.notes) or (args.strict and not all(outcomes))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1_000_000, help="big database's sessions")
    parser.add_argument("--items", type=int, default=10_000_000, help="big database's items")
    parser.add_argument("--rounds", type=int, default=7, help="rounds of 30 calls (default 7)")
    parser.add_argument("--keep", action="store_true", help="keep the databases (to explain)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
