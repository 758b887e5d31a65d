"""Files the command line writes (an export, a receipt): whole or not at all, and never
the database itself.

The text goes to a file beside the target, which takes the target's place only once it is
complete: a command that fails halfway (a wrong key, a tampered row, a full disk) leaves
what was there before. A target that is the SQLite database the command opens, or one of
its journal files, is refused before anything runs.

Example::

    refuse_database_file(output, url, "'--output'")
    with written(output) as out:
        out.write(text)
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import click

from ..database.engines import normalize_url, sqlite_file

_JOURNALS = ("", "-wal", "-shm", "-journal")


def refuse_database_file(path: Path, url: str, option: str) -> None:
    """A `click.BadParameter` if `path` is the SQLite file `url` opens, or its journal."""
    database = sqlite_file(normalize_url(url))
    if database is None:
        return
    target, base = path.resolve(), database.resolve()
    if any(target == base.with_name(base.name + suffix) for suffix in _JOURNALS):
        raise click.BadParameter(
            f"{path} is the database {database} (or its journal): choose another file",
            param_hint=option,
        )


@contextmanager
def written(path: Path, option: str) -> Iterator[IO[str]]:
    """A text file that becomes `path` when the block ends without an error; on an error
    it is removed and `path` stays as it was. It is readable by its owner only."""
    try:
        handle, temporary = tempfile.mkstemp(
            dir=path.resolve().parent, prefix=f".{path.name}.", suffix=".partial"
        )
    except OSError as exc:  # a directory that does not exist, a read-only one
        raise click.BadParameter(
            f"cannot write {path}: {exc.strerror}", param_hint=option
        ) from None
    try:
        with open(handle, "w", encoding="utf-8") as out:
            yield out
        os.replace(temporary, path)
    except OSError as exc:  # a full disk
        raise click.ClickException(f"cannot write {path}: {exc.strerror}") from None
    finally:
        Path(temporary).unlink(missing_ok=True)
