"""`agents-sqlalchemy import-sdk`: copy the SDK's own session tables into the library's.

Example::

    agents-sqlalchemy import-sdk --from conversations.db --url postgresql://app@db/app
    AGENTS_SQLALCHEMY_KEY=... agents-sqlalchemy import-sdk --from conversations.db --url agent.db
"""

from __future__ import annotations

from typing import Any, get_args

import click

from ..crypto import Key
from ..errors import WrongKeyError
from ..services.importer import ImportOmission, ImportReport, Order, import_sdk
from ..tables import TableNames
from .layout import ProgressBar, counted
from .options import (
    database_options,
    encrypted_hint,
    key_options,
    missing_sqlite_file,
    run,
    ttl_option,
)


@click.command("import-sdk")
@click.option(
    "--from",
    "source",
    required=True,
    metavar="URL",
    help="Database holding the SDK's tables: a SQLiteSession file path or a URL.",
)
@click.option(
    "--source-sessions-table",
    default="agent_sessions",
    show_default=True,
    help="The SDK's sessions table in the source.",
)
@click.option(
    "--source-messages-table",
    default="agent_messages",
    show_default=True,
    help="The SDK's messages table in the source.",
)
@click.option(
    "--order",
    type=click.Choice(get_args(Order)),
    default="auto",
    show_default=True,
    help="The SDK's reading order: id (SQLiteSession), created_at (SQLAlchemySession).",
)
@click.option(
    "--create", is_flag=True, help="Create (or upgrade) the library's tables first if needed."
)
@click.option(
    "--skip-unstorable",
    is_flag=True,
    help="Import a session holding items this store cannot hold (NaN, a lone surrogate, "
    "nesting past 128 levels) without them, naming each; by default it is not imported.",
)
@ttl_option
@click.option("--progress/--no-progress", default=True, help="Show a progress bar.")
@database_options(may_create=True)
@key_options
def command(
    url: str,
    tables: TableNames,
    key: Key | None,
    source: str,
    source_sessions_table: str,
    source_messages_table: str,
    order: Order,
    create: bool,
    skip_unstorable: bool,
    ttl: float | None,
    progress: bool,
) -> None:
    """Copy the SDK's SQLiteSession/SQLAlchemySession tables into the library's tables.

    The source is only read. Each session is copied whole, as the SDK reads it, or not at
    all; a session already in the target is skipped, so running the import again is safe.
    Sessions not imported (an id this library refuses, an item it cannot hold) are listed,
    and the command then exits with status 1. Of an AdvancedSQLiteSession, the main line is
    imported; its other branches and usage per turn are listed as left out. With a key (see
    --key-env, --ask-key), items are sealed on the way in, as the store seals them. The
    target's tables must be at head (`db upgrade`), or --create makes them.
    """
    if not create and (missing := missing_sqlite_file(url)) is not None:
        raise click.ClickException(
            f"no SQLite database at {missing}: add --create to make it, with the tables"
        )
    bar = ProgressBar(progress, "Importing items")
    try:
        report = run(
            _import(
                source,
                url,
                tables=tables,
                sessions_table=source_sessions_table,
                messages_table=source_messages_table,
                order=order,
                progress=bar,
                key=key,
                create_tables=create,
                skip_unstorable=skip_unstorable,
                ttl=ttl,
            ),
            create_option=True,
        )
    finally:
        bar.close()
    click.secho(
        f"Imported {counted(report.sessions, 'session')} ({counted(report.items, 'item')}); "
        f"skipped {report.skipped_sessions} already present",
        fg="green",
    )
    if report.skipped_ids:
        shown = ", ".join(repr(session_id) for session_id in report.skipped_ids[:20])
        more = len(report.skipped_ids) - 20
        click.secho(
            f"Present on both sides and left as they are here: {shown}"
            + (f" and {more} more" if more > 0 else "")
            + " (compare with `agents-sqlalchemy sessions show ID`)",
            fg="yellow",
            err=True,
        )
    if report.unreadable:
        click.secho(
            f"Left out {counted(report.unreadable, 'row')} that did not hold valid JSON "
            "(the SDK skips them too)",
            fg="yellow",
            err=True,
        )
    if report.items:
        click.echo(
            "To search them, run `agents-sqlalchemy reindex` (it indexes only what is "
            "missing): an import writes no search index, and a search indexes 2,000 at most",
            err=True,
        )
    _listed("Left out of the sessions imported:", report.left_out, "yellow")
    _listed("Not imported (nothing of them written):", report.refused, "red")
    if report.refused:
        unstorable = not skip_unstorable and any(o.unstorable for o in report.refused)
        hint = " (--skip-unstorable imports those refused for their items without them)"
        raise click.ClickException(
            f"{counted(len(report.refused), 'session')} not imported, listed above"
            + (hint if unstorable else "")
        )


def _listed(title: str, omissions: tuple[ImportOmission, ...], colour: str) -> None:
    """Each session id and reason, the first 50 of them, under `title`."""
    if not omissions:
        return
    lines = [f"  {o.session_id[:80]!r}: {o.reason}" for o in omissions[:50]]
    if len(omissions) > 50:
        lines.append(f"  and {len(omissions) - 50} more")
    click.secho("\n".join([title, *lines]), fg=colour, err=True)


async def _import(source: str, url: str, **options: Any) -> ImportReport:
    """`import_sdk`; an encrypted target opened without a key says how to give it here."""
    try:
        return await import_sdk(source, url, **options)
    except WrongKeyError as exc:
        if options.get("key") is not None:
            raise
        raise WrongKeyError(encrypted_hint(url)) from exc
