"""`agents-sqlalchemy sessions check|repair`: histories the model API would refuse, and
their repair. `sessions.py` adds these commands to its group.

Example::

    agents-sqlalchemy sessions check --url agent.db                 # every session
    agents-sqlalchemy sessions check support-42 --url agent.db
    agents-sqlalchemy sessions repair support-42 --url agent.db --yes
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Sequence

import click

from ..crypto import Key
from ..errors import SearchModelWarning
from ..history_check import HistoryReport
from ..shown_text import clean
from ..store import SessionStore
from ..tables import TableNames
from .layout import counted, described
from .options import database_options, key_options, opened, run, shown
from .transcript import shell_words

# Problems listed per session; the rest are counted.
SHOWN_PROBLEMS = 10


async def every_session(store: SessionStore) -> AsyncIterator[str]:
    """The id of every session, archived ones too, a page at a time."""
    cursor: str | None = None
    while True:
        page = await store.list_sessions(limit=500, cursor=cursor, archived=None)
        for info in page:
            yield info.session_id
        cursor = page.next_cursor
        if cursor is None:
            return


async def check_sessions(
    store: SessionStore, session_ids: Sequence[str]
) -> tuple[list[tuple[str, HistoryReport]], list[str]]:
    """Each session's report (of those named, or of all), and the ids named that have none."""
    reports: list[tuple[str, HistoryReport]] = []
    missing: list[str] = []
    if session_ids:
        for session_id in session_ids:
            if await store.session_info(session_id) is None:
                missing.append(session_id)
            else:
                reports.append((session_id, await store.session(session_id).check()))
    else:
        async for session_id in every_session(store):
            reports.append((session_id, await store.session(session_id).check()))
    return reports, missing


def repair_command(repair: str, session_ids: Sequence[str]) -> str:
    """`repair` (a command without ids) with the first five of `session_ids` as words a
    shell hands over as they are, and "..." if there are more; or how else to repair, where
    one cannot be given on a command line."""
    words = shell_words(session_ids[:5])
    if words is None:
        return "repair() of each session from Python (an id holds a NUL, which no command carries)"
    return f"{repair} {words}{' ...' if len(session_ids) > 5 else ''}"


def _print_report(session_id: str, report: HistoryReport, *, verb: str = "") -> None:
    name = clean(repr(session_id))
    if report.ok:
        click.echo(f"{name}: {report.summary()}")
        return
    click.secho(f"{name}: {verb}{report.summary()}", fg="yellow")
    for problem in report.problems[:SHOWN_PROBLEMS]:
        click.echo(f"  {clean(problem.describe())}")
    if len(report.problems) > SHOWN_PROBLEMS:
        click.echo(f"  ... and {len(report.problems) - SHOWN_PROBLEMS} more")


@click.command()
@click.argument("session_ids", nargs=-1, metavar="[SESSION_ID]...")
@key_options
@database_options
def check(url: str, tables: TableNames, key: Key | None, session_ids: tuple[str, ...]) -> None:
    """Find what would make the model API refuse a session's history: tool outputs
    without their call, calls never answered (an interrupted turn), an item id twice.

    Every session unless some are named. Exits 1 when a history needs `sessions repair`
    or a session named does not exist.

    \b
    Example:
      agents-sqlalchemy sessions check --url agent.db
      agents-sqlalchemy sessions check support-42 --url agent.db
    """
    reports, missing = run(_check(url, tables, key, session_ids))
    for session_id in missing:
        click.secho(f"No session {clean(repr(session_id))}", fg="yellow", err=True)
    unhealthy = [session_id for session_id, report in reports if not report.ok]
    for session_id, report in reports:
        if session_ids or not report.ok:
            _print_report(session_id, report)
    verdict = f": {counted(len(unhealthy), 'to repair', 'to repair')}" if unhealthy else ""
    if reports and not unhealthy:
        verdict = ": healthy"  # not said of nothing (a session named that is not there)
    click.echo(f"Checked {counted(len(reports), 'session')}{verdict}")
    if unhealthy:
        repair = tables.command_line("repair", shown(url), program="agents-sqlalchemy sessions")
        click.echo(f"Fix with: {repair_command(repair, unhealthy)}")
    if unhealthy or missing:
        raise SystemExit(1)


async def _check(
    url: str, tables: TableNames, key: Key | None, session_ids: Sequence[str]
) -> tuple[list[tuple[str, HistoryReport]], list[str]]:
    async with opened(url, tables, key, search=False) as store:
        return await check_sessions(store, session_ids)


@click.command()
@click.argument("session_ids", nargs=-1, required=True, metavar="SESSION_ID...")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@key_options
@database_options
def repair(
    url: str, tables: TableNames, key: Key | None, session_ids: tuple[str, ...], yes: bool
) -> None:
    """Mend what `sessions check` finds, keeping every other item: drop tool outputs
    without their call, answer calls never answered ("no result"), drop a repeated copy of
    an item (a different item with a used id keeps its content, without the id).

    Do not repair a session whose run waits for an approval it will still get: its
    pending call would be answered "no result". Exits 1 if a session named does not exist.

    \b
    Example:
      agents-sqlalchemy sessions repair support-42 --url agent.db --yes
    """
    if not yes:
        click.confirm(
            f"Repair {clean(described(session_ids))} in {shown(url)}?", abort=True, err=True
        )
    reports, missing = run(_repair(url, tables, key, session_ids))
    for session_id in missing:
        click.secho(f"No session {clean(repr(session_id))}", fg="yellow", err=True)
    for session_id, report in reports:
        _print_report(session_id, report, verb="repaired ")
    mended = sum(not report.ok for _, report in reports)
    click.echo(f"Repaired {counted(mended, 'session')}")
    if missing:
        raise SystemExit(1)


async def _repair(
    url: str, tables: TableNames, key: Key | None, session_ids: Sequence[str]
) -> tuple[list[tuple[str, HistoryReport]], list[str]]:
    # Search on: the items a repair writes are indexed before the store closes, with the
    # database's model (with a model of the app's own, nothing is: a search of the app's
    # indexes them, and `doctor` says so meanwhile).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SearchModelWarning)
        async with opened(url, tables, key) as store:
            return await _repaired(store, session_ids)


async def _repaired(
    store: SessionStore, session_ids: Sequence[str]
) -> tuple[list[tuple[str, HistoryReport]], list[str]]:
    reports: list[tuple[str, HistoryReport]] = []
    missing: list[str] = []
    for session_id in session_ids:
        if await store.session_info(session_id) is None:
            missing.append(session_id)
        else:
            reports.append((session_id, await store.session(session_id).repair()))
    return reports, missing


#: The group these commands belong to (cli/__init__.py adds them to it).
GROUP = "sessions"
commands = (check, repair)
