"""Run every workload on every backend of one database, round-robin, into figures."""

from __future__ import annotations

import gc
import statistics
import sys
import time
import traceback
from contextlib import AsyncExitStack

from .backends import Backend
from .core import (
    Figures,
    Handle,
    Prepared,
    Report,
    Results,
    Samples,
    Settings,
    Unsupported,
    Workload,
)
from .databases import Database
from .workloads import METRICS, WORKLOADS


def log(message: str) -> None:
    print(f"  .. {message}", file=sys.stderr, flush=True)


def note_error(report: Report, what: str, exc: BaseException) -> None:
    report.notes.append(f"ERROR in {what}: {exc!r}")
    traceback.print_exc(file=sys.stderr)


async def _prepare(
    workload: Workload, handles: dict[str, Handle], settings: Settings, reports: dict[str, Report]
) -> dict[str, Prepared]:
    prepared: dict[str, Prepared] = {}
    for key, handle in handles.items():
        if workload.backends is not None and key not in workload.backends:
            continue
        try:
            prepared[key] = await workload.prepare(handle, settings, reports[key])
        except Unsupported as exc:
            reports[key].notes.append(f"{workload.key}: n/a ({exc})")
        except Exception as exc:
            note_error(reports[key], f"{workload.key} (prepare)", exc)
    return prepared


async def run_workload(
    workload: Workload, handles: dict[str, Handle], settings: Settings, reports: dict[str, Report]
) -> tuple[dict[str, Samples], dict[str, Samples]]:
    """Prepare it on every backend, then sample them in rounds, rotating who goes first:
    every sample, and each round's own figure, by backend and metric."""
    prepared = await _prepare(workload, handles, settings, reports)
    taken: dict[str, Samples] = {key: dict(p.setup) for key, p in prepared.items()}
    per_round: dict[str, Samples] = {key: {} for key in prepared}
    aggregates = {m.key: m.aggregate for m in METRICS}
    closing = {key: p.close for key, p in prepared.items() if p.close is not None}
    rounds = workload.rounds or (settings.short_rounds if workload.short else settings.rounds)
    for round_ in range(rounds):
        gc.collect()
        keys = list(prepared)
        shift = round_ % len(keys) if keys else 0
        for key in keys[shift:] + keys[:shift]:
            try:
                for metric, values in (await prepared[key].sample(round_)).items():
                    taken[key].setdefault(metric, []).extend(values)
                    if values:
                        figure = aggregates.get(metric, statistics.median)(values)
                        per_round[key].setdefault(metric, []).append(figure)
            except Exception as exc:
                note_error(reports[key], f"{workload.key} (round {round_})", exc)
                del prepared[key], taken[key], per_round[key]  # no partial figures
    for key, close in closing.items():
        try:
            await close()
        except Exception as exc:
            note_error(reports[key], f"{workload.key} (close)", exc)
    return taken, per_round


def figures(samples: Samples, rounds: Samples) -> Figures:
    """Each metric's figure from its samples, then the derived ones; with each round's."""
    aggregates = {m.key: m.aggregate for m in METRICS}
    result = {
        metric: aggregates.get(metric, statistics.median)(values)
        for metric, values in samples.items()
        if values
    }
    for m in METRICS:
        value = m.derive(result) if m.derive is not None else None
        if value is not None:
            result[m.key] = value
    return Figures(result, rounds)


async def run_database(
    database: Database, backends: list[Backend], settings: Settings
) -> tuple[Results, dict[str, Report]]:
    """Open every backend at once, then run each workload on all of them round-robin."""
    reports = {backend.key: Report() for backend in backends}
    samples: dict[str, Samples] = {backend.key: {} for backend in backends}
    rounds: dict[str, Samples] = {backend.key: {} for backend in backends}
    async with AsyncExitStack() as stack:
        handles: dict[str, Handle] = {}
        for backend in backends:
            try:
                location = await stack.enter_async_context(database.fresh(backend.key))
                handles[backend.key] = await stack.enter_async_context(backend.open(location))
                handles[backend.key].backend = backend.key
            except Unsupported as exc:
                reports[backend.key].notes.append(f"n/a ({exc})")
            except Exception as exc:
                note_error(reports[backend.key], "opening the backend", exc)
        for workload in WORKLOADS:
            if not workload.enabled(settings):
                continue
            started = time.perf_counter()
            taken, per_round = await run_workload(workload, handles, settings, reports)
            for key, measured in taken.items():
                samples[key].update(measured)
                rounds[key].update(per_round[key])
            log(f"{database.label} / {workload.key}: {time.perf_counter() - started:.1f} s")
    results: Results = {key: figures(measured, rounds[key]) for key, measured in samples.items()}
    return results, reports
