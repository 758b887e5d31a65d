"""Work run at once on threads of its own, its failures raised in the test's thread."""

from __future__ import annotations

import threading
from collections.abc import Callable


def on_threads(work: Callable[[int], object], count: int) -> None:
    """Run `work(0)` ... `work(count - 1)` at once, each on a thread of its own; what
    failed there is raised here."""
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            work(index)
        except BaseException as exc:  # collected and re-raised in the test thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=240)
    assert not errors, errors
