"""Token usage as the command line shows it: the tables of `sessions usage`, and what
`sessions show` prints of a session's branches and of its usage per turn.

Example::

    agents-sqlalchemy sessions usage --url agent.db --user alice --since 2026-11-01
    agents-sqlalchemy sessions show support-42 --url agent.db --branch retry --usage
"""

from __future__ import annotations

from typing import Any

from ..records import TokenUsage, UsageReport
from ..shown_text import clean, one_id
from .layout import counted, fit, table

USER_WIDTH = 24
_FIGURES = ("requests", "input_tokens", "output_tokens", "total_tokens")
_HEADERS = ["REQUESTS", "INPUT", "OUTPUT", "TOTAL"]


def figures(values: Any) -> list[str]:
    """Token figures with thousands separators, from a `TokenUsage` or a usage row."""
    get = values.get if isinstance(values, dict) else lambda name: getattr(values, name)
    return [f"{get(name):,}" for name in _FIGURES]


def branches_line(branches: list[dict[str, Any]], shown: str) -> str:
    """`main (12 items), retry* (7 items)`: the branch shown is starred."""
    return ", ".join(
        f"{clean(b['branch_id'])}{'*' if b['branch_id'] == shown else ''} "
        f"({counted(b['message_count'], 'item')})"
        for b in branches
    )


def turn_usage_lines(rows: list[dict[str, Any]]) -> list[str]:
    """A table of usage per user turn, and its sum."""
    if not rows:
        return ["(no usage recorded)"]
    body = [[str(row["user_turn_number"]), *figures(row)] for row in rows]
    total = sum(
        (TokenUsage(1, *(int(row[name]) for name in _FIGURES)) for row in rows), TokenUsage()
    )
    body.append(["all", *figures(total)])
    return table(["TURN", *_HEADERS], body, right=set(range(5)))


def report_lines(report: UsageReport) -> list[str]:
    """A table of usage per day and owner, and the total."""
    rows = [
        [
            row.day.isoformat(),
            fit(one_id(row.user_id), USER_WIDTH) if row.user_id is not None else "-",
            f"{row.usage.turns:,}",
            *figures(row.usage),
        ]
        for row in report.days
    ]
    total = report.total
    rows.append(["total", "", f"{total.turns:,}", *figures(total)])
    return table(["DAY (UTC)", "USER", "TURNS", *_HEADERS], rows, right=set(range(2, 7)))


def report_json(report: UsageReport) -> list[dict[str, Any]]:
    return [
        {"day": row.day.isoformat(), "user_id": row.user_id, "turns": row.usage.turns}
        | {name: getattr(row.usage, name) for name in _FIGURES}
        for row in report.days
    ]
