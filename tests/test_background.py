"""The worker lets writes gather until they pause, though not forever, and a flush cuts the
wait short."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from agents_sqlalchemy.services import background as background_module
from agents_sqlalchemy.services.background import Background

from .support.tables import PREFIX, raw_rows

PAUSE = 0.5  # GATHER_SECONDS in these tests
WRITE_EVERY = 0.05


async def _nothing() -> None:
    pass


class Job:
    """A job that notes when it ran (on the worker thread)."""

    def __init__(self) -> None:
        self.ran: list[float] = []
        self.done = threading.Event()

    async def __call__(self) -> None:
        self.ran.append(time.monotonic())
        self.done.set()

    async def wait(self, seconds: float) -> None:
        await asyncio.to_thread(self.done.wait, seconds)

    async def submit_every(self, background: Background, seconds: float, *, stop: bool) -> float:
        """Submit this job every `WRITE_EVERY` seconds for `seconds` (or until it ran, with
        `stop`); returns when the writes started."""
        started = time.monotonic()
        while time.monotonic() - started < seconds and not (stop and self.ran):
            background.submit("index", self)
            await asyncio.sleep(WRITE_EVERY)
        return started


def gathering(monkeypatch: pytest.MonkeyPatch, limit: int) -> tuple[Job, Background]:
    """A job and a worker that waits for writes to pause for `PAUSE`, at most `limit` times."""
    monkeypatch.setattr(background_module, "GATHER_SECONDS", PAUSE)
    monkeypatch.setattr(background_module, "GATHER_LIMIT", limit)
    return Job(), Background(release=_nothing)


async def test_the_worker_waits_for_the_writes_to_pause_then_runs_by_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    job, background = gathering(monkeypatch, limit=100)
    await job.submit_every(background, 3 * PAUSE, stop=False)  # always within the pause
    assert job.ran == []  # a fixed pause from the first write would have run it by now
    stopped = time.monotonic()
    await job.wait(10 * PAUSE)
    assert len(job.ran) == 1 and job.ran[0] >= stopped  # one pass, once the writes stopped
    await background.close()


async def test_under_a_steady_stream_of_writes_the_worker_waits_at_most_its_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    job, background = gathering(monkeypatch, limit=3)
    started = await job.submit_every(background, 20 * PAUSE, stop=True)
    assert job.ran, "the worker never ran while writes kept coming"
    assert 3 * PAUSE <= job.ran[0] - started < 3 * PAUSE + 2.0
    await background.close()


async def test_a_flush_cuts_the_gathering_short(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(background_module, "GATHER_SECONDS", 60.0)
    job = Job()
    background = Background(release=_nothing)
    background.submit("index", job)
    await asyncio.wait_for(background.flush(), 10)
    assert len(job.ran) == 1
    await background.close()


class Blocking:
    """A job that runs until it is let go (on the worker's loop, or the caller's)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.go = threading.Event()
        self.ran = 0

    async def __call__(self) -> None:
        self.started.set()
        await asyncio.to_thread(self.go.wait, 10)
        self.ran += 1


async def test_a_cancelled_flush_leaves_the_others_waiting_for_nothing() -> None:
    """A flush cancelled by its caller (a search under `wait_for`) had its future cancelled:
    setting it raised, and every flush listed after it waited for ever (a search hung)."""
    blocking = Blocking()
    background = Background(release=_nothing)
    background.submit("index", blocking)
    await asyncio.to_thread(blocking.started.wait, 10)
    cancelled = asyncio.ensure_future(background.flush())
    others = [asyncio.ensure_future(background.flush()) for _ in range(3)]
    await asyncio.sleep(0.01)
    cancelled.cancel()
    blocking.go.set()
    await asyncio.wait_for(asyncio.gather(*others), 10)
    assert cancelled.cancelled() and blocking.ran == 1
    await background.close()


