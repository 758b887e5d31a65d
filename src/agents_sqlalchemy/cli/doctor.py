"""`agents-sqlalchemy doctor`: what a deployment gets wrong, checked in one go, each finding
with the command that fixes it.

The checks, in order: the schema (revision, and the prefix the tables are under), the key
(an encrypted database opened without one, a wrong one, an unfinished rotation), the
embedder against the model the items were indexed with, the Agents SDK's own tables
holding sessions not imported, and the histories the model API would refuse
(`sessions check`). Nothing is written.

Example::

    agents-sqlalchemy doctor --url postgresql://app@db/app --prefix chat_
    AGENTS_SQLALCHEMY_KEY=... agents-sqlalchemy doctor --url agent.db --embedder model2vec
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import click

from ..crypto import Key
from ..errors import AgentsSQLAlchemyError, KeyringError, SdkHistoryWarning, WrongKeyError
from ..migrations import api as migrate
from ..search import BUILTIN_EMBEDDERS, HashingEmbedder, builtin_indexing_as, index_id
from ..services import Services
from ..services.opener import IMPORT_COMMAND, SDK_MESSAGES
from ..shown_text import clean
from ..store import SessionStore
from ..tables import TableNames
from ..types import Scope, SessionKey
from .layout import counted
from .options import (
    ENV_PREFIX,
    database_options,
    encrypted_hint,
    key_options,
    load_embedder,
    missing_sqlite_file,
    owner_keys,
    run,
    shown,
)
from .sessions_health import every_session, repair_command


@dataclass(frozen=True)
class Finding:
    """One check: what it looked at, whether it is fine, what was found, and the fix."""

    check: str
    ok: bool
    detail: str
    fix: str | None = None


async def diagnose(
    url: str, tables: TableNames, key: Key | None, embedder_name: str | None
) -> list[Finding]:
    """Every check, in order; a check whose ground is missing (no schema, no key) stops
    the ones that need it."""
    warnings.simplefilter("ignore", SdkHistoryWarning)  # a finding of its own here
    where = shown(url)
    if missing_sqlite_file(url) is not None:
        status = migrate.SchemaStatus("missing", (), migrate.head_revision(), tables)
    else:
        status = await migrate.check(url, tables=tables)
    if not status.at_head:
        error = status.error(where)
        return [Finding("schema", False, status.describe(), error.cli_message)]
    findings = [
        Finding(
            "schema",
            True,
            f"{status.describe()}; tables {tables.sessions_table}, {tables.items_table}, ...",
        )
    ]
    findings.append(await _key(url, tables, key))
    if not findings[-1].ok:
        return findings
    findings += await _with_store(url, tables, key, embedder_name)
    return findings


@asynccontextmanager
async def _services(
    url: str, tables: TableNames, key: Key | None = None
) -> AsyncIterator[Services]:
    """The store's services on the database, with `key` (without one, nothing sealed can
    be read: the checks that read no item need none); closed after."""
    services = Services.build(
        url, tables=tables, key=key, ttl=None, embedder=None, create_tables=False
    )
    try:
        yield services
    finally:
        await services.close()


async def _key(url: str, tables: TableNames, key: Key | None) -> Finding:
    async with _services(url, tables) as plain:
        rows = await plain.opener.encrypted()
    if not rows:
        note = "; the key given would make new items sealed" if key is not None else ""
        return Finding("key", True, f"plaintext database (no keyring){note}")
    if key is None:
        return Finding("key", False, "the database is encrypted and no key was given",
                       encrypted_hint(url))  # fmt: skip
    try:
        async with _services(url, tables, key) as keyed:
            await keyed.opener.ready()
    except WrongKeyError as exc:
        return Finding(
            "key",
            False,
            str(exc),
            f"give the key this database was encrypted with in ${ENV_PREFIX}KEY (or "
            "--key-env/--key-provider); after a rotation, the new one",
        )
    except KeyringError as exc:
        return Finding("key", False, str(exc), "agents-sqlalchemy rotate-key (to finish it)")
    return Finding("key", True, "encrypted; the key given opens it")


async def _with_store(
    url: str, tables: TableNames, key: Key | None, embedder_name: str | None
) -> list[Finding]:
    """The checks that need the store; one that fails (a row altered outside the library)
    is a finding of its own, and the others still run."""
    owners = owner_keys() if key is not None else None
    async with SessionStore(url, tables=tables, key=key, search=False, owner_keys=owners) as store:
        checks: dict[str, Callable[[], Awaitable[Finding]]] = {
            "embedder": lambda: _embedder(url, tables, store, embedder_name),
            "index": lambda: _unindexed(url, tables, store, embedder_name),
            "sdk tables": lambda: _sdk_history(url, tables),
            "histories": lambda: _histories(url, tables, store),
        }
        findings = []
        for name, check in checks.items():
            try:
                findings.append(await check())
            except AgentsSQLAlchemyError as exc:
                findings.append(Finding(name, False, str(exc)))
    return findings


async def _histories(url: str, tables: TableNames, store: SessionStore) -> Finding:
    """The sessions whose history the model API would refuse, and those that do not read."""
    unhealthy, unreadable, count = [], [], 0
    async for session_id in every_session(store):
        count += 1
        try:
            if not (await store.session(session_id).check()).ok:
                unhealthy.append(session_id)
        except AgentsSQLAlchemyError:
            unreadable.append(session_id)
    if unreadable:
        return Finding(
            "histories",
            False,
            f"{counted(len(unreadable), 'session')} of {count} do not read (a row altered "
            f"outside the library): {_some(unreadable)}",
            f"{tables.command_line('show', shown(url), program=REPAIR)} ID (to see why)",
        )
    if unhealthy:
        return Finding(
            "histories",
            False,
            f"{counted(len(unhealthy), 'session')} of {count} "
            f"{'holds' if len(unhealthy) == 1 else 'hold'} a history the model API "
            "would refuse (see `sessions check`)",
            repair_command(tables.command_line("repair", shown(url), program=REPAIR), unhealthy),
        )
    return Finding("histories", True, f"{counted(count, 'session')}, all healthy")


def _some(session_ids: list[str]) -> str:
    """The first five ids, quoted, and '...' if there are more."""
    more = " ..." if len(session_ids) > 5 else ""
    return " ".join(clean(repr(session_id)) for session_id in session_ids[:5]) + more


REPAIR = "agents-sqlalchemy sessions"


async def _embedder(
    url: str, tables: TableNames, store: SessionStore, embedder_name: str | None
) -> Finding:
    indexed = await store.indexed_model()
    if indexed is None:
        return Finding("embedder", True, "nothing indexed yet")
    if embedder_name:
        embedder, which = load_embedder(embedder_name), f"--embedder {embedder_name}"
    else:  # what a store opened without embedder= takes
        embedder = builtin_indexing_as(indexed) or HashingEmbedder()
        which = "a store given no embedder"
    expected = index_id(embedder.model_id)
    if indexed == expected:
        return Finding("embedder", True, f"items indexed with {indexed}, as {which} indexes")
    name = embedder_name or "NAME"
    return Finding(
        "embedder",
        False,
        f"items were indexed with {indexed}, not {expected} ({which}): searches with it find "
        "the older items by keyword only",
        f"{tables.command_line('', shown(url), program='agents-sqlalchemy reindex')} "
        f"--embedder {name} (or give the application the embedder {indexed})",
    )


async def _unindexed(
    url: str, tables: TableNames, store: SessionStore, embedder_name: str | None
) -> Finding:
    """Live items without a row of the index's model: a search indexes 2,000 of its scope's
    at most, so after a load with search off, or a writer that died before its indexing,
    the rest are found by no search."""
    model = await store.indexed_model()
    if model is None:
        embedder = load_embedder(embedder_name) if embedder_name else HashingEmbedder()
        model = index_id(embedder.model_id)
    async with _services(url, tables) as services:
        await services.opener.schema_ready()
        missing = await services.search_index.count_unindexed(model, Scope())
    if not missing:
        return Finding("index", True, f"every live item is indexed with {model}")
    return Finding(
        "index",
        False,
        f"{counted(missing, 'live item')} not indexed with {model}: found by no search until "
        "indexed (a load with search off, or a writer stopped before its indexing)",
        tables.command_line("", shown(url), program="agents-sqlalchemy reindex")
        + (f" --embedder {embedder_name}" if embedder_name else ""),
    )


async def _sdk_history(url: str, tables: TableNames) -> Finding:
    if SDK_MESSAGES in (tables.sessions_table, tables.items_table):
        return Finding("sdk tables", True, f"{SDK_MESSAGES} is this library's own table here")
    async with _services(url, tables) as services:
        await services.opener.schema_ready()
        ids = await services.imports.sdk_session_ids(SDK_MESSAGES)
        hashes = {SessionKey.of(session_id).hash: session_id for session_id in ids}
        known = await services.imports.known_hashes(list(hashes))
    if not ids:
        return Finding("sdk tables", True, f"no {SDK_MESSAGES} history beside these tables")
    missing = [session_id for digest, session_id in hashes.items() if digest not in known]
    if not missing:
        return Finding("sdk tables", True, f"every session of {SDK_MESSAGES} was imported")
    where = shown(url)
    return Finding(
        "sdk tables",
        False,
        f"{SDK_MESSAGES} holds {counted(len(missing), 'session')} not imported into these "
        "tables (an import skips those already there)",
        tables.command_line(f"--from '{where}'", where, program=IMPORT_COMMAND),
    )


@click.command("doctor")
@click.option(
    "--embedder",
    "embedder_name",
    type=click.Choice(BUILTIN_EMBEDDERS),
    default=None,
    help="The embedder the application uses [default: the built-in default, hashing].",
)
@key_options
@database_options
def command(url: str, tables: TableNames, key: Key | None, embedder_name: str | None) -> None:
    """Check in one go what a deployment gets wrong: the schema's revision and prefix, the
    key, the embedder against the indexed model, the Agents SDK's tables holding sessions
    not imported, and histories the model API would refuse. Each finding comes with the
    command that fixes it; exits 1 if there is any. Nothing is written.

    \b
    Example:
      AGENTS_SQLALCHEMY_KEY=... agents-sqlalchemy doctor --url agent.db
    """
    try:
        findings = run(diagnose(url, tables, key, embedder_name))
    except AgentsSQLAlchemyError as exc:  # pragma: no cover - run() turns these into errors
        raise click.ClickException(str(exc)) from exc
    click.echo(f"Checking {shown(url)}")
    for finding in findings:
        mark = (
            click.style("ok     ", fg="green") if finding.ok else click.style("PROBLEM", fg="red")
        )
        click.echo(f"  {mark}  {finding.check:<11} {clean(finding.detail)}")
        if finding.fix:
            click.echo(f"           {'':<11} fix: {finding.fix}")
    problems = [finding for finding in findings if not finding.ok]
    if problems:
        click.echo(f"{counted(len(problems), 'problem')} found")
        raise SystemExit(1)
    click.echo("No problems found")
