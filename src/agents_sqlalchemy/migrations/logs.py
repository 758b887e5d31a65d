"""What migrations would print that says nothing to an app, kept out of its logs.

- Alembic's INFO lines ("Context impl SQLiteImpl.", "Will assume non-transactional DDL.",
  "Running upgrade ...") while a store checks or creates its schema on first use. The
  command line (`db upgrade`) and an app's own Alembic runs keep them.
- MySQL's and MariaDB's "Name 'pk_...' ignored for PRIMARY key." (their primary keys are
  all named PRIMARY), which asyncmy logs as a warning for every table the migrations
  create: the revisions name their keys by the models' naming convention, Alembic its
  version table's. And their "Can't create database '...'; database exists", which every
  migration with a schema meets, creating it if it is not there.

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
_NOTES = re.compile(
    r"Name '.*' ignored for PRIMARY key\.|Can't create database '.*'; database exists"
)
_MYSQL_NOTES = _Quieted(lambda record: _NOTES.fullmatch(record.getMessage()) is not None)
logging.getLogger(ASYNCMY_LOGGER).addFilter(_MYSQL_NOTES)


def quiet_alembic() -> AbstractContextManager[None]:
    """Within the block, Alembic's migration logger passes on warnings and errors only."""
    return _ALEMBIC.quieting()


def quiet_mysql_notes() -> AbstractContextManager[None]:
    """Within the block (migrations on MySQL or MariaDB), asyncmy's reports that a primary
    key's name was ignored or that the schema's database exists are dropped; its other
    warnings pass."""
    return _MYSQL_NOTES.quieting()
