"""One key option for every command that opens an encrypted database: a passphrase, a raw
32-byte key in hex or base64, or a key provider named by import path."""

from __future__ import annotations

import asyncio
import base64
import os
import sys
import uuid
from pathlib import Path

import click
import pytest

from agents_sqlalchemy import SessionStore
from agents_sqlalchemy.cli import app
from agents_sqlalchemy.crypto import Key

from .support.cli import invoke
from .support.items import message

PROVIDER_MODULE = '''
from cryptography.hazmat.primitives.keywrap import aes_key_unwrap, aes_key_wrap

SECRET = bytes(range(32))


class LocalProvider:
    """A stand-in for a KMS: the key stays in this module."""

    kek_id = "local/test-key"

    def wrap(self, data_key):
        return aes_key_wrap(SECRET, data_key)

    def unwrap(self, wrapped):
        return aes_key_unwrap(SECRET, wrapped)


provider = LocalProvider()


def make_provider():
    return LocalProvider()


def failing_factory():
    raise RuntimeError("the vault is sealed")


class BadKekId(LocalProvider):
    @property
    def kek_id(self):
        raise RuntimeError("no key id today")


bad_kek_id = BadKekId()
'''

BROKEN_MODULE = 'raise RuntimeError("this module does not import")\n'

KEY_COMMANDS = [
    ("sessions", "list"),
    ("sessions", "show"),
    ("sessions", "delete"),
    ("sessions", "purge"),
    ("search",),
    ("reindex",),
    ("import-sdk",),
    ("rotate-key",),
]


async def seed(url: str, key: Key) -> None:
    async with SessionStore(url, create_tables=True, key=key) as store:
        await store.session("s1", user_id="alice", metadata={"tier": 2}).add_items(
            [message("sealed words")]
        )


def test_every_command_with_a_key_takes_the_same_options() -> None:
    for path in KEY_COMMANDS:
        command: click.Command = app
        for name in path:
            assert isinstance(command, click.Group)
            command = command.commands[name]
        options = {opt for param in command.params for opt in getattr(param, "opts", [])}
        assert {"--key-env", "--key-format", "--key-provider"} <= options, path
    rotate = app.commands["rotate-key"]
    options = {opt for param in rotate.params for opt in getattr(param, "opts", [])}
    assert {"--new-key-env", "--new-key-format", "--new-key-provider"} <= options


@pytest.mark.parametrize("form", ["hex", "base64"])
def test_raw_keys_in_hex_or_base64(sqlite_url: str, form: str) -> None:
    raw = os.urandom(32)
    asyncio.run(seed(sqlite_url, raw))
    text = raw.hex() if form == "hex" else base64.b64encode(raw).decode()
    shown = invoke(
        "sessions", "show", "s1", "--url", sqlite_url, "--key-format", form,
        env={"AGENTS_SQLALCHEMY_KEY": text},
    )  # fmt: skip
    assert shown.exit_code == 0, shown.output
    assert "sealed words" in shown.output and text not in shown.output
    found = invoke(
        "search", "sealed", "--url", sqlite_url, "--key-format", form,
        env={"AGENTS_SQLALCHEMY_KEY": text},
    )  # fmt: skip
    assert found.exit_code == 0 and "sealed words" in found.output, found.output
    bad = invoke(
        "sessions", "show", "s1", "--url", sqlite_url, "--key-format", form,
        env={"AGENTS_SQLALCHEMY_KEY": "not-a-key!"},
    )  # fmt: skip
    assert bad.exit_code == 2 and form in bad.output, bad.output


def test_a_key_provider_by_import_path(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"kms_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(PROVIDER_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    asyncio.run(seed(sqlite_url, _load(tmp_path, name)))
    for spec in (f"{name}:provider", f"{name}:make_provider", f"{name}:LocalProvider"):
        shown = invoke("sessions", "show", "s1", "--url", sqlite_url, "--key-provider", spec)
        assert shown.exit_code == 0, (spec, shown.output)
        assert "sealed words" in shown.output
    (tmp_path / f"{name}_broken.py").write_text(BROKEN_MODULE)
    # Each was a traceback: a module failing at import, a factory failing, a kek_id raising.
    failing = (f"{name}_broken:x", f"{name}:failing_factory", f"{name}:bad_kek_id")
    for bad in (f"{name}", f"{name}:nothing", "no_such_module_here:x", f"{name}:SECRET", *failing):
        result = invoke("sessions", "show", "s1", "--url", sqlite_url, "--key-provider", bad)
        assert result.exit_code == 2 and "--key-provider" in result.output, (bad, result.output)
        assert isinstance(result.exception, SystemExit), (bad, result.exception)
    both = invoke(
        "sessions", "show", "s1", "--url", sqlite_url,
        "--key-provider", f"{name}:provider", "--key-env", "X", env={"X": "y"},
    )  # fmt: skip
    assert both.exit_code == 2 and "--key-provider" in both.output


def _load(directory: Path, name: str) -> Key:
    sys.path.insert(0, str(directory))
    module = __import__(name)
    provider: Key = module.provider
    return provider


@pytest.mark.slow
def test_sessions_list_needs_no_key(db_url: str) -> None:
    asyncio.run(seed(db_url, "correct horse"))
    listed = invoke("sessions", "list", "--url", db_url)
    assert listed.exit_code == 0, listed.output
    assert "s1" in listed.output and "alice" in listed.output and "tier=2" in listed.output
    wrong = invoke("sessions", "list", "--url", db_url, env={"AGENTS_SQLALCHEMY_KEY": "wrong"})
    assert wrong.exit_code == 1 and "wrong key" in wrong.output
    shown = invoke("sessions", "show", "s1", "--url", db_url)  # the transcript is sealed
    assert shown.exit_code == 1 and "is encrypted" in shown.output
