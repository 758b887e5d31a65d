"""Options every command shares (`--url` and the table names), and running a coroutine.

Example (a new command module)::

    @click.command("count")
    @database_options
    def count(url: str, tables: TableNames) -> None:
        click.echo(run(count_sessions(url, tables)))
"""

from __future__ import annotations

import asyncio
import base64
import functools
import importlib
import os
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar, overload

import click

from ..crypto import Key, KeyDirectory, KeyProvider, OwnerKeyStore, validate_key
from ..database.engines import normalize_url, sqlite_file
from ..errors import (
    AgentsSQLAlchemyError,
    ConfigurationError,
    KeyProviderError,
    SchemaError,
    WrongKeyError,
)
from ..search import Embedder, embedder_by_name
from ..store import SessionStore
from ..tables import ROLES, VIEWS, TableNames

T = TypeVar("T")
ENV_PREFIX = "AGENTS_SQLALCHEMY_"
# The click parameter of each table role's override, e.g. --items-table -> items_table.
_ROLE_PARAMS = {f"{role}_table": role for role in ROLES} | {view: view for view in VIEWS}


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
            f"--{param.replace('_', '-')}",
            param,
            metavar="NAME",
            help=f"Name of the {role.replace('_', ' ')} "
            f"{'' if role in VIEWS else 'table '}[default: PREFIX{role}].",
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
        tables = _table_names({key: value for key, value in names.items() if value is not None})
        try:
            missing = missing_sqlite_file(kwargs["url"])
        except ConfigurationError as exc:
            raise click.BadParameter(str(exc), param_hint="'--url'") from exc
        sqlite = normalize_url(kwargs["url"]).get_backend_name() == "sqlite"
        if sqlite and tables.schema not in (None, "main"):
            raise click.BadParameter(
                "a SQLite database has no schemas: its tables are in the file --url names",
                param_hint="'--schema'",
            )
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


def _table_names(given: dict[str, str]) -> TableNames:
    """The `TableNames` of the table options given; a bad value is named by its option."""
    try:
        return TableNames(**given)
    except ConfigurationError as exc:
        wrong = [name for name, value in given.items() if not _valid({name: value})]
        options = [f"'{_OPTIONS.get(name, f'--{name}')}'" for name in wrong or given]
        raise click.BadParameter(str(exc), param_hint=" / ".join(options)) from exc


def _valid(names: dict[str, str]) -> bool:
    try:
        TableNames(**names)
    except ConfigurationError:
        return False
    return True


#: Each table name's option, by its `TableNames` field.
_OPTIONS = {role: f"--{param.replace('_', '-')}" for param, role in _ROLE_PARAMS.items()}


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
    except KeyboardInterrupt:
        # Click's own "Aborted!" read as if nothing was done.
        raise click.ClickException(
            "interrupted: what was done before stays done, each batch whole (a purge may "
            "have finished its batch); run the command again to go on"
        ) from None
    except SchemaError as exc:
        message = exc.cli_message
        if create_option and exc.state in ("missing", "behind"):
            message += ", or add --create"
        raise click.ClickException(message) from exc
    except AgentsSQLAlchemyError as exc:
        raise click.ClickException(str(exc)) from exc


KEY_ENV = f"{ENV_PREFIX}KEY"
KEY_FORMATS = ("passphrase", "hex", "base64")
# Where `key_options` leaves the store `--owner-keys` names (`click.Context.meta`).
OWNER_KEYS = "agents_sqlalchemy.owner_keys"
# Set in `click.Context.meta` when a key was read from a pipe on stdin (see `stdin_taken`).
_PIPED_KEY = "agents_sqlalchemy.piped_key"


@dataclass(frozen=True)
class KeySource:
    """Where a command's key comes from, as its options say; a key is never an argument."""

    option: str  # "--key" or "--new-key": how messages name the options
    env: str | None  # --key-env NAME
    default_env: str
    form: str  # --key-format
    provider: str | None  # --key-provider MODULE:ATTR
    ask: bool  # --ask-key


