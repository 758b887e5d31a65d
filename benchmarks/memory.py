"""Peak memory of one call: Python allocations (tracemalloc) and the process's peak RSS.

RSS: the kernel's high-water mark (``VmHWM``) is reset to the current RSS before the call
(``/proc/self/clear_refs``, Linux) and read after it; glibc is asked to hand freed memory
back first (``malloc_trim``) so that the growth is not hidden by memory freed earlier. Both
are approximate: they include whatever else the process does meanwhile (nothing, here).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")
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
