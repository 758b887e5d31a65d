"""A SQLite file the store opened: small units run on the caller's thread, yet never stall
its event loop behind another writer, and the WAL is still checkpointed."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError

from agents_sqlalchemy import DatabaseError, SchemaError, SessionBusyError, SessionStore
from agents_sqlalchemy.database.sqlite_file import CHECKPOINT_EVERY

from .support.cli import cli
from .support.items import message


async def ticking(ticks: list[float]) -> None:
    while True:
        await asyncio.sleep(0.01)
        ticks.append(asyncio.get_running_loop().time())


async def test_a_small_write_behind_another_writer_waits_off_the_event_loop(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.db"
    async with SessionStore(path, create_tables=True, search=False) as store:
        session = store.session("s")
        await session.add_items([message("first")])
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another writer holds the database's write lock
        ticks: list[float] = []
        ticker = asyncio.create_task(ticking(ticks))
        append = asyncio.create_task(session.add_items([message("second")]))
        pop = asyncio.create_task(session.pop_item())
        await asyncio.sleep(0.5)
        assert not append.done() and not pop.done()  # they wait for the lock...
        assert len(ticks) >= 20  # ...and the loop goes on meanwhile
        other.execute("ROLLBACK")
        other.close()
        await append
        popped = await pop
        ticker.cancel()
        assert popped in (message("first"), message("second"))
        assert len(await session.get_items()) == 1


async def test_a_small_write_still_gives_up_after_lock_timeout(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    async with SessionStore(path, create_tables=True, search=False, lock_timeout=0.3) as store:
        session = store.session("s")
        await session.add_items([message("kept")])
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            for write in (session.add_items([message("lost")]), session.pop_item()):
                with pytest.raises(SessionBusyError, match="'s'"):
                    await write
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert await session.get_items() == [message("kept")]


def wal_restarts(wal: Path) -> int:
    """How many times the WAL was started over: its header's checkpoint sequence number."""
    return int.from_bytes(wal.read_bytes()[12:16], "big")


async def test_small_writes_checkpoint_the_wal(tmp_path: Path) -> None:
    """Back-to-back small writes, with no pause for a checkpoint to find the WAL idle: the
    WAL still starts over every few hundred writes, so its file (which keeps the largest
    size it reached) stays within what `2 * CHECKPOINT_EVERY` writes fill."""
    path, wal = tmp_path / "agent.db", tmp_path / "agent.db-wal"
    writes = 10 * CHECKPOINT_EVERY
    async with SessionStore(path, create_tables=True, search=False) as store:
        session = store.session("s")
        await session.add_items([message("first")])
        before = wal_restarts(wal)
        sizes = [wal.stat().st_size]
        for n in range(writes):  # each adds a few pages to the WAL
            await session.add_items([message("another turn")])
            if n < CHECKPOINT_EVERY // 2:
                sizes.append(wal.stat().st_size)
        per_write = max(b - a for a, b in itertools.pairwise(sizes))
        await asyncio.sleep(0.2)
        await session.add_items([message("last")])  # the first write after a checkpoint
        # Without checkpoints the WAL would grow all along; with them it starts over.
        assert wal_restarts(wal) >= before + 4
        assert wal.stat().st_size <= 2 * CHECKPOINT_EVERY * per_write * 1.5
        assert wal.stat().st_size < writes * per_write / 3
        assert len(await session.get_items()) == writes + 2


async def test_a_store_that_does_not_create_tables_never_creates_its_file(
    tmp_path: Path,
) -> None:
    """Without `create_tables`, a SQLite file that is not there (never made, or moved away
    while the store runs) is an error on every new connection, sync or async; nothing is
    made in its place. `create_tables=True` makes it, as before."""
    path = tmp_path / "agent.db"
    never = SessionStore(path)
    with pytest.raises(SchemaError, match="create_tables=True"):  # the tables are missing
        await never.session("s").get_items()
    await never.close()
    assert not path.exists() and not path.with_name("agent.db-wal").exists()

    async with SessionStore(path, create_tables=True) as store:
        await store.session("s").add_items([message("kept")])
    async with SessionStore(path) as store:
        session = store.session("s")
        assert await session.get_items(limit=1) == [message("kept")]
        path.rename(tmp_path / "moved.db")

        # New connections: of the store's units on another thread, of its engine here.
        with pytest.raises(DatabaseError, match=r"no such file .*nothing was created"):
            await asyncio.to_thread(asyncio.run, session.get_items(limit=1))
        await store.engine.dispose()
        with pytest.raises(OperationalError, match="unable to open"):
            async with store.engine.connect() as conn:
                await conn.exec_driver_sql("SELECT 1")
    assert not path.exists()  # (its WAL, opened before the move, may be left beside it)


