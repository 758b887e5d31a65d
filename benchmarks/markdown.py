"""The benchmark's figures as a Markdown page, written by ``bench.py --markdown PATH``.

The documentation includes that file (``docs/benchmarks/results.md``) as it is: every
figure the docs show comes from one run, written once, by this module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .backends import Backend
from .core import Results, Settings
from .report import GROUPS, TargetLine, group_table


def public(description: str) -> str:
    """A database's description without the machine's paths and addresses (the page is
    committed): the temporary directory's path and the server's URL are dropped."""
    description = re.sub(r" in /\S+", " in a temporary directory", description)
    return re.sub(r" at [a-z+]+://\S+", "", description)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _table(header: list[str], rows: list[list[str]], *, figures: bool = True) -> list[str]:
    """A Markdown table; with `figures`, every column but the first aligned right."""
    lines = ["| " + " | ".join(_cell(c) for c in header) + " |"]
    aligned = "---:" if figures else "---"
    lines.append("|" + "|".join(["---", *(aligned for _ in header[1:])]) + "|")
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


@dataclass
class MarkdownPage:
    """The sections of one run, a database after another, written out at the end."""

    header: list[str]
    sections: list[str] = field(default_factory=list)

    def add_database(
        self,
        label: str,
        description: str,
        backends: list[Backend],
        results: Results,
        settings: Settings,
        measurements: list[str],
        targets: list[TargetLine],
    ) -> None:
        lines = [f"## {label}", "", f"{public(description)}.", ""]
        lines += ["Backends:", ""]
        lines += [f"- {backend.label}: {backend.note}" for backend in backends]
        for group in GROUPS:
            table = group_table(group, backends, results, settings)
            if table is None:
                continue
            lines += ["", f"### {table.title}", "", *_table(table.header, table.rows), ""]
            lines += [f"- {note}" for note in table.notes]
        if measurements:
            lines += ["", f"### Single measurements ({label})", ""]
            lines += [f"- {line}" for line in measurements]
        if targets:
            lines += ["", f"### Targets ({label})", ""]
            rows = [[t.verdict, t.text, t.detail] for t in targets]
            lines += _table(["verdict", "target", "measured"], rows, figures=False)
        self.sections.append("\n".join(lines))

    def write(self, path: Path, footer: str) -> None:
        text = "\n".join(self.header) + "\n\n" + "\n\n".join(self.sections)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{text}\n\n{footer}\n", encoding="utf-8")
