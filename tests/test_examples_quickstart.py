"""examples/quickstart.py (`make demo`): a conversation that a second process continues, on
the embedded SQLite default, offline."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # two Python processes

SCRIPT = Path(__file__).resolve().parent.parent / "examples" / "quickstart.py"


def test_the_demo_continues_the_conversation_in_a_second_process(tmp_path: Path) -> None:
    script = tmp_path / SCRIPT.name  # its database goes beside it: here, not in the checkout
    shutil.copy(SCRIPT, script)
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    for _ in range(2):  # a second run starts the conversation afresh
        done = subprocess.run(
            [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert len({line.split("]")[0] for line in lines}) == 2, lines  # two processes
        assert "Noted." in lines[1] and "Your dog is called Mochi." in lines[4], lines
        assert lines[5].endswith("4 items stored in quickstart.db"), lines
    assert (tmp_path / "quickstart.db").exists()
