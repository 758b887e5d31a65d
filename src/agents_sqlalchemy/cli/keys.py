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

import base64
import os
import time

import click

from ..crypto import Key, same_key
from ..engines import normalize_url
from ..services import ROTATE_BATCH
from ..store import SessionStore
from ..tables import TableNames
from .importer import ProgressBar
from .options import ENV_PREFIX, KEY_ENV, database_options, run

NEW_KEY_ENV = f"{ENV_PREFIX}NEW_KEY"
KEY_FORMATS = ("passphrase", "hex", "base64")


def read_secret(env: str | None, default_env: str, prompt: str, *, confirm: bool) -> str:
    """A secret from `env` (or `default_env`), else typed at a hidden prompt.

    An `env` named explicitly must be set; the default one may be unset.
    """
    value = os.environ.get(env or default_env)
    if value:
        return value
    if env is not None:
        raise click.UsageError(f"the environment variable {env} is not set")
    return str(click.prompt(prompt, hide_input=True, confirmation_prompt=confirm))


def decode_key(value: str, form: str, what: str) -> Key:
    """The `key=` a secret stands for: the passphrase itself, or 32 raw bytes in hex/base64."""
    if form == "passphrase":
        return value
    try:
        raw = bytes.fromhex(value) if form == "hex" else base64.b64decode(value, validate=True)
    except ValueError:  # binascii.Error is one
        raise click.BadParameter(f"the {what} is not {form}") from None
    if len(raw) != 32:
        raise click.BadParameter(f"the {what} must decode to 32 bytes, got {len(raw)}")
    return raw


async def rotate(
    url: str,
    tables: TableNames,
    key: Key,
    new_key: Key,
    batch_size: int,
    bar: ProgressBar,
) -> int:
    """Open the store with `key` and rotate it to `new_key`; return the keys re-wrapped."""
    async with SessionStore(url, tables=tables, key=key) as store:
        return await store.rotate_key(new_key, batch_size=batch_size, progress=bar)


@click.command("rotate-key")
@click.option(
    "--key-env",
    metavar="NAME",
    help=f"Environment variable holding the current key [default: {KEY_ENV}, else a prompt].",
)
@click.option(
    "--new-key-env",
    metavar="NAME",
    help=f"Environment variable holding the new key [default: {NEW_KEY_ENV}, else a prompt].",
)
@click.option(
    "--key-format",
    type=click.Choice(KEY_FORMATS),
    default="passphrase",
    show_default=True,
    help="What the current key is: a passphrase, or 32 raw bytes in hex or base64.",
)
@click.option(
    "--new-key-format",
    type=click.Choice(KEY_FORMATS),
    default="passphrase",
    show_default=True,
    help="What the new key is.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=ROTATE_BATCH,
    show_default=True,
    help="Data keys re-wrapped per transaction.",
)
@click.option("--progress/--no-progress", default=True, help="Show a progress bar.")
@database_options
def command(
    url: str,
    tables: TableNames,
    key_env: str | None,
    new_key_env: str | None,
    key_format: str,
    new_key_format: str,
    batch_size: int,
    progress: bool,
) -> None:
    """Re-wrap every data key under a new key; no item is re-encrypted.

    Afterwards only the new key opens the database. If the command is interrupted, run it
    again with the same keys: it resumes. Processes still using the old key must be
    restarted with the new one.
    """
    key = decode_key(
        read_secret(key_env, KEY_ENV, "Current key", confirm=False), key_format, "current key"
    )
    new_key = decode_key(
        read_secret(new_key_env, NEW_KEY_ENV, "New key", confirm=True), new_key_format, "new key"
    )
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
        f"Re-wrapped {done} data keys in {time.perf_counter() - started:.1f} s; "
        f"only the new key opens {shown} now",
        fg="green",
    )
