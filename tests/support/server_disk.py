"""A database server of a test's own, whose files the test reads byte by byte, and the
keys that may open what lies there.

The shared servers of `make test` are many tests' at once; a test that reads what lies in a
server's data directory, write-ahead log or redo log starts its own through the project's
scripts (`scripts/pg.sh`, `scripts/mariadb.sh`), in a directory of its own, and stops it.

Example::

    with own_server("postgresql") as server:
        ... server.url ...
        backup = server.files()                   # a copy, as a backup taken now holds it
        found = holding(server.files(), [wrapped_key])   # the keys some file still holds
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from agents_sqlalchemy.crypto import OwnerKey, Wrapper
from agents_sqlalchemy.errors import DecryptionError

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = {"postgresql": ("pg.sh", "PG_DIR"), "mariadb": ("mariadb.sh", "MARIADB_DIR")}


@dataclass(frozen=True)
class OwnServer:
    """A running server: its URL and the directory its files are in."""

    dialect: str
    url: str
    directory: Path

    def files(self) -> dict[Path, bytes]:
        """Every file of the server's data directory (table files, WAL or redo log), read now."""
        out: dict[Path, bytes] = {}
        for path in sorted((self.directory / "data").rglob("*")):
            if path.is_file() and not path.is_symlink():
                try:
                    out[path] = path.read_bytes()
                except OSError:  # a file the server removed while we walked
                    continue
        return out


def holding(files: dict[Path, bytes], blobs: list[bytes]) -> dict[bytes, list[str]]:
    """Which of `blobs` lie whole in which files (names relative to the data directory)."""
    found: dict[bytes, list[str]] = {}
    for blob in blobs:
        where = [path.name for path, data in files.items() if blob in data]
        if where:
            found[blob] = where
    return found


def opened(keys: Sequence[Wrapper], wrapped: Iterable[bytes]) -> int:
    """How many of the wrapped data keys `wrapped` some of `keys` unwraps."""
    count = 0
    for one in wrapped:
        for key in keys:
            try:
                key.unwrap(one)
            except DecryptionError:
                continue
            count += 1
            break
    return count


def key_files(directory: Path | None) -> list[Wrapper]:
    """The owner keys a key directory's files hold (`KeyDirectory`: the owner, a newline,
    the key's 32 bytes)."""
    found: list[Wrapper] = []
    for path in directory.glob("*.key") if directory is not None else ():
        owner, _, material = path.read_bytes().partition(b"\n")
        found.append(OwnerKey(path.stem, owner.decode(), material))
    return found


@contextmanager
def own_server(dialect: str) -> Iterator[OwnServer]:
    """Start a throwaway server of `dialect` ("postgresql" or "mariadb"); stop it after."""
    script, variable = SCRIPTS[dialect]
    # World-searchable: PostgreSQL runs as its own user when the tests run as root.
    directory = Path(tempfile.mkdtemp(prefix=f"own-{dialect}-"))
    directory.chmod(0o755)
    server_dir = directory / "server"
    env = os.environ | {variable: str(server_dir)}
    run = ["bash", str(ROOT / "scripts" / script)]
    try:
        subprocess.run([*run, "start"], env=env, check=True, capture_output=True, timeout=300)
        url = (server_dir / "url").read_text().strip()
        yield OwnServer(dialect, url, server_dir)
    finally:
        subprocess.run([*run, "stop"], env=env, check=False, capture_output=True, timeout=120)
        shutil.rmtree(directory, ignore_errors=True)
