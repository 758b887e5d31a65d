"""Inputs that used to fail late or obscurely now get a clear error of ours, or work, on every
dialect: session ids holding NUL, integers JSON readers refuse, purge durations, forged list
cursors, unbounded timeouts, and the index worker at interpreter exit."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from agents_sqlalchemy import ConfigurationError, ItemError, SessionStore
from agents_sqlalchemy.validation import MAX_INT_DIGITS

from .support.items import ASSISTANT, USER

KEYS = [None, "passphrase"]


@pytest.mark.parametrize("key", KEYS, ids=["plain", "sealed"])
async def test_session_ids_with_nul_round_trip(db_url: str, key: str | None) -> None:
    """Ids with NUL (and the escape character PostgreSQL's form uses) are kept apart,
    read back, listed and deleted as given."""
    ids = ["a\x00b", "a", "a\x00", "\x00", "x\uffff0y", "x\x00y", "\uffff\uffff\x00"]
    async with SessionStore(db_url, create_tables=True, key=key, search=False) as store:
        for number, session_id in enumerate(ids):
            await store.session(session_id).add_items([{"role": "user", "content": str(number)}])
        for number, session_id in enumerate(ids):
            items = await store.session(session_id).get_items()
            assert items == [{"role": "user", "content": str(number)}]
        listed = {info.session_id for info in await store.list_sessions(limit=100)}
        assert listed == set(ids)
        info = await store.session_info("a\x00b")
        assert info is not None and info.session_id == "a\x00b" and info.item_count == 1
        assert (await store.delete_session("a\x00b")).sessions == 1
        assert await store.session("a").get_items() == [{"role": "user", "content": "1"}]
        assert await store.session("a\x00b").get_items() == []


async def test_nul_id_keeps_its_branches_apart(sqlite_url: str) -> None:
    """A session whose id is another's id plus NUL and "branches" is not that one's
    companion row (the hashes of the two kinds of rows never meet)."""
    async with SessionStore(sqlite_url, create_tables=True, search=False) as store:
        first = store.session("s")
        await first.add_items([USER, ASSISTANT])
        await first.create_branch_from_turn(1, "retry")
        await first.add_items([{"role": "user", "content": "on the branch"}])
        other = store.session("s\x00branches")
        assert await other.get_items() == []
        await other.add_items([{"role": "user", "content": "other"}])
        assert await first.get_items() == [{"role": "user", "content": "on the branch"}]
        assert await other.get_items() == [{"role": "user", "content": "other"}]


@pytest.mark.parametrize("key", KEYS, ids=["plain", "sealed"])
async def test_integers_beyond_json_readers_are_refused(db_url: str, key: str | None) -> None:
    """An integer of more than 4,300 digits is an `ItemError` at `add_items` (nothing
    written); one of 4,300 digits round-trips."""
    largest = -(10**MAX_INT_DIGITS - 1)
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        session = store.session("big")
        for item in (
            {"role": "user", "content": "x", "n": 10**MAX_INT_DIGITS},
            {"role": "user", "content": [{"type": "input_text", "text": "x", "n": -(10**5000)}]},
        ):
            with pytest.raises(ItemError, match="4300 digits"):
                await session.add_items([USER, item])
        assert await session.get_items() == []
        kept = {"role": "user", "content": "y", "n": largest}
        await session.add_items([kept])
        await store.flush()
        assert await session.get_items() == [kept]
        with pytest.raises(ItemError, match="digits"):
            await session.set_state("n", 10**4400)


async def test_purge_inactive_refuses_what_reaches_every_session(db_url: str) -> None:
    """None, zero and negative durations are refused (`delete_all(confirm=True)` is the way
    to remove everything); seconds work as `ttl=` takes them."""
    async with SessionStore(db_url, create_tables=True, search=False) as store:
        await store.session("kept").add_items([USER])
        for bad in (None, timedelta(0), 0, -5, timedelta(seconds=-1), True, "3600"):
            with pytest.raises(ConfigurationError, match="older_than"):
                await store.purge_inactive(bad)  # type: ignore[arg-type]
            with pytest.raises(ConfigurationError, match="older_than"):
                await store.archive_inactive(bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="delete_all"):
            await store.purge_inactive(0)
        assert (await store.purge_inactive(3600)).sessions == 0
        assert await store.archive_inactive(3600.5) == 0
        assert (await store.purge_inactive(timedelta(days=1))).sessions == 0
        assert [info.session_id for info in await store.list_sessions()] == ["kept"]


def _cursor(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


FORGED = [
    _cursor(["2026-01-01T00:00:00+00:00", 10**30]),  # beyond 64 bits
    _cursor(["2026-01-01T00:00:00+00:00", -1]),
    _cursor(["2026-01-01T00:00:00", 5]),  # no zone
    _cursor(["0001-01-01T00:00:00+14:00", 5]),  # out of range once in UTC
    _cursor(["9999-12-31T23:59:59-14:00", 5]),
    _cursor([["2026"], 5]),
    _cursor(["2026-01-01T00:00:00+00:00", 5.5]),
    _cursor(["2026-01-01T00:00:00+00:00", True]),
    _cursor({"a": 1}),
    base64.urlsafe_b64encode(b"[" * 100_000).decode()[:150],
    base64.urlsafe_b64encode(b"[" * 10_000 + b"]" * 10_000).decode(),
    "%%%",
    base64.urlsafe_b64encode(b"\xff\xfe").decode(),
]


async def test_forged_cursors_are_configuration_errors(db_url: str) -> None:
    """A cursor `list_sessions` did not make is a `ConfigurationError` before any query."""
    async with SessionStore(db_url, create_tables=True, search=False) as store:
        for number in range(3):
            await store.session(f"s{number}").add_items([USER])
        page = await store.list_sessions(limit=2)
        assert page.next_cursor is not None
        rest = await store.list_sessions(limit=2, cursor=page.next_cursor)
        assert len(page) + len(rest) == 3
        for cursor in FORGED:
            with pytest.raises(ConfigurationError, match="not a cursor"):
                await store.list_sessions(cursor=cursor)


@pytest.mark.parametrize("option", ["lock_timeout", "statement_timeout"])
@pytest.mark.parametrize("value", [float("inf"), float("nan"), 1e300, 3_000_000])
def test_unbounded_waits_are_configuration_errors(
    sqlite_url: str, option: str, value: float
) -> None:
    with pytest.raises(ConfigurationError, match=option):
        SessionStore(sqlite_url, **{option: value})  # type: ignore[arg-type]


def test_index_worker_is_quiet_at_interpreter_exit(tmp_path: Path) -> None:
    """A process that writes and exits without closing its store logs no traceback of
    the index worker ("cannot schedule new futures after interpreter shutdown")."""
    script = textwrap.dedent(
        f"""
        import asyncio, logging
        from agents_sqlalchemy import SessionStore
        logging.basicConfig(level=logging.WARNING)
        store = SessionStore({str(tmp_path / "exit.db")!r}, create_tables=True)

        async def main():
            for n in range(20):
                await store.session(f"s{{n}}").add_items(
                    [{{"role": "user", "content": f"remember item number {{n}} " * 20}}]
                )

        asyncio.run(main())
        print("done")
        """
    )
    for _ in range(3):
        proc = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr
        assert "done" in proc.stdout
        assert "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("times", [1, 6])
async def test_an_item_over_max_allowed_packet_names_it(mariadb_url: str, times: int) -> None:
    """On MariaDB, a write larger than the server's max_allowed_packet says so (the server
    only closes the connection), and nothing is written. Six times over (about 100 MB) the
    refusal may come while asyncmy is still sending, which then reads the reply out of turn
    ("Packet sequence number wrong", seen in 5 runs of 6 on a loaded machine): the same."""
    from sqlalchemy import text

    from agents_sqlalchemy import DatabaseError

    async with SessionStore(mariadb_url, create_tables=True, search=False) as store:
        async with store.engine.connect() as conn:
            limit = (await conn.execute(text("SELECT @@max_allowed_packet"))).scalar_one()
        session = store.session("big")
        huge = {"role": "user", "content": "x" * (int(limit) * times + 1_000_000)}
        with pytest.raises(DatabaseError, match="max_allowed_packet"):
            await session.add_items([USER, huge])
        assert await session.get_items() == []
        await session.add_items([USER])
        assert await session.get_items() == [USER]
