"""Printing one database's figures: a table per group, speed-ups, and the targets."""

from __future__ import annotations

from dataclasses import dataclass, fields

from .backends import LABELS, Backend
from .core import Metric, Ratio, Report, Results, Settings, ratio
from .targets import TARGETS
from .workloads import METRICS

GROUPS = {
    "hot": "Hot paths (ms, lower is better; append+index in items/s)",
    "big": "Big sessions",
    "flat": "get_items(limit=n) on a small and a huge session",
    "search": "Search (ours only)",
}


@dataclass(frozen=True)
class Comparison:
    ours: str  # backend key
    other: str  # backend key


COMPARISONS = [
    Comparison("ours_nosearch", "sdk_sqlite"),
    Comparison("ours", "sdk_sqlalchemy"),
    Comparison("ours", "floor"),
    Comparison("ours", "ours_nosearch"),
    Comparison("ours_encrypted", "ours"),
    Comparison("ours_encrypted", "sdk_encrypted"),
]


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "items/s":
        return f"{value:,.0f}"
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "MiB":
        return f"{value:,.1f}"
    return f"{value:,.1f}" if value >= 100 else f"{value:.3f}"


def render_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True)]
        return " | ".join([first, *rest])

    rule = "-+-".join("-" * width for width in widths)
    return "\n".join([line(header), rule, *(line(row) for row in rows)])


def speedup(results: Results, metric: Metric, ours: str, other: str) -> Ratio | None:
    """How many times faster ``ours`` is than ``other`` on ``metric`` (>1: ours faster),
    round by round: the median and spread of the rounds' speed-ups."""
    if metric.higher_is_better:
        return ratio(results, ours, other, metric.key)
    return ratio(results, other, ours, metric.key)


def _column(metric: Metric, settings: Settings) -> str:
    unit = "" if metric.unit in ("ms", "x") and metric.group == "hot" else f" {metric.unit}"
    return metric.column.format(**_values(settings)) + ("" if metric.unit == "x" else unit)


def _values(settings: Settings) -> dict[str, object]:
    return {f.name: getattr(settings, f.name) for f in fields(settings)}


@dataclass(frozen=True)
class GroupTable:
    """One group's figures: a row per backend, then the speed-up rows, and what each
    column means."""

    title: str
    header: list[str]
    rows: list[list[str]]
    notes: list[str]


def group_table(
    group: str, backends: list[Backend], results: Results, s: Settings
) -> GroupTable | None:
    """The table of one group of metrics, or None when no backend has a figure in it."""
    metrics = [m for m in METRICS if m.group == group]
    shown = [b for b in backends if any(m.key in results.get(b.key, {}) for m in metrics)]
    if not shown:
        return None
    header = ["backend", *(_column(m, s) for m in metrics)]
    rows = [
        [b.label, *(fmt(results.get(b.key, {}).get(m.key), m.unit) for m in metrics)] for b in shown
    ]
    keys = {b.key for b in shown}
    for c in COMPARISONS:
        if c.ours not in keys or c.other not in keys:
            continue
        factors = [speedup(results, m, c.ours, c.other) if m.comparable else None for m in metrics]
        if any(factor is not None for factor in factors):
            label = f"speed-up {LABELS[c.ours]} / {LABELS[c.other]}"
            rows.append([label, *("-" if f is None else f.text() for f in factors)])
    notes = [
        f"{m.column.format(**_values(s))}: {m.description.format(**_values(s))}" for m in metrics
    ]
    return GroupTable(GROUPS[group], header, rows, notes)


def print_group(group: str, backends: list[Backend], results: Results, s: Settings) -> None:
    table = group_table(group, backends, results, s)
    if table is None:
        return
    print(f"\n{table.title}")
    rows = [[f"  {r[0]}" if r[0].startswith("speed-up") else r[0], *r[1:]] for r in table.rows]
    print(render_table(table.header, rows))
    for note in table.notes:
        print(f"  {note}")


def print_tables(
    backends: list[Backend], results: Results, reports: dict[str, Report], settings: Settings
) -> None:
    """A table per group of metrics, with speed-ups under it, then every note."""
    print("\nBackends:")
    for backend in backends:
        print(f"  {backend.label}: {backend.note}")
    for group in GROUPS:
        print_group(group, backends, results, settings)
    print(
        "(speed-up rows: above 1 means the first is faster, or uses less memory; the median"
        " of the per-round speed-ups, their lowest and highest in brackets)"
    )
    for backend in backends:
        for note in reports[backend.key].notes:
            print(f"NOTE {backend.label}: {note}")


@dataclass(frozen=True)
class TargetLine:
    """A target's verdict: PASS, MISS, INFO (a figure watched beside the targets) or n/a."""

    verdict: str
    issue: str
    text: str
    detail: str


def target_lines(
    database_key: str, ran: set[str], results: Results, settings: Settings
) -> list[TargetLine]:
    """One line per target that applies to this database and these backends."""
    lines: list[TargetLine] = []
    for target in TARGETS:
        skipped = not target.backends <= ran or not target.when(settings)
        if database_key not in target.databases or skipped:
            continue
        text = target.text.format(**_values(settings))
        verdict = target.check(results, settings)
        if verdict is None:
            lines.append(TargetLine("n/a", target.issue, text, "figures missing"))
            continue
        met, detail = verdict
        if met is None:
            lines.append(TargetLine("n/a", target.issue, text, detail))
        elif target.watched:
            lines.append(TargetLine("INFO", target.issue, text, detail))
        else:
            lines.append(TargetLine("PASS" if met else "MISS", target.issue, text, detail))
    return lines


def print_targets(label: str, lines: list[TargetLine]) -> list[bool]:
    """Print the targets' lines; return the verdicts of those that are targets."""
    print(f"\nTargets ({label}):")
    for line in lines:
        print(f"  {line.verdict.ljust(5)} [{line.issue}] {line.text}: {line.detail}")
    return [line.verdict == "PASS" for line in lines if line.verdict in ("PASS", "MISS")]
