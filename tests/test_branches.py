"""Branches on SQLite and PostgreSQL: shared items, what each line sees, removal, concurrency."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.util import await_only

from agents_sqlalchemy import BranchError, ConfigurationError, SessionStore, TableNames
from agents_sqlalchemy.repository import prepared
from agents_sqlalchemy.repository.branches import MAIN_PAGE
from agents_sqlalchemy.repository.schema import ARRAY_ROWS

from .support.clock import travel
from .support.items import ALL, message
from .support.processes import finish, spawn
from .support.tables import raw_rows

P = "agents_sqlalchemy_"


def reply(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def turn(n: int, answer: str = "answer") -> list[dict[str, Any]]:
    """One user turn: the question and an answer."""
    return [message(f"question {n}"), reply(f"{answer} {n}")]


def contents(items: list[Any]) -> list[str]:
    return [item["content"] for item in items]


async def counts(url: str) -> dict[str, int]:
    """Rows per table of the library (the version table aside)."""
    tables = ("sessions", "items", "branches", "branch_items", "turn_usage")
    found = {}
    for table in tables:
        [(count,)] = await raw_rows(url, f"SELECT COUNT(*) FROM {P}{table}")
        found[table] = int(str(count))
    return found


@pytest.mark.parametrize("key", [None, "a passphrase"], ids=["plaintext", "encrypted"])
async def test_the_turns_of_a_history_of_several_pages(db_url: str, key: str | None) -> None:
    """PostgreSQL derives a long history's turns from its items read as arrays, `MAIN_PAGE`
    a statement: past one page, again in one snapshot, so that a writer meanwhile is seen
    whole or not at all. Every dialect numbers them alike."""
    count = MAIN_PAGE * 2 + 7

    def item(n: int) -> dict[str, Any]:
        return message(f"question {n}") if n % 3 == 0 else reply(f"answer {n}")

    async with SessionStore(db_url, create_tables=True, key=key, search=False) as store:
        session = store.session("long", user_id="u")
        await session.add_items([item(n) for n in range(count)])
        more = turn(0)
        by_turns, _ = await asyncio.gather(
            session.get_conversation_by_turns(), session.add_items(more)
        )
        users = (count + 2) // 3  # the items 0, 3, 6, ... open a turn each
        kinds = {n: [d["type"] for d in described] for n, described in by_turns.items()}
        assert list(kinds)[:users] == list(range(1, users + 1))
        assert all(kinds[n] == ["user", "assistant", "assistant"] for n in range(1, users))
        assert kinds[users] == ["user"] + ["assistant"] * (count - 3 * (users - 1) - 1)
        assert kinds.get(users + 1, ["user", "assistant"]) == ["user", "assistant"]
        assert len(kinds) in (users, users + 1)
        [main] = await session.list_branches()
        assert (main["message_count"], main["user_turns"]) == (count + 2, users + 1)
        asked = await session.get_conversation_turns()
        assert [t["turn"] for t in asked[-2:]] == [users, users + 1]
        assert asked[-1]["content"] == "question 0"
        assert await session.get_tool_usage() == []
        # A branch, and main once branched, read their turns from references, as pages too.
        main_kinds = {
            n: [d["type"] for d in found]
            for n, found in (await session.get_conversation_by_turns()).items()
        }
        await session.create_branch_from_turn(users, "late")
        on_branch, _ = await asyncio.gather(
            session.get_conversation_by_turns(), session.add_items(turn(1))
        )
        assert list(on_branch)[: users - 1] == list(range(1, users))
        assert all(len(on_branch[n]) == 3 for n in range(1, users))
        assert len(on_branch) in (users - 1, users)
        added = [d["type"] for d in on_branch.get(users, [{"type": "user"}, {"type": "assistant"}])]
        assert added == ["user", "assistant"]
        assert [t["turn"] for t in await session.get_conversation_turns()][-1] == users
        by_main = await session.get_conversation_by_turns("main")
        assert {n: [d["type"] for d in found] for n, found in by_main.items()} == main_kinds


async def read_with_a_write_between_pages(
    store: SessionStore, read: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`read` of a session of more than one page, with a write of the session between the
    pages of its second read (in one snapshot): the read does not see it, and it does not
    wait (`lock_timeout` is short)."""
    count = (ARRAY_ROWS if read == "get_items" else MAIN_PAGE) + 5
    session = store.session("long")
    await session.add_items([message(str(n)) for n in range(count)])
    pages: list[str] = []
    execute = prepared._execute

    def between_pages(conn: Connection, sql: str, values: Any) -> list[Any]:
        rows = execute(conn, sql, values)
        if "array_agg" in sql:
            pages.append(sql)
            if len(pages) == 2:  # the first page of the second read, in one snapshot
                late = store.session("long").add_items([message("meanwhile")])
                await_only(asyncio.wait_for(late, 5))
        return rows

    def size(found: Any) -> int:
        return len(found) if read == "get_items" else sum(map(len, found.values()))

    monkeypatch.setattr(prepared, "_execute", between_pages)
    found = await getattr(session, read)()
    monkeypatch.undo()
    assert len(pages) == 3  # one page, more to come: again, in two pages
    assert size(found) == count
    assert size(await getattr(session, read)()) == count + 1


