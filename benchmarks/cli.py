"""The command line of ``benchmarks/bench.py``: options, then one database after another."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib.metadata
import os
import platform
import sys
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

from .backends import BACKENDS, Backend
from .core import Results, Settings
from .databases import (
    MARIADB_URL_ENV,
    PG_FSYNC_URL_ENV,
    PG_URL_ENV,
    Database,
    mariadb_database,
    postgres_database,
    sqlite_database,
)
from .markdown import MarkdownPage
from .oneoffs import (
    append_statement_cost,
    listing_cost,
    pop_behind_reader,
    sealed_memory_held,
    semantic_search,
    store_open_cost,
    sustained_appends,
)
from .report import print_tables, print_targets, target_lines
from .runner import log, run_database

QUICK = {  # five rounds still: every ratio is a median of five per-round ratios at least
    "rounds": 5,
    "short_rounds": 6,
    "memory_items": 20_000,
    "flat_big": 20_000,
    "search_items": 2000,
    "search_sessions": 200,
    "search_other_sessions": 50,
    "semantic_calls": 20,
}


def settings_from(args: argparse.Namespace) -> Settings:
    values: dict[str, object] = dict(QUICK) if args.quick else {}
    if args.big_items is not None:
        values["flat_big"] = args.big_items
    values["search_workload"] = args.search
    values["semantic_embedder"] = args.semantic_embedder
    return dataclasses.replace(Settings(quick=args.quick), **values)  # type: ignore[arg-type]


def load_average() -> str:
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return "load average unknown"
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min)"


def version_of(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


async def guarded(work: Awaitable[tuple[Results, str]], what: str) -> tuple[Results, str]:
    """A single measurement's figures and line; an error becomes the line instead."""
    try:
        return await work
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        return {}, f"ERROR in {what}: {exc!r}"


async def _lines_only(work: Awaitable[str]) -> tuple[Results, str]:
    return {}, await work


async def one_offs(database: Database, keys: set[str], s: Settings) -> tuple[Results, list[str]]:
    """The single measurements that apply to this database and these backends."""
    chosen: list[tuple[str, Awaitable[tuple[Results, str]]]] = []
    if "ours_encrypted" in keys:
        chosen.append(("opening a store", _lines_only(store_open_cost(database))))
        if database.key == "sqlite":
            chosen.append(("the pop behind a reader", pop_behind_reader(database)))
            chosen.append(("memory held", sealed_memory_held(database, s)))
    if database.key == "postgres" and {"floor", "ours_nosearch"} <= keys:
        chosen.append(("where an append goes", _lines_only(append_statement_cost(database, s))))
    if "ours" in keys:
        chosen.append(("listing sessions", _lines_only(listing_cost(database))))
        chosen.append(("sustained appends", _lines_only(sustained_appends(database, s))))
        chosen.append(("the semantic search", semantic_search(database, s)))
    figures: Results = {}
    lines: list[str] = []
    for what, work in chosen:
        found, line = await guarded(work, what)
        for key, values in found.items():
            figures.setdefault(key, {}).update(values)
        lines.append(line)
    return figures, lines


async def run_one(
    database: Database, backends: list[Backend], s: Settings, page: MarkdownPage | None
) -> list[bool]:
    description = await database.describe()
    print(f"\n=== {database.label}: {description} ===")
    if database.probe is not None:
        print(f"before: {await database.probe()}")
    results, reports = await run_database(database, backends, s)
    if database.probe is not None:
        print(f"after:  {await database.probe()}")
    started = time.perf_counter()
    extra, lines = await one_offs(database, {b.key for b in backends}, s)
    log(f"{database.label} / single measurements: {time.perf_counter() - started:.1f} s")
    for key, found in extra.items():
        results.setdefault(key, {}).update(found)
    print_tables(backends, results, reports, s)
    for line in lines:
        print(line)
    targets = target_lines(database.key, {b.key for b in backends}, results, s)
    if page is not None:
        page.add_database(database.label, description, backends, results, s, lines, targets)
    return print_targets(database.label, targets)


FSYNC_ON = "PostgreSQL, fsync on"
# (key, label, the variable naming its server, what makes the Database of that URL)
SERVERS: tuple[tuple[str, str, str, Callable[[str], Database]], ...] = (
    ("postgres", "PostgreSQL", PG_URL_ENV, postgres_database),
    ("postgres", FSYNC_ON, PG_FSYNC_URL_ENV, partial(postgres_database, label=FSYNC_ON)),
    ("mariadb", "MariaDB", MARIADB_URL_ENV, mariadb_database),
)


