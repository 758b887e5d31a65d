"""`agents-sqlalchemy rotate-key`: re-wrap every item's data key under a new key.

Keys never come from the command line: each is read from an environment variable, or typed
at a prompt that does not echo. A rotation that is interrupted resumes when the same
command is run again with the same two keys.

Example::

    export AGENTS_SQLALCHEMY_KEY=... AGENTS_SQLALCHEMY_NEW_KEY=...
    agents-sqlalchemy rotate-key --url postgresql://app@db/app
    agents-sqlalchemy rotate-key --url agent.db --key-format hex   # prompts for both keys
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import click

from ..crypto import Key, same_key
from ..database.engines import normalize_url
from ..services import ROTATE_BATCH
from ..store import SessionStore
from ..tables import TableNames
from .layout import ProgressBar, counted
from .options import ENV_PREFIX, database_options, key_options, owner_keys, run, shown

T = TypeVar("T")
NEW_KEY_ENV = f"{ENV_PREFIX}NEW_KEY"


async def rotate(
    url: str,
    tables: TableNames,
    key: Key,
    new_key: Key,
    batch_size: int,
    bar: ProgressBar,
) -> int:
    """Open the store with `key` and rotate it to `new_key`; return the keys re-wrapped."""
    owners = owner_keys()
    async with SessionStore(url, tables=tables, key=key, owner_keys=owners) as store:
        return await store.rotate_key(new_key, batch_size=batch_size, progress=bar)


def rotation_options(command: Callable[..., T]) -> Callable[..., T]:
    """`--batch-size N` and `--progress/--no-progress`, of both rotations."""
    command = click.option("--progress/--no-progress", default=True, help="Show a progress bar.")(
        command
    )
    return click.option(
        "--batch-size",
        type=click.IntRange(min=1),
        default=ROTATE_BATCH,
        show_default=True,
        help="Data keys re-wrapped per transaction.",
    )(command)


@click.command("rotate-key")
@key_options(prompt="Current key")
@key_options(name="new-key", default_env=NEW_KEY_ENV, prompt="New key", confirm=True)
@rotation_options
@database_options
def command(
    url: str,
    tables: TableNames,
    key: Key,
    new_key: Key,
    batch_size: int,
    progress: bool,
) -> None:
    """Re-wrap every data key under a new key; no item is re-encrypted.

    Afterwards only the new key opens the database. If the command is interrupted, run it
    again with the same keys: it resumes. Processes still using the old key must be
    restarted with the new one. Each key comes from its variable (or --key-env,
    --new-key-env), a provider (--key-provider, --new-key-provider), or a hidden prompt.
    """
    if same_key(key, new_key):
        raise click.UsageError("the new key is the current key")
    bar = ProgressBar(progress, "Re-wrapping data keys")
    started = time.perf_counter()
    try:
        done = run(rotate(url, tables, key, new_key, batch_size, bar))
    finally:
        bar.close()
    shown = normalize_url(url).render_as_string(hide_password=True)
    click.secho(
        f"Re-wrapped {counted(done, 'data key')} in {time.perf_counter() - started:.1f} s; "
        f"only the new key opens {shown} now",
        fg="green",
    )


async def rotate_owners(
    url: str, tables: TableNames, key: Key, batch_size: int, bar: ProgressBar
) -> int:
    """Open the store with `key` and give every owner a fresh key; return the keys re-wrapped."""
    owners = owner_keys()
    async with SessionStore(url, tables=tables, key=key, owner_keys=owners) as store:
        return await store.rotate_owner_keys(batch_size=batch_size, progress=bar)


@click.command("rotate-owner-keys")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@key_options(prompt="Key")
@rotation_options
@database_options
def owners_command(
    url: str, tables: TableNames, key: Key, batch_size: int, progress: bool, yes: bool
) -> None:
    """Give every owner a fresh key and destroy the old ones; the store's key stays.

    Items removed before it can then no longer be opened from any copy of the database,
    where the owners' keys are kept outside it (--owner-keys): nor can anything else in
    copies and backups made before it. With the keys in the database, copies still hold
    the old ones under the store's key: rotate-key instead. Asks first unless --yes. If
    interrupted, run it again: it resumes.
    """
    if not yes:
        click.confirm(
            f"Give every owner in {shown(url)} a fresh key and destroy the old ones? Copies "
            "and backups made before then will no longer open",
            abort=True,
            err=True,
        )
    bar = ProgressBar(progress, "Re-wrapping data keys")
    started = time.perf_counter()
    try:
        done = run(rotate_owners(url, tables, key, batch_size, bar))
    finally:
        bar.close()
    click.secho(
        f"Re-wrapped {counted(done, 'data key')} under fresh owner keys in "
        f"{time.perf_counter() - started:.1f} s; the old owner keys are destroyed",
        fg="green",
    )


commands = (command, owners_command)
