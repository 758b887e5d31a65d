"""Worker processes answering the same sessions, one turn of a session at a time.

    python examples/worker_pool.py                          # a SQLite file beside this script
    python examples/worker_pool.py postgresql://app@db/app --workers 4 --sessions 3 --messages 6

A queue holds user messages for a few sessions; four processes (spawned) take them one by
one and answer each with `Runner.run` on its session. The store keeps every `add_items`
batch whole and in order whatever the process, but a turn is two batches (the user's message
before the model call, the reply after it): two workers answering one session at the same
time would store u1 u2 a1 a2, and the second would not see the first's reply. So a worker
holds the session's lock for the whole turn; here, one of a few process locks picked by a
hash of the session id. Workers on several machines would take a database lock instead
(e.g. PostgreSQL's `pg_advisory_lock`) or route each session to one consumer.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import sys
import time
import zlib
from pathlib import Path
from typing import Any

from agents import Agent, Runner, set_tracing_disabled
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message

from agents_sqlalchemy import SessionStore, upgrade

DEFAULT_URL = f"sqlite+aiosqlite:///{Path(__file__).with_name('worker_pool.db')}"
Job = tuple[str, str]  # (session id, user message)


async def offline_reply(call: ModelCall) -> list[Any]:
    """The stand-in model: takes a moment, then echoes the message and the history's size."""
    await asyncio.sleep(0.02)
    return [assistant_message(f"re: {call.input[-1]['content']} (saw {len(call.input)} items)")]


def make_agent() -> Agent[Any]:
    if os.environ.get("OPENAI_API_KEY"):
        return Agent(name="assistant", instructions="Answer in one short sentence.")
    set_tracing_disabled(True)
    return Agent(name="assistant", model=ScriptedModel([ModelStep.respond(offline_reply)]))


async def serve(url: str, queue: Any, locks: list[Any], ready: Any) -> int:
    """Answer jobs from the queue until a None; return how many."""
    handled = 0
    async with SessionStore(url) as store:
        ready.wait()  # every worker starts taking jobs at the same time
        while (job := await asyncio.to_thread(queue.get)) is not None:
            session_id, text = job
            lock = locks[zlib.crc32(session_id.encode()) % len(locks)]
            await asyncio.to_thread(lock.acquire)
            try:
                await Runner.run(make_agent(), text, session=store.session(session_id))
            finally:
                lock.release()
            handled += 1
    return handled


def worker(url: str, queue: Any, locks: list[Any], ready: Any) -> None:
    handled = asyncio.run(serve(url, queue, locks, ready))
    # One write of the whole line: unbuffered, print() writes the newline apart, and two
    # workers' lines could run together.
    sys.stdout.write(f"worker {os.getpid()}: {handled} turns\n")
    sys.stdout.flush()


def check_turns(transcript: list[Any]) -> list[str]:
    """The user messages of a transcript; raises unless each is followed by its own turn.

    A turn: the user's message, then items that are not (tool calls, reasoning), ending with
    the assistant's reply. Two turns that overlapped would leave a user message with none.
    """
    starts = [n for n, item in enumerate(transcript) if item.get("role") == "user"]
    for begin, end in zip(starts, [*starts[1:], len(transcript)], strict=True):
        if end - begin < 2 or transcript[end - 1].get("role") != "assistant":
            raise AssertionError(f"turns interleave at item {begin}: {transcript}")
    if transcript and starts[:1] != [0]:
        raise AssertionError(f"items before the first user message: {transcript}")
    return [transcript[n]["content"] for n in starts]


async def reset(url: str, session_ids: list[str]) -> None:
    await upgrade(url)  # the migrations, to head (a no-op when the tables are current)
    async with SessionStore(url) as store:
        for session_id in session_ids:
            await store.delete_session(session_id)


async def transcripts(url: str, session_ids: list[str]) -> dict[str, list[Any]]:
    async with SessionStore(url) as store:
        return {sid: await store.session(sid).get_items() for sid in session_ids}


def run_pool(
    url: str, workers: int, sessions: int, messages: int
) -> tuple[dict[str, list[Any]], float]:
    """Queue `messages` per session, answer them with `workers` processes, check the result;
    return the transcripts and the seconds the workers took once all had started."""
    session_ids = [f"pool-{n}" for n in range(sessions)]
    asyncio.run(reset(url, session_ids))
    spawn = multiprocessing.get_context("spawn")
    # The workers and this process meet at the barrier once every worker has imported the
    # SDK and opened its store: the clock starts there, so start-up is not counted.
    queue, ready = spawn.Queue(), spawn.Barrier(workers + 1)
    locks = [spawn.Lock() for _ in range(16)]
    for n in range(messages):
        for session_id in session_ids:
            queue.put((session_id, f"{session_id} message {n}"))
    for _ in range(workers):
        queue.put(None)
    processes = [
        spawn.Process(target=worker, args=(url, queue, locks, ready)) for _ in range(workers)
    ]
    for process in processes:
        process.start()
    ready.wait()
    started = time.perf_counter()
    for process in processes:
        process.join()
        if process.exitcode != 0:
            raise SystemExit(f"a worker failed with exit code {process.exitcode}")
    elapsed = time.perf_counter() - started
    found = asyncio.run(transcripts(url, session_ids))
    for session_id, transcript in found.items():
        sent = {f"{session_id} message {n}" for n in range(messages)}
        if sorted(check_turns(transcript)) != sorted(sent):
            raise AssertionError(f"{session_id}: messages lost or repeated: {transcript}")
    return found, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("url", nargs="?", default=DEFAULT_URL)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--messages", type=int, default=6)
    args = parser.parse_args()
    found, elapsed = run_pool(args.url, args.workers, args.sessions, args.messages)
    turns = sum(len(check_turns(items)) for items in found.values())
    print(
        f"{turns} turns by {args.workers} workers in {elapsed:.1f} s "
        "(from when all had started); no turn interleaved"
    )


if __name__ == "__main__":
    main()