@pytest.mark.parametrize("thread", [True, False], ids=["worker thread", "caller's loop"])
async def test_a_flush_waits_for_what_was_submitted_before_it_only(
    monkeypatch: pytest.MonkeyPatch, thread: bool
) -> None:
    """A flush returns once the jobs submitted before it have run, while writes go on
    submitting more: it waited for the queue to empty, and a search beside writers that
    never pause waited for all of them (0.8 to 5.8 s beside four writers)."""
    monkeypatch.setattr(background_module, "GATHER_SECONDS", 0.0)
    background = Background(release=_nothing, thread=thread)
    first, later = Blocking(), Blocking()
    background.submit(("index", "a"), first)
    await asyncio.to_thread(first.started.wait, 10)
    flushed = asyncio.ensure_future(background.flush())
    await asyncio.sleep(0)  # the flush has begun
    background.submit(("index", "b"), later)  # after it: not what it waits for
    await asyncio.sleep(0.05)
    assert not flushed.done()  # the first job still runs
    first.go.set()
    await asyncio.wait_for(asyncio.shield(flushed), 10)
    assert (first.ran, later.ran) == (1, 0)
    assert later.started.wait(10)  # the later job runs, and the flush did not wait for it
    later.go.set()
    await background.close()
    assert later.ran == 1


EXIT_SCRIPT = textwrap.dedent(
    """
    import asyncio, atexit, sys, threading

    def workers_left():  # registered before the library's own hook: runs after it
        names = [t.name for t in threading.enumerate() if t.name.startswith("agents-sqlalchemy")]
        print("workers left at exit:", names)

    atexit.register(workers_left)
    from agents_sqlalchemy import SessionStore

    async def main(url):
        store = SessionStore(url, create_tables=True)  # never closed
        # 300 characters each: a batch long enough to be tokenised off an app's loop.
        text = "invoice {0} for the deploy " * 12
        items = [{"role": "user", "content": text.format(i)} for i in range(200)]
        await store.session("ending").add_items(items)

    asyncio.run(main(sys.argv[1]))
    """
)


def test_a_process_that_ends_without_closing_its_store_stops_the_worker_first(
    db_url: str,
) -> None:
    """The worker is stopped at interpreter exit: one the finalizing interpreter kills inside
    the driver aborts the whole process (2 runs in 30 here on PostgreSQL, exit status 134).
    On a server it indexes what was written first; on SQLite it cannot (the interpreter's
    thread pools are shut by then) and the next search catches up."""
    done = subprocess.run(
        [sys.executable, "-c", EXIT_SCRIPT, db_url], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "workers left at exit: []" in done.stdout, done.stdout
    if not db_url.startswith("sqlite"):
        count = f"SELECT count(*) FROM {PREFIX}search_index"
        assert asyncio.run(raw_rows(db_url, count)) == [(200,)]


FORK_SCRIPT = textwrap.dedent(
    """
    import asyncio, atexit, contextlib, faulthandler, os, sys, time
    from agents_sqlalchemy import SessionStore

    async def main(url, hold):
        store = SessionStore(url, create_tables=True)
        await store.session("forked").add_items([{"role": "user", "content": "hello"}])
        # With "hold": forked while the lock is held, as the worker holds it now and then.
        held = store._services.background._lock if hold else contextlib.nullcontext()
        with held:
            pid = os.fork()  # while the worker gathers the new item's indexing
            if pid == 0:  # the child has the store's state but not its worker thread
                faulthandler.dump_traceback_later(20, exit=True)  # a hang fails, and says where
                started = time.monotonic()
                atexit._run_exitfuncs()
                print(f"exit handlers took {time.monotonic() - started:.1f} s", flush=True)
                os._exit(0)
        os.waitpid(pid, 0)
        await store.close()

    asyncio.run(main(sys.argv[1], sys.argv[2:] == ["hold"]))
    """
)


def _fork_exit_seconds(tmp_path: Path, *args: str) -> float:
    """How long the exit handlers of a child forked after a write took (`FORK_SCRIPT`)."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'agent.db'}"
    done = subprocess.run(
        [sys.executable, "-c", FORK_SCRIPT, url, *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    [took] = re.findall(r"exit handlers took ([0-9.]+) s", done.stdout)
    return float(took)


def test_a_forked_child_does_not_wait_at_exit_for_its_parents_worker(tmp_path: Path) -> None:
    """A child forked while the worker had jobs waiting has no worker of its own: its exit
    stops nothing (it waited 5 s, every bound in turn, for a thread that is not there)."""
    assert _fork_exit_seconds(tmp_path) < 1.0


def test_a_child_forked_while_a_worker_held_its_lock_exits_at_once(tmp_path: Path) -> None:
    """The parent's worker may hold its lock at the moment of a fork; in the child nothing
    ever releases it, and the child's exit waited on it for ever (1 run of 13, machine
    busy). The child starts its workers afresh instead."""
    assert _fork_exit_seconds(tmp_path, "hold") < 1.0
