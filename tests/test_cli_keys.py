"""`agents-sqlalchemy rotate-key`, and `import-sdk` into an encrypted database."""

from __future__ import annotations

import asyncio
import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest
from agents import SQLiteSession

from agents_sqlalchemy import SessionStore, import_sdk
from agents_sqlalchemy.crypto import Key
from agents_sqlalchemy.errors import WrongKeyError
from agents_sqlalchemy.migrations import api as migrate
from agents_sqlalchemy.services import keys as keys_module

from .support.cli import invoke
from .support.disk import on_disk, sqlite_path
from .support.items import message
from .support.sealed import ITEM_MARKER, MARKERS, as_bytes, secret_items
from .support.tables import ITEMS, dump, raw_rows

OLD, NEW = "the old passphrase", "the new passphrase"


async def seed(url: str, key: Key, sessions: int = 3) -> dict[str, list[Any]]:
    expected = {f"s{n}": secret_items(str(n)) for n in range(sessions)}
    async with SessionStore(url, create_tables=True, key=key) as store:
        for session_id, items in expected.items():
            await store.session(session_id).add_items(items)
    return expected


async def read_back(url: str, key: Key, names: list[str]) -> dict[str, list[Any]]:
    async with SessionStore(url, key=key) as store:
        return {name: await store.session(name).get_items() for name in names}


async def add_and_read(url: str, key: Key, session_id: str, item: Any) -> None:
    async with SessionStore(url, key=key) as store:
        await store.session(session_id).add_items([item])
        assert (await store.session(session_id).get_items())[-1] == item


# -- rotate-key ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_rotate_key_with_keys_from_the_environment(db_url: str) -> None:
    expected = asyncio.run(seed(db_url, OLD))
    count = sum(len(items) for items in expected.values())
    before = {
        bytes(w) for (w,) in asyncio.run(raw_rows(db_url, f"SELECT wrapped_key FROM {ITEMS}"))
    }

    result = invoke(
        "rotate-key",
        "--url",
        db_url,
        "--batch-size",
        "4",
        env={"AGENTS_SQLALCHEMY_KEY": OLD, "AGENTS_SQLALCHEMY_NEW_KEY": NEW},
    )
    assert result.exit_code == 0, result.output
    assert "Re-wrapping data keys" in result.output  # the progress bar's label
    assert f"Re-wrapped {count} data keys" in result.output
    assert "only the new key opens" in result.output
    assert OLD not in result.output and NEW not in result.output

    after = {bytes(w) for (w,) in asyncio.run(raw_rows(db_url, f"SELECT wrapped_key FROM {ITEMS}"))}
    assert len(after) == count and not before & after
    assert asyncio.run(read_back(db_url, NEW, list(expected))) == expected
    with pytest.raises(WrongKeyError):
        asyncio.run(read_back(db_url, OLD, list(expected)))


@pytest.mark.slow
def test_rotate_key_prompts_without_echo_and_takes_raw_keys(sqlite_url: str) -> None:
    old, new = os.urandom(32), os.urandom(32)
    expected = asyncio.run(seed(sqlite_url, old))
    typed = f"{old.hex()}\n{new.hex()}\n{new.hex()}\n"
    result = invoke(
        "rotate-key",
        "--url",
        sqlite_url,
        "--key-format",
        "hex",
        "--new-key-format",
        "hex",
        "--no-progress",
        input=typed,
    )
    assert result.exit_code == 0, result.output
    assert "Current key: " in result.output and "Repeat for confirmation: " in result.output
    assert old.hex() not in result.output and new.hex() not in result.output
    assert "Re-wrapping data keys" not in result.output  # --no-progress
    assert asyncio.run(read_back(sqlite_url, new, list(expected))) == expected

    # From the raw key to a passphrase, named variables, the new key in base64 first.
    env = {"APP_OLD": base64.b64encode(new).decode(), "APP_NEW": NEW}
    options = ["--key-env", "APP_OLD", "--new-key-env", "APP_NEW", "--key-format", "base64"]
    result = invoke("rotate-key", "--url", sqlite_url, *options, env=env)
    assert result.exit_code == 0, result.output
    assert asyncio.run(read_back(sqlite_url, NEW, list(expected))) == expected


@pytest.mark.slow
def test_rotate_key_refuses_bad_input_and_changes_nothing(sqlite_url: str) -> None:
    asyncio.run(seed(sqlite_url, OLD, sessions=1))
    before = asyncio.run(dump(sqlite_url))
    url = ["--url", sqlite_url]

    def env(current: str) -> dict[str, str | None]:
        return {"AGENTS_SQLALCHEMY_KEY": current, "AGENTS_SQLALCHEMY_NEW_KEY": NEW}

    wrong = invoke("rotate-key", *url, env=env("not the passphrase"))
    assert wrong.exit_code == 1 and "wrong key" in wrong.output
    same = invoke("rotate-key", *url, env=env(NEW))
    assert same.exit_code == 2 and "the new key is the current key" in same.output
    unset = invoke("rotate-key", *url, "--new-key-env", "APP_UNSET", env=env(OLD))
    assert unset.exit_code == 2 and "APP_UNSET is not set" in unset.output
    no_input = invoke("rotate-key", *url, env={"AGENTS_SQLALCHEMY_KEY": OLD}, input="")
    assert no_input.exit_code == 1 and "Aborted" in no_input.output
    for bad, error in (("zz", "not hex"), ("ab", "32 bytes")):
        raw = invoke("rotate-key", *url, "--key-format", "hex", env=env(bad))
        assert raw.exit_code == 2 and error in raw.output
    on_argv = invoke("rotate-key", *url, "--key", OLD)
    assert on_argv.exit_code == 2 and "No such option" in on_argv.output
    assert asyncio.run(dump(sqlite_url)) == before