@pytest.mark.dialects("postgresql", "pgbouncer")
@pytest.mark.parametrize("read", ["get_items", "get_conversation_by_turns"])
async def test_a_read_of_several_pages_is_one_snapshot_and_keeps_no_writer_waiting(
    db_url: str, monkeypatch: pytest.MonkeyPatch, read: str
) -> None:
    """PostgreSQL reads a history of more than one page again in one snapshot, where its
    pages agree: a write of the session between two pages is not seen, and does not wait
    (under the session's share lock, as it was read before, it waited for the whole read)."""
    async with SessionStore(db_url, create_tables=True, search=False, lock_timeout=1) as store:
        await read_with_a_write_between_pages(store, read, monkeypatch)


@pytest.mark.parametrize("read", ["get_items", "get_conversation_by_turns"])
async def test_the_snapshot_is_asked_for_as_an_app_engines_transaction_begins(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, read: str
) -> None:
    """An app's engine may run a query as each transaction begins (a tenant's setting and
    an audit row, here), after which PostgreSQL takes no SET TRANSACTION: the snapshot's
    level is named by the BEGIN itself, and it is not READ ONLY, where the audit would fail."""
    engine = create_async_engine(pg_url)
    async with engine.begin() as conn:
        await conn.exec_driver_sql("CREATE TABLE audit (at timestamptz DEFAULT now())")

    @event.listens_for(engine.sync_engine, "begin")
    def tenant(conn: Connection) -> None:
        conn.exec_driver_sql("SELECT set_config('app.tenant', '1', true)")
        conn.exec_driver_sql("INSERT INTO audit DEFAULT VALUES")

    try:
        async with SessionStore(engine, create_tables=True, search=False, lock_timeout=1) as store:
            await read_with_a_write_between_pages(store, read, monkeypatch)
    finally:
        await engine.dispose()


