"""Token usage on the command line: `sessions usage`, and what `sessions show` prints of a
session's branches and of its usage per turn.

Example::

    agents-sqlalchemy sessions usage --url agent.db --user alice --since 2026-11-01
    agents-sqlalchemy sessions show support-42 --url agent.db --branch retry --usage
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import click

from ..crypto import Key
from ..records import SessionInfo, TokenUsage, UsageReport
from ..session import StoreSession
from ..tables import TableNames
from .layout import counted, fit, table
from .options import database_options, iso_time, key_options, opened, run, shown
from .transcript import clean

USER_WIDTH = 24
_FIGURES = ("requests", "input_tokens", "output_tokens", "total_tokens")
_HEADERS = ["REQUESTS", "INPUT", "OUTPUT", "TOTAL"]


def _figures(values: Any) -> list[str]:
    """Token figures with thousands separators, from a `TokenUsage` or a usage row."""
    get = values.get if isinstance(values, dict) else lambda name: getattr(values, name)
    return [f"{get(name):,}" for name in _FIGURES]


async def read_session(
    url: str,
    tables: TableNames,
    key: Key | None,
    session_id: str,
    limit: int | None,
    branch: str | None,
    with_usage: bool,
) -> tuple[SessionInfo, list[Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """What `sessions show` prints: the session, the items of the branch shown, the session's
    branches and (with `with_usage`) that branch's usage per turn."""
    async with opened(url, tables, key) as store:
        info = await store.session_info(session_id)
        if info is None:
            raise click.ClickException(f"no session {session_id!r} in {shown(url)}")
        session = store.session(session_id)
        branches, usage = await branch_view(session, branch, with_usage)
        items = list(await session.get_items(limit=limit, branch_id=branch))
        return info, items, branches, usage


async def branch_view(
    session: StoreSession, branch: str | None, with_usage: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The session's branches, and (with `with_usage`) the usage rows of the branch shown."""
    branches = await session.list_branches()
    if branch is not None and branch not in {"main", *(b["branch_id"] for b in branches)}:
        names = ", ".join(b["branch_id"] for b in branches) or "main"
        raise click.ClickException(f"no branch {branch!r} in this session (it has: {names})")
    rows = await session.get_turn_usage(branch_id=branch or "main") if with_usage else []
    return branches, list(rows) if isinstance(rows, list) else []


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
    body = [[str(row["user_turn_number"]), *_figures(row)] for row in rows]
    total = sum(
        (TokenUsage(1, *(int(row[name]) for name in _FIGURES)) for row in rows), TokenUsage()
    )
    body.append(["all", *_figures(total)])
    return table(["TURN", *_HEADERS], body, right=set(range(5)))


def report_lines(report: UsageReport) -> list[str]:
    """A table of usage per day and owner, and the total."""
    rows = [
        [
            row.day.isoformat(),
            fit(row.user_id, USER_WIDTH) if row.user_id is not None else "-",
            f"{row.usage.turns:,}",
            *_figures(row.usage),
        ]
        for row in report.days
    ]
    total = report.total
    rows.append(["total", "", f"{total.turns:,}", *_figures(total)])
    return table(["DAY (UTC)", "USER", "TURNS", *_HEADERS], rows, right=set(range(2, 7)))


def report_json(report: UsageReport) -> list[dict[str, Any]]:
    return [
        {"day": row.day.isoformat(), "user_id": row.user_id, "turns": row.usage.turns}
        | {name: getattr(row.usage, name) for name in _FIGURES}
        for row in report.days
    ]


@click.command("usage")
@click.option("--user", "user_id", metavar="ID", help="Only this user's sessions.")
@click.option("--since", metavar="ISO", callback=iso_time, help="Turns recorded from this time.")
@click.option("--until", metavar="ISO", callback=iso_time, help="Turns recorded before it.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per day and user.")
@key_options
@database_options
def usage_command(
    url: str,
    tables: TableNames,
    key: Key | None,
    user_id: str | None,
    since: datetime | None,
    until: datetime | None,
    as_json: bool,
) -> None:
    """Token usage summed across sessions, per day (UTC) and user, with the total.

    Sums what sessions recorded per user turn, on every branch; the database adds it up.

    \b
    Example:
      agents-sqlalchemy sessions usage --url agent.db --user alice --since 2026-11-01
    """
    report = run(_report(url, tables, key, user_id, since, until))
    if as_json:
        for row in report_json(report):
            click.echo(json.dumps(row, ensure_ascii=False))
        return
    if not report.days:
        click.echo("No usage recorded.")
        return
    for line in report_lines(report):
        click.echo(line)


async def _report(
    url: str,
    tables: TableNames,
    key: Key | None,
    user_id: str | None,
    since: datetime | None,
    until: datetime | None,
) -> UsageReport:
    async with opened(url, tables, key) as store:
        return await store.usage(user_id=user_id, since=since, until=until)
