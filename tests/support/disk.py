"""The bytes of a SQLite database as they lie on disk: the file and its write-ahead log."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import make_url


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL; None for a server's URL."""
    return Path(str(make_url(url).database)) if url.startswith("sqlite") else None


def on_disk(url: str) -> bytes:
    """The raw bytes of a SQLite database file and of its write-ahead log."""
    path = sqlite_path(url)
    assert path is not None
    wal = Path(f"{path}-wal")
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def pieces(blob: bytes) -> list[bytes]:
    """The blob and every 16-byte piece of it: a remnant of part of it counts too."""
    return [blob, *(blob[i : i + 16] for i in range(0, len(blob) - 15, 16))]


def found_on_disk(url: str, blobs: list[bytes]) -> list[bytes]:
    """Those of `blobs` of which the SQLite file or its log still holds a piece."""
    disk = on_disk(url)
    return [blob for blob in blobs if any(piece in disk for piece in pieces(blob))]
