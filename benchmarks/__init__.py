"""The benchmark of this library against the Agents SDK's session backends and a floor.

Run it with ``make bench`` or ``python benchmarks/bench.py`` (see that file). Modules:

- ``items``: the items every backend stores (4-item tool-using turns).
- ``core``: the vocabulary: settings, a backend's open handle, metrics, workloads, samples.
- ``floor``: bare ``sqlite3`` + ``json`` and bare ``asyncpg`` + ``json`` sessions.
- ``backends``: every backend: the floor, the SDK's sessions, ours in three settings.
- ``databases``: a fresh SQLite file or PostgreSQL database per backend.
- ``workloads``, ``search_workload``: what is timed, in rounds that rotate the backends.
- ``runner``: opens the backends and runs each workload on all of them round-robin.
- ``targets``: the project's performance targets, checked on one run's figures.
- ``report``: the tables, the speed-ups and the PASS/MISS (and INFO) lines.
- ``oneoffs``, ``semantic``: single measurements (opening a store, listing, a pop behind a
  long reader, a first search with a cold semantic model in a fresh process).
"""
