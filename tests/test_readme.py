"""The README and every page of docs/ as a user reads them: every Python block runs as
written, every shell command names what exists, and the tables say what the package has.

Each ```python block runs on its own (its own names, its own empty directory as the working
directory), with top-level `await` allowed as in `python -m asyncio`. The only stand-ins: the
model (the SDK's `ScriptedModel` answers whatever agent a block makes, offline; the
Responses API's `compact` endpoint returns a fixed summary) and the PostgreSQL URL
`postgresql://app@db.internal/app`, which becomes the test server's.

Each ```bash and ```console block's commands are checked one by one: `agents-sqlalchemy`
lines are parsed by the real click commands (a removed command, option or choice fails),
`alembic` lines by Alembic's own parser, `make` targets against the Makefile, `pip install`
extras against pyproject.toml, and `python` lines name a file or module that exists. Then
every `agents-sqlalchemy` and `alembic` command of a page runs, in order, in an empty
directory holding the database the page talks about (`support/docs_worlds.py`), and a console
block's command prints what the block shows (but for times and scores).
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import inspect
import os
import re
import shlex
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import agents.memory.openai_responses_compaction_session as sdk_compaction
import click
import pytest
from agents import Agent
from agents.models.multi_provider import MultiProvider
from agents.testing import ScriptedModel, assistant_message
from alembic.config import CommandLine
from click.testing import CliRunner

import agents_sqlalchemy
from agents_sqlalchemy.cli import app

from .support.compaction import CompactEndpoint
from .support.docs_worlds import WORLDS

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: Written by `benchmarks/bench.py --markdown`; included by docs/benchmarks/index.md.
RESULTS = DOCS / "benchmarks" / "results.md"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
PG_IN_DOCS = "postgresql://app@db.internal/app"


def text(page: Path = README) -> str:
    return page.read_text(encoding="utf-8")


def name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def blocks(language: str, pages: list[Path] = PAGES) -> list[tuple[str, str]]:
    """("page:first line", code) of every fenced block in `language`."""
    found = []
    for page in pages:
        body = text(page)
        for match in re.finditer(rf"^```{language}\n(.*?)^```", body, re.M | re.S):
            found.append((f"{name(page)}:{body.count(chr(10), 0, match.start()) + 2}", match[1]))
    return found


def section(title: str, page: Path = README) -> str:
    """A page's text from a heading to the next heading of the same level or above."""
    level = title.split(" ")[0]
    start = text(page).index(f"\n{title}\n")
    rest = text(page)[start + len(title) + 2 :]
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
    marks = [pytest.mark.servers] if PG_IN_DOCS in code else []
    return marks + ([pytest.mark.slow] if re.search(r"model2vec|minilm", code) else [])


@pytest.mark.parametrize(
    ("where", "code"),
    [pytest.param(where, code, marks=block_marks(code)) for where, code in PYTHON],
    ids=[where for where, _ in PYTHON],
)
def test_every_python_block_runs(
    where: str,
    code: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    offline_model: None,
    request: pytest.FixtureRequest,
) -> None:
    if PG_IN_DOCS in code:
        code = code.replace(PG_IN_DOCS, str(request.getfixturevalue("pg_url")))
    monkeypatch.chdir(tmp_path)
    compiled = compile(code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace: dict[str, Any] = {"__name__": "docs"}
    if compiled.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(compiled, namespace))  # top-level await: in an event loop
    else:
        exec(compiled, namespace)  # sync code (run_sync): no loop running
    agents = [value for value in namespace.values() if isinstance(value, Agent)]
    # The docs' agents are plain (OpenAI's model, here the stand-in), or say they are offline.
    assert all(agent.model is None or isinstance(agent.model, ScriptedModel) for agent in agents)


def test_there_are_python_blocks_on_every_guide() -> None:
    assert len(PYTHON) >= 20
    pages = {where.rsplit(":", 1)[0] for where, _ in PYTHON}
    guides = {name(page) for page in (DOCS / "guide").glob("*.md")} - {"docs/guide/cli.md"}
    assert guides <= pages, guides - pages


