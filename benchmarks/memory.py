"""Peak memory of a full read, measured in a fresh process per backend.

A process that has already read big sessions through other backends keeps much of that
memory in its allocators and reuses it, which hides the growth of the next read; so the
parent builds the session, then runs this module once per backend::

    python -m benchmarks.memory BACKEND LOCATION_JSON SESSION COUNT START

which opens the backend on the same database (and key), warms it up (a one-item read of
the session, a full read of an empty one), then times one ``get_items()`` and reports, as
one JSON line, how far the process's peak RSS rose above its RSS before the call (the
kernel's high-water mark ``VmHWM``, reset through ``/proc/self/clear_refs``; Linux only,
else null), and in a second call the peak of Python allocations (tracemalloc, every
thread; C-level buffers such as SQLite's page cache are not in it).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import json
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from .core import Location
from .items import item_at

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent  # where ``-m benchmarks.memory`` runs
MIB = 1024 * 1024


def _status_kib(name: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(name + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_rss_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear_refs:
            clear_refs.write("5")
    except OSError:
        return False
    return True


def _trim() -> None:
    gc.collect()
    name = ctypes.util.find_library("c")
    if name is None:
        return
    trim = getattr(ctypes.CDLL(name), "malloc_trim", None)
    if trim is not None:
        trim(0)


async def rss_peak(call: Callable[[], Awaitable[T]]) -> tuple[T, float, float | None]:
    """(result, ms, MiB the peak RSS grew by during the call, or None where unknown)."""
    _trim()
    reset = _reset_rss_peak()
    before = _status_kib("VmRSS")
    started = time.perf_counter()
    result = await call()
    elapsed = (time.perf_counter() - started) * 1000.0
    peak = _status_kib("VmHWM")
    if not reset or before is None or peak is None:
        return result, elapsed, None
    return result, elapsed, (peak - before) * 1024 / MIB


async def traced_peak(call: Callable[[], Awaitable[object]]) -> float:
    """MiB: the peak of Python allocations during the call above those live before it."""
    _trim()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        result = await call()
        _, peak = tracemalloc.get_traced_memory()
        del result
    finally:
        tracemalloc.stop()
    return (peak - before) / MIB


def spot_check(got: Sequence[object], count: int, start: int) -> str | None:
    """Compare a big read with what was written: its length, and every 997th item."""
    if len(got) != count:
        return f"{len(got)} items, expected {count}"
    for index in [*range(0, count, 997), count - 1]:
        if got[index] != item_at(index, start):
            return f"item {index} differs"
    return None


async def measure(
    backend: str, location: Location, session_id: str, count: int, start: int
) -> dict[str, Any]:
    """In this process: open the backend, warm it up, measure one full read twice."""
    from .backends import BACKENDS

    [opener] = [b.open for b in BACKENDS if b.key == backend]
    async with opener(location) as handle:
        session = handle.session(session_id)
        # Connections, schema checks, both statements: a tail read, and a full read of
        # a session that has no items.
        await session.get_items(limit=1)
        await handle.session(f"{session_id}-empty").get_items()
        got, elapsed, rss = await rss_peak(session.get_items)
        check = spot_check(got, count, start)
        del got
        traced = await traced_peak(session.get_items)
    return {"read_ms": elapsed, "rss_mib": rss, "traced_mib": traced, "check": check}


async def measure_elsewhere(
    backend: str, location: Location, session_id: str, count: int, start: int
) -> dict[str, Any]:
    """``measure`` in a fresh Python process (this module run with ``-m``)."""
    where = {
        "database": location.database,
        "url": location.url,
        "path": None if location.path is None else str(location.path),
        "key": None if location.key is None else location.key.hex(),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "benchmarks.memory",
        backend,
        json.dumps(where),
        session_id,
        str(count),
        str(start),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await process.communicate()
    lines = out.decode().strip().splitlines()
    if process.returncode != 0 or not lines:
        raise RuntimeError(f"benchmarks.memory exited with {process.returncode}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def main(argv: list[str]) -> int:
    backend, where_json, session_id, count, start = argv
    where = json.loads(where_json)
    location = Location(
        where["database"],
        where["url"],
        None if where["path"] is None else Path(where["path"]),
        None if where["key"] is None else bytes.fromhex(where["key"]),
    )
    result = asyncio.run(measure(backend, location, session_id, int(count), int(start)))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
