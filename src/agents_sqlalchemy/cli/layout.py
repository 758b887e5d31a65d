"""How the command line lays text out: times, terminal widths, aligned tables.

Example::

    for line in table(["id", "items"], [["chat-1", "12"]], right={1}):
        click.echo(line)
"""

from __future__ import annotations

import sys
import unicodedata
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any, TextIO

import click

from ..shown_text import one_line


def minute(when: datetime) -> str:
    """A time in UTC to the minute: `2026-11-29 14:03`."""
    return when.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M")


def second(when: datetime) -> str:
    """A time in UTC to the second: `2026-11-29 14:03:07`."""
    return when.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def width(text: str) -> int:
    """Terminal columns of `text`: wide (CJK, emoji) characters take two, combining none."""
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
        for c in text
    )


def counted(number: int, singular: str, plural: str | None = None) -> str:
    """`number` and the word that agrees with it.

    >>> counted(1, "session"), counted(2, "session"), counted(0, "entry", "entries")
    ('1 session', '2 sessions', '0 entries')
    """
    return f"{number} {singular if number == 1 else plural or singular + 's'}"


def fit(text: str, columns: int) -> str:
    """`text` on one line, as `one_line` shows it (as `sessions show` does), cut to
    `columns` terminal columns with a trailing "…"."""
    text = one_line(text)
    if width(text) <= columns:
        return text
    while width(text) > columns - 1:
        text = text[:-1]
    return f"{text}…"


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    right: set[int],
    widths: Sequence[int] | None = None,
) -> list[str]:
    """Aligned lines (columns of `right` aligned right), two spaces between columns; the
    columns as wide as their widest cell, or `widths` (a table printed a part at a time)."""
    if widths is None:
        widths = [max([width(h)] + [width(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        padded = [
            " " * (w - width(c)) + c if i in right else c + " " * (w - width(c))
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(padded).rstrip()

    return [click.style(line(headers), bold=True), *(line(row) for row in rows)]


def described(session_ids: Sequence[str]) -> str:
    """How a prompt names the sessions given: one, or a count and the first few."""
    if len(session_ids) == 1:
        return f"session {session_ids[0]!r}"
    names = ", ".join(repr(s) for s in session_ids[:3])
    return f"{len(session_ids)} sessions ({names}{', ...' if len(session_ids) > 3 else ''})"


class ProgressBar:
    """Feeds (done, total) reports to a click progress bar, made on the first report; on
    standard error, apart from what a command prints."""

    def __init__(self, enabled: bool, label: str, *, file: TextIO | None = None) -> None:
        self._enabled, self._label, self._done = enabled, label, 0
        self._file = file or sys.stderr
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
