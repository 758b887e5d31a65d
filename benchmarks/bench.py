"""Benchmark: this library against the Agents SDK's session backends and the bare driver.

One process, one run, one event loop: every workload runs against every backend on the
same machine, and the script prints each figure, the speed-ups, and a PASS/MISS line per
performance target (issues 10 and 11; INFO for a figure watched beside them). The machine
may be shared and noisy: compare figures within one run only.

Run it with ``make bench`` (which starts throwaway PostgreSQL servers, one with fsync off
and one with it on, and a MariaDB), or from the repository root with the package
installed (``pip install -e '.[dev]'``)::

    python benchmarks/bench.py                 # SQLite, plus each server configured:
    #   AGENTS_SQLALCHEMY_PG_URL, AGENTS_SQLALCHEMY_PG_FSYNC_URL (fsync on: measured apart),
    #   AGENTS_SQLALCHEMY_MARIADB_URL
    python benchmarks/bench.py --quick         # smaller big sessions, 5 rounds
    python benchmarks/bench.py --only sqlite   # or: --only postgres
    python benchmarks/bench.py --backends floor,ours,sdk_sqlite   # a subset of backends
    python benchmarks/bench.py --big-items 100000   # the huge session of the flat check
    python benchmarks/bench.py --search        # add ours' search latency (~5 min more)
    python benchmarks/bench.py --sqlite-dir /dev/shm   # SQLite on tmpfs: CPU cost alone
    python benchmarks/bench.py --strict        # exit 1 when a target is missed

Backends (``backends.py``; every SQLite one in WAL mode with ``synchronous=NORMAL``)
    floor            bare sqlite3 + json (one thread hop per operation) / asyncpg + json
    sdk_sqlite       ``agents.SQLiteSession`` (SQLite only)
    sdk_sqlalchemy   ``agents.extensions.memory.SQLAlchemySession`` on one shared engine
    sdk_encrypted    the SDK's ``EncryptedSession`` over it (only when named: --backends)
    ours_nosearch    ``SessionStore(url, search=False)``
    ours             ``SessionStore(url)``: the defaults, search on
    ours_encrypted   ``SessionStore(url, key=os.urandom(32))``, search on

Workloads (``workloads.py``, ``search_workload.py``), in this order on one database each
    append      300 turns of 4 items -> ms per turn (the caller's), and items/s with the
                search indexing waited for (``store.flush()``; ours only has any)
    read        ``get_items()`` of a 1,200-item session -> ms
    tail        ``get_items(limit=20)`` of another 1,200-item session -> ms
    pop         ``pop_item()`` from a 1,000-item session -> ms
    memory      a 100,000-item session built in 10,000-item batches, then read once in a
                fresh process per backend -> ms, tracemalloc peak, peak RSS growth (MiB)
    flat        ours only: ``get_items(limit=20)`` on 1,000 vs 1,000,000 items (building
                the big one takes about a minute per database) -> ms and their ratio
    search      with --search, ours only: ``session.search`` in 10,000 items and
                ``store.search`` over one user's 1,000 sessions -> p50, p95

Then single measurements (``oneoffs.py``): opening an encrypted store, ``list_sessions``
over 100 and 100,000 sessions, appends without pause for 8 s with search off and on (their
p50, p99 and longest, and the full garbage collections meanwhile), an encrypted pop behind
a long SQLite reader, a first search with a cold semantic model
(``--semantic-embedder``, default ``minilm``; skipped with a note when
``embedder_by_name`` does not know it) in a fresh process, and on PostgreSQL where an
append's time goes: the floor's statement, the library's own append statement on the bare
driver, and the library's append, in alternating rounds.

Each workload is prepared on every backend, then sampled in rounds that visit the backends
in turn, rotating who goes first (5 rounds, ``--quick`` too; the short calls, reads,
tails and pops, in 15 or 6 shorter rounds); each figure is the median of its samples, and
each ratio of two backends (speed-ups, targets) the median of its per-round ratios, both
figures from the same round, with their lowest and highest beside it.
Results are checked and any mismatch or error is printed. A whole ``make bench`` takes
about 8 minutes on a busy 2-core machine, ``--quick`` about 4.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: import the package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from benchmarks.cli import main

if __name__ == "__main__":
    sys.exit(main(__doc__))
