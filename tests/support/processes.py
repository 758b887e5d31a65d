"""Child Python processes that run `tests.support.worker` (see its commands)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

#: The repository's root, from where `python -m tests.support.worker` finds the module.
ROOT = Path(__file__).resolve().parents[2]
WORKER = "tests.support.worker"


def spawn(*args: str) -> subprocess.Popen[str]:
    """Start a worker process with these arguments; its output is read by `finish`."""
    return subprocess.Popen(
        [sys.executable, "-m", WORKER, *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str]) -> str:
    """Wait for a worker; its standard output, once it has exited with status 0."""
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    return out
