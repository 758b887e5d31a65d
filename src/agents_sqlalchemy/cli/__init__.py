"""The `agents-sqlalchemy` command line.

Example::

    agents-sqlalchemy db upgrade --url postgresql://app@db/app --prefix chat_
    agents-sqlalchemy db check --url agent.db && echo "schema at head"
    agents-sqlalchemy --help
"""

from __future__ import annotations

from importlib import import_module

import click

# Each module defines `command`, a click command or group; add a name here to add one.
COMMAND_MODULES = ("db", "importer")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="openai-agents-sqlalchemy")
def app() -> None:
    """OpenAI Agents SDK sessions in your SQL database: schema, import and maintenance.

    Every command takes --url (or AGENTS_SQLALCHEMY_URL) and the table options
    (--prefix, --schema, --items-table, ...) that the application's TableNames uses.
    """


for _module in COMMAND_MODULES:
    app.add_command(import_module(f"{__name__}.{_module}").command)


def main() -> None:
    """Entry point of the `agents-sqlalchemy` console script."""
    app()