class Interrupted(Exception):
    """Stands for a crash half-way through a rotation."""


def test_an_interrupted_rotate_key_resumes_when_run_again(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = os.urandom(32).hex(), os.urandom(32).hex()
    expected = asyncio.run(seed(sqlite_url, bytes.fromhex(old)))
    count = sum(len(items) for items in expected.values())
    env = {"AGENTS_SQLALCHEMY_KEY": old, "AGENTS_SQLALCHEMY_NEW_KEY": new}
    options = ["--url", sqlite_url, "--key-format", "hex", "--new-key-format", "hex"]
    real, calls = keys_module.rewrap_many, []

    def failing(wrapped: list[bytes], *keks: Any) -> list[bytes]:
        calls.append(len(wrapped))
        if len(calls) > 1:
            raise Interrupted
        return real(wrapped, *keks)

    monkeypatch.setattr(keys_module, "rewrap_many", failing)
    crashed = invoke("rotate-key", *options, "--batch-size", "5", env=env)
    assert isinstance(crashed.exception, Interrupted)
    monkeypatch.undo()

    resumed = invoke("rotate-key", *options, "--batch-size", "5", env=env)
    assert resumed.exit_code == 0, resumed.output
    assert f"Re-wrapped {count - 5} data keys" in resumed.output
    assert asyncio.run(read_back(sqlite_url, bytes.fromhex(new), list(expected))) == expected


# -- import-sdk with a key -----------------------------------------------------------------------


async def sdk_source(path: Path) -> dict[str, list[Any]]:
    expected: dict[str, list[Any]] = {}
    for name in ("alice", "bob"):
        session = SQLiteSession(name, path)
        await session.add_items(secret_items(name))
        expected[name] = await session.get_items()
        session.close()
    return expected


@pytest.mark.slow
def test_import_sdk_with_a_key_seals_every_item(db_url: str, tmp_path: Path) -> None:
    source = tmp_path / "conversations.db"
    expected = asyncio.run(sdk_source(source))
    texts = [
        json.dumps(item, ensure_ascii=False, separators=(",", ":"))
        for items in expected.values()
        for item in items
    ]
    asyncio.run(migrate.upgrade(db_url))
    asyncio.run(seed(db_url, OLD, sessions=1))  # an encrypted database already in use

    refused = invoke("import-sdk", "--from", str(source), "--url", db_url)
    assert refused.exit_code == 1 and "encrypted" in refused.output  # no key: nothing written
    assert (
        asyncio.run(
            raw_rows(db_url, "SELECT * FROM agents_sqlalchemy_sessions WHERE session_id = 'alice'")
        )
        == []
    )

    result = invoke(
        "import-sdk", "--from", str(source), "--url", db_url, env={"AGENTS_SQLALCHEMY_KEY": OLD}
    )
    assert result.exit_code == 0, result.output
    assert "Imported 2 sessions" in result.output
    assert asyncio.run(read_back(db_url, OLD, list(expected))) == expected

    tables = asyncio.run(dump(db_url))
    cells = [as_bytes(value) for rows in tables.values() for row in rows for value in row]
    for needle in (*MARKERS, *texts):
        assert not [cell for cell in cells if needle.encode() in cell], needle
    rows = asyncio.run(
        raw_rows(db_url, f"SELECT payload, ciphertext, wrapped_key, kek_id FROM {ITEMS}")
    )
    assert rows and all(payload is None and isinstance(c, bytes) for payload, c, _, _ in rows)
    assert all(len(bytes(w)) == 40 and kek for _, _, w, kek in rows)  # each its own key
    if sqlite_path(db_url) is not None:
        assert ITEM_MARKER.encode() not in on_disk(db_url)

    again = asyncio.run(import_sdk(source, db_url, key=OLD))
    assert (again.sessions, again.skipped_sessions) == (0, 2)
    asyncio.run(add_and_read(db_url, OLD, "alice", message("after the import")))


def test_import_sdk_with_a_raw_key_into_a_new_database(sqlite_url: str, tmp_path: Path) -> None:
    source = tmp_path / "conversations.db"
    expected = asyncio.run(sdk_source(source))
    asyncio.run(migrate.upgrade(sqlite_url))
    key = os.urandom(32)
    report = asyncio.run(import_sdk(source, sqlite_url, key=key))
    assert (report.sessions, report.items) == (2, sum(len(v) for v in expected.values()))
    assert asyncio.run(read_back(sqlite_url, key, list(expected))) == expected
    with pytest.raises(WrongKeyError):
        asyncio.run(import_sdk(source, sqlite_url, key=os.urandom(32)))
    with pytest.raises(WrongKeyError):
        asyncio.run(import_sdk(source, sqlite_url))
