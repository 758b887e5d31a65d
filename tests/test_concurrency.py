"""Many writers at once: processes, tasks, event loops and threads, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path

from agents import Agent, Runner
from agents.testing import ScriptedModel, assistant_message

from agents_sqlalchemy import SessionStore

from .items import message

ROOT = Path(__file__).resolve().parent.parent


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.worker", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    return out


async def test_eight_processes_never_lose_or_interleave_a_batch(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        await store.session("busy").get_items()
    writers = [spawn("write", db_url, "busy", str(w), "50") for w in range(8)]
    for process in writers:
        finish(process)
    async with SessionStore(db_url) as store:
        items = await store.session("busy").get_items()
    assert len(items) == 1200
    tags = [json.loads(item["content"]) for item in items]
    for start in range(0, 1200, 3):
        batch = tags[start : start + 3]
        assert [i for _, _, i in batch] == [0, 1, 2], f"batch split at {start}: {batch}"
        assert len({(w, b) for w, b, _ in batch}) == 1, f"batch interleaved at {start}"
    # Each writer's batches keep their own order.
    for writer in range(8):
        assert [b for w, b, i in tags if w == writer and i == 0] == list(range(50))


async def test_concurrent_pops_return_each_item_once(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        session = store.session("pops")
        await session.add_items([message(str(i)) for i in range(120)])
    poppers = [spawn("pop", db_url, "pops", "20") for _ in range(3)]
    async with SessionStore(db_url) as first, SessionStore(db_url) as second:
        sessions = [first.session("pops"), second.session("pops")] * 10
        popped_here = await asyncio.gather(*(s.pop_item() for s in sessions for _ in range(3)))
    popped_there = [
        json.loads(line) for process in poppers for line in finish(process).splitlines()
    ]
    popped = [item["content"] for item in [*popped_here, *popped_there] if item is not None]
    assert sorted(popped, key=int) == [str(i) for i in range(120)]


async def test_first_write_to_a_new_session_from_many_tasks(db_url: str) -> None:
    async with SessionStore(db_url, create_tables=True) as store:
        sessions = [store.session("brand-new") for _ in range(25)]
        await asyncio.gather(*(s.add_items([message(str(i))]) for i, s in enumerate(sessions)))
        items = await store.session("brand-new").get_items()
    assert sorted(int(item["content"]) for item in items) == list(range(25))


async def test_first_use_creates_tables_once_under_concurrency(db_url: str) -> None:
    stores = [SessionStore(db_url, create_tables=True) for _ in range(5)]
    try:
        await asyncio.gather(
            *(store.session(f"s{i}").add_items([message("x")]) for i, store in enumerate(stores))
        )
        assert [
            len(await store.session(f"s{i}").get_items()) for i, store in enumerate(stores)
        ] == [1] * 5
    finally:
        for store in stores:
            await store.close()


def test_one_store_from_asyncio_run_three_times(db_url: str) -> None:
    store = SessionStore(db_url, create_tables=True)
    session = store.session("loops")
    for i in range(3):
        asyncio.run(session.add_items([message(str(i))]))
    assert [item["content"] for item in asyncio.run(session.get_items())] == ["0", "1", "2"]
    asyncio.run(store.close())


def test_one_store_from_run_sync_in_three_threads(db_url: str) -> None:
    store = SessionStore(db_url, create_tables=True)
    asyncio.run(store.session("warm-up").get_items())  # the store has already served a loop
    errors: list[BaseException] = []
    outputs: list[str] = []

    def worker(index: int) -> None:
        try:
            agent = Agent(name="a", model=ScriptedModel([[assistant_message(f"reply {index}")]]))
            result = Runner.run_sync(agent, f"hi {index}", session=store.session("threads"))
            outputs.append(result.final_output)
        except BaseException as exc:  # collected and re-raised in the test thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert sorted(outputs) == ["reply 0", "reply 1", "reply 2"]
    items = asyncio.run(store.session("threads").get_items())
    assert len(items) == 6
    asyncio.run(store.close())
