"""A user's export, its import into any store, and erasure with a receipt."""

from __future__ import annotations

import asyncio
import json
import os
import random
from datetime import timedelta
from typing import Any

import pytest
from agents import RunContextWrapper
from sqlalchemy.ext.asyncio import create_async_engine

from agents_sqlalchemy import (
    AgentsSQLAlchemyError,
    ConfigurationError,
    DatabaseError,
    ErasureReceipt,
    SessionStore,
    TableNames,
)
from agents_sqlalchemy.services.branches import Branches
from agents_sqlalchemy.services.management import Management

from .support.clock import travel
from .support.items import message
from .support.portability import fill
from .support.runs import usage
from .support.tables import ITEMS, SESSIONS, execute, raw_rows

TIMES = ("exported_at", "created_at", "updated_at", "archived_at")


async def lines_of(store: SessionStore, user_id: str) -> list[dict[str, Any]]:
    return [json.loads(line) async for line in store.export_user(user_id)]


def by_session(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Each session's records without their times (an import stamps its own, and so lists
    the sessions in another order of activity)."""
    sessions: dict[str, list[dict[str, Any]]] = {}
    current: list[dict[str, Any]] = []
    for record in records[1:-1]:
        if record["type"] == "session":
            current = sessions.setdefault(record["session_id"], [])
        current.append({k: v for k, v in record.items() if k not in TIMES})
    assert records[-1]["type"] == "done"
    return sessions


@pytest.mark.parametrize("key", [None, "passphrase"])
async def test_a_round_trip_is_exact(db_url: str, key: str | None) -> None:
    other_key = None if key else os.urandom(32)  # plaintext to encrypted, and back
    async with (
        SessionStore(db_url, create_tables=True, key=key) as source,
        SessionStore(
            db_url, create_tables=True, key=other_key, tables=TableNames(prefix="copy_")
        ) as target,
    ):
        await fill(source)
        exported = [line async for line in source.export_user("alice")]
        assert all(line.endswith("\n") and line.count("\n") == 1 for line in exported)
        first = json.loads(exported[0])
        assert (first["format"], first["version"], first["user_id"]) == (
            "agents-sqlalchemy/user-export",
            1,
            "alice",
        )
        assert "not alice's" not in "".join(exported)

        report = await target.import_user(exported)
        assert (report.sessions, report.skipped_sessions, report.usage_left_out) == (2, 0, 0)

        again = await lines_of(target, "alice")
        assert by_session(again) == by_session([json.loads(line) for line in exported])
        assert again[-1] == json.loads(exported[-1])
        # The store's own reads agree, line by line.
        for session_id in ("chat-1", "chat-2"):
            before, after = source.session(session_id), target.session(session_id)
            assert await after.get_items() == await before.get_items()
            for branch in await before.list_branches():
                name = branch["branch_id"]
                assert await after.get_items(branch_id=name) == await before.get_items(
                    branch_id=name
                )
                assert await after.get_turn_usage(branch_id=name) == await before.get_turn_usage(
                    branch_id=name
                )
            assert [b["branch_id"] for b in await after.list_branches()] == [
                b["branch_id"] for b in await before.list_branches()
            ]
            old, new = await source.session_info(session_id), await target.session_info(session_id)
            assert old is not None and new is not None
            assert (new.user_id, new.metadata, new.item_count) == (
                old.user_id,
                old.metadata,
                old.item_count,
            )
            assert (new.archived_at is None) == (old.archived_at is None)
        chat = target.session("chat-1")
        assert await chat.get_state("cart") == {"items": ["tea", "ça"], "total": 12.5}
        assert await chat.get_state("step") == 3
        assert len(await target.session("chat-1").get_turn_usage(branch_id="retry")) == 1
        assert await target.session_info("bob-1") is None


async def test_import_refuses_a_session_it_has_and_can_skip_it(sqlite_url: str) -> None:
    async with SessionStore(sqlite_url, create_tables=True) as store:
        await fill(store)
        exported = [line async for line in store.export_user("alice")]
        with pytest.raises(ConfigurationError, match="already in this store"):
            await store.import_user(exported)
        report = await store.import_user(exported, skip_existing=True)
        assert (report.sessions, report.skipped_sessions) == (0, 2)


async def test_a_truncated_or_foreign_stream_is_refused(sqlite_url: str, tmp_path: Any) -> None:
    async with SessionStore(sqlite_url, create_tables=True) as store:
        await fill(store)
        exported = [line async for line in store.export_user("alice")]
    ends = [i for i, line in enumerate(exported) if json.loads(line).get("type") == "end"]
    target_url = f"sqlite+aiosqlite:///{tmp_path / 'target.db'}"
    async with SessionStore(target_url, create_tables=True) as target:
        cut = exported[: ends[0] + 3]  # the first session whole, the second begun
        with pytest.raises(ConfigurationError, match=r"truncated.*before it: 1 session imp"):
            await target.import_user(cut)
        page = await target.list_sessions(user_id="alice", archived=None)
        assert [info.session_id for info in page] == [json.loads(exported[1])["session_id"]]
        with pytest.raises(ConfigurationError, match="not an export"):
            await target.import_user(['{"hello": 1}\n'])
        with pytest.raises(ConfigurationError, match="line 2 of the export: not JSON"):
            await target.import_user([exported[0], "{oops\n"])
        bad_version = json.dumps({**json.loads(exported[0]), "version": 99})
        with pytest.raises(ConfigurationError, match="version 99"):
            await target.import_user([bad_version])
        # A session of another user, or with metadata that is no object, names its line
        # (the first was imported under mallory; the second raised an ItemError without it).
        for change, said in [
            ({"user_id": "mallory"}, "a session of 'mallory' in the export of 'alice'"),
            ({"metadata": [1]}, "metadata is a list"),
        ]:
            forged = [exported[0], json.dumps({**json.loads(exported[1]), **change}) + "\n"]
            with pytest.raises(ConfigurationError, match=f"line 2 of the export: {said}"):
                await target.import_user(forged + exported[2:])
        nameless = json.dumps({**json.loads(exported[0]), "user_id": None})
        with pytest.raises(ConfigurationError, match="line 1 of the export: the export names no"):
            await target.import_user([nameless, *exported[1:]])
        assert len(await target.list_sessions(archived=None)) == 1  # the cut's whole session


async def test_an_export_given_whole_or_as_odd_lines(sqlite_url: str, tmp_path: Any) -> None:
    """A whole export in one text or bytes (`file.read()`) imports; what is no lines of text
    is a ConfigurationError (an int raised TypeError, a bytes object read as ints raised
    AttributeError), and so is a `skip_existing` that is no flag."""
    async with SessionStore(sqlite_url, create_tables=True) as store:
        await fill(store)
        exported = [line async for line in store.export_user("alice")]
    for n, whole in enumerate(["".join(exported), "".join(exported).encode()]):
        async with SessionStore(tmp_path / f"copy{n}.db", create_tables=True) as copy:
            assert (await copy.import_user(whole)).sessions == 2
            assert len(await copy.list_sessions(user_id="alice", archived=None)) == 2
    async with SessionStore(tmp_path / "odd.db", create_tables=True) as target:
        with pytest.raises(ConfigurationError, match=r"lines of text or bytes.*got int"):
            await target.import_user(5)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="line 2 of the export: not a line of text"):
            await target.import_user([exported[0], 7])  # type: ignore[list-item]
        with pytest.raises(ConfigurationError, match="skip_existing must be True or False"):
            await target.import_user(exported, skip_existing="no")  # type: ignore[arg-type]
        assert await target.list_sessions(archived=None) == []


async def test_an_export_streams_from_a_file(sqlite_url: str, tmp_path: Any) -> None:
    path = tmp_path / "alice.jsonl"
    async with SessionStore(sqlite_url, create_tables=True, key="k") as store:
        await fill(store)
        seen: list[tuple[int, int]] = []
        with path.open("w", encoding="utf-8") as out:
            async for line in store.export_user("alice", progress=lambda *a: seen.append(a)):
                out.write(line)
        assert seen == [(0, 2), (1, 2), (2, 2)]
    async with SessionStore(tmp_path / "copy.db", create_tables=True) as copy:
        with path.open("rb") as export:  # bytes do as well as text
            report = await copy.import_user(export)
        done = json.loads(path.read_text(encoding="utf-8").splitlines()[-1])
        assert done["type"] == "done"
        assert (report.sessions, report.items) == (2, done["items"])
        assert await copy.session("chat-2").get_items() == [
            {"role": "system", "content": "be brief"},
            message("héllo 日本"),
            {"role": "assistant", "content": "hi", "extra": [1, None, True]},
        ]


@pytest.mark.parametrize("key", [None, "passphrase"])
async def test_erasure_returns_a_receipt_without_content(db_url: str, key: str | None) -> None:
    async with SessionStore(db_url, create_tables=True, key=key) as store:
        await fill(store)
        infos = await store.list_sessions(user_id="alice", archived=None)
        live = sum(info.item_count for info in infos)
        receipt = await store.erase_user("alice")
        assert await store.list_sessions(user_id="alice", archived=None) == []
        assert await store.session_info("bob-1") is not None
        assert receipt.sessions == 2
        assert receipt.items >= live  # the branch's own items too
        assert receipt.item_keys_deleted == (receipt.items if key else 0)
        assert receipt.encrypted is (key is not None)
        assert receipt.dialect == store.engine.dialect.name
        assert "agents_sqlalchemy_items" in receipt.tables
        assert receipt.user_sha256 == ErasureReceipt.hash_user("alice")
        kept = json.dumps(receipt.as_dict())
        for word in ("alice", "chat-1", "Oslo", "tea"):
            assert word not in kept
        assert ErasureReceipt.from_dict(json.loads(kept)) == receipt
        # A receipt written by a later version, with fields this one does not know, reads.
        later = {**json.loads(kept), "owner_key_destroyed": True}
        assert ErasureReceipt.from_dict(later) == receipt
        again = await store.erase_user("alice")
        assert (again.sessions, again.items) == (0, 0)
        with pytest.raises(ConfigurationError):
            await store.erase_user(None)  # type: ignore[arg-type]


def turn(n: int) -> list[dict[str, Any]]:
    return [message(f"question {n}"), {"role": "assistant", "content": f"answer {n}"}]


@pytest.mark.parametrize("key", [None, "passphrase"])
async def test_branches_of_branches_and_a_main_line_changed_since(
    sqlite_url: str, tmp_path: Any, key: str | None
) -> None:
    """A branch made from a branch, and branches whose source line has changed since (items
    popped and others added): each is rebuilt with exactly its items."""
    async with (
        SessionStore(sqlite_url, create_tables=True, key=key) as source,
        SessionStore(tmp_path / "copy.db", create_tables=True, key="other") as target,
    ):
        chat = source.session("tree", user_id="alice")
        await chat.add_items([{"role": "system", "content": "be brief"}, *turn(1), *turn(2)])
        await chat.add_items(turn(3))
        await chat.create_branch_from_turn(2, "b1")  # holds turn 1
        await chat.add_items([*turn(20), *turn(21)])
        await chat.create_branch_from_turn(3, "b2")  # b1's turns 1 and 2
        await chat.add_items(turn(30))
        await chat.switch_to_branch("main")
        await chat.pop_item()
        await chat.pop_item()
        await chat.pop_item()  # main now ends inside turn 2
        await chat.add_items([{"role": "assistant", "content": "second thoughts"}, *turn(4)])
        # A branch that shares no first item with any line left: rebuilt from a line's
        # first turn, whose items are popped off the new branch.
        bare = source.session("bare", user_id="alice")
        await bare.add_items([*turn(1), *turn(2)])
        await bare.create_branch_from_turn(2, "kept")

        await bare.add_items([message("other question 2")])
        await bare.switch_to_branch("main")
        for _ in range(4):
            await bare.pop_item()
        await bare.add_items([{"role": "system", "content": "new rules"}, *turn(1)])
        exported = [line async for line in source.export_user("alice")]
        await target.import_user(exported)
        assert await target.session("bare").get_items(branch_id="kept") == [
            *turn(1),
            message("other question 2"),
        ]
        again = [json.loads(line) async for line in target.export_user("alice")]
        assert by_session(again) == by_session([json.loads(line) for line in exported])
        copy = target.session("tree")
        for name in ("main", "b1", "b2"):
            assert await copy.get_items(branch_id=name) == await chat.get_items(branch_id=name)
        assert len(await copy.get_items(branch_id="b2")) == 3 + 2 + 2  # b1 before its turn 3


async def test_a_session_written_to_while_the_export_runs_is_still_exported(
    sqlite_url: str,
) -> None:
    """The export paged through the user's sessions by activity: one written to after the
    first page jumped ahead of the pages left and was missed, while the `done` line read
    as complete. The ids are now listed first; a session deleted meanwhile is left out."""
    async with SessionStore(sqlite_url, create_tables=True) as store:
        for number in range(120):
            await store.session(f"c{number:03d}", user_id="alice").add_items([message("m")])
        exported: list[str] = []
        async for line in store.export_user("alice"):
            record = json.loads(line)
            if record.get("type") == "session":
                exported.append(record["session_id"])
                if len(exported) == 1:  # the oldest of them now the most recently active
                    await store.session("c000", user_id="alice").add_items([message("late")])
                    await store.delete_session("c001")
        assert record == {"type": "done", "sessions": 119, "items": 120}
        assert sorted(exported) == sorted({f"c{n:03d}" for n in range(120)} - {"c001"})


async def ran(session: Any, requests: int, tokens: int) -> None:
    """Record a run's usage on the session's current turn, as `Runner.run` does."""
    wrapper = RunContextWrapper(context=None, usage=usage(requests, tokens))
    await session.store_run_usage(type("Result", (), {"context_wrapper": wrapper})())


async def branched_export(store: SessionStore) -> list[dict[str, Any]]:
    """The records of an export of one session with usage per turn and a branch."""
    chat = store.session("s1", user_id="alice", metadata={"m": 1})
    await chat.add_items(turn(1))
    await ran(chat, 1, 9)
    await chat.add_items(turn(2))
    await ran(chat, 2, 20)
    await chat.set_state("k", {"v": 1})
    await chat.create_branch_from_turn(2, "retry")
    await chat.add_items([message("question 2, again")])
    return await lines_of(store, "alice")


def changed(records: list[dict[str, Any]], change: Any) -> list[str]:
    """The export's lines, `change(copy)` made to a copy of its records."""
    copy = json.loads(json.dumps(records))
    change(copy)
    return [json.dumps(record) + "\n" for record in copy]


