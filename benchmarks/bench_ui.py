"""Session browser benchmark: how long its pages take on a large store (issue 38: under
300 ms with 100,000 sessions and a 10,000-item transcript, paged).

Per database (SQLite, and PostgreSQL when ``AGENTS_SQLALCHEMY_PG_URL`` is set): a fresh one
loaded with ``--sessions`` sessions of ``--items`` items in all (the rows the library
writes, imported fast: ``scale_load.py`` on PostgreSQL, the same rows by sqlite3 on
SQLite) and indexed for search by ``store.reindex()``, then one session of
``--transcript`` items written through the library (search on, token usage on every turn).
``agents-sqlalchemy ui`` serves it in its own process (uvicorn); each page is fetched
``--rounds`` times after one warm-up request, and its median, p95 and slowest times are
printed, measured by the client (the whole HTTP round trip). "first" is the first request
of a page (the app keeps what aggregates whole tables, and a transcript's branches, usage
and history check, for a minute; a store keeps a large scope's search candidates
while the scope is unchanged, so a search page's first request is what a search costs
right after a write in its scope); the charts are timed cold once.

    python benchmarks/bench_ui.py                              # 100,000 sessions
    python benchmarks/bench_ui.py --sessions 10000 --items 40000 --rounds 5

Not a timed test: it prints figures, and PASS or MISS against 300 ms (the median).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from datetime import timedelta
from pathlib import Path

import httpx
from agents.run_context import RunContextWrapper
from agents.usage import Usage

if __package__ in (None, ""):  # run as a file: import the package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from agents_sqlalchemy import SessionStore
from agents_sqlalchemy.codec import encode_item
from agents_sqlalchemy.ui.app import TRANSCRIPT_PAGE
from benchmarks.cli import load_average, version_of
from benchmarks.databases import PG_URL_ENV, postgres_database, sqlite_database
from benchmarks.items import item_at, make_turn
from benchmarks.report import render_table
from benchmarks.runner import log
from benchmarks.scale_load import HEAVY_USER, POOL, Layout, load, owner, session_name

BIG = "big-transcript"
TARGET_MS = 300.0


def load_sqlite(path: Path, layout: Layout) -> float:
    """The rows `scale_load.load` writes on PostgreSQL, written into a SQLite file."""
    started = time.perf_counter()
    k = layout.per_session
    pool = [encode_item(item_at(i)) for i in range(POOL)]
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = OFF")
        stamp = "%Y-%m-%d %H:%M:%S.%f"
        for first in range(0, layout.sessions, 10_000):
            last = min(layout.sessions, first + 10_000)
            sessions, items = [], []
            for n in range(first, last):
                name = session_name(n)
                made = layout.start.replace(tzinfo=None) + _seconds(n)
                sessions.append(
                    (
                        n + 1,
                        name,
                        hashlib.sha256(name.encode()).hexdigest(),
                        owner(n),
                        json.dumps({"n": n}),
                        k,
                        made.strftime(stamp),
                        made.strftime(stamp),
                    )
                )
                items += [
                    (
                        n + 1,
                        seq,
                        (made + _seconds(seq / 1000)).strftime(stamp),
                        None,
                        pool[(n * k + seq - 1) % POOL],
                    )
                    for seq in range(1, k + 1)
                ]
            conn.executemany(
                "INSERT INTO agents_sqlalchemy_sessions (id, session_id, session_hash, user_id,"
                " metadata, next_seq, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                sessions,
            )
            conn.executemany(
                "INSERT INTO agents_sqlalchemy_items (session_pk, seq, created_at, expires_at,"
                " payload) VALUES (?, ?, ?, ?, ?)",
                items,
            )
            conn.commit()
            log(f"  loaded {last:,} sessions, {last * k:,} items")
        conn.execute("ANALYZE")
        conn.commit()
    finally:
        conn.close()
    return time.perf_counter() - started


def _seconds(n: float) -> timedelta:
    return timedelta(seconds=n)


async def index_all(url: str) -> float:
    """The loaded rows indexed for search, as the library indexes what it writes (else
    each search would index the rows it finds missing, a batch at a time)."""
    started = time.perf_counter()
    async with SessionStore(url) as store:
        await store.reindex(batch_size=2000)
    return time.perf_counter() - started


async def write_transcript(url: str, items: int) -> float:
    """A session of `items` items in 4-item turns, through the library, usage on each."""
    started = time.perf_counter()
    async with SessionStore(url) as store:
        session = store.session(BIG, user_id=HEAVY_USER, metadata={"kind": "benchmark"})
        for n in range(items // 4):
            usage = Usage(requests=1, input_tokens=900, output_tokens=100, total_tokens=1000)
            await session.add_items(make_turn(n), wrapper=RunContextWrapper(None, usage))
        await store.flush()
    return time.perf_counter() - started


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def serve(url: str, log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`agents-sqlalchemy ui` on a free port, once it answers."""
    port = free_port()
    command = [sys.executable, "-m", "agents_sqlalchemy.cli", "ui", "--url", url]
    with log_path.open("wb") as out:
        process = subprocess.Popen(
            [*command, "--port", str(port)], stdout=out, stderr=subprocess.STDOUT
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server stopped:\n{log_path.read_text()}")
        try:
            if httpx.get(f"{base}/users?limit=1", timeout=5).status_code == 200:
                return process, base
        except httpx.HTTPError:
            time.sleep(0.3)
    process.kill()
    raise SystemExit("the server did not answer")


def timed(client: httpx.Client, path: str) -> float:
    started = time.perf_counter()
    response = client.get(path)
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise SystemExit(f"{path}: {response.status_code}\n{response.text[:2000]}")
    return elapsed


def _next(page: str) -> str | None:
    marker = 'id="next" rel="next" href="'
    if marker not in page:
        return None
    return page.split(marker)[1].split('"')[0].replace("&amp;", "&")


def pages(client: httpx.Client, sessions: int, transcript: int) -> list[tuple[str, str]]:
    """The pages timed: (what, path); the deep page is the 100th (or the last) by cursor."""
    deep, number = "/sessions", 1
    while number < 100 and (found := _next(client.get(deep).text)) is not None:
        deep, number = found, number + 1
    oldest = -(-transcript // TRANSCRIPT_PAGE)
    middle = oldest // 2
    return [
        ("sessions, page 1 (50)", "/sessions"),
        (f"sessions, page {number} (by cursor)", deep),
        ("sessions of the heavy user", f"/sessions?user={HEAVY_USER}"),
        ("sessions by metadata", f"/sessions?meta=n%3D{sessions // 2 + 1}"),
        ("users, page 1", "/users"),
        ("users, page 2", "/users?after=user-000049"),
        (f"transcript of {transcript:,}: latest page", f"/session?id={BIG}"),
        (f"transcript of {transcript:,}: page {middle}", f"/session?id={BIG}&page={middle}"),
        (f"transcript of {transcript:,}: oldest", f"/session?id={BIG}&page={oldest}"),
        ("a loaded session", f"/session?id={session_name(sessions // 2 + 1)}"),
        ("search in the transcript", f"/search?q=weather+in+Oslo&session={BIG}"),
        ("search across the heavy user", f"/search?q=weather+in+Oslo&user={HEAVY_USER}"),
        ("charts, 30 days (cached)", "/charts"),
    ]


def measure(base: str, sessions: int, transcript: int, rounds: int) -> list[list[str]]:
    rows: list[list[str]] = []
    with httpx.Client(base_url=base, timeout=60) as client:
        cold = timed(client, "/charts?days=90")
        rows.append(["charts, 90 days", f"{cold:.1f}", "-", "-", "-", ""])
        for what, path in pages(client, sessions, transcript):
            first = timed(client, path)  # the first view, before any cache of the app
            times = sorted(timed(client, path) for _ in range(rounds))
            median = statistics.median(times)
            p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
            verdict = "PASS" if median < TARGET_MS else "MISS"
            figures = [f"{first:.1f}", f"{median:.1f}", f"{p95:.1f}", f"{times[-1]:.1f}"]
            rows.append([what, *figures, verdict])
    return rows


async def main_async(args: argparse.Namespace) -> int:
    layout = Layout(args.sessions, args.items)
    layout.check()
    print(
        f"agents-sqlalchemy session browser benchmark: {layout.sessions:,} sessions, "
        f"{layout.items:,} items, and a transcript of {args.transcript:,} items"
    )
    version = version_of("openai-agents-sqlalchemy")
    print(f"openai-agents-sqlalchemy {version}, {os.cpu_count()} CPUs")
    scratch = Path(tempfile.mkdtemp(prefix="bench_ui_"))
    databases = [sqlite_database(scratch)]
    if os.environ.get(PG_URL_ENV):
        databases.append(postgres_database(os.environ[PG_URL_ENV]))
    else:
        print(f"{PG_URL_ENV} is not set: SQLite only")
    misses = 0
    for database in databases:
        async with AsyncExitStack() as stack:
            location = await stack.enter_async_context(database.fresh("ui"))
            print(f"\n{await database.describe()}; before: {load_average()}")
            async with SessionStore(location.url, create_tables=True) as store:
                await store.list_sessions(limit=1)  # makes the tables
            if database.key == "sqlite":
                assert location.path is not None
                seconds = await asyncio.to_thread(load_sqlite, location.path, layout)
            else:
                seconds = await load(location.url, layout, log=log)
            log(f"{database.label}: loaded in {seconds:.1f} s")
            seconds = await index_all(location.url)
            log(f"{database.label}: indexed for search in {seconds:.1f} s")
            seconds = await write_transcript(location.url, args.transcript)
            log(f"{database.label}: the transcript written and indexed in {seconds:.1f} s")
            process, base = serve(location.url, scratch / f"{database.key}.log")
            try:
                rows = measure(base, layout.sessions, args.transcript, args.rounds)
            finally:
                process.terminate()
                process.wait(timeout=30)
        header = ["page", "first ms", "median ms", "p95 ms", "max ms", f"< {TARGET_MS:.0f} ms"]
        print(render_table(header, rows))
        misses += sum(row[-1] == "MISS" for row in rows)
    shutil.rmtree(scratch, ignore_errors=True)
    print(f"\n{misses} page(s) over {TARGET_MS:.0f} ms (median); after the run: {load_average()}")
    return 1 if args.strict and misses else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--items", type=int, default=400_000, help="items of those sessions")
    parser.add_argument("--transcript", type=int, default=10_000, help="items of the big one")
    parser.add_argument("--rounds", type=int, default=15, help="requests per page, timed")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a page is over")
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
