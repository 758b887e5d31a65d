"""What telemetry costs: append and tail with it off, on with nothing listening, and on
with the OpenTelemetry SDK exporting to memory.

One store on one database, switched from one variant to the next in rounds that visit them
in turn (rotating who goes first); a round's figure is the median of its calls (an append
is one turn of 4 items; a tail read asks for the latest 20), and each figure below the
median of its rounds:

- ``bare``: the session's methods without their telemetry wrapper (the code before it);
- ``off``: ``Telemetry(enabled=False)``;
- ``no-op``: the default, with OpenTelemetry's API installed and no provider set (what an
  app that does not trace gets);
- ``memory``: an SDK tracer provider (a simple processor into an in-memory exporter) and
  meter provider (an in-memory reader) of the store's own.

Run: ``python -m benchmarks.telemetry [--url postgresql+asyncpg://...] [--rounds 15]``
(without ``--url``, a fresh SQLite file in a temporary directory; with it, tables of a
prefix of their own there, emptied at the end).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agents_sqlalchemy import SessionStore, SQLAlchemySession, TableNames, Telemetry
from agents_sqlalchemy.session import StoreSession
from agents_sqlalchemy.telemetry import Probe

from .items import make_items

VARIANTS = ("bare", "off", "no-op", "memory")


class BareSession(SQLAlchemySession):
    """A session whose protocol methods are the undecorated ones: the code before telemetry."""

    get_items = StoreSession.get_items.__wrapped__  # type: ignore[attr-defined]
    add_items = StoreSession.add_items.__wrapped__  # type: ignore[attr-defined]


def memory_telemetry() -> tuple[Telemetry, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    option = Telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)
    return option, exporter


def switch(store: SessionStore, option: Telemetry) -> None:
    """Make `store` report per `option` from now on (a fresh probe, as a new store has)."""
    services = store._services
    probe = Probe(option, services.db.url)
    probe.describe(
        items_table=store.tables.items_table,
        sessions_table=store.tables.sessions_table,
        sealed=False,
        backlog=services.background.backlog,
        pools=services.db.pools,
    )
    services.db.telemetry = probe
    services.background._telemetry = probe


async def main(url: str | None, rounds: int, turns: int, tail_calls: int, tail: int) -> None:
    memory, exporter = memory_telemetry()
    options = {
        "bare": Telemetry(enabled=False),
        "off": Telemetry(enabled=False),
        "no-op": Telemetry(),
        "memory": memory,
    }
    kinds = {variant: SQLAlchemySession for variant in VARIANTS} | {"bare": BareSession}
    append: dict[str, list[float]] = {v: [] for v in VARIANTS}
    reads: dict[str, list[float]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory() as folder:
        # One store, one database: the variants differ by their telemetry only (a store
        # per variant would compare files and threads as much as telemetry).
        target = url or str(Path(folder) / "telemetry.db")
        tables = TableNames(prefix=f"tel_{os.getpid()}_")
        async with SessionStore(target, create_tables=True, tables=tables) as store:
            filled = {v: kinds[v](f"tail-{v}", store=store) for v in VARIANTS}
            for variant, session in filled.items():
                switch(store, options[variant])
                for start in range(0, 1000, 100):
                    await session.add_items(make_items(100, start=start))
                await store.flush()
                for _ in range(50):  # warm up
                    await session.get_items(limit=tail)
            batches = [make_items(4, start=t * 4) for t in range(turns)]
            for round_ in range(rounds):
                order = VARIANTS[round_ % 4 :] + VARIANTS[: round_ % 4]
                for variant in order:
                    switch(store, options[variant])
                    session = kinds[variant](f"append-{variant}-{round_}", store=store)
                    turns_taken = []
                    for batch in batches:
                        started = time.perf_counter()
                        await session.add_items(batch)
                        turns_taken.append((time.perf_counter() - started) * 1e6)
                    append[variant].append(statistics.median(turns_taken))
                    await store.flush()
                    exporter.clear()
                    calls = []
                    for _ in range(tail_calls):
                        started = time.perf_counter()
                        await filled[variant].get_items(limit=tail)
                        calls.append((time.perf_counter() - started) * 1e6)
                    reads[variant].append(statistics.median(calls))
            if url:
                await store.delete_all(confirm=True)
    where = url.split("://")[0] if url else "sqlite (file)"
    print(f"telemetry cost on {where}: medians of {rounds} alternating rounds")
    print(f"{'variant':<8} {'append (us)':>11} {'ratio':>6} {'tail (us)':>10} {'ratio':>6}")
    base_append = statistics.median(append["bare"])
    base_tail = statistics.median(reads["bare"])
    for variant in VARIANTS:
        a, t = statistics.median(append[variant]), statistics.median(reads[variant])
        print(f"{variant:<8} {a:>11.1f} {a / base_append:>6.3f} {t:>10.1f} {t / base_tail:>6.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=None)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--turns", type=int, default=200, help="turns (of 4 items) per round")
    parser.add_argument("--tail-calls", type=int, default=200)
    parser.add_argument("--tail", type=int, default=20, help="items a tail read asks for")
    arguments = parser.parse_args()
    asyncio.run(
        main(arguments.url, arguments.rounds, arguments.turns, arguments.tail_calls, arguments.tail)
    )