async def test_small_units_give_the_loop_a_turn(tmp_path: Path) -> None:
    """A small read or write ran on the loop's thread without ever suspending: a task
    polling `get_items(limit=1)` starved every other task, and its timeout never fired."""
    turns = 0

    async def other_task() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    async with SessionStore(tmp_path / "a.db", create_tables=True, search=False) as store:
        session = store.session("s")
        other = asyncio.create_task(other_task())
        for n in range(100):
            await session.add_items([message(f"{n}")])
            await session.get_items(limit=1)
        other.cancel()
    assert turns >= 150
    with pytest.raises(TimeoutError):
        async with SessionStore(tmp_path / "a.db") as store, asyncio.timeout(0.2):
            for _ in range(100_000):  # a few seconds: far past the timeout
                await store.session("s").get_items(limit=1)


async def test_an_append_cancelled_as_it_is_called_is_stored(db_url: str) -> None:
    """The turn a small SQLite unit gave the loop came before its work (and so did a WAL
    checkpoint when one was due): a cancel that came then (a streamed run cancelled at a
    tool's output) lost the append, where the SDK's own sessions and the servers store it."""
    async with SessionStore(db_url, create_tables=True, search=False) as store:
        session = store.session("s")
        await session.add_items([message("first")])  # the store is open, its tables checked
        # On SQLite, past the WAL's checkpoints, due every 200 small writes.
        count = 450 if db_url.startswith("sqlite") else 3
        for n in range(count):
            task = asyncio.create_task(session.add_items([message(f"kept {n}")]))
            await asyncio.sleep(0)  # the call has started
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        kept = [message(f"kept {n}") for n in range(count)]
        assert await session.get_items() == [message("first"), *kept]


@pytest.mark.parametrize("name", ["chat?v2.db", "k?mode=ro.db", "e%41f.db"])
def test_a_file_path_is_the_file_it_names(tmp_path: Path, name: str) -> None:
    """A path was read as a URL: 'chat?v2.db' wrote to the file 'chat', 'e%41f.db' to
    'eAf.db', so two apps whose paths differed after a '?' shared one database."""

    async def write(given: Path | str) -> None:
        async with SessionStore(given, create_tables=True) as store:
            await store.session("s").add_items([message(str(given))])

    for given in (tmp_path / name, str(tmp_path / name)):
        asyncio.run(write(given))
    assert sorted(path.name for path in tmp_path.iterdir() if path.suffix == ".db") == [name]
    result = cli("sessions", "list", "--url", str(tmp_path / name), "--json")
    assert result.exit_code == 0 and '"session_id": "s"' in result.output, result.output


@pytest.mark.parametrize("how", ["deleted", "replaced"])
async def test_writes_to_a_file_deleted_or_replaced_while_open_are_refused(
    tmp_path: Path, how: str
) -> None:
    """A SQLite file deleted, or replaced by another (a backup restored over it), while a
    store had it open took every later write into the old file, which no one opens again,
    and reported it saved. Each write now checks the file is the one it first wrote."""
    path = tmp_path / "agent.db"
    async with SessionStore(path, create_tables=True, search=False) as store:
        session = store.session("s")
        await session.add_items([message("kept")])
        backup = tmp_path / "backup.db"
        async with SessionStore(backup, create_tables=True, search=False) as other:
            await other.session("s").add_items([message("restored")])
        _remove_database(path)
        if how == "replaced":
            backup.replace(path)
        for write in (  # small and large units alike
            lambda: session.add_items([message("lost")]),
            lambda: session.add_items([message("lost")] * 300),
            lambda: store.session("new").set_state("k", 1),
        ):
            with pytest.raises(DatabaseError, match=f"was {how}"):
                await write()
        if how == "replaced":  # the file now there holds what it held, and nothing of ours
            with sqlite3.connect(path) as restored:
                rows = restored.execute("SELECT payload FROM agents_sqlalchemy_items").fetchall()
            assert [row[0] for row in rows] == ['{"role":"user","content":"restored"}']


def _remove_database(path: Path) -> None:
    """Delete a SQLite database: its file, its write-ahead log and the log's index."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


async def test_a_relative_path_names_the_file_it_named_as_the_store_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite resolves a relative path as each connection opens: after the process changed
    directory, a write failed, saying that agent.db "was deleted while this store had it
    open" (it was not), and its next connection would have opened another file."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    async with SessionStore("agent.db", create_tables=True) as store:
        session = store.session("s")
        await session.add_items([message("tomatoes")])
        monkeypatch.chdir(tmp_path / "b")
        await session.add_items([message("kayaks")])
        assert await store.session("s").get_items() == [message("tomatoes"), message("kayaks")]
        assert await session.search("kayaks") == [message("kayaks")]
    assert list((tmp_path / "b").iterdir()) == []
    async with SessionStore(tmp_path / "a" / "agent.db") as store:
        assert len(await store.session("s").get_items()) == 2


async def test_a_shared_store_on_a_relative_path_is_the_file_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`SessionStore.shared` found its store by the path as given: after a `chdir`,
    "agent.db" gave the store of the other directory's file, and its absolute path another
    store on the same file."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    first = SessionStore.shared("agent.db", create_tables=True)
    try:
        assert SessionStore.shared(tmp_path / "a" / "agent.db") is first
        await first.release()
        monkeypatch.chdir(tmp_path / "b")
        other = SessionStore.shared("agent.db", create_tables=True)
        assert other is not first
        await other.release()
    finally:
        await first.release()
