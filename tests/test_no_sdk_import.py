"""A process that never imports the Agents SDK (a web backend listing sessions, a worker,
the command line) pays nothing for it: no operation of a store or session loads `agents`.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from agents_sqlalchemy import SessionStore

    async def main(url):
        async with SessionStore(url, create_tables=True, key="pw",
                                session_settings={"limit": 5}) as store:
            session = store.session("a", user_id="u", session_settings={"limit": 3})
            await session.add_items([{"role": "user", "content": f"hi {i}"} for i in range(5)])
            assert len(await session.get_items()) == 3
            assert len(await session.get_items(limit=4)) == 4
            assert len(await store.session("a").get_items()) == 5
            await session.search("hi")
            await session.set_state("k", 1)
            await session.pop_item()
            await session.get_conversation_turns()
            await store.list_sessions(user_id="u")
            await store.session_info("a")
            await store.usage()
        loaded = sorted(m for m in sys.modules if m == "agents" or m.startswith("agents."))
        print(loaded)

    asyncio.run(main(sys.argv[1]))
    """
)


@pytest.mark.slow
def test_no_operation_imports_the_sdk(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'agent.db'}"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, url], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_settings_the_sdk_reads_are_its_own_type(tmp_path: Path) -> None:
    """The SDK's Runner reads `session.session_settings`: it gets the SDK's type, resolved
    from the store's and the session's own, whatever form they were given in."""
    from agents.memory import SessionSettings

    from agents_sqlalchemy import SessionStore

    store = SessionStore(tmp_path / "a.db", session_settings={"limit": 5})
    own = store.session("a", session_settings={"limit": None})
    assert own.session_settings == SessionSettings(limit=5)
    assert store.session("b", session_settings={"limit": 2}).session_settings == SessionSettings(
        limit=2
    )
    assert store.session_settings == SessionSettings(limit=5)


CLI_SCRIPT = textwrap.dedent(
    """
    import sys
    from agents_sqlalchemy.cli import app

    url = sys.argv[1]
    for args in (["sessions", "list"], ["sessions", "show", "a", "--usage"],
                 ["search", "hi"], ["doctor"], ["sessions", "usage"], ["users", "export", "u"]):
        try:
            app([*args, "--url", url], standalone_mode=False)
        except SystemExit:  # doctor's exit status
            pass
    loaded = sorted(m for m in sys.modules if m == "agents" or m.startswith("agents."))
    print(loaded, file=sys.stderr)
    """
)


@pytest.mark.slow
def test_no_command_imports_the_sdk(tmp_path: Path) -> None:
    """The guide said `sessions show` imports it: no command does."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'agent.db'}"
    written = "import asyncio, sys\n" + SCRIPT.split("import asyncio, sys\n", 1)[1]
    made = subprocess.run([sys.executable, "-c", written, url], capture_output=True, timeout=120)
    assert made.returncode == 0, made.stderr
    env = {"AGENTS_SQLALCHEMY_KEY": "pw", "PATH": "", "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", CLI_SCRIPT, url],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr
