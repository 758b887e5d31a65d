"""Benchmark: what turns, usage and branches cost, and what they leave alone.

Two parts, each on fresh SQLite files (tmpfs if you pass ``--sqlite-dir /dev/shm``):

    python benchmarks/branches.py hot       # the hot paths of a session that never branches
    python benchmarks/branches.py branch    # branching a 10,000-item session
    python benchmarks/branches.py hot --json   # one JSON line, for comparing two checkouts

``hot`` times, for a plaintext store: ``add_items`` of 1,200 items in 4-item turns (items/s
on the wall clock, and per CPU second: ``_cpu``), ``get_items()`` of those 1,200 items and
``get_items(limit=20)`` (ms, medians); then ``add_items`` carrying a Runner context whose
usage is recorded on the way (what ``Runner.run`` does) against plain ones.
``--against MODULE`` runs a second copy of the library in the same process, alternating
with this one round by round, so both see the same machine: make one from an older
checkout with ``git archive <commit> src`` and its package directory and absolute imports
renamed (``agents_sqlalchemy_base``), then
``PYTHONPATH=<that dir> python benchmarks/branches.py hot --against agents_sqlalchemy_base``.

``branch`` builds a 10,000-item session (2,500 four-item turns) and times
``create_branch_from_turn(2,400)``: the first time (cold: the main line's turn structure is
derived from the stored items first) and again from main (warm), plaintext and encrypted;
then ``get_items()`` of the branch (9,596 items) and of main (10,000), and
``get_items(limit=20)`` on the branch; medians of 3 sessions. Branching is timed on the
wall clock and in CPU time (of the process, its database thread included).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: import the package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from agents_sqlalchemy import SessionStore
from benchmarks.items import make_items  # the same realistic 4-item turns as bench.py

ROUNDS = 9


async def _timed(call: Any, *args: Any, **kwargs: Any) -> float:
    """Milliseconds that `await call(*args, **kwargs)` takes."""
    started = time.perf_counter()
    await call(*args, **kwargs)
    return (time.perf_counter() - started) * 1000


async def _cpu_timed(call: Any, *args: Any) -> tuple[float, float]:
    """Wall and CPU milliseconds of `await call(*args)` (CPU of every thread of this process,
    the database's worker included: what a busy machine inflates least)."""
    cpu = time.process_time()
    wall = await _timed(call, *args)
    return wall, (time.process_time() - cpu) * 1000


def _usage_wrapper() -> Any:
    """A Runner context that has used some tokens."""
    from agents.run_context import RunContextWrapper
    from agents.usage import Usage

    usage = Usage(requests=1, input_tokens=120, output_tokens=40, total_tokens=160)
    return RunContextWrapper(context=None, usage=usage)


async def _append(session: Any, items: list[Any], wrapper: Any = None) -> tuple[float, float]:
    """Items per second appending `items` in 4-item turns (with `wrapper`, as Runner does):
    on the wall clock, and per second of CPU time (the process's, database thread included)."""
    extra = {} if wrapper is None else {"wrapper": wrapper}
    started, cpu = time.perf_counter(), time.process_time()
    for start in range(0, len(items), 4):
        await session.add_items(items[start : start + 4], **extra)
    return len(items) / (time.perf_counter() - started), len(items) / (time.process_time() - cpu)


async def _hot_round(lib: Any, path: Path) -> dict[str, float]:
    """One round of the hot paths on a fresh file with `lib` (a copy of the library)."""
    items = make_items(1200)
    async with lib.SessionStore(path, create_tables=True) as store:
        session = store.session("hot")
        await store.session("warm-up").get_items()  # the tables are made on first use
        append, append_cpu = await _append(session, items)
        return {
            "append": append,
            "append_cpu": append_cpu,
            "read_all": statistics.median([await _timed(session.get_items) for _ in range(10)]),
            "limit20": statistics.median(
                [await _timed(session.get_items, limit=20) for _ in range(30)]
            ),
        }


async def _usage_round(lib: Any, path: Path, first: bool) -> dict[str, float]:
    """Appends with and without a Runner context (usage recorded), taking turns."""
    items, wrapper = make_items(1200), _usage_wrapper()
    async with lib.SessionStore(path, create_tables=True) as store:
        await store.session("warm-up").get_items()  # the tables are made on first use
        plain = (store.session("plain"), None, "append_plain")
        used = (store.session("used"), wrapper, "append_usage")
        found = {}
        for session, w, name in [plain, used] if first else [used, plain]:
            found[name], found[f"{name}_cpu"] = await _append(session, items, w)
        return found


async def hot(
    directory: Path, against: str | None = None, rounds: int = ROUNDS
) -> dict[str, float]:
    """Medians of the never-branching hot paths; then of appends that record usage.

    With `against` (another copy of the library, importable under that name), each round
    runs both copies one after the other, taking turns to go first, in this process. The
    appends that record usage run apart, after, against plain appends of the same copy.
    """
    libs = {"": importlib.import_module("agents_sqlalchemy")}
    if against:
        libs[f"{against}_"] = importlib.import_module(against)
    figures: dict[str, list[float]] = {}

    def add(found: dict[str, float], prefix: str = "") -> None:
        for name, value in found.items():
            figures.setdefault(prefix + name, []).append(value)

    for round_ in range(rounds):
        order = list(libs.items()) if round_ % 2 == 0 else list(libs.items())[::-1]
        for prefix, lib in order:
            add(await _hot_round(lib, directory / f"hot-{prefix}{round_}.db"), prefix)
    for round_ in range(rounds):
        order = list(libs.items()) if round_ % 2 == 0 else list(libs.items())[::-1]
        for prefix, lib in order:
            path = directory / f"usage-{prefix}{round_}.db"
            add(await _usage_round(lib, path, round_ % 2 == 0), prefix)
    return {name: statistics.median(values) for name, values in figures.items()}


async def branch(directory: Path) -> dict[str, float]:
    """Branching a 10,000-item session: cold, warm, and reading the branch and main."""
    items = make_items(10_000)
    turn = 2400  # 9,596 items lie before it
    out: dict[str, float] = {}
    for label, key in (("plain", None), ("encrypted", os.urandom(32))):
        figures: dict[str, list[float]] = {}
        for round_ in range(3):
            path = directory / f"branch-{label}-{round_}.db"
            async with SessionStore(path, create_tables=True, key=key) as store:
                session = store.session("long")
                for start in range(0, len(items), 1000):
                    await session.add_items(items[start : start + 1000])
                for name in ("cold", "warm", "warm", "warm"):
                    await session.switch_to_branch("main")
                    wall, cpu = await _cpu_timed(session.create_branch_from_turn, turn)
                    figures.setdefault(f"{name}_ms", []).append(wall)
                    figures.setdefault(f"{name}_cpu_ms", []).append(cpu)
                assert len(await session.get_items()) == 4 * (turn - 1)
                for _ in range(5):  # the two reads take turns
                    for name, branch_id in (("read_branch_ms", None), ("read_main_ms", "main")):
                        figures.setdefault(name, []).append(
                            await _timed(session.get_items, branch_id=branch_id)
                        )
                figures.setdefault("branch_limit20_ms", []).append(
                    statistics.median(
                        [await _timed(session.get_items, limit=20) for _ in range(20)]
                    )
                )
        out |= {f"{label}_{name}": statistics.median(values) for name, values in figures.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("part", choices=("hot", "branch"))
    parser.add_argument("--sqlite-dir", help="where the SQLite files go (e.g. /dev/shm)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="hot: rounds (medians)")
    parser.add_argument(
        "--against",
        metavar="MODULE",
        help="hot: also run another copy of the library importable as MODULE (e.g. an older "
        "checkout's package renamed), alternating with this one in each round",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(
        prefix="agents-sqlalchemy-branches-", dir=args.sqlite_dir
    ) as d:
        if args.part == "hot":
            figures = asyncio.run(hot(Path(d), args.against, args.rounds))
        else:
            figures = asyncio.run(branch(Path(d)))
    if args.json:
        print(json.dumps(figures))
    else:
        for name, value in figures.items():
            unit = "items/s" if "append" in name else "ms"
            print(f"{name:>24}: {value:,.2f} {unit}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
