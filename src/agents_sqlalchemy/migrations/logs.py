"""What migrations would print that says nothing to an app, kept out of its logs.

- Alembic's INFO lines ("Context impl SQLiteImpl.", "Will assume non-transactional DDL.",
  "Running upgrade ...") while a store checks or creates its schema on first use. The
  command line (`db upgrade`) and an app's own Alembic runs keep them.
- MySQL's and MariaDB's "Name 'pk_...' ignored for PRIMARY key." (their primary keys are
  all named PRIMARY), which asyncmy logs as a warning for every table the migrations
  create: the revisions name their keys by the models' naming convention, Alembic its
  version table's.

Example::

    with quiet_alembic():
        status = schema_status(connection, tables)
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

ALEMBIC_LOGGER = "alembic.runtime.migration"
ASYNCMY_LOGGER = "asyncmy"


class _Quieted(logging.Filter):
    """Drops the records `dropped` picks while a `quieting` block runs (in any thread)."""

    def __init__(self, dropped: Callable[[logging.LogRecord], bool]) -> None:
        super().__init__()
        self.dropped = dropped
        self.depth = 0
        self.lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        return self.depth == 0 or not self.dropped(record)

    @contextmanager
    def quieting(self) -> Iterator[None]:
        with self.lock:
            self.depth += 1
        try:
            yield
        finally:
            with self.lock:
                self.depth -= 1


_ALEMBIC = _Quieted(lambda record: record.levelno < logging.WARNING)
logging.getLogger(ALEMBIC_LOGGER).addFilter(_ALEMBIC)
_NAMES = re.compile(r"Name '.*' ignored for PRIMARY key\.")
_PRIMARY_KEY_NAMES = _Quieted(lambda record: _NAMES.fullmatch(record.getMessage()) is not None)
logging.getLogger(ASYNCMY_LOGGER).addFilter(_PRIMARY_KEY_NAMES)


def quiet_alembic() -> AbstractContextManager[None]:
    """Within the block, Alembic's migration logger passes on warnings and errors only."""
    return _ALEMBIC.quieting()


def quiet_primary_key_names() -> AbstractContextManager[None]:
    """Within the block (migrations on MySQL or MariaDB), asyncmy's report that a primary
    key's name was ignored is dropped; its other warnings pass."""
    return _PRIMARY_KEY_NAMES.quieting()
