"""The `agents-sqlalchemy` command line.

Example::

    agents-sqlalchemy db upgrade --url postgresql://app@db/app --prefix chat_
    agents-sqlalchemy db check --url agent.db && echo "schema at head"
    agents-sqlalchemy --help
"""

from __future__ import annotations

import os
from importlib import import_module

import click

# Each module defines `command`, a click command or group (or `commands`, several of them),
# and `GROUP` when they are subcommands of one (after that group's module); add a name here
# to add one.
COMMAND_MODULES = (
    "db",
    "importer",
    "sessions",
    "sessions_admin",
    "sessions_health",
    "users",
    "keys",
    "search",
    "doctor",
    "ui",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="openai-agents-sqlalchemy")
@click.pass_context
def app(context: click.Context) -> None:
    """OpenAI Agents SDK sessions in your SQL database: schema, import and maintenance.

    Every command takes --url (or AGENTS_SQLALCHEMY_URL) and the table options
    (--prefix, --schema, --items-table, ...) that the application's TableNames uses.
    NO_COLOR (set and not empty) turns colours off.
    """
    if os.environ.get("NO_COLOR"):
        context.color = False


for _name in COMMAND_MODULES:
    _module = import_module(f"{__name__}.{_name}")
    _group = app.commands[_module.GROUP] if hasattr(_module, "GROUP") else app
    for _command in getattr(_module, "commands", None) or (_module.command,):
        _group.add_command(_command)  # type: ignore[attr-defined]


def main() -> None:
    """Entry point of the `agents-sqlalchemy` console script."""
    app()
