"""The session manager: minting sessions, archiving instead of deleting, restoring, and
deleting everything on purpose; from Python and from the command line."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta

import pytest
from click.testing import CliRunner, Result

from agents_sqlalchemy import ConfigurationError, Removed, SessionStore
from agents_sqlalchemy.cli import app

from .support.clock import travel
from .support.items import message


def ids(page: list) -> list[str]:  # type: ignore[type-arg]
    return [info.session_id for info in page]


async def test_create_session_mints_a_fresh_unguessable_id(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = await store.create_session(user_id="alice", metadata={"channel": "web"})
        # 128 bits, URL-safe, and never a leading "-" (1 id in 64 was, which the command
        # line took for an option)
        assert re.fullmatch(r"[0-9a-f]{32}", session.session_id)
        [info] = await store.list_sessions(user_id="alice")  # listed before any item
        assert (info.session_id, info.metadata, info.item_count) == (
            session.session_id,
            {"channel": "web"},
            0,
        )
        await session.add_items([message("hi")])
        assert await store.session(session.session_id).get_items() == [message("hi")]
        others = {(await store.create_session()).session_id for _ in range(50)}
        assert len(others) == 50 and session.session_id not in others
        assert not any(other.startswith("-") for other in others)
        with pytest.raises(ConfigurationError, match="user id"):
            await store.create_session(user_id="")


async def test_archive_inactive_keeps_items_and_restores(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        for name in ("old-1", "old-2"):
            await store.session(name, user_id="alice").add_items([message(name)])
        travel(monkeypatch, timedelta(days=40))
        await store.session("recent", user_id="alice").add_items([message("recent")])
        assert await store.archive_inactive(older_than=timedelta(days=30)) == 2
        assert await store.archive_inactive(older_than=timedelta(days=30)) == 0  # once
        assert ids(await store.list_sessions()) == ["recent"]
        assert sorted(ids(await store.list_sessions(archived=True))) == ["old-1", "old-2"]
        assert len(await store.list_sessions(archived=None)) == 3
        info = await store.session_info("old-1")
        assert info is not None and info.archived_at is not None and info.item_count == 1
        assert await store.session("old-1").get_items() == [message("old-1")]  # items kept

        assert await store.restore_session("old-1") is True
        assert await store.restore_session("old-1") is False  # not archived any more
        assert await store.restore_session("never-was") is False
        assert sorted(ids(await store.list_sessions())) == ["old-1", "recent"]
        assert (await store.session_info("old-1")).archived_at is None  # type: ignore[union-attr]
        assert await store.archive_session("recent") is True
        assert ids(await store.list_sessions()) == ["old-1"]
        with pytest.raises(ConfigurationError):
            await store.archive_inactive(older_than=timedelta(0))


async def test_erasure_and_ttl_still_apply_to_archived_sessions(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        await store.session("a", user_id="alice", ttl=60).add_items([message("expires")])
        await store.session("b", user_id="bob").add_items([message("stays")])
        travel(monkeypatch, timedelta(days=2))
        assert await store.archive_inactive(older_than=timedelta(days=1)) == 2
        assert await store.purge_expired() == 1  # TTL: the archived item expired
        assert (await store.session_info("a")).item_count == 0  # type: ignore[union-attr]
        assert await store.delete_user("alice") == Removed(sessions=1, items=0)
        assert ids(await store.list_sessions(archived=None)) == ["b"]
        assert await store.purge_inactive(older_than=timedelta(days=1)) == Removed(1, 1)
        assert await store.list_sessions(archived=None) == []


async def test_delete_all_needs_confirmation(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        for name in ("a", "b", "c"):
            await store.session(name).add_items([message(name), message("2")])
        await store.archive_session("c")
        for refused in ({}, {"confirm": False}, {"confirm": "yes"}):
            with pytest.raises(ConfigurationError, match="confirm=True"):
                await store.delete_all(**refused)  # type: ignore[arg-type]
        assert len(await store.list_sessions(archived=None)) == 3
        assert await store.delete_all(confirm=True) == Removed(sessions=3, items=6)
        assert await store.list_sessions(archived=None) == []


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"AGENTS_SQLALCHEMY_KEY": None})


def test_cli_archive_and_restore(sqlite_url: str) -> None:
    async def seed() -> None:
        async with SessionStore(sqlite_url, create_tables=True) as store:
            for name in ("a", "b", "c"):
                await store.session(name).add_items([message(name)])

    asyncio.run(seed())
    archived = cli("sessions", "archive", "a", "b", "missing", "--url", sqlite_url)
    assert archived.exit_code == 1, archived.output  # "missing" was not there
    assert "Archived 2 sessions" in archived.output and "missing" in archived.output
    listed = cli("sessions", "list", "--url", sqlite_url)
    assert "c" in listed.output.split() and "a" not in listed.output.split()
    only = cli("sessions", "list", "--archived", "--url", sqlite_url)
    assert {"a", "b"} <= set(only.output.split()) and "c" not in only.output.split()
    shown = cli("sessions", "show", "a", "--url", sqlite_url)
    assert "Archived" in shown.output, shown.output
    restored = cli("sessions", "restore", "a", "--url", sqlite_url)
    assert restored.exit_code == 0 and "Restored 1 session" in restored.output
    none_yet = cli("sessions", "archive", "--inactive-days", "30", "--yes", "--url", sqlite_url)
    assert none_yet.exit_code == 0 and "Archived 0 sessions" in none_yet.output
    usage = cli("sessions", "archive", "--url", sqlite_url)
    assert usage.exit_code == 2
