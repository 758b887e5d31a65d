"""Alembic's INFO lines ("Context impl SQLiteImpl.", "Will assume non-transactional DDL.",
"Running upgrade ...") kept out of an app's logs while a store checks or creates its schema.

A store does that on its first use; an app logging at INFO would otherwise get Alembic's
lines there. The command line (`db upgrade`) and an app's own Alembic runs keep them.

Example::

    with quiet_alembic():
        status = schema_status(connection, tables)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

ALEMBIC_LOGGER = "alembic.runtime.migration"


class _QuietFilter(logging.Filter):
    """Drops records under WARNING while a `quiet_alembic` block runs (in any thread)."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or self.depth == 0


_FILTER = _QuietFilter()
logging.getLogger(ALEMBIC_LOGGER).addFilter(_FILTER)


@contextmanager
def quiet_alembic() -> Iterator[None]:
    """Within the block, Alembic's migration logger passes on warnings and errors only."""
    with _FILTER.lock:
        _FILTER.depth += 1
    try:
        yield
    finally:
        with _FILTER.lock:
            _FILTER.depth -= 1
