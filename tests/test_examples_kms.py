"""examples/kms_key_provider.py as a user runs it: it seals, reopens with one KMS call, and
says that the two wrong keys are refused as expected."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "examples" / "kms_key_provider.py"


def test_the_kms_example_runs_and_explains_its_refusals() -> None:
    env = {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "sealed 1000 items; KMS calls so far: 2"
    assert lines[1].startswith("reopened, last item = ") and lines[1].endswith("KMS calls: 1")
    assert "message 1000" in lines[1]
    assert lines[2:] == [
        "another key of the same KMS (alias/someone-else): refused, as expected (WrongKeyError)",
        "the same alias in another KMS (alias/agents-demo): refused, as expected "
        "(KeyProviderError)",
    ]
