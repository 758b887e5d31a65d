"""Options every command shares (`--url` and the table names), and running a coroutine.

Example (a new command module)::

    @click.command("count")
    @database_options
    def count(url: str, tables: TableNames) -> None:
        click.echo(run(count_sessions(url, tables)))
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar, overload

import click

from ..engines import normalize_url, sqlite_file
from ..errors import AgentsSQLAlchemyError, ConfigurationError, SchemaError, WrongKeyError
from ..store import SessionStore
from ..tables import ROLES, TableNames

T = TypeVar("T")
ENV_PREFIX = "AGENTS_SQLALCHEMY_"
# The click parameter of each table role's override, e.g. --items-table -> items_table.
_ROLE_PARAMS = {f"{role}_table": role for role in ROLES}


Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def _table_options() -> list[Decorator]:
    default = TableNames()
    options: list[Decorator] = [
        click.option(
            "--prefix",
            metavar="PREFIX",
            envvar=f"{ENV_PREFIX}PREFIX",
            show_envvar=True,
            help=f"Prefix of every table name [default: {default.prefix}].",
        ),
        click.option(
            "--schema",
            metavar="NAME",
            envvar=f"{ENV_PREFIX}SCHEMA",
            show_envvar=True,
            help="Schema of the tables (PostgreSQL) [default: the connection's].",
        ),
    ]
    options += [
        click.option(
            f"--{role.replace('_', '-')}-table",
            param,
            metavar="NAME",
            help=f"Name of the {role.replace('_', ' ')} table [default: PREFIX{role}].",
        )
        for param, role in _ROLE_PARAMS.items()
    ]
    return options


@overload
def database_options(command: Callable[..., T]) -> Callable[..., T]: ...


@overload
def database_options(*, may_create: bool) -> Callable[[Callable[..., T]], Callable[..., T]]: ...


def database_options(command: Callable[..., T] | None = None, *, may_create: bool = False) -> Any:
    """Add `--url` and the table options; the command receives `url` and `tables`.

    A SQLite file that does not exist is an error (nothing is created) unless the command
    says `may_create=True`, as `db upgrade` and `import-sdk` do.
    """
    if command is None:
        return functools.partial(database_options, may_create=may_create)

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> T:
        names = {"prefix": kwargs.pop("prefix"), "schema": kwargs.pop("schema")}
        names |= {role: kwargs.pop(param) for param, role in _ROLE_PARAMS.items()}
        try:
            tables = TableNames(**{key: value for key, value in names.items() if value is not None})
            missing = missing_sqlite_file(kwargs["url"])
        except ConfigurationError as exc:
            raise click.BadParameter(str(exc)) from exc
        if missing is not None and not may_create:
            raise click.ClickException(
                f"no SQLite database at {missing} (nothing was created): check --url, or "
                f"create it with `agents-sqlalchemy db upgrade --url {missing}`"
            )
        return command(tables=tables, **kwargs)

    decorated: Callable[..., Any] = wrapper
    for option in reversed(_table_options()):
        decorated = option(decorated)
    url = click.option(
        "--url",
        metavar="URL",
        envvar=f"{ENV_PREFIX}URL",
        show_envvar=True,
        required=True,
        help="Database URL, or a file path for SQLite (e.g. postgresql://app@db/app, agent.db).",
    )
    return url(decorated)


def missing_sqlite_file(url: str) -> Path | None:
    """The SQLite file `url` names if it does not exist (else None)."""
    path = sqlite_file(normalize_url(url))
    return path if path is not None and not path.exists() else None


def run(coroutine: Coroutine[Any, Any, T], *, create_option: bool = False) -> T:
    """Run a coroutine to its end; the library's errors become a one-line `Error: ...`, exit 1.

    A `SchemaError` gives its command-line advice; with `create_option`, the command's
    `--create` is named too.
    """
    try:
        return asyncio.run(coroutine)
    except SchemaError as exc:
        message = exc.cli_message
        if create_option and exc.state in ("missing", "behind"):
            message += ", or add --create"
        raise click.ClickException(message) from exc
    except AgentsSQLAlchemyError as exc:
        raise click.ClickException(str(exc)) from exc


KEY_ENV = f"{ENV_PREFIX}KEY"


def read_key(env: str | None = None, *, ask: bool = False, prompt: str = "Key") -> str | None:
    """A key (passphrase) from a hidden prompt, or from an environment variable; never argv.

    With `ask`, prompt without echo. Otherwise read `env` (default AGENTS_SQLALCHEMY_KEY):
    unset means no key, unless `env` was named explicitly, which makes it an error.

    Example::

        key = read_key("APP_SESSION_KEY")          # $APP_SESSION_KEY, or a usage error
        key = read_key(ask=True, prompt="New key")  # typed, not echoed
    """
    if ask:
        return str(click.prompt(prompt, hide_input=True))
    value = os.environ.get(env or KEY_ENV)
    if not value and env is not None:
        raise click.UsageError(f"the environment variable {env} (from --key-env) is not set")
    return value or None


def key_options(command: Callable[..., T]) -> Callable[..., T]:
    """Add `--key-env NAME` and `--ask-key`; the command receives `key` (None: no key)."""

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> T:
        key = read_key(kwargs.pop("key_env"), ask=kwargs.pop("ask_key"))
        return command(key=key, **kwargs)

    ask = click.option(
        "--ask-key", is_flag=True, help="Prompt for the database's key (input is not echoed)."
    )
    env = click.option(
        "--key-env",
        metavar="NAME",
        help=f"Environment variable holding the database's key [default: {KEY_ENV}].",
    )
    return env(ask(wrapper))


def max_chars_option(default: int) -> Decorator:
    """`--max-chars N`: where printed tool arguments and outputs are cut (0: never)."""
    return click.option(
        "--max-chars",
        type=click.IntRange(min=0),
        default=default,
        show_default=True,
        help="Cut tool arguments and outputs longer than this (0: never).",
    )


def shown(url: str) -> str:
    """A database URL as the commands print it: driver spelled out, password hidden."""
    return normalize_url(url).render_as_string(hide_password=True)


@asynccontextmanager
async def opened(
    url: str, tables: TableNames, key: str | None, **store_options: Any
) -> AsyncIterator[SessionStore]:
    """A store on the database; an encrypted one opened without a key says how to give it."""
    async with SessionStore(url, tables=tables, key=key, **store_options) as store:
        try:
            yield store
        except WrongKeyError as exc:
            if key is not None:
                raise
            raise WrongKeyError(
                f"{shown(url)} is encrypted: give its key in ${KEY_ENV} "
                "(or the variable named by --key-env), or use --ask-key"
            ) from exc