def read_key(source: KeySource, *, prompt: str | None = None, confirm: bool = False) -> Key | None:
    """The key `source` names: a provider, a hidden prompt, or an environment variable.

    An unset default variable means no key (or, with `prompt`, a hidden prompt); a variable
    named with --key-env must be set.

    Example::

        source = KeySource("--key", "APP_KEY", KEY_ENV, "hex", None, ask=False)
        key = read_key(source)            # 32 bytes from $APP_KEY, or a usage error
    """
    if source.provider is not None:
        if source.env is not None or source.ask:
            raise click.UsageError(
                f"give {source.option}-provider alone, without the other key options"
            )
        return load_provider(source.provider, f"{source.option}-provider")
    value = None if source.ask else os.environ.get(source.env or source.default_env)
    if not value and source.env is not None and not source.ask:
        raise click.UsageError(
            f"the environment variable {source.env} is not set (named by {source.option}-env)"
        )
    if not value and prompt is None and not source.ask:
        return None
    if not value:
        stdin = sys.stdin
        if stdin is sys.__stdin__ and stdin is not None and not stdin.isatty():
            # No terminal to ask: a key piped in is read as a line (no echo to hide), and
            # none at all says where a key goes.
            value = stdin.readline().rstrip("\r\n")
            if (context := click.get_current_context(silent=True)) is not None:
                context.meta[_PIPED_KEY] = True
            if not value:
                variable = source.env or source.default_env
                raise click.UsageError(
                    f"no key given and no terminal to ask for it: set ${variable} (or name "
                    f"another variable with {source.option}-env, or a provider with "
                    f"{source.option}-provider), or pipe the key in"
                )
            return decode_key(value, source.form, f"{source.option}-format")
        text = prompt or "Key"
        value = str(click.prompt(text, hide_input=True, confirmation_prompt=confirm))
    return decode_key(str(value), source.form, f"{source.option}-format")


def decode_key(value: str, form: str, option: str) -> Key:
    """The `key=` a secret stands for: the passphrase itself, or 32 raw bytes in hex/base64."""
    if form == "passphrase":
        return value
    # The key is what is wrong, not the option that names its form (said "Invalid value
    # for '--key-format'").
    try:
        raw = bytes.fromhex(value) if form == "hex" else base64.b64decode(value, validate=True)
    except ValueError:  # binascii.Error is one
        raise click.UsageError(f"the key given is not {form}, as {option} {form} says") from None
    if len(raw) != 32:
        raise click.UsageError(
            f"a {form} key must decode to 32 bytes, the key given decodes to {len(raw)} "
            f"({option} {form})"
        )
    return raw


