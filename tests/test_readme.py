"""The README as a user reads it: every Python block runs as written, and its tables say what
the package has.

Each ```python block runs on its own (its own names, its own empty directory as the working
directory), with top-level `await` allowed as in `python -m asyncio`. The only stand-ins: the
model (the SDK's `ScriptedModel` answers whatever agent a block makes, offline; the
Responses API's `compact` endpoint returns a fixed summary) and the PostgreSQL URL
`postgresql://app@db.internal/app`, which becomes the test server's.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
from pathlib import Path
from typing import Any

import agents.memory.openai_responses_compaction_session as sdk_compaction
import click
import pytest
from agents import Agent
from agents.models.multi_provider import MultiProvider
from agents.testing import ScriptedModel, assistant_message

import agents_sqlalchemy
from agents_sqlalchemy.cli import app

from .support.compaction import CompactEndpoint

README = Path(__file__).resolve().parent.parent / "README.md"
PG_IN_README = "postgresql://app@db.internal/app"


def text() -> str:
    return README.read_text(encoding="utf-8")


def blocks(language: str) -> list[tuple[int, str]]:
    """(first line, code) of every fenced block in `language`."""
    found = []
    for match in re.finditer(rf"^```{language}\n(.*?)^```", text(), re.M | re.S):
        found.append((text().count("\n", 0, match.start()) + 2, match.group(1)))
    return found


def section(title: str) -> str:
    """The README's text from a heading to the next heading of the same level or above."""
    level = title.split(" ")[0]
    start = text().index(f"\n{title}\n")
    rest = text()[start + len(title) + 2 :]
    ends = [m.start() for m in re.finditer(rf"^#{{1,{len(level)}}} ", rest, re.M)]
    return rest[: ends[0]] if ends else rest


@pytest.fixture
def offline_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever model an agent names, the SDK's scripted model answers."""

    def get_model(self: MultiProvider, name: str | None) -> ScriptedModel:
        return ScriptedModel([[assistant_message("(an offline answer)")] for _ in range(20)])

    monkeypatch.setattr(MultiProvider, "get_model", get_model)
    monkeypatch.setattr(sdk_compaction, "get_default_openai_client", CompactEndpoint)


PYTHON = blocks("python")


def block_marks(code: str) -> list[pytest.MarkDecorator]:
    """A block on PostgreSQL needs the servers; one that loads an embedding model is slow."""
    marks = [pytest.mark.servers] if PG_IN_README in code else []
    return marks + ([pytest.mark.slow] if re.search(r"model2vec|minilm", code) else [])


@pytest.mark.parametrize(
    ("line", "code"),
    [pytest.param(line, code, marks=block_marks(code)) for line, code in PYTHON],
    ids=[f"README.md:{n}" for n, _ in PYTHON],
)
def test_every_python_block_runs(
    line: int,
    code: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    offline_model: None,
    request: pytest.FixtureRequest,
) -> None:
    if PG_IN_README in code:
        code = code.replace(PG_IN_README, str(request.getfixturevalue("pg_url")))
    monkeypatch.chdir(tmp_path)
    compiled = compile(code, f"README.md:{line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace: dict[str, Any] = {"__name__": "readme"}
    if compiled.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(compiled, namespace))  # top-level await: in an event loop
    else:
        exec(compiled, namespace)  # sync code (run_sync): no loop running
    agents = [value for value in namespace.values() if isinstance(value, Agent)]
    assert all(agent.model is None for agent in agents)  # the README's agents are plain


def test_there_are_python_blocks() -> None:
    assert len(PYTHON) >= 10


def test_the_errors_table_lists_every_error() -> None:
    documented = set(re.findall(r"^\| `(\w+)` \|", section("### Errors"), re.M))
    exported = {
        name
        for name in agents_sqlalchemy.__all__
        if isinstance(obj := getattr(agents_sqlalchemy, name), type)
        and issubclass(obj, (agents_sqlalchemy.AgentsSQLAlchemyError, Warning))
    }
    assert exported == documented


def _leaves(group: click.Group, path: tuple[str, ...] = ()) -> set[str]:
    found: set[str] = set()
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found |= _leaves(command, (*path, name))
        else:
            found.add(" ".join((*path, name)))
    return found


def test_the_cli_table_lists_every_command() -> None:
    rows = re.findall(r"^\| `([^`]+)`", section("## Command line"), re.M)
    documented = set()
    for row in rows:
        words = []
        for word in row.split():
            if not re.fullmatch(r"[a-z][a-z-]*", word):
                break
            words.append(word)
        documented.add(" ".join(words))
    assert _leaves(app) <= documented, _leaves(app) - documented


def test_the_comparison_matches_the_benchmarks() -> None:
    claimed = re.search(r"\(([\d.]+)x in \[Benchmarks\]", text())
    sqlite = section("## Benchmarks").split("| PostgreSQL |")[0]
    sdk = re.search(r"^\| SDK `SQLAlchemySession` \| ([\d.]+) \|", sqlite, re.M)
    ours = re.search(r"^\| ours, defaults \(search on\) \| ([\d.]+) \|", sqlite, re.M)
    assert claimed and sdk and ours
    assert float(claimed.group(1)) == round(float(sdk.group(1)) / float(ours.group(1)), 1)


def test_the_ini_example_keeps_postgresql_options_out_of_sqlites_way() -> None:
    for _, ini in blocks("ini"):
        assert not re.search(r"^schema\s*=", ini, re.M), "a schema is PostgreSQL's only"


def test_install_says_how_to_install_from_a_checkout() -> None:
    install = section("## Install")
    assert "checkout" in install and "pip install -e" in install
