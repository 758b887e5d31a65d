"""`agents-sqlalchemy db ...`: the library's schema, through its shipped Alembic migrations.

Example::

    agents-sqlalchemy db upgrade --url postgresql://app@db/app --prefix chat_
    agents-sqlalchemy db check --url agent.db || echo "run db upgrade"
"""

from __future__ import annotations

import click

from ..database.engines import normalize_url
from ..migrations import api as migrate
from ..tables import TableNames
from .options import database_options, missing_sqlite_file, run, shown

# Offline, nothing tells MariaDB from MySQL but the URL; their collations differ.
MYSQL_OFFLINE = (
    "note: this is MySQL's SQL (a mysql:// URL); MariaDB refuses its collation "
    "utf8mb4_0900_bin: for MariaDB, give a mariadb:// URL"
)


def status_of(url: str, tables: TableNames) -> migrate.SchemaStatus:
    """Where the schema stands; a SQLite file that does not exist is read as "missing",
    without creating it."""
    if missing_sqlite_file(url) is not None:
        return migrate.SchemaStatus("missing", (), migrate.head_revision(), tables)
    return run(migrate.check(url, tables=tables))


@click.group("db")
def command() -> None:
    """Create, upgrade, inspect or remove the library's tables (Alembic migrations).

    The migrations keep their own version table (PREFIX + "version"), never the
    application's alembic_version.
    """


@command.command()
@click.argument("revision", default="head")
@click.option(
    "--sql",
    is_flag=True,
    help="Print the SQL instead of running it (offline mode). For MariaDB give a mariadb:// "
    "URL: offline, mysql:// gets MySQL's SQL, which MariaDB refuses.",
)
@database_options(may_create=True)
def upgrade(url: str, tables: TableNames, revision: str, sql: bool) -> None:
    """Migrate the tables up to REVISION (default: head), creating them if needed."""
    if sql:
        run(migrate.upgrade_sql(url, revision, tables=tables))
        if normalize_url(url).get_backend_name() == "mysql":
            click.echo(MYSQL_OFFLINE, err=True)
        return

    async def upgrading() -> tuple[migrate.SchemaStatus, migrate.SchemaStatus]:
        before = await migrate.upgrade(url, revision, tables=tables)  # as found, locked
        return before, await migrate.check(url, tables=tables)

    before, after = run(upgrading())
    if before.found == after.found:
        click.echo(f"{shown(url)}: already {after.describe()}, nothing to do")
    else:
        click.secho(f"{shown(url)}: upgraded from {before.found_text} to ", nl=False)
        click.secho(after.describe().removeprefix("at revision "), fg="green")


@command.command(context_settings={"ignore_unknown_options": True})
@click.argument("revision")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@database_options
def downgrade(url: str, tables: TableNames, revision: str, yes: bool) -> None:
    """Migrate the tables down to REVISION: a revision id, -1 (one step), or "base"
    (removes every table of the library)."""
    if not yes:
        click.confirm(
            f"Downgrade {shown(url)} to {revision}? Tables dropped lose their rows (below "
            "0002, refused while owner keys are kept: the sealed items would never open again)",
            abort=True,
            err=True,
        )
    before = run(migrate.check(url, tables=tables))
    run(migrate.downgrade(url, revision, tables=tables))
    after = run(migrate.check(url, tables=tables))
    click.echo(f"{shown(url)}: downgraded from {before.found_text} to {after.found_text}")


@command.command()
@click.argument("revision", default="head")
@database_options
def stamp(url: str, tables: TableNames, revision: str) -> None:
    """Record REVISION as applied without running it (tables made by other means)."""
    run(migrate.stamp(url, revision, tables=tables))
    click.echo(f"{shown(url)}: stamped {revision}")


@command.command()
@database_options
def current(url: str, tables: TableNames) -> None:
    """Show the revision the database is at, and the one this version expects (a SQLite
    file that does not exist is said to be missing, and not made)."""
    status = status_of(url, tables)
    click.echo(f"{shown(url)}: {status.describe()}")
    if status.state == "missing" and status.others:
        found = ", ".join(
            f"{name} (--prefix {name.removesuffix('version')})" for name in status.others
        )
        click.echo(f"this library's tables are there under other names: {found}")


@command.command()
@database_options(may_create=True)
def check(url: str, tables: TableNames) -> None:
    """Exit with status 0 if the schema is at head, 1 otherwise (and say what to run)."""
    status = status_of(url, tables)
    if status.at_head:
        click.secho(f"{shown(url)}: {status.describe()}", fg="green")
        return
    click.secho(f"{shown(url)}: {status.describe()}", fg="yellow", err=True)
    click.echo(status.error(shown(url)).cli_message, err=True)
    raise SystemExit(1)