def databases_from(args: argparse.Namespace, directory: Path) -> list[Database] | None:
    databases: list[Database] = []
    if args.only in (None, "sqlite"):
        databases.append(sqlite_database(directory))
    for key, label, variable, database in SERVERS:
        if args.only not in (None, key):
            continue
        url = os.environ.get(variable)
        if url:
            databases.append(database(url))
        elif args.only == key and variable != PG_FSYNC_URL_ENV:
            print(f"--only {key} needs {variable}", file=sys.stderr)
            return None
        else:
            print(f"\n{label}: skipped ({variable} is not set)")
    return databases


def header(s: Settings) -> list[str]:
    """Print what the run is, and on what; return the same lines."""
    names = ("openai-agents-sqlalchemy", "openai-agents", "SQLAlchemy", "aiosqlite", "asyncpg")
    lines = [
        "agents-sqlalchemy benchmark" + (" (--quick)" if s.quick else ""),
        f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs; "
        + ", ".join(f"{name} {version_of(name)}" for name in names),
        f"Before the run: {load_average()} (other work on the machine skews the figures)",
    ]
    for line in lines:
        print(line)
    return lines


def page_for(
    args: argparse.Namespace, argv: list[str], lines: list[str], s: Settings
) -> MarkdownPage | None:
    """The Markdown page of this run when --markdown names one."""
    if args.markdown is None:
        return None
    command = " ".join(["python benchmarks/bench.py", *argv])
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return MarkdownPage(
        [
            "<!-- Generated by benchmarks/bench.py --markdown: do not edit by hand. -->",
            "",
            f"One run of `{command}`, started {started}. {lines[1]}. {lines[2]}.",
            "Figures are medians of their samples. A ratio (the speed-up rows, the targets) is"
            " formed in each round from both figures of that round, over at least"
            f" {min(s.rounds, s.short_rounds)} rounds: the median of those, their lowest and"
            " highest in brackets. Compare the rows of one table, not tables of different runs.",
        ]
    )


async def main_async(args: argparse.Namespace, argv: list[str]) -> int:
    s = settings_from(args)
    wanted = {key.strip() for key in args.backends.split(",")} if args.backends else None
    if wanted is not None and wanted - {b.key for b in BACKENDS}:
        print(f"unknown backend(s): {', '.join(sorted(wanted - {b.key for b in BACKENDS}))}")
        return 2
    page = page_for(args, argv, header(s), s)
    started = time.perf_counter()
    outcomes: list[bool] = []
    with tempfile.TemporaryDirectory(prefix="agents-sqlalchemy-bench-", dir=args.sqlite_dir) as tmp:
        databases = databases_from(args, Path(tmp))
        if databases is None:
            return 2
        for database in databases:
            backends = [
                b
                for b in BACKENDS
                if database.key in b.databases
                and (b.key in wanted if wanted is not None else b.default)
            ]
            outcomes += await run_one(database, backends, s, page)
    summary = (
        f"Targets: {sum(outcomes)} PASS, {len(outcomes) - sum(outcomes)} MISS. "
        f"Total time: {time.perf_counter() - started:.1f} s; {load_average()}"
    )
    print(f"\n{summary}")
    if page is not None:
        page.write(Path(args.markdown), f"{summary}.")
        print(f"Wrote {args.markdown}")
    return 1 if args.strict and not all(outcomes) else 0


def main(doc: str | None = None, argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=(doc or "").split("\n\n")[0] or None,
        epilog="See the docstring of benchmarks/bench.py for the workloads.",
    )
    parser.add_argument("--quick", action="store_true", help="smaller sessions, 5 rounds")
    parser.add_argument(
        "--only", choices=("sqlite", "postgres", "mariadb"), help="one database only"
    )
    parser.add_argument(
        "--backends",
        help="comma-separated backend keys (default: all but sdk_encrypted): "
        + ", ".join(backend.key for backend in BACKENDS),
    )
    parser.add_argument(
        "--big-items",
        type=int,
        help="items of the huge session of the flat check (default 1,000,000; quick 20,000)",
    )
    parser.add_argument(
        "--search",
        action="store_true",
        help="add the search latency workload (ours only; about 5 minutes more)",
    )
    parser.add_argument(
        "--semantic-embedder",
        default="minilm",
        help="the built-in embedder of the cold first-search check (default: minilm)",
    )
    parser.add_argument(
        "--sqlite-dir",
        help="where the SQLite files go (default: the system temp dir); a tmpfs such as "
        "/dev/shm shows the CPU cost alone",
    )
    parser.add_argument(
        "--strict", action="store_true", help="exit with status 1 when a target is missed"
    )
    parser.add_argument(
        "--markdown",
        metavar="PATH",
        help="also write the tables as Markdown to PATH (the docs include "
        "docs/benchmarks/results.md)",
    )
    arguments = sys.argv[1:] if argv is None else argv
    return asyncio.run(main_async(parser.parse_args(arguments), arguments))