def of_type(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [record for record in records if record.get("type") == kind]


def usage_row(records: list[dict[str, Any]]) -> dict[str, Any]:
    row: dict[str, Any] = of_type(records, "line")[0]["usage"][0]
    return row


FORGED = {
    "usage of 2**70 tokens": (
        lambda r: usage_row(r).update(input_tokens=2**70),
        "usage.input_tokens must be between 0 and",
    ),
    "a usage row without its turn": (
        lambda r: usage_row(r).pop("turn"),
        "usage.turn must be an integer, got None",
    ),
    "negative usage": (
        lambda r: usage_row(r).update(requests=-5),
        "usage.requests must be between 0",
    ),
    "usage in words": (
        lambda r: usage_row(r).update(input_tokens="many"),
        "usage.input_tokens must be an integer",
    ),
    "usage details that are no object": (
        lambda r: usage_row(r).update(input_details=[1, 2]),
        "usage.input_details is a list",
    ),
    "a usage row that is no object": (
        lambda r: of_type(r, "line")[0]["usage"].__setitem__(0, 5),
        "a usage row is not an object",
    ),
    "two usage rows of one turn": (
        lambda r: of_type(r, "line")[0]["usage"].append(usage_row(r)),
        "two usage rows of turn 1",
    ),
    "a branch named ''": (
        lambda r: of_type(r, "line")[1].update(name=""),
        "a branch's name cannot be empty",
    ),
    "a second main line": (
        lambda r: of_type(r, "line")[1].update(name="main"),
        "a second line of history named 'main'",
    ),
    "an item count in words": (
        lambda r: of_type(r, "line")[0].update(items="lots"),
        "its item count must be an integer",
    ),
    "no item count": (
        lambda r: of_type(r, "line")[1].update(items=None),
        "its item count must be an integer",
    ),
    "an item nested too deep": (
        lambda r: of_type(r, "item")[5].update(item={"d": json.loads("[" * 140 + "]" * 140)}),
        "the item is nested more than",
    ),
    "a negative turn": (
        lambda r: of_type(r, "item")[0].update(turn=-3),
        "an item's turn must be between 0",
    ),
    "a state that is a list": (
        lambda r: of_type(r, "session")[0].update(state=[]),
        "a session's state is not an object",
    ),
    "an archive time that is no time": (
        lambda r: of_type(r, "session")[0].update(archived_at="not a time"),
        "archived_at is not a time",
    ),
}


async def test_a_session_that_cannot_be_imported_leaves_nothing(db_url: str) -> None:
    """Each session is checked whole before anything of it is written. A usage count of
    2**70 (OverflowError or a DatabaseError), a usage row without its turn (KeyError), a
    branch named "" (BranchError after main was written), negative or textual usage (kept
    as given), an item count in words (ValueError) and the like left the session
    half-written, and importing the intact export again was then refused as "already in
    this store"."""
    async with (
        SessionStore(db_url, create_tables=True) as source,
        SessionStore(db_url, create_tables=True, tables=TableNames(prefix="copy_")) as target,
    ):
        records = await branched_export(source)
        for forged, (change, said) in FORGED.items():
            with pytest.raises(ConfigurationError, match=r"line \d+ of the export: " + said):
                await target.import_user(changed(records, change))
            assert await target.list_sessions(archived=None) == [], forged
        for version in (True, 1.0):  # both equal 1, neither is the version
            header = changed(records, lambda r, v=version: r[0].update(version=v))
            with pytest.raises(ConfigurationError, match=f"an export of version {version}"):
                await target.import_user(header)
        report = await target.import_user(changed(records, lambda r: None))
        assert (report.sessions, report.items) == (1, 7)
        assert by_session(await lines_of(target, "alice")) == by_session(records)


async def test_a_write_that_fails_part_way_is_undone(db_url: str, tmp_path: Any) -> None:
    """A write the database refuses after the session's first ones (PostgreSQL could not
    branch a plaintext item holding NUL) left main's items behind under a message saying
    "nothing was changed", and a retry was refused as "already in this store". Now the
    session imports whole, or raises and leaves nothing, so that it can be imported again.
    Here the database refuses the branch's row by a trigger, after main was written."""
    async with (
        SessionStore(tmp_path / "source.db", create_tables=True) as source,
        SessionStore(db_url, create_tables=True) as target,
    ):
        chat = source.session("s1", user_id="alice")
        await chat.add_items([message("with NUL \x00"), {"role": "assistant", "content": "a"}])
        await chat.add_items(turn(2))
        await chat.create_branch_from_turn(2, "retry")
        await chat.add_items([message("again")])
        exported = [line async for line in source.export_user("alice")]
        dialect = target.engine.dialect.name
        assert await target.list_sessions() == []  # the tables made, for the trigger
        for statement in _refusing_branch(dialect, "retry"):
            await execute(db_url, statement)
        try:
            with pytest.raises(AgentsSQLAlchemyError) as refused:
                await target.import_user(exported)
        finally:
            await execute(db_url, f"DROP TRIGGER refuse_retry{_ON_BRANCHES[dialect]}")
        assert "already in this store" not in str(refused.value)
        assert await target.list_sessions(archived=None) == []
        assert await raw_rows(db_url, f"SELECT id FROM {ITEMS}") == []
        await target.import_user(exported)
        copy = target.session("s1")
        for name in ("main", "retry"):
            assert await copy.get_items(branch_id=name) == await chat.get_items(branch_id=name)


_BRANCHES = "agents_sqlalchemy_branches"
_ON_BRANCHES = {"sqlite": "", "mysql": "", "mariadb": "", "postgresql": f" ON {_BRANCHES}"}


def _refusing_branch(dialect: str, name: str) -> list[str]:
    """SQL making the database itself refuse a branch row named `name` (a trigger)."""
    if dialect == "sqlite":
        return [
            f"CREATE TRIGGER refuse_{name} BEFORE INSERT ON {_BRANCHES} "
            f"WHEN NEW.name = '{name}' BEGIN SELECT RAISE(ABORT, 'refused'); END"
        ]
    if dialect == "postgresql":
        return [
            "CREATE OR REPLACE FUNCTION refuse_branch() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'refused'; END $$",
            f"CREATE TRIGGER refuse_{name} BEFORE INSERT ON {_BRANCHES} FOR EACH ROW "
            f"WHEN (NEW.name = '{name}') EXECUTE FUNCTION refuse_branch()",
        ]
    return [
        f"CREATE TRIGGER refuse_{name} BEFORE INSERT ON {_BRANCHES} FOR EACH ROW BEGIN "
        f"IF NEW.name = '{name}' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused'; "
        "END IF; END"
    ]


async def test_branches_of_a_main_line_popped_empty_import_back(db_url: str) -> None:
    """A branch made from turn 2 whose main line was then popped empty could not be
    rebuilt ("no line of history before it holds a user message"), and neither could one
    that holds no user message at all: main holds one for a moment to branch off it."""
    async with (
        SessionStore(db_url, create_tables=True, key="k") as source,
        SessionStore(db_url, create_tables=True, tables=TableNames(prefix="copy_")) as target,
    ):
        emptied = source.session("emptied", user_id="alice")
        await emptied.add_items([*turn(1), message("question 2")])
        await emptied.create_branch_from_turn(2, "keep")
        await emptied.add_items([message("question 2, kept")])
        await emptied.switch_to_branch("main")
        for _ in range(3):
            await emptied.pop_item()
        userless = source.session("userless", user_id="alice")
        await userless.add_items([{"role": "system", "content": "be brief"}, *turn(1)])
        await userless.create_branch_from_turn(1, "system only")
        await userless.add_items([{"role": "assistant", "content": "unasked"}])
        await userless.switch_to_branch("main")
        await userless.create_branch_from_turn(1, "system too")
        await userless.add_items([{"role": "assistant", "content": "unasked too"}])
        await userless.switch_to_branch("main")
        for _ in range(2):
            await userless.pop_item()
        exported = [line async for line in source.export_user("alice")]
        report = await target.import_user(exported)
        assert (report.sessions, report.items) == (2, 8)
        again = [json.loads(line) async for line in target.export_user("alice")]
        assert by_session(again) == by_session([json.loads(line) for line in exported])
        for chat in (emptied, userless):
            copy = target.session(chat.session_id)
            for branch in [*await chat.list_branches(), {"branch_id": "main"}]:
                name = branch["branch_id"]
                assert await copy.get_items(branch_id=name) == await chat.get_items(branch_id=name)
        assert await target.session("emptied").get_items(branch_id="keep") == [
            *turn(1),
            message("question 2, kept"),
        ]


async def test_a_branch_emptied_and_written_again_imports_with_its_numbers(db_url: str) -> None:
    """A branch popped empty numbers what it is written next after the turn it was made
    after: rebuilt from nothing, it numbered them from 1, its usage moved to other turns,
    and a branch made from its turn 3 could not be made at all ("Turn 3 does not contain a
    user message"), so the whole export could not be imported."""
    async with (
        SessionStore(db_url, create_tables=True) as source,
        SessionStore(db_url, create_tables=True, tables=TableNames(prefix="copy_")) as target,
    ):
        chat = source.session("s", user_id="u")
        await chat.add_items([*turn(1), *turn(2)])
        await chat.create_branch_from_turn(2, "b1")
        for _ in range(2):
            await chat.pop_item()
        for n in (3, 4):
            await chat.add_items(turn(n))
            await ran(chat, 1, n)
        await chat.create_branch_from_turn(3, "b2")
        await chat.add_items([message("question 5")])
        exported = [json.loads(line) async for line in source.export_user("u")]
        b1 = next(record for record in exported if record.get("name") == "b1")
        assert [row["turn"] for row in b1["usage"]] == [2, 3]
        report = await target.import_user([json.dumps(record) for record in exported])
        assert (report.sessions, report.usage_left_out) == (1, 0)
        again = [json.loads(line) async for line in target.export_user("u")]
        assert by_session(again) == by_session(exported)
        copy = target.session("s")
        for name in ("main", "b1", "b2"):

            def numbered(turns: list[dict[str, Any]]) -> list[tuple[int, str]]:
                return [(turn["turn"], turn["content"]) for turn in turns]

            turns = numbered(await copy.get_conversation_turns(branch_id=name))
            assert turns == numbered(await chat.get_conversation_turns(branch_id=name))


@pytest.mark.slow
async def test_random_histories_round_trip(sqlite_url: str) -> None:
    """Histories of random turns, pops, branches, switches and deletions of branches come
    back from an import line for line: items, turn numbers and usage per turn (seed 78
    empties a branch by pops and writes it again, which an import renumbered)."""
    for seed in range(70, 100):
        chance = random.Random(seed)
        async with (
            SessionStore(
                sqlite_url, create_tables=True, tables=TableNames(prefix=f"a{seed}_")
            ) as source,
            SessionStore(
                sqlite_url, create_tables=True, tables=TableNames(prefix=f"b{seed}_")
            ) as target,
        ):
            chat = source.session("s", user_id="u")
            for step in range(chance.randint(3, 25)):
                await _random_step(chat, chance, step)
            report = await target.import_user([line async for line in source.export_user("u")])
            assert report.usage_left_out == 0, seed
            assert await _lines(target.session("s")) == await _lines(chat), seed


async def _random_step(chat: Any, chance: random.Random, step: int) -> None:
    """One random change of `chat`: a turn with usage, an item, a pop, or a branch made,
    switched to or deleted."""
    branches = [branch["branch_id"] for branch in await chat.list_branches()]
    kind = chance.choice(["turn", "turn", "item", "branch", "switch", "pop", "pop", "delete"])
    if kind == "turn":
        await chat.add_items(turn(step))
        await ran(chat, 1, step)
    elif kind == "item":
        await chat.add_items([{"role": chance.choice(["assistant", "system"]), "content": "x"}])
    elif kind == "pop":
        await chat.pop_item()
    elif kind == "branch" and (turns := await chat.get_conversation_turns()):
        await chat.create_branch_from_turn(chance.choice(turns)["turn"], f"b{step}")
    elif kind == "switch":
        await chat.switch_to_branch(chance.choice([*branches, "main"]))
    elif kind == "delete" and (others := [b for b in branches if b != "main"]):
        await chat.switch_to_branch("main")
        await chat.delete_branch(chance.choice(others))


async def _lines(chat: Any) -> dict[str, Any]:
    """Each line of history of `chat`: its items, numbered turns and usage per turn."""
    found = {}
    for branch in await chat.list_branches():
        name = branch["branch_id"]
        turns = await chat.get_conversation_turns(branch_id=name)
        usage = await chat.get_turn_usage(branch_id=name)
        found[name] = (
            await chat.get_items(branch_id=name),
            [(t["turn"], t["content"]) for t in turns],
            [(row["user_turn_number"], row["total_tokens"]) for row in usage],
        )
    return found


async def test_an_export_that_contradicts_itself_is_refused(sqlite_url: str) -> None:
    """A user message in a turn it does not open (which put turn 1's usage on turn 2), a
    state name the API refuses (stored, then neither read nor deleted), and a session twice
    in one export (the second dropped silently by skip_existing) are refused; an error
    after a session was imported says that one was."""
    async with (
        SessionStore(sqlite_url, create_tables=True) as source,
        SessionStore(sqlite_url, create_tables=True, tables=TableNames(prefix="copy_")) as target,
    ):
        records = await branched_export(source)

        def same_turn(r: list[dict[str, Any]]) -> None:
            of_type(r, "item")[2]["turn"] = 1  # question 2, in turn 1

        for change, said in [
            (same_turn, "line 6 of the export: a user message in turn 1, which it does not open"),
            (lambda r: r[1]["state"].update({"": 1}), "state names are non-empty strings"),
        ]:
            with pytest.raises(ConfigurationError, match=said):
                await target.import_user(changed(records, change))
        assert await target.list_sessions(archived=None) == []
        twice = records[:-1] + records[1:]
        lines = [json.dumps(record) + "\n" for record in twice]
        with pytest.raises(ConfigurationError, match="a second session of the same id") as error:
            await target.import_user(lines, skip_existing=True)
        assert str(error.value).endswith(
            "(before it: 1 session imported. Import the export again, corrected, with "
            "skip_existing=True)"
        )
        assert [info.session_id for info in await target.list_sessions(archived=None)] == ["s1"]


async def test_the_counts_of_end_and_done_lines_are_checked(db_url: str) -> None:
    """The `end` line's counts and the `done` line's items were never checked: an export
    with a whole branch cut out imported "successfully" without it."""
    async with (
        SessionStore(db_url, create_tables=True) as source,
        SessionStore(db_url, create_tables=True, tables=TableNames(prefix="copy_")) as target,
    ):
        records = await branched_export(source)
        branch = next(i for i, r in enumerate(records) if r.get("name") == "retry")
        end = next(i for i, r in enumerate(records) if r.get("type") == "end")
        cut = [json.dumps(record) + "\n" for record in records[:branch] + records[end:]]
        with pytest.raises(
            ConfigurationError,
            match=r"session 's1' holds 1 lines of history and 4 items, its end line says 2 and 7",
        ):
            await target.import_user(cut)
        for change, said in [
            (lambda r: of_type(r, "end")[0].update(items=8), "its end line says 2 and 8"),
            (lambda r: of_type(r, "end")[0].update(lines=True), "its end line says True and 7"),
            (lambda r: of_type(r, "end")[0].update(session_id="s2"), "the end of another"),
        ]:
            with pytest.raises(ConfigurationError, match=said):
                await target.import_user(changed(records, change))
        assert await target.list_sessions(archived=None) == []
        with pytest.raises(ConfigurationError, match="announces other than its 7 items"):
            await target.import_user(changed(records, lambda r: r[-1].update(items=6)))


async def test_a_whole_export_in_one_text_is_split_at_line_feeds_only(db_url: str) -> None:
    """`import_user(text)` split with `str.splitlines()`, which also splits at U+2028,
    U+2029, U+0085 and other characters that JSON strings hold as they are."""
    odd = "a\u2028b\u2029c\x85d\x1ce\x1df\x1eg\x0bh\x0ci"
    async with (
        SessionStore(db_url, create_tables=True) as source,
        SessionStore(db_url, create_tables=True, tables=TableNames(prefix="copy_")) as target,
    ):
        chat = source.session(f"chat {odd}", user_id="alice", metadata={"note": odd})
        await chat.add_items([message(odd), {"role": "assistant", "content": odd}])
        text = "".join([line async for line in source.export_user("alice")])
        assert (await target.import_user(text)).items == 2
        assert await target.session(f"chat {odd}").get_items() == await chat.get_items()
        await target.delete_all(confirm=True)
        assert (await target.import_user(text.replace("\n", "\r\n"))).items == 2
        await target.delete_all(confirm=True)
        assert (await target.import_user(text.replace("\n", "\r\n").encode())).items == 2


@pytest.mark.dialects("sqlite", "postgresql")
async def test_an_import_cancelled_while_it_makes_a_session_leaves_nothing(
    db_url: str, tmp_path: Any
) -> None:
    """A cancel that came while the session's row was being made (its write waiting for a
    lock) left the row made and empty, as a write ends whole: importing again skipped it as
    imported (`skip_existing`) or refused it, and its items were never imported."""
    async with (
        SessionStore(tmp_path / "source.db", create_tables=True) as source,
        SessionStore(db_url, create_tables=True) as target,
    ):
        await source.session("s1", user_id="alice").add_items(turn(1))
        exported = [line async for line in source.export_user("alice")]
        assert await target.list_sessions() == []  # the tables made
        engine = create_async_engine(db_url)
        try:
            async with engine.connect() as locker:
                if locker.dialect.name == "sqlite":
                    await locker.exec_driver_sql("BEGIN IMMEDIATE")
                else:
                    await locker.exec_driver_sql(f"LOCK TABLE {SESSIONS} IN EXCLUSIVE MODE")
                importing = asyncio.ensure_future(target.import_user(exported))
                await asyncio.sleep(0.5)  # its first write waits for the lock
                importing.cancel()
                await asyncio.sleep(0.2)
                await locker.rollback()
            with pytest.raises(asyncio.CancelledError):
                await importing
        finally:
            await engine.dispose()
        assert await target.list_sessions(archived=None) == []
        report = await target.import_user(exported, skip_existing=True)
        assert (report.sessions, report.skipped_sessions) == (1, 0)
        assert await target.session("s1").get_items() == turn(1)


async def alice_branched(tmp_path: Any) -> tuple[list[str], dict[str, list[Any]]]:
    """An export of alice's session "s1" (4 turns, a state, and a branch "retry" off turn 3
    with one item of its own), and what each of its lines holds."""
    async with SessionStore(tmp_path / "source.db", create_tables=True) as source:
        chat = source.session("s1", user_id="alice")
        for n in range(1, 5):
            await chat.add_items(turn(n))
        await chat.create_branch_from_turn(3, "retry")
        await chat.add_items([message("again")])
        await chat.set_state("k", "v")
        exported = [line async for line in source.export_user("alice")]
        return exported, {name: await chat.get_items(branch_id=name) for name in ("main", "retry")}


async def cut_off(
    target: SessionStore, exported: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Import `exported` into `target` with the database gone from the first append to a
    branch on: what the import wrote cannot be deleted again either."""
    gone = DatabaseError("cannot reach the database (in this test)")
    append = Branches.append

    async def failing_append(self: Branches, key: Any, name: str, *args: Any, **kw: Any) -> Any:
        if name != "main":
            raise gone
        return await append(self, key, name, *args, **kw)

    async def failing_delete(self: Management, **where: Any) -> Any:
        raise gone

    monkeypatch.setattr(Branches, "append", failing_append)
    monkeypatch.setattr(Management, "delete", failing_delete)
    with pytest.raises(DatabaseError, match="in this test"):
        await target.import_user(exported)
    monkeypatch.undo()


async def test_an_import_the_database_stopped_part_way_is_refused_until_deleted(
    db_url: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database went away in the middle of a session's import, so the import could not
    delete what it had written: a ConfigurationError said so, and an import again with
    skip_existing skipped the half session as imported. It is refused now (an import of it
    may still run), and imported once deleted."""
    exported, whole = await alice_branched(tmp_path)
    async with SessionStore(db_url, create_tables=True) as target:
        await cut_off(target, exported, monkeypatch)
        assert await target.list_sessions() == []  # the half session is out of listings
        assert len(await raw_rows(db_url, f"SELECT id FROM {ITEMS}")) >= 4
        with pytest.raises(ConfigurationError, match="marked as being imported"):
            await target.import_user(exported, skip_existing=True)
        assert await target.delete_session("s1")
        report = await target.import_user(exported, skip_existing=True)
        assert (report.sessions, report.skipped_sessions) == (1, 0)
        copy = target.session("s1")
        assert {name: await copy.get_items(branch_id=name) for name in whole} == whole
        [info] = await target.list_sessions()
        assert info.archived_at is None


@pytest.mark.parametrize("key", [None, "passphrase"])
async def test_a_history_whose_first_turns_were_purged_imports_with_its_numbers(
    db_url: str, key: str | None, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An import numbered the turns from 1 again, and left the purged turns' usage out:
    the copy's turns, usage and branches now read as the original's."""
    ran = {"wrapper": RunContextWrapper(None, usage=usage(1, 7))}
    async with SessionStore(tmp_path / "source.db", create_tables=True, key=key) as source:
        chat = source.session("s1", user_id="alice", ttl=60)
        await chat.add_items(turn(1), **ran)
        await chat.add_items([message("question 2")])
        travel(monkeypatch, timedelta(seconds=50))
        await chat.add_items([{"role": "assistant", "content": "answer 2"}], **ran)
        await chat.add_items(turn(3), **ran)
        travel(monkeypatch, timedelta(seconds=20))  # 70 s after the first items
        assert await source.purge_expired() == 3
        await chat.create_branch_from_turn(3, "again")
        await chat.add_items([message("question 3, again")], **ran)
        exported = [line async for line in source.export_user("alice")]
        async with SessionStore(db_url, create_tables=True, key=key) as target:
            report = await target.import_user(exported)
            assert (report.sessions, report.usage_left_out) == (1, 0)
            copy = target.session("s1")
            for name in ("main", "again"):
                turns = [(t["turn"], t["content"]) for t in await chat.get_conversation_turns(name)]
                copied = await copy.get_conversation_turns(name)
                assert [(t["turn"], t["content"]) for t in copied] == turns
                assert await copy.get_conversation_by_turns(name) == (
                    await chat.get_conversation_by_turns(name)
                )
                assert await copy.get_turn_usage(branch_id=name) == (
                    await chat.get_turn_usage(branch_id=name)
                )
            assert list(await copy.get_conversation_by_turns("main")) == [2, 3]
            assert await copy.get_session_usage() == await chat.get_session_usage()


@pytest.mark.parametrize("when", [1, 2])
async def test_a_session_deleted_while_it_is_imported_is_not_made_again(
    db_url: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, when: int
) -> None:
    """`erase_user` while an import of the user ran: each later append made the session
    again, and the import reported it whole, a part of the history back after the erasure's
    receipt (before the main line, `when` 1; once the branch is made, `when` 2)."""
    exported, _ = await alice_branched(tmp_path)
    append, calls = Branches.append, []
    async with SessionStore(db_url, create_tables=True) as target, SessionStore(db_url) as other:

        async def erasing(self: Branches, *args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            if len(calls) == when:
                await other.erase_user("alice")
            return await append(self, *args, **kwargs)

        monkeypatch.setattr(Branches, "append", erasing)
        with pytest.raises(ConfigurationError, match="deleted while it was imported"):
            await target.import_user(exported)
        monkeypatch.undo()
        assert await raw_rows(db_url, f"SELECT id FROM {SESSIONS}") == []
        assert await raw_rows(db_url, f"SELECT id FROM {ITEMS}") == []
        report = await target.import_user(exported)  # whole, once the erasure is done
        assert (report.sessions, report.items) == (1, json.loads(exported[-1])["items"])


async def test_a_half_imported_session_is_neither_exported_nor_restored(
    db_url: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session an import left half-written (the database went away) was exported as an
    archived session like any other, and `restore_session` took its mark off: its half
    then passed for the whole, in another store or to `skip_existing`."""
    async with SessionStore(tmp_path / "source.db", create_tables=True) as source:
        for name in ("s1", "s2"):
            for n in range(1, 4):
                await source.session(name, user_id="alice").add_items(turn(n))
        second = source.session("s2")
        await second.create_branch_from_turn(2, "retry")
        await second.add_items([message("again")])
        exported = [line async for line in source.export_user("alice")]
    async with SessionStore(db_url, create_tables=True) as target:
        await cut_off(target, exported, monkeypatch)  # in s2's branch: its main line is in
        records = await lines_of(target, "alice")
        assert [r["session_id"] for r in records if r.get("type") == "session"] == ["s1"]
        assert records[-1]["sessions"] == 1
        assert await target.restore_session("s2") is False
        with pytest.raises(ConfigurationError, match="marked as being imported"):
            await target.import_user(exported, skip_existing=True)
        for archived in (False, True, None):  # out of listings, as the docs say
            listed = await target.list_sessions(archived=archived)
            assert "s2" not in [info.session_id for info in listed]


async def test_skip_existing_does_not_skip_another_users_session(
    db_url: str, tmp_path: Any
) -> None:
    """alice's export holds "chat-1"; the target's "chat-1" is bob's: it was skipped as
    alice's, and alice had nothing there."""
    async with SessionStore(tmp_path / "source.db", create_tables=True) as source:
        await source.session("chat-1", user_id="alice").add_items(turn(1))
        exported = [line async for line in source.export_user("alice")]
    async with SessionStore(db_url, create_tables=True) as target:
        await target.session("chat-1", user_id="bob").add_items([message("bob's")])
        for skip in (True, False):
            with pytest.raises(ConfigurationError, match="belongs to another user"):
                await target.import_user(exported, skip_existing=skip)
        assert await target.session("chat-1").get_items() == [message("bob's")]


async def test_an_import_keeps_the_sessions_order_of_activity(db_url: str, tmp_path: Any) -> None:
    """The export listed the most recent session first and the import stamped each as it
    wrote it: the order of activity came out reversed."""
    async with SessionStore(tmp_path / "source.db", create_tables=True) as source:
        for name in ("oldest", "middle", "newest"):
            await source.session(name, user_id="alice").add_items(turn(1))
        order = [info.session_id for info in await source.list_sessions(user_id="alice")]
        exported = [line async for line in source.export_user("alice")]
    assert order == ["newest", "middle", "oldest"]
    async with SessionStore(db_url, create_tables=True) as target:
        await target.import_user(exported)
        assert [info.session_id for info in await target.list_sessions(user_id="alice")] == order


async def test_an_export_saved_with_a_byte_order_mark_is_read(
    sqlite_url: str, tmp_path: Any
) -> None:
    """A file an editor saved with a byte order mark failed on its first line: "not JSON"."""
    async with SessionStore(tmp_path / "source.db", create_tables=True) as source:
        await source.session("s1", user_id="alice").add_items(turn(1))
        exported = "".join([line async for line in source.export_user("alice")])
    path = tmp_path / "alice.jsonl"
    path.write_text("\ufeff" + exported, encoding="utf-8")
    async with SessionStore(sqlite_url, create_tables=True) as target:
        with path.open("rb") as lines:
            assert (await target.import_user(lines)).sessions == 1
        await target.delete_user("alice")
        assert (await target.import_user(path.read_text(encoding="utf-8"))).sessions == 1
        assert await target.session("s1").get_items() == turn(1)
