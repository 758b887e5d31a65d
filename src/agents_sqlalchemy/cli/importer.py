"""`agents-sqlalchemy import-sdk`: copy the SDK's own session tables into the library's.

Example::

    agents-sqlalchemy import-sdk --from conversations.db --url postgresql://app@db/app
    AGENTS_SQLALCHEMY_KEY=... agents-sqlalchemy import-sdk --from conversations.db --url agent.db
"""

from __future__ import annotations

from typing import Any, TextIO, get_args

import click

from ..crypto import Key
from ..services.importer import Order, import_sdk
from ..tables import TableNames
from .options import database_options, key_options, missing_sqlite_file, run


class ProgressBar:
    """Feeds (done, total) reports to a click progress bar, made on the first report."""

    def __init__(self, enabled: bool, label: str, *, file: TextIO | None = None) -> None:
        self._enabled, self._label, self._done, self._file = enabled, label, 0, file
        self._bar: Any = None

    def __call__(self, done: int, total: int) -> None:
        if not self._enabled:
            return
        if self._bar is None:
            self._bar = click.progressbar(
                length=total, label=self._label, show_pos=True, file=self._file
            )
            self._bar.__enter__()
        self._bar.update(done - self._done)
        self._done = done

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)


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
    progress: bool,
) -> None:
    """Copy the SDK's SQLiteSession/SQLAlchemySession tables into the library's tables.

    The source is only read. Each session is copied whole, in the SDK's order; a session
    already in the target is skipped, so running the import again is safe. With a key (see
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
            import_sdk(
                source,
                url,
                tables=tables,
                sessions_table=source_sessions_table,
                messages_table=source_messages_table,
                order=order,
                progress=bar,
                key=key,
                create_tables=create,
            ),
            create_option=True,
        )
    finally:
        bar.close()
    click.secho(
        f"Imported {report.sessions} sessions ({report.items} items); "
        f"skipped {report.skipped_sessions} already present",
        fg="green",
    )
    if report.unreadable:
        click.secho(
            f"{report.unreadable} rows were not JSON objects and were left out "
            "(the SDK skips them too)",
            fg="yellow",
            err=True,
        )