def test_every_snippet_with_a_runner_says_what_it_needs() -> None:
    """A block that calls Runner says the key it needs (or shows the offline model): before
    it, in it, or in the paragraph after it."""
    for where, code in PYTHON:
        if "Runner." not in code:
            continue
        page, line = ROOT / where.rsplit(":", 1)[0], int(where.rsplit(":", 1)[1])
        around = "\n".join(text(page).splitlines()[: line + code.count("\n") + 6])
        assert "OPENAI_API_KEY" in around or "ScriptedModel" in code, where


def test_every_page_with_top_level_await_says_how_to_run_it() -> None:
    for where, code in PYTHON:
        compiled = compile(code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        if compiled.co_flags & inspect.CO_COROUTINE:
            page = text(ROOT / where.rsplit(":", 1)[0])
            assert "python -m asyncio" in page or "getting-started.md#running" in page, where


# -- shell blocks ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """One command of a shell block: its words, the `VAR=value` words before it, and (in a
    console block) the lines the block shows after it."""

    words: list[str]
    env: dict[str, str]
    shown: list[str] = field(default_factory=list)
    chained: bool = False  # `a && b`: a's output and b's are shown together, under b

    def __str__(self) -> str:
        return shlex.join(self.words)


def commands(code: str, console: bool) -> list[Command]:
    """The commands of a block: console lines after `$ ` (with the output shown under
    them), or every bash line, without comments; `a && b` is two commands."""
    found: list[Command] = []
    for line in code.splitlines():
        if console and not line.startswith("$ "):
            if found:
                found[-1].shown.append(line)
            continue
        if not console and (not line.strip() or line.startswith("#")):
            continue
        words = shlex.split(line[2:] if console else line, comments=True)
        env: dict[str, str] = {}
        while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
            key, _, value = words.pop(0).partition("=")
            env[key] = value
        command: list[str] = []
        chain: list[Command] = []
        for word in [*words, "&&"]:
            if word != "&&":
                command.append(word)
            elif command:
                chain.append(Command(command, env, chained=True))
                command = []
        if chain:
            chain[-1] = Command(chain[-1].words, env)
        found += chain
    return found


def shell_blocks(pages: list[Path] = PAGES) -> list[tuple[str, str, list[Command]]]:
    """(where, language, commands) of every bash and console block, in page order."""
    found = []
    for page in pages:
        body = text(page)
        for match in re.finditer(r"^```(bash|console)\n(.*?)^```", body, re.M | re.S):
            where = f"{name(page)}:{body.count(chr(10), 0, match.start()) + 2}"
            found.append((where, match[1], commands(match[2], match[1] == "console")))
    return found


SHELL = [(where, command) for where, _, found in shell_blocks() for command in found]


def make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][a-z-]*):", text(ROOT / "Makefile"), re.M))


def extras() -> set[str]:
    """The extras pyproject.toml defines (read as text: tomllib is not in Python 3.10)."""
    table = text(ROOT / "pyproject.toml").split("[project.optional-dependencies]")[1]
    return set(re.findall(r"^([a-z0-9-]+) = \[", table.split("\n[")[0], re.M))


def check_cli(args: list[str]) -> None:
    """Parse `args` with the real commands, down to the last one, without running it."""
    with warnings.catch_warnings():  # click 8.2 names the subcommand in `protected_args`
        warnings.simplefilter("ignore", DeprecationWarning)
        command: click.Command = app
        context = app.make_context("agents-sqlalchemy", list(args))
        rest = context.protected_args + context.args
        while isinstance(command, click.Group) and rest:
            sub = command.get_command(context, rest[0])
            assert sub is not None, f"no command {rest[0]!r}"
            command = sub
            context = command.make_context(rest[0], rest[1:], parent=context)
            group = isinstance(command, click.Group)
            rest = context.protected_args + context.args if group else []


@pytest.mark.parametrize(("where", "command"), SHELL, ids=[f"{w} {c}" for w, c in SHELL])
def test_every_shell_command_names_what_exists(where: str, command: Command) -> None:
    program, *args = command.words
    if program == "agents-sqlalchemy":
        check_cli(args)
    elif program == "alembic":
        parsed = CommandLine(prog="alembic").parser.parse_args(args)
        assert parsed.name == "agents_sqlalchemy" and hasattr(parsed, "cmd")
    elif program == "make":
        assert set(args) <= make_targets(), set(args) - make_targets()
    elif program == "pip":
        assert args[0] == "install"
        for requirement in args[1:]:
            if requirement in ("-e", "openai-agents-sqlalchemy"):
                continue
            named = re.fullmatch(r"(openai-agents-sqlalchemy|\.)\[([a-z0-9,-]+)\]", requirement)
            assert named, requirement
            assert set(named[2].split(",")) <= extras(), requirement
    elif program == "python":
        if args[0] == "-m":
            assert importlib.util.find_spec(args[1]) is not None
        else:
            assert (ROOT / args[0]).is_file(), args[0]
    elif program not in ("echo", "export"):
        raise AssertionError(f"{where}: a command the docs test does not know: {command}")


def test_there_are_shell_commands() -> None:
    assert len(SHELL) >= 30
    assert {str(command).split()[0] for _, command in SHELL} >= {"agents-sqlalchemy", "make"}


def same_output(printed: list[str], shown: list[str]) -> bool:
    """What a command printed against what the page shows: line for line, but for the
    times (dates, clock times, durations, a score's last digits), and a `...` line on the
    page stands for any lines."""

    def plain(line: str) -> str:
        line = re.sub(r"\d{4}-\d\d-\d\d( \d\d:\d\d(:\d\d)?)?", "<time>", line.rstrip())
        line = re.sub(r"\d+\.\d s\b", "<duration>", line)
        return re.sub(r"score \d\.\d+", "score <score>", line)

    pattern = "".join(
        "(?:.*\n)*?" if line == "..." else re.escape(plain(line)) + "\n" for line in shown
    )
    return re.fullmatch(pattern, "".join(plain(line) + "\n" for line in printed)) is not None


RUNNABLE = ("agents-sqlalchemy", "alembic")
#: An app's alembic.ini before the page's section is added: its logging, as `alembic init`
#: writes it (the migrations' env.py configures logging from the file).
APP_ALEMBIC_INI = """[loggers]
keys = root

[handlers]
keys = console

[formatters]
keys = generic

[logger_root]
level = WARNING
handlers = console

[handler_console]
class = StreamHandler
args = (sys.stderr,)
formatter = generic

[formatter_generic]
format = %(levelname)-5.5s [%(name)s] %(message)s

"""
RUN_PAGES = sorted(
    {
        where.rsplit(":", 1)[0]
        for where, _, found in shell_blocks()
        if any(command.words[0] in RUNNABLE for command in found)
    }
)


@pytest.mark.parametrize(
    "page", [pytest.param(page, marks=block_marks(text(ROOT / page))) for page in RUN_PAGES]
)
def test_every_command_of_a_page_runs_and_prints_what_it_shows(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """The page's `agents-sqlalchemy` and `alembic` commands, in order, in an empty directory
    holding the world the page talks about (`support/docs_worlds.py`), on SQLite and on the test's
    PostgreSQL where the page names one; console blocks print what they show."""
    pg = str(request.getfixturevalue("pg_url")) if PG_IN_DOCS in text(ROOT / page) else ""
    monkeypatch.chdir(tmp_path)
    for variable in [v for v in os.environ if v.startswith("AGENTS_SQLALCHEMY_")]:
        monkeypatch.delenv(variable)  # the servers' URLs: only what the page says counts
    if page in WORLDS:
        asyncio.run(WORLDS[page]())
    for _, ini in blocks("ini", [ROOT / page]):  # the page's section, in an app's alembic.ini
        ini = ini.replace("postgresql+asyncpg://", "postgresql://").replace(PG_IN_DOCS, pg)
        Path("alembic.ini").write_text(APP_ALEMBIC_INI + ini)
    exported: dict[str, str] = {}
    for where, language, found in shell_blocks([ROOT / page]):
        printed: list[str] = []
        for command in found:
            words = [word.replace(PG_IN_DOCS, pg) for word in command.words]
            output = run(words, {**exported, **command.env}, exported)
            if output is None:  # not run here: checked by the test above
                continue
            printed += output
            if language == "console" and not command.chained:
                shown = command.shown
                assert same_output(printed, shown), f"{where}: {command}\n" + "\n".join(printed)
                printed = []


def run(words: list[str], env: dict[str, str], exported: dict[str, str]) -> list[str] | None:
    """Run one command of a page (None: not one the test runs); its output's lines."""
    program, *args = words
    if program == "export":
        exported.update(dict(word.partition("=")[::2] for word in args))
        return []
    if program == "echo":
        return [" ".join(args)]
    if program == "alembic":
        try:
            CommandLine(prog="alembic").main(args)
        except SystemExit as exc:
            raise AssertionError(f"alembic {shlex.join(args)} failed ({exc.code})") from None
        return None
    if program != "agents-sqlalchemy":
        return None
    result = CliRunner().invoke(app, args, env=env, catch_exceptions=False)
    assert result.exit_code == 0, f"{shlex.join(words)}:\n{result.output}"
    return result.output.rstrip("\n").splitlines()


# -- tables ---------------------------------------------------------------------------------


def test_the_errors_table_lists_every_error() -> None:
    page = text(DOCS / "reference" / "errors.md")
    documented = set(re.findall(r"^\| `(\w+)` \|", page, re.M))
    exported = {
        name
        for name in agents_sqlalchemy.__all__
        if isinstance(obj := getattr(agents_sqlalchemy, name), type)
        and issubclass(obj, (agents_sqlalchemy.AgentsSQLAlchemyError, Warning))
    }
    assert exported == documented
    reference = set(
        re.findall(r"^::: agents_sqlalchemy\.(\w+)$", text(DOCS / "reference" / "api.md"), re.M)
    )
    assert exported <= reference, exported - reference


def test_the_api_reference_covers_every_exported_name() -> None:
    page = text(DOCS / "reference" / "api.md")
    documented = set(re.findall(r"^::: agents_sqlalchemy\.(\w+)$", page, re.M))
    assert documented == set(agents_sqlalchemy.__all__), set(agents_sqlalchemy.__all__) ^ documented


def _leaves(group: click.Group, path: tuple[str, ...] = ()) -> set[str]:
    found: set[str] = set()
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found |= _leaves(command, (*path, name))
        else:
            found.add(" ".join((*path, name)))
    return found


def test_the_cli_table_lists_every_command() -> None:
    rows = re.findall(r"^\| `([^`]+)`", text(DOCS / "guide" / "cli.md"), re.M)
    documented = set()
    for row in rows:
        words = []
        for word in row.split():
            if not re.fullmatch(r"[a-z][a-z-]*", word):
                break
            words.append(word)
        documented.add(" ".join(words))
    assert _leaves(app) <= documented, _leaves(app) - documented


def test_figures_come_from_the_benchmarks_generated_page() -> None:
    """The benchmark page includes the generated pages, and no other page copies a figure
    of theirs: a time in ms or µs, or a rate in items/s, appears nowhere else."""
    generated = {RESULTS, *(DOCS / "benchmarks" / f"{n}.md" for n in ("loop-lag", "million"))}
    for page in generated:
        assert f'--8<-- "{name(page)}"' in text(DOCS / "benchmarks" / "index.md")
        assert text(page).startswith("<!-- Generated by "), name(page)
    assert text(RESULTS).startswith("<!-- Generated by benchmarks/bench.py --markdown")
    measured = re.compile(r"\d[\d,.]* ?(ms|µs)\b|\d[\d,.]* items/s|\d+(\.\d+)?x (the|its) ")
    for page in PAGES:
        if page not in generated:
            assert not measured.search(text(page)), (name(page), measured.search(text(page)))


def test_the_ini_example_keeps_postgresql_options_out_of_sqlites_way() -> None:
    for _, ini in blocks("ini"):
        assert not re.search(r"^schema\s*=", ini, re.M), "a schema is PostgreSQL's only"


def test_install_says_how_to_install_from_a_checkout() -> None:
    for page in (README, DOCS / "getting-started.md"):
        install = section("## Install", page)
        assert "checkout" in install and "pip install -e" in install


def test_the_first_screen_shows_the_demo_and_the_tests() -> None:
    first_screen = "\n".join(text(README).splitlines()[:25])
    assert "make demo" in first_screen and "make test" in first_screen
    assert len(text(README).splitlines()) <= 200


def test_every_page_is_in_the_site() -> None:
    """mkdocs.yml names every page (the generated results are included, not listed)."""
    config = text(ROOT / "mkdocs.yml")
    listed = set(re.findall(r":\s+(\S+\.md)$", config, re.M))
    pages = {page.relative_to(DOCS).as_posix() for page in DOCS.rglob("*.md")}
    generated = {"benchmarks/results.md", "benchmarks/loop-lag.md", "benchmarks/million.md"}
    assert pages - listed == generated
    assert all(f"  {page}\n" in config for page in generated)  # excluded, and included
