"""`agents-sqlalchemy sessions delete|purge|archive|restore`: what an operator removes or
puts aside. `sessions.py` adds these commands to its group.

Example::

    agents-sqlalchemy sessions archive --inactive-days 30 --url agent.db --yes
    agents-sqlalchemy sessions restore support-42 --url agent.db
    agents-sqlalchemy sessions delete --user alice --url agent.db --yes
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import click

from ..crypto import Key
from ..records import Removed
from ..shown_text import clean
from ..tables import TableNames
from ..validation import LONGEST
from .layout import counted, described
from .options import database_options, key_options, opened, run, shown


class _Days(click.FloatRange):
    """A number of days: more than 0, at most `LONGEST`, not NaN (which every bound lets by)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        days = super().convert(value, param, ctx)
        if math.isnan(days):
            self.fail(f"{value!r} is not a number of days", param, ctx)
        return days


DAYS = _Days(min=0, min_open=True, max=LONGEST.days)


@click.command()
@click.argument("session_ids", nargs=-1, metavar="[SESSION_ID]...")
@click.option("--user", "user_id", metavar="ID", help="Delete every session of this user.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@key_options
@database_options
def delete(
    url: str,
    tables: TableNames,
    key: Key | None,
    session_ids: tuple[str, ...],
    user_id: str | None,
    yes: bool,
) -> None:
    """Delete sessions by id, or every session of a user (--user).

    Items, their keys, state and the session rows go; asks first unless --yes. Exits 1
    if a session named does not exist (the others are deleted).

    \b
    Example:
      agents-sqlalchemy sessions delete support-42 support-43 --url agent.db
      agents-sqlalchemy sessions delete --user alice --url agent.db --yes
    """
    if bool(session_ids) == (user_id is not None):
        raise click.UsageError("name the sessions to delete, or give --user ID (not both)")
    what = f"every session of user {user_id!r}" if user_id is not None else described(session_ids)
    if not yes:
        click.confirm(
            f"Delete {clean(what)} from {shown(url)}, with all items?", abort=True, err=True
        )
    removed, missing = run(_delete(url, tables, key, session_ids, user_id))
    for session_id in missing:
        click.secho(f"No session {clean(repr(session_id))}", fg="yellow", err=True)
    click.echo(f"Removed {counted(removed.sessions, 'session')} ({counted(removed.items, 'item')})")
    if missing:
        raise SystemExit(1)


async def _delete(
    url: str, tables: TableNames, key: Key | None, session_ids: Sequence[str], user_id: str | None
) -> tuple[Removed, list[str]]:
    async with opened(url, tables, key) as store:
        if user_id is not None:
            return await store.delete_user(user_id), []
        total, missing = Removed(), []
        for session_id in session_ids:
            removed = await store.delete_session(session_id)
            total += removed
            if not removed.sessions:
                missing.append(session_id)
        return total, missing


@click.command()
@click.option("--expired", is_flag=True, help="Delete expired items (reads already hide them).")
@click.option(
    "--inactive-days",
    type=DAYS,
    metavar="N",
    help="Delete the sessions with no activity for N days (asks first).",
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@key_options
@database_options
def purge(
    url: str,
    tables: TableNames,
    key: Key | None,
    expired: bool,
    inactive_days: float | None,
    yes: bool,
) -> None:
    """Purge expired items and/or the sessions inactive for N days.

    \b
    Example (a nightly job):
      agents-sqlalchemy sessions purge --expired --inactive-days 90 --url agent.db --yes
    """
    if not expired and inactive_days is None:
        raise click.UsageError("say what to purge: --expired and/or --inactive-days N")
    if inactive_days is not None and not yes:
        click.confirm(
            f"Delete every session of {shown(url)} inactive for {inactive_days:g} days?",
            abort=True,
            err=True,
        )
    items, removed = run(_purge(url, tables, key, expired, inactive_days))
    if items is not None:
        click.echo(f"Removed {counted(items, 'expired item')}")
    if removed is not None:
        click.echo(
            f"Removed {counted(removed.sessions, 'inactive session')} "
            f"({counted(removed.items, 'item')})"
        )


async def _purge(
    url: str, tables: TableNames, key: Key | None, expired: bool, inactive_days: float | None
) -> tuple[int | None, Removed | None]:
    async with opened(url, tables, key) as store:
        items = await store.purge_expired() if expired else None
        removed = None
        if inactive_days is not None:
            removed = await store.purge_inactive(older_than=timedelta(days=inactive_days))
        return items, removed


@click.command()
@click.argument("session_ids", nargs=-1, metavar="[SESSION_ID]...")
@click.option(
    "--inactive-days",
    type=DAYS,
    metavar="N",
    help="Archive every session with no activity for N days (asks first).",
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@key_options
@database_options
def archive(
    url: str,
    tables: TableNames,
    key: Key | None,
    session_ids: tuple[str, ...],
    inactive_days: float | None,
    yes: bool,
) -> None:
    """Archive sessions by id, or those inactive for N days: they keep their items and
    leave `sessions list` (see --archived) until restored.

    \b
    Example:
      agents-sqlalchemy sessions archive --inactive-days 30 --url agent.db --yes
    """
    if session_ids and inactive_days is not None:
        raise click.UsageError("name the sessions to archive or give --inactive-days N, not both")
    if not session_ids and inactive_days is None:
        raise click.UsageError("name the sessions to archive, or give --inactive-days N")
    if inactive_days is not None and not yes:
        click.confirm(
            f"Archive every session of {shown(url)} inactive for {inactive_days:g} days?",
            abort=True,
            err=True,
        )
    count, missing = run(_archive(url, tables, key, session_ids, inactive_days, archive=True))
    for session_id in missing:
        click.secho(
            f"No session {clean(repr(session_id))} to archive (none by that id, or archived "
            "already)",
            fg="yellow",
            err=True,
        )
    click.echo(f"Archived {counted(count, 'session')}")
    if missing:
        raise SystemExit(1)


@click.command()
@click.argument("session_ids", nargs=-1, required=True, metavar="SESSION_ID...")
@key_options
@database_options
def restore(url: str, tables: TableNames, key: Key | None, session_ids: tuple[str, ...]) -> None:
    """Bring archived sessions back into `sessions list`.

    \b
    Example:
      agents-sqlalchemy sessions restore support-42 --url agent.db
    """
    count, missing = run(_archive(url, tables, key, session_ids, None, archive=False))
    for session_id in missing:
        click.secho(f"No archived session {clean(repr(session_id))}", fg="yellow", err=True)
    click.echo(f"Restored {counted(count, 'session')}")
    if missing:
        raise SystemExit(1)


async def _archive(
    url: str,
    tables: TableNames,
    key: Key | None,
    session_ids: Sequence[str],
    inactive_days: float | None,
    *,
    archive: bool,
) -> tuple[int, list[str]]:
    async with opened(url, tables, key) as store:
        if inactive_days is not None:
            return await store.archive_inactive(timedelta(days=inactive_days)), []
        change = store.archive_session if archive else store.restore_session
        missing = [session_id for session_id in session_ids if not await change(session_id)]
        return len(session_ids) - len(missing), missing


#: The group these commands belong to (cli/__init__.py adds them to it).
GROUP = "sessions"
commands = (delete, purge, archive, restore)