def _load(spec: str, option: str, kind: type, described: str) -> Any:
    """The `kind` at `MODULE:ATTR` (an instance, or a class or factory, called); anything
    the app's code raises on the way is a one-line error naming it."""
    module_name, _, attr = spec.partition(":")
    hint = f"'{option}'"
    if not module_name or not attr:
        raise click.BadParameter(f"{spec!r} is not MODULE:ATTR", param_hint=hint)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` does: the app's own modules
    try:
        found: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            found = getattr(found, part)
        if isinstance(found, type) or (callable(found) and not isinstance(found, kind)):
            found = found()
        fits = isinstance(found, kind)  # a protocol's check reads its attributes
    except Exception as exc:
        raise click.BadParameter(
            f"cannot load {spec!r}: {type(exc).__name__}: {exc}", param_hint=hint
        ) from None
    if not fits:
        raise click.BadParameter(
            f"{spec!r} is a {type(found).__name__}, not {described}", param_hint=hint
        )
    return found


def load_provider(spec: str, option: str) -> Key:
    """The `KeyProvider` at `MODULE:ATTR` (an instance, or a class or factory to call)."""
    found = _load(spec, option, KeyProvider, "a key provider (kek_id, wrap, unwrap)")
    try:
        return validate_key(found)
    except (ConfigurationError, KeyProviderError) as exc:
        raise click.BadParameter(str(exc), param_hint=f"'{option}'") from None


def load_owner_keys(spec: str) -> OwnerKeyStore:
    """The owner key store `--owner-keys` names: a directory, or `MODULE:ATTR`."""
    if ":" not in spec or Path(spec).is_dir():
        try:
            return KeyDirectory(spec)
        except ConfigurationError as exc:  # "", or a path that is a file
            raise click.BadParameter(str(exc), param_hint="'--owner-keys'") from None
    store: OwnerKeyStore = _load(
        spec, "--owner-keys", OwnerKeyStore, "an owner key store (keep, fetch, destroy)"
    )
    return store


def stdin_taken(what: str) -> None:
    """Refuse `what` read from stdin when this command's key was read from it (a pipe:
    `read_key`): the key would have been the first line of it."""
    context = click.get_current_context(silent=True)
    if context is not None and context.meta.get(_PIPED_KEY):
        raise click.UsageError(
            f"{what} and the key cannot both come from stdin: give the key with --key-env "
            "or --key-provider, or read it from a file"
        )


def owner_keys() -> OwnerKeyStore | None:
    """The owner key store this command was given with `--owner-keys` (None: the
    database keeps the owners' keys)."""
    context = click.get_current_context(silent=True)
    found: OwnerKeyStore | None = None if context is None else context.meta.get(OWNER_KEYS)
    return found


def _key_option_list(name: str, default_env: str) -> list[Decorator]:
    """The four key options of `key_options`, named after `name` ("key", "new-key")."""
    what = "the new key" if name == "new-key" else "the database's key"
    return [
        click.option(
            f"--{name}-env",
            metavar="NAME",
            help=f"Environment variable holding {what} [default: {default_env}].",
        ),
        click.option(
            f"--{name}-format",
            type=click.Choice(KEY_FORMATS),
            default="passphrase",
            show_default=True,
            help="What the key is: a passphrase, or 32 raw bytes in hex or base64.",
        ),
        click.option(
            f"--{name}-provider",
            metavar="MODULE:ATTR",
            help="A key provider (KMS, secret manager) by import path: an instance, or a "
            "class or function that makes one.",
        ),
        click.option(
            f"--ask-{name}", is_flag=True, help=f"Prompt for {what} (input is not echoed)."
        ),
    ]


@overload
def key_options(command: Callable[..., T]) -> Callable[..., T]: ...


@overload
def key_options(
    *, name: str = ..., default_env: str = ..., prompt: str | None = ..., confirm: bool = ...
) -> Callable[[Callable[..., T]], Callable[..., T]]: ...


def key_options(
    command: Callable[..., T] | None = None,
    *,
    name: str = "key",
    default_env: str = KEY_ENV,
    prompt: str | None = None,
    confirm: bool = False,
) -> Any:
    """Add the key options; the command receives `key` (None: no key), or `new_key` etc.

    `--key-env NAME` (default $AGENTS_SQLALCHEMY_KEY), `--key-format passphrase|hex|base64`,
    `--key-provider MODULE:ATTR` and `--ask-key`; `name="new-key"` makes `--new-key-env`...
    With `prompt`, a key that nothing names is asked for at a hidden prompt.
    """
    if command is None:
        return functools.partial(
            key_options, name=name, default_env=default_env, prompt=prompt, confirm=confirm
        )
    param = name.replace("-", "_")

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> T:
        if name == "key":
            given = kwargs.pop("owner_keys")
            if given is not None:
                click.get_current_context().meta[OWNER_KEYS] = load_owner_keys(given)
        source = KeySource(
            f"--{name}",
            kwargs.pop(f"{param}_env"),
            default_env,
            kwargs.pop(f"{param}_format"),
            kwargs.pop(f"{param}_provider"),
            kwargs.pop(f"ask_{param}"),
        )
        kwargs[param] = read_key(source, prompt=prompt, confirm=confirm)
        return command(**kwargs)

    options = _key_option_list(name, default_env)
    if name == "key":
        options.append(
            click.option(
                "--owner-keys",
                metavar="DIR|MODULE:ATTR",
                help="Where the owners' keys are kept, if not in the database: a key "
                "directory, or an owner key store (a KMS) by import path.",
            )
        )
    decorated: Callable[..., Any] = wrapper
    for option in reversed(options):
        decorated = option(decorated)
    return decorated


def max_chars_option(default: int) -> Decorator:
    """`--max-chars N`: where printed tool arguments and outputs are cut (0: never)."""
    return click.option(
        "--max-chars",
        type=click.IntRange(min=0),
        default=default,
        show_default=True,
        help="Cut tool arguments and outputs longer than this (0: never).",
    )


#: `--ttl SECONDS` of the import commands: the imported items expire as the store's ttl
#: would have them (the target's own times; an app's `ttl=` is not known here).
ttl_option = click.option(
    "--ttl",
    type=float,
    default=None,
    metavar="SECONDS",
    help="The imported items expire this long from now, as the store's ttl would have them "
    "(default: never).",
)


def shown(url: str) -> str:
    """A database URL as the commands print it: driver spelled out, password hidden."""
    return normalize_url(url).render_as_string(hide_password=True)


@asynccontextmanager
async def opened(
    url: str, tables: TableNames, key: Key | None, **store_options: Any
) -> AsyncIterator[SessionStore]:
    """A store on the database; an encrypted one opened without a key says how to give it."""
    store_options.setdefault("owner_keys", owner_keys() if key is not None else None)
    async with SessionStore(url, tables=tables, key=key, **store_options) as store:
        try:
            yield store
        except WrongKeyError as exc:
            if key is not None:
                raise
            raise WrongKeyError(encrypted_hint(url)) from exc


def encrypted_hint(url: str) -> str:
    """What to say when an encrypted database was opened without a key."""
    return (
        f"{shown(url)} is encrypted: give its key in ${KEY_ENV} (or the variable "
        "named by --key-env, with --key-format hex|base64 for a raw key), name a "
        "provider with --key-provider MODULE:ATTR, or use --ask-key"
    )


def iso_time(ctx: click.Context, param: click.Parameter, value: str | None) -> datetime | None:
    """An ISO 8601 time option (`2026-11-29`, `2026-11-29T14:03`, `...Z`, `...+02:00`).

    A time without an offset is UTC.
    """
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not an ISO time such as 2026-11-29T14:03Z"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def load_embedder(name: str) -> Embedder:
    """A built-in embedder; a missing extra is a usage error that names it."""
    try:
        return embedder_by_name(name)
    except AgentsSQLAlchemyError as exc:
        raise click.BadParameter(str(exc), param_hint="--embedder") from exc
