"""`agents-sqlalchemy users export|import|erase`: a user's data carried out, carried in, and
erased with a receipt.

Example::

    agents-sqlalchemy users export alice --url agent.db --output alice.jsonl
    agents-sqlalchemy users import alice.jsonl --url postgresql://app@db/app
    agents-sqlalchemy users erase alice --url agent.db --yes --receipt erasure-alice.json
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import IO

import click

from ..crypto import Key
from ..migrations import api as migrate
from ..records import ErasureReceipt, ImportedUser
from ..shown_text import clean
from ..tables import TableNames
from .files import refuse_database_file, written
from .layout import ProgressBar, counted
from .options import (
    database_options,
    key_options,
    missing_sqlite_file,
    opened,
    run,
    shown,
    stdin_taken,
    ttl_option,
)


@click.group("users")
def command() -> None:
    """Export a user's sessions, import such an export, erase a user.

    An encrypted database needs its key: from $AGENTS_SQLALCHEMY_KEY, the variable named
    by --key-env, or typed at the --ask-key prompt (never as an argument).
    """


@command.command("export")
@click.argument("user_id")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    default=Path("-"),
    show_default=True,
    help="File to write the export to (JSON Lines); '-' is standard output.",
)
@click.option("--progress/--no-progress", default=True, help="Show a progress bar (on stderr).")
@key_options
@database_options
def export(
    url: str, tables: TableNames, key: Key | None, user_id: str, output: Path, progress: bool
) -> None:
    """Write every session of USER_ID (archived ones too) as a JSON Lines export.

    The export holds each session's metadata, state, items verbatim, branches and token
    usage per turn, in plaintext: keep it as you keep the database. `users import` reads
    it into any store.

    \b
    Example:
      agents-sqlalchemy users export alice --url agent.db -o alice.jsonl
    """
    if str(output) != "-":
        refuse_database_file(output, url, "'--output'")
    bar = ProgressBar(progress, "Exporting sessions")
    try:
        with (
            nullcontext(sys.stdout) if str(output) == "-" else written(output, "'--output'") as out
        ):
            sessions = run(_export(url, tables, key, user_id, out, bar))
    finally:
        bar.close()
    click.secho(
        f"Exported {counted(sessions, 'session')} of {clean(repr(user_id))}", fg="green", err=True
    )


async def _export(
    url: str, tables: TableNames, key: Key | None, user_id: str, out: IO[str], bar: ProgressBar
) -> int:
    async with opened(url, tables, key) as store:
        sessions = 0
        async for line in store.export_user(user_id, progress=bar):
            out.write(line)
            sessions += line.startswith('{"type":"end"')
        return sessions


@command.command("import")
@click.argument(
    "source", type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path)
)
@click.option(
    "--skip-existing", is_flag=True, help="Skip sessions whose id the database already has."
)
@click.option(
    "--create", is_flag=True, help="Create (or upgrade) the library's tables first if needed."
)
@ttl_option
@click.option("--progress/--no-progress", default=True, help="Show a progress bar.")
@key_options
@database_options(may_create=True)
def import_(
    url: str,
    tables: TableNames,
    key: Key | None,
    source: Path,
    skip_existing: bool,
    create: bool,
    ttl: float | None,
    progress: bool,
) -> None:
    """Import an export of `users export` (SOURCE, a file or '-') into the database.

    Sessions keep their ids, owner, metadata, state, items, branches and usage; with a key,
    everything sealed is sealed under this database's key. A session already there is an
    error, unless --skip-existing.

    \b
    Example:
      AGENTS_SQLALCHEMY_KEY=... agents-sqlalchemy users import alice.jsonl --url agent.db
    """
    if not create and (missing := missing_sqlite_file(url)) is not None:
        raise click.ClickException(
            f"no SQLite database at {missing}: add --create to make it, with the tables"
        )
    if str(source) == "-":
        stdin_taken("the export")
    bar = ProgressBar(progress and str(source) != "-", "Importing")
    try:
        if str(source) == "-":
            report = run(
                _import(url, tables, key, sys.stdin.buffer, 0, bar, skip_existing, create, ttl),
                create_option=True,
            )
        else:
            size = source.stat().st_size
            with source.open("rb") as export:
                report = run(
                    _import(url, tables, key, export, size, bar, skip_existing, create, ttl),
                    create_option=True,
                )
    finally:
        bar.close()
    click.secho(
        f"Imported {counted(report.sessions, 'session')} "
        f"({counted(report.items, 'item')}); "
        f"skipped {report.skipped_sessions} already present",
        fg="green",
    )
    if report.usage_left_out:
        click.secho(
            f"{report.usage_left_out} turns' usage had no item left to sit on and was left out",
            fg="yellow",
            err=True,
        )


def _read(export: IO[bytes], size: int, bar: ProgressBar) -> Iterator[bytes]:
    """The export's lines, the bar following the bytes read."""
    done = 0
    bar(0, size)
    for line in export:
        done += len(line)
        bar(done, max(size, done))
        yield line


async def _import(
    url: str,
    tables: TableNames,
    key: Key | None,
    export: IO[bytes],
    size: int,
    bar: ProgressBar,
    skip_existing: bool,
    create: bool,
    ttl: float | None,
) -> ImportedUser:
    if create:  # first, as it says: an export that fails left a new file without tables
        await migrate.upgrade(url, tables=tables)
    async with opened(url, tables, key, ttl=ttl) as store:
        return await store.import_user(_read(export, size, bar), skip_existing=skip_existing)


@command.command("erase")
@click.argument("user_id")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--receipt",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the erasure receipt (JSON) to this file.",
)
@key_options
@database_options
def erase(
    url: str, tables: TableNames, key: Key | None, user_id: str, yes: bool, receipt: Path | None
) -> None:
    """Erase USER_ID: delete every session of theirs (items and their keys, state,
    branches, usage), then print the receipt (JSON) to keep.

    The receipt names the user by the SHA-256 of the id, and holds counts, the time, the
    database's dialect and tables: no content. Asks first unless --yes.

    \b
    Example:
      agents-sqlalchemy users erase alice --url agent.db --yes --receipt erasure-alice.json
    """
    if receipt is not None:
        refuse_database_file(receipt, url, "'--receipt'")
        if receipt.exists():  # a run again would put a receipt of nothing in its place
            raise click.BadParameter(
                f"{receipt} exists: keep that receipt, and give another file",
                param_hint="'--receipt'",
            )
    # The receipt's file is made first: the erasure cannot be undone, its receipt not lost.
    with nullcontext() if receipt is None else written(receipt, "'--receipt'") as out:
        if not yes:
            click.confirm(
                f"Erase every session of user {clean(repr(user_id))} from {shown(url)}, with "
                "all items? This cannot be undone",
                abort=True,
                err=True,
            )
        done = run(_erase(url, tables, key, user_id))
        text = json.dumps(done.as_dict(), indent=2)
        click.echo(text)
        if out is not None:
            out.write(text + "\n")
    click.secho(
        f"Erased {counted(done.sessions, 'session')} ({counted(done.items, 'item')}, "
        f"{counted(done.item_keys_deleted, 'item key')})",
        fg="green",
        err=True,
    )


async def _erase(url: str, tables: TableNames, key: Key | None, user_id: str) -> ErasureReceipt:
    async with opened(url, tables, key) as store:
        return await store.erase_user(user_id)
