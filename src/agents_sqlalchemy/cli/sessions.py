"""`agents-sqlalchemy sessions ...`: list, read, delete and purge sessions.

Example::

    agents-sqlalchemy sessions list --url agent.db --user alice --meta channel=web
    AGENTS_SQLALCHEMY_KEY=... agents-sqlalchemy sessions show support-42 --url agent.db
    agents-sqlalchemy sessions delete --user alice --url agent.db --yes
    agents-sqlalchemy sessions purge --expired --inactive-days 90 --url agent.db --yes
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import click

from ..crypto import Key
from ..metadata_text import format_meta, meta_pair
from ..records import SessionInfo, UsageReport
from ..services import Services
from ..session import StoreSession
from ..shown_text import one_id, one_line
from ..tables import TableNames
from .layout import fit, minute, second, table
from .options import (
    database_options,
    iso_time,
    key_options,
    max_chars_option,
    opened,
    run,
    shown,
)
from .transcript import transcript
from .usage import branches_line, report_json, report_lines, turn_usage_lines

# Widest cells of the list table, in terminal columns; longer values end with "…".
SESSION_WIDTH, USER_WIDTH, METADATA_WIDTH = 40, 24, 48
ITEMS_WIDTH = 9  # up to 999,999,999 items


def meta_filters(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> dict[str, Any] | None:
    """The `--meta KEY=VALUE` options as a metadata filter (None when there are none)."""
    found: dict[str, Any] = {}
    for value in values:
        try:
            name, wanted = meta_pair(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
        found[name] = wanted
    return found or None


def _iso(value: object) -> str:
    """What JSON has no type for, as text: a time in ISO 8601 UTC."""
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).isoformat()
    return str(value)


def info_json(info: SessionInfo) -> dict[str, Any]:
    """A `SessionInfo` as JSON: times in ISO 8601 UTC."""
    return {
        "session_id": info.session_id,
        "user_id": info.user_id,
        "item_count": info.item_count,
        "created_at": _iso(info.created_at),
        "updated_at": _iso(info.updated_at),
        "metadata": info.metadata,
        "archived_at": _iso(info.archived_at) if info.archived_at else None,
    }


@click.group("sessions")
def command() -> None:
    """List, read, check, repair, archive, restore, delete and purge sessions.

    An encrypted database needs its key: from $AGENTS_SQLALCHEMY_KEY, the variable named
    by --key-env, or typed at the --ask-key prompt (never as an argument).
    """


@command.command("list")
@click.option("--user", "user_id", metavar="ID", help="Only the sessions of this user.")
@click.option(
    "--meta",
    "metadata",
    metavar="KEY=VALUE",
    multiple=True,
    callback=meta_filters,
    help="Only sessions whose metadata KEY equals VALUE (a number or boolean if it reads as "
    "one, else a string; '\"1\"' is the string). Repeat: all must match.",
)
@click.option(
    "--updated-after",
    metavar="ISO",
    callback=iso_time,
    help="Only sessions active after this time.",
)
@click.option(
    "--updated-before",
    metavar="ISO",
    callback=iso_time,
    help="Only sessions last active before it.",
)
@click.option(
    "--limit", type=click.IntRange(1, 1000), default=50, show_default=True, help="Page size."
)
@click.option("--cursor", metavar="CURSOR", help="Start after this page (the hint printed).")
@click.option("--archived", is_flag=True, help="Only the archived sessions.")
@click.option("--all", "every_page", is_flag=True, help="Follow the cursors to the last page.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line, for scripts.")
@key_options
@database_options
def list_sessions(
    url: str,
    tables: TableNames,
    key: Key | None,
    user_id: str | None,
    metadata: dict[str, Any] | None,
    updated_after: datetime | None,
    updated_before: datetime | None,
    limit: int,
    cursor: str | None,
    archived: bool,
    every_page: bool,
    as_json: bool,
) -> None:
    """List sessions, most recently active first (times in UTC); archived ones with
    --archived.

    A page at a time: the next page's --cursor is printed after the table; --all reads
    every page, printing each as it comes, and meets each session once: those active
    since it started are left out (as --updated-before would).

    \b
    Example:
      agents-sqlalchemy sessions list --url agent.db --user alice --meta tier=2
      agents-sqlalchemy sessions list --url agent.db --all --json | jq .session_id
    """
    shown: list[SessionInfo] = []

    def page(infos: list[SessionInfo]) -> None:
        if as_json:
            for info in infos:
                click.echo(json.dumps(info_json(info), ensure_ascii=False))
        elif every_page and infos:  # printed as it comes, in columns as wide as they can be
            lines = _table(infos, fixed=True)
            for line in lines if not shown else lines[1:]:
                click.echo(line)
            shown.extend(infos[:1])
        else:
            shown.extend(infos)

    if every_page and updated_before is None:  # a session written meanwhile moves ahead
        updated_before = datetime.now(timezone.utc)
    filters = {
        "user_id": user_id,
        "metadata": metadata,
        "updated_after": updated_after,
        "updated_before": updated_before,
        "archived": archived,
    }
    next_cursor = run(_list(url, tables, key, filters, limit, cursor, every_page, page))
    if not as_json and not shown:
        click.echo("No sessions.")
    elif not as_json and not every_page:
        for line in _table(shown):
            click.echo(line)
    if next_cursor:
        hint = f"More sessions: repeat with --cursor {next_cursor} (or --all)"
        click.secho(hint, fg="yellow", err=True)


async def _list(
    url: str,
    tables: TableNames,
    key: Key | None,
    filters: dict[str, Any],
    limit: int,
    cursor: str | None,
    every_page: bool,
    page: Callable[[list[SessionInfo]], None],
) -> str | None:
    """Pass each page to `page`; return the cursor after the last one read, if any.

    Nothing listed is sealed: without a key, an encrypted database is listed all the same.
    """
    services = Services.build(
        url, tables=tables, key=key, ttl=None, embedder=None, create_tables=False
    )
    try:
        while True:
            found = await services.management.list_sessions(
                **filters, limit=limit, cursor=cursor, need_key=False
            )
            page(found)
            cursor = found.next_cursor
            if cursor is None or not every_page:
                return cursor
    finally:
        await services.close()


def _table(infos: list[SessionInfo], *, fixed: bool = False) -> list[str]:
    """The sessions as table lines (a header first); `fixed`: each column as wide as it may
    be, so that tables printed one after another line up."""
    rows = [
        [
            fit(one_id(info.session_id), SESSION_WIDTH),
            fit(one_id(info.user_id), USER_WIDTH) if info.user_id is not None else "-",
            str(info.item_count),
            minute(info.updated_at),
            minute(info.created_at),
            fit(format_meta(info.metadata), METADATA_WIDTH),
        ]
        for info in infos
    ]
    headers = ["SESSION", "USER", "ITEMS", "UPDATED (UTC)", "CREATED (UTC)", "METADATA"]
    widths = [SESSION_WIDTH, USER_WIDTH, ITEMS_WIDTH, 16, 16, METADATA_WIDTH] if fixed else None
    return table(headers, rows, right={2}, widths=widths)


@command.command()
@click.argument("session_id")
@click.option("--branch", metavar="NAME", help="A branch's transcript [default: main].")
@click.option("--usage", "with_usage", is_flag=True, help="Then the token usage per turn.")
@click.option("--limit", type=click.IntRange(min=1), help="Only the latest N items.")
@max_chars_option(600)
@click.option("--json", "as_json", is_flag=True, help="The session and its items as JSON.")
@key_options
@database_options
def show(
    url: str,
    tables: TableNames,
    key: Key | None,
    session_id: str,
    branch: str | None,
    with_usage: bool,
    limit: int | None,
    max_chars: int,
    as_json: bool,
) -> None:
    """Print a session's owner, metadata and times, then its transcript.

    An encrypted session is decrypted with the key; long tool data is cut (--max-chars).

    \b
    Example:
      AGENTS_SQLALCHEMY_KEY=... agents-sqlalchemy sessions show support-42 --url agent.db
      agents-sqlalchemy sessions show support-42 --url agent.db --limit 20 --max-chars 0
      agents-sqlalchemy sessions show support-42 --url agent.db --branch retry --usage
    """
    info, items, branches, usage = run(
        read_session(url, tables, key, session_id, limit, branch, with_usage)
    )
    if as_json:
        found = {"session": info_json(info), "branch": branch or "main", "items": items}
        extra = {"branches": branches} | ({"usage": usage} if with_usage else {})
        click.echo(json.dumps(found | extra, ensure_ascii=False, default=_iso))
        return
    counts = {b["branch_id"]: b["message_count"] for b in branches} | {"main": info.item_count}
    total = counts.get(branch or "main", len(items))
    count = f"{total}" if len(items) >= total else f"{total} (showing the latest {len(items)})"
    header = [
        ("Session", one_id(info.session_id)),
        ("Owner", one_id(info.user_id) if info.user_id is not None else "-"),
        ("Metadata", one_line(format_meta(info.metadata)) or "-"),
        ("Created", f"{second(info.created_at)} UTC"),
        ("Updated", f"{second(info.updated_at)} UTC"),
        ("Items", count),
    ]
    if info.archived_at is not None:
        header.append(("Archived", f"{second(info.archived_at)} UTC"))
    if len(branches) > 1 or branch:
        header.append(("Branches", branches_line(branches, branch or "main")))
    for name, value in header:
        click.echo(f"{click.style(f'{name:<10}', bold=True)}{value}")
    click.echo()
    if not items:
        click.echo("(no items)")
    first = max(1, total - len(items) + 1)
    lines = transcript(items, first=first, max_chars=max_chars)
    for line in [*lines, *(["", *turn_usage_lines(usage)] if with_usage else [])]:
        click.echo(line)


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


command.add_command(usage_command)
