"""The `agents-sqlalchemy` command line run in-process, without the caller's key settings."""

from __future__ import annotations

from collections.abc import Mapping

from click.testing import CliRunner, Result

from agents_sqlalchemy.cli import app

NO_KEY: dict[str, str | None] = {"AGENTS_SQLALCHEMY_KEY": None}
NO_KEYS: dict[str, str | None] = {"AGENTS_SQLALCHEMY_KEY": None, "AGENTS_SQLALCHEMY_NEW_KEY": None}


def cli(*args: str, env: dict[str, str | None] | None = None, input: str | None = None) -> Result:
    """Run the command; an exception it raises propagates (a test sees its traceback)."""
    return CliRunner().invoke(
        app, list(args), env={**NO_KEY, **(env or {})}, input=input, catch_exceptions=False
    )


def invoke(
    *args: str, env: Mapping[str, str | None] | None = None, input: str | None = None
) -> Result:
    """Run the command as a user would: an exception ends it with a non-zero exit code, and
    neither the key nor the new key of the caller's environment is seen."""
    return CliRunner().invoke(app, list(args), env={**NO_KEYS, **(env or {})}, input=input)