async def test_a_session_that_never_branches_writes_nothing_else(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("plain")
        await session.add_items(turn(1) + turn(2))
        assert contents(await session.get_items(limit=3)) == ["answer 1", "question 2", "answer 2"]
        assert await session.pop_item() == reply("answer 2")
        assert session.current_branch_id == "main"
        # Reading its turns derives them in memory: nothing is written for that either.
        assert [t["turn"] for t in await session.get_conversation_turns()] == [1, 2]
        assert [t["turn"] for t in await session.find_turns_by_content("QUESTION 2")] == [2]
        for call in (session.find_turns_by_content, session.create_branch_from_content):
            with pytest.raises(ConfigurationError, match="a search term is a string"):
                await call(2)  # type: ignore[arg-type]  # was a TypeError from `re`
        assert list(await session.get_conversation_by_turns()) == [1, 2]
        assert [b["user_turns"] for b in await session.list_branches()] == [2]
        assert await session.get_turn_usage() == []
        assert await session.get_session_usage() is None
        assert await counts(db_url) == {
            "sessions": 1,
            "items": 3,
            "branches": 0,
            "branch_items": 0,
            "turn_usage": 0,
        }
        await session.clear_session()
        assert (await counts(db_url))["items"] == 0


async def test_a_branch_shares_the_items_before_its_turn(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("shared", user_id="alice")
        main = turn(1) + turn(2) + turn(3)
        for n in range(0, 6, 2):
            await session.add_items(main[n : n + 2])
        before = await counts(db_url)
        name = await session.create_branch_from_turn(3, "retry")
        assert name == "retry" and session.current_branch_id == "retry"
        after = await counts(db_url)
        # No payload was copied: the branch refers to the four items before turn 3 (and the
        # main line's turns, derived from its six items, are kept beside them).
        assert after["items"] == before["items"] == 6
        assert (before["branch_items"], after["branch_items"]) == (0, 6 + 4)
        assert await session.get_items() == main[:4]

        await session.add_items(turn(3, "other answer"))
        assert contents(await session.get_items()) == [
            *contents(main[:4]),
            "question 3",
            "other answer 3",
        ]
        assert await session.get_items(branch_id="main") == main
        assert await store.session("shared").get_items() == main  # a new object is on main
        assert await session.get_items(limit=1) == [reply("other answer 3")]
        # The branch's own items are not the session's: listing and counts show the main line.
        [info] = await store.list_sessions()
        assert (info.session_id, info.user_id, info.item_count) == ("shared", "alice", 6)
        assert [b["branch_id"] for b in await session.list_branches()] == ["main", "retry"]
        assert [t["turn"] for t in await session.get_conversation_turns()] == [1, 2, 3]


async def test_branch_from_a_branch_and_back(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("tree")
        await session.add_items(turn(1) + turn(2))
        first = await session.create_branch_from_turn(2, "b1")
        await session.add_items(turn(2, "b1 says") + turn(3, "b1 says"))
        second = await session.create_branch_from_turn(3, "b2")
        assert contents(await session.get_items()) == [
            "question 1",
            "answer 1",
            "question 2",
            "b1 says 2",
        ]
        await session.switch_to_branch(first)
        assert len(await session.get_items()) == 6
        await session.delete_branch(second)
        with pytest.raises(BranchError, match="already been used"):
            await session.create_branch_from_turn(2, second)
        with pytest.raises(BranchError, match="does not exist"):
            await session.switch_to_branch(second)
        assert [b["branch_id"] for b in await session.list_branches()] == ["main", "b1"]


async def test_pops_keep_what_another_line_holds(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("pops")
        main = turn(1) + turn(2)
        await session.add_items(main)
        await session.create_branch_from_turn(2, "side")
        await session.add_items([message("side only")])
        assert await session.pop_item() == message("side only")
        assert await session.pop_item() == main[1]  # shared with main: stays stored
        assert (await counts(db_url))["items"] == 4
        assert await session.get_items(branch_id="main") == main

        await session.add_items([message("again")])
        await session.switch_to_branch("main")
        for expected in reversed(main):  # answer 2 and question 2 go; turn 1 moves aside
            assert await session.pop_item() == expected
        assert await session.get_items() == []
        assert contents(await session.get_items(branch_id="side")) == ["question 1", "again"]
        assert (await counts(db_url))["items"] == 2
        await session.switch_to_branch("side")
        for _ in range(2):
            await session.pop_item()
        assert (await counts(db_url))["items"] == 0
        assert await session.pop_item() is None


async def test_delete_and_clear_remove_what_no_line_holds(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("gone")
        await session.add_items(turn(1) + turn(2))
        await session.create_branch_from_turn(2, "doomed")
        await session.add_items(turn(2, "doomed"))
        with pytest.raises(BranchError, match="Cannot delete current branch"):
            await session.delete_branch("doomed")
        with pytest.raises(BranchError, match="Cannot delete the 'main' branch"):
            await session.delete_branch("main")
        await session.delete_branch("doomed", force=True)
        assert session.current_branch_id == "main"
        assert (await counts(db_url))["items"] == 4
        assert await session.get_items(branch_id="doomed") == []

        await session.create_branch_from_turn(2, "kept")
        await session.add_items([message("kept")])
        other = store.session("gone")  # another object, on main
        await other.clear_session()
        assert (await counts(db_url))["items"] == 0
        assert await session.get_items() == []  # its branch was cleared: back on main
        assert session.current_branch_id == "main"
        await session.add_items(turn(1))
        with pytest.raises(BranchError, match="already been used"):
            await session.create_branch_from_turn(1, "kept")
        assert await session.list_branches() == [
            {
                "branch_id": "main",
                "message_count": 2,
                "user_turns": 1,
                "is_current": True,
                "created_at": (await session.get_conversation_turns())[0]["timestamp"],
            }
        ]


async def test_store_removals_take_the_branches_along(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        for user in ("alice", "bob"):
            session = store.session(f"{user}-chat", user_id=user)
            await session.add_items(turn(1) + turn(2))
            await session.create_branch_from_turn(2)
            await session.add_items(turn(2, "branch"))
        removed = await store.delete_session("alice-chat")
        assert (removed.sessions, removed.items) == (1, 6)
        assert (await store.delete_user("bob")).sessions == 1
        assert await counts(db_url) == dict.fromkeys(
            ("sessions", "items", "branches", "branch_items", "turn_usage"), 0
        )


async def test_expired_items_leave_every_line(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("short", ttl=60)
        await session.add_items(turn(1) + turn(2))
        await session.create_branch_from_turn(2, "b")
        await session.add_items([message("branch")])
        travel(monkeypatch, timedelta(minutes=2))
        assert await session.get_items() == []
        # An expired turn is no turn of the history: not listed, and no branch starts there
        # (it made one of the items before it).
        assert await session.get_conversation_turns() == []
        await session.switch_to_branch("main")
        with pytest.raises(BranchError, match="Turn 1 does not contain a user message"):
            await session.create_branch_from_turn(1, "from-expired")
        assert await store.purge_expired() == 5
        assert (await counts(db_url))["branch_items"] == 0


async def test_only_the_main_line_is_searched(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True, search=True) as store:
        session = store.session("s")
        await session.add_items([message("the deployment failed"), message("lunch plans")])
        await session.create_branch_from_turn(1, "b")
        await session.add_items([message("zebra migration on the branch")])
        assert await session.search("zebra", mode="keyword") == []
        assert await store.search("zebra", mode="keyword") == []
        assert await store.reindex() == 0  # branch items are not waiting to be indexed
        [hit] = await store.search("deployment", mode="keyword")
        assert hit.session_id == "s"


async def test_names_and_turns_are_checked(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("checks")
        with pytest.raises(BranchError, match="Turn 1 does not contain a user message"):
            await session.create_branch_from_turn(1)
        await session.add_items(turn(1))
        for bad in ("", "  ", "x" * 256):
            with pytest.raises(BranchError):
                await session.create_branch_from_turn(1, bad)
        with pytest.raises(BranchError, match="No user turns found"):
            await session.create_branch_from_content("absent")
        assert await session.list_branches() == [
            {
                "branch_id": "main",
                "message_count": 2,
                "user_turns": 1,
                "is_current": True,
                "created_at": (await session.get_conversation_turns())[0]["timestamp"],
            }
        ]
        name = await session.create_branch_from_turn(1)
        assert name.startswith("branch_from_turn_1_")
        assert await session.get_items() == []  # nothing before turn 1
        with pytest.raises(BranchError, match="does not exist"):
            await session.delete_branch(name, force=True)  # it holds nothing yet
        assert session.current_branch_id == name


async def test_odd_names_and_turn_numbers_get_clear_errors_on_every_dialect(db_url: str) -> None:
    """A NUL in a branch name was kept on SQLite and MariaDB and a DatabaseError on
    PostgreSQL; turn numbers of the wrong kind or past 64 bits were OverflowError or
    DatabaseError, or "Turn True does not contain a user message"."""
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("odd")
        await session.add_items(turn(1) + turn(2))
        for name, said in [("a\x00b", "NUL"), ("a\ud800b", "lone surrogates"), (5, "a string")]:
            with pytest.raises(BranchError, match=said):
                await session.create_branch_from_turn(1, name)  # type: ignore[arg-type]
            with pytest.raises(BranchError, match="does not exist"):
                await session.switch_to_branch(name)  # type: ignore[arg-type]
            assert await session.get_conversation_turns(name) == []  # type: ignore[arg-type]
            assert await session.get_session_usage(name) is None  # type: ignore[arg-type]
        for number in (0, -1, 2**70, "1", True, 1.0):
            with pytest.raises(ConfigurationError, match="turn_number must be"):
                await session.create_branch_from_turn(number)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="user_turn_number must be an integer"):
            await session.get_turn_usage("1")  # type: ignore[arg-type]
        assert [branch["branch_id"] for branch in await session.list_branches()] == ["main"]
        assert contents(await session.get_items()) == contents(turn(1) + turn(2))


async def test_custom_table_names_hold_the_branches(sqlite_url: str) -> None:
    tables = TableNames(prefix="chat_", branch_items="chat_refs")
    async with SessionStore(sqlite_url, tables=tables, create_tables=True) as store:
        session = store.session("custom")
        await session.add_items(turn(1) + turn(2))
        await session.create_branch_from_turn(2, "b")
    [(refs,)] = await raw_rows(sqlite_url, "SELECT COUNT(*) FROM chat_refs")
    [(names,)] = await raw_rows(sqlite_url, "SELECT COUNT(*) FROM chat_branches")
    assert (refs, names) == (6, 2)  # main's four and the branch's two; main and b


@pytest.mark.slow
async def test_processes_racing_for_one_name_and_writing_to_branches(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("race")
        await session.add_items(turn(1) + turn(2))
        await session.create_branch_from_turn(2, "ready")
    racers = [spawn("branch", db_url, "race", "2", "wanted") for _ in range(4)]
    outcomes = sorted(finish(process).strip() for process in racers)
    assert outcomes == ["BranchError"] * 3 + ["wanted"]

    writers = [spawn("write-branch", db_url, "race", "ready", str(w), "20") for w in range(3)]
    writers += [spawn("write", db_url, "race", "9", "20")]
    for process in writers:
        finish(process)
    async with SessionStore(db_url) as store:
        session = store.session("race")
        branch = (await session.get_items(branch_id="ready"))[2:]
        main = (await session.get_items())[4:]
    assert len(branch) == 180 and len(main) == 60
    for items, writers_there in ((branch, {0, 1, 2}), (main, {9})):
        tags = [json.loads(item["content"]) for item in items]
        for start in range(0, len(tags), 3):
            batch = tags[start : start + 3]
            assert [i for _, _, i in batch] == [0, 1, 2], f"batch split at {start}"
            assert len({(w, b) for w, b, _ in batch}) == 1, f"batch interleaved at {start}"
        assert {w for w, _, _ in tags} == writers_there


async def test_tasks_appending_to_a_branch_at_once(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("tasks")
        await session.add_items(turn(1))
        await session.create_branch_from_turn(1, "b")
        batches = [[message(f"{w}-{i}") for i in range(4)] for w in range(10)]
        await asyncio.gather(*(session.add_items(batch) for batch in batches))
        items = await session.get_items()
        assert len(items) == 40
        for start in range(0, 40, 4):
            assert len({item["content"].split("-")[0] for item in items[start : start + 4]}) == 1
        assert [t["turn"] for t in await session.get_conversation_turns()] == list(range(1, 41))


async def test_turns_read_alike_from_json_and_sealed_items(db_url: str) -> None:
    """The database derives the turns of JSON items; sealed ones are opened: same result."""
    items = [
        reply("before any question"),
        *ALL,
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "message", "role": "system", "content": "not a turn"},
        {"role": "user", "content": "last"},
    ]
    found = []
    for tables, key in ((TableNames(prefix="plain_"), None), (TableNames(), os.urandom(32))):
        async with SessionStore(db_url, tables=tables, create_tables=True, key=key) as store:
            session = store.session("alike")
            await session.add_items(items[:3])
            await session.add_items(items[3:])
            found.append(
                (
                    await session.get_conversation_by_turns(),
                    [t["turn"] for t in await session.get_conversation_turns()],
                )
            )
    assert found[0] == found[1]
    by_turn, numbers = found[0]
    assert numbers == [1, 2, 3, 4]  # USER, MULTIPART, "hi", "last"
    assert [entry["type"] for entry in by_turn[0]] == ["assistant"]
    assert sum(len(entries) for entries in by_turn.values()) == len(items)


async def test_compaction_is_not_offered_while_branches_share_items(db_url: str) -> None:
    """Compaction's hooks replace main-line items: with a branch holding some, they are not
    offered (the SDK then falls back to clear_session and add_items, as for its own
    AdvancedSQLiteSession); nor on a branch. Without branches they are."""
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("compact")
        await session.add_items(turn(1) + turn(2))
        assert await session._get_compaction_snapshot(10) is not None
        await session.create_branch_from_turn(2, "b")
        assert await session._get_compaction_snapshot(10) is None
        assert await session._atomic_replace_items([message("all")]) is False
        await session.switch_to_branch("main")
        assert await session._get_compaction_snapshot(10) is None
        await session.delete_branch("b")
        assert await session._atomic_replace_items([message("all")]) is True
        assert await session.get_items() == [message("all")]


async def test_a_branch_that_holds_nothing_does_not_stop_repair_or_compaction(
    db_url: str,
) -> None:
    """A branch from turn 1 holds no item: it exists for no call (the SDK's branches are
    their items), yet `repair` refused the session for it, and nothing could delete it."""
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("s")
        await session.add_items([message("hi"), {"type": "function_call_output",
                                                 "call_id": "gone", "output": "late"}])  # fmt: skip
        await session.create_branch_from_turn(1, "retry")
        await session.switch_to_branch("main")
        assert [b["branch_id"] for b in await session.list_branches()] == ["main"]
        repaired = await session.repair()  # what was wrong, mended
        assert [problem.kind for problem in repaired.problems] == ["orphan_output"]
        assert await session.get_items() == [message("hi")] and (await session.check()).ok
        with pytest.raises(BranchError, match="does not exist"):
            await session.delete_branch("retry")


async def test_a_never_branched_summary_counts_in_the_database_as_it_opens(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plaintext session never branched has its main line summed by the database (its
    user messages told by their JSON): nothing is decoded, and the summary is the one a
    sealed store gets by opening every item, expired items left out of both."""
    found = []
    for key in (None, "a passphrase"):
        tables = TableNames(prefix=f"summed_{key is None}_")  # a keyed store's own tables
        async with SessionStore(db_url, tables=tables, key=key, create_tables=True, ttl=60) as s:
            await s.session("s").add_items([reply("before any question")])
        async with SessionStore(db_url, tables=tables, key=key) as store:
            session = store.session("s")
            await session.add_items([*turn(1), reply("more"), *turn(2)])
            with monkeypatch.context() as ahead:
                travel(ahead, timedelta(minutes=2))  # the first item has expired
                [main] = await session.list_branches()
                first = (await session.get_items())[0]
            found.append({k: v for k, v in main.items() if k != "created_at"})
            assert first == message("question 1") and main["created_at"] is not None
    assert (
        found[0]
        == found[1]
        == {
            "branch_id": "main",
            "message_count": 5,
            "user_turns": 2,
            "is_current": True,
        }
    )


async def test_roles_the_database_reads_agree_with_python(db_url: str) -> None:
    """SQLite's JSON functions cut a text at a NUL: a role "user\\u0000" was counted as a
    user message by the database's sum, not by Python's reading of the same items."""
    odd = [
        {"role": "user\u0000", "content": "a NUL in the role"},
        {"role": "user", "content": "x\u0000y"},
        {"role": ["user"], "content": "a list"},
        {"role": "User", "content": "capitalised"},
        {"content": {"role": "user"}},
        {"role": "user", "content": "plain"},
    ]
    for key in (None, "a passphrase"):  # the database reads roles; Python opens them
        tables = TableNames(prefix=f"roles_{key is None}_")
        async with SessionStore(db_url, tables=tables, key=key, create_tables=True) as store:
            session = store.session("odd")
            await session.add_items(odd)
            turns = await session.get_conversation_turns()
            [main] = await session.list_branches()
            assert len(turns) == main["user_turns"] == 2, key
            assert list(await session.get_conversation_by_turns()) == [0, 1, 2], key


async def test_an_engine_that_streams_results_is_refused(sqlite_url: str) -> None:
    """An app's own engine with server-side cursors (`stream_results`, `yield_per`): its
    rows cannot cross to the worker threads that process many of them (turns failed with
    `MissingGreenlet`, a search too), and PostgreSQL failed every operation on one."""
    from sqlalchemy.ext.asyncio import create_async_engine

    from agents_sqlalchemy import ConfigurationError

    engine = create_async_engine(sqlite_url)
    try:
        for option in ({"stream_results": True}, {"yield_per": 100}):
            with pytest.raises(ConfigurationError, match="stream results"):
                SessionStore(engine.execution_options(**option))
            with pytest.raises(ConfigurationError, match="stream results"):
                SessionStore(sqlite_url, engine_kwargs={"execution_options": option})
        buffered = engine.execution_options(stream_results=False)
        async with SessionStore(buffered, create_tables=True, key="a passphrase") as store:
            await store.session("s").add_items(turn(1))
            assert [t["turn"] for t in await store.session("s").get_conversation_turns()] == [1]
    finally:
        await engine.dispose()
