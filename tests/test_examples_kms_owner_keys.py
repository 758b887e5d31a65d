"""examples/kms_owner_keys.py as a user runs it: owner keys in a KMS, a user erased (the
KMS key's deletion scheduled), and that user's items refused when a backup taken before the
erasure is restored."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "examples" / "kms_owner_keys.py"


def test_the_kms_owner_keys_example_erases_what_a_backup_holds() -> None:
    env = {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "sealed 200 items of 2 users; KMS calls: 4",
        "erased alice: 1 session, 100 items, 1 owner key scheduled (kept in KmsOwnerKeys)",
        "bob reads on: bob's message 99",
        # A KMS key per owner (not per owner key) went with the old key: bob was erased.
        "bob reads on after a rotation of the owner keys: bob's message 99",
        "alice's items from the backup: refused, as expected (OwnerKeyError)",
    ]
