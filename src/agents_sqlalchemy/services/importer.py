"""Adopting existing data: copy the SDK's own `SQLiteSession`/`SQLAlchemySession` tables.

The source is only read (a SQLite file is opened read-only). Each session is copied in one
transaction, in the SDK's own order, and a session already in the target is skipped, so an
interrupted or repeated import is safe to run again. Items are encoded by the target's
codec: with a key, they are sealed exactly as `SessionStore(target, key=...)` seals them.

Example::

    report = await import_sdk("conversations.db", "postgresql://app@db/app")
    print(report.sessions, report.items)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from ..codec import Codec
from ..crypto import Key
from ..errors import ConfigurationError
from ..repository import SdkSource
from ..repository.imports import Order
from ..tables import TableNames, table_names
from ..telemetry import Telemetry, current, telemetry_option
from ..validation import check_progress, session_key
from . import Services
from .adoption import copy_session

__all__ = ["ImportReport", "Order", "import_sdk"]


@dataclass(frozen=True)
class ImportReport:
    """What an import did: sessions and items copied, sessions skipped, rows not readable.

    Example::

        report = await import_sdk("conversations.db", "agent.db")
        assert report.unreadable == 0, "some SDK rows were not JSON objects"
    """

    sessions: int = 0
    items: int = 0
    skipped_sessions: int = 0  # already in the target: an earlier import, or written since
    unreadable: int = 0  # rows that are not a JSON object (the SDK skips them as well)
    #: The ids of the sessions skipped: present on both sides, left as they are in the target.
    skipped_ids: tuple[str, ...] = ()


async def import_sdk(
    source: str | Path | URL | AsyncEngine,
    target: str | Path | URL | AsyncEngine,
    *,
    tables: TableNames | None = None,
    sessions_table: str = "agent_sessions",
    messages_table: str = "agent_messages",
    order: Order = "auto",
    progress: Callable[[int, int], None] | None = None,
    key: Key | None = None,
    create_tables: bool = False,
    telemetry: Telemetry | bool | None = None,
) -> ImportReport:
    """Copy every SDK session of `source` into the library's tables in `target`.

    `order` is the SDK's reading order: `id` (`SQLiteSession`), `created_at` then id
    (`SQLAlchemySession`), or `auto` (told apart by the index each creates). `progress` is
    called with (rows done, rows in all) as sessions are copied. The target's schema must be
    at head (`agents-sqlalchemy db upgrade`), or `create_tables=True` migrates it there
    first. `key` is the target's key: an encrypted target
    refuses an import without it, and with it every item is sealed on the way in.
    `telemetry` is the target store's option (`Telemetry`): the import is one operation.

    Example::

        report = await import_sdk("conversations.db", "agent.db", messages_table="msgs")
    """
    if order not in get_args(Order):
        raise ConfigurationError(f"order must be one of {get_args(Order)}, got {order!r:.80}")
    progress, names = check_progress(progress), table_names(tables)
    reader = SdkSource(source, sessions_table, messages_table)
    services = Services.build(
        target,
        tables=names,
        key=key,
        ttl=None,
        embedder=None,
        create_tables=create_tables,
        telemetry=telemetry_option(telemetry),
    )
    services.opener.announce_history = False  # the history is being imported
    counts = {"sessions": 0, "items": 0, "skipped_sessions": 0, "unreadable": 0}
    skipped: list[str] = []
    try:
        with services.db.telemetry.operation("import"):
            codec = await services.opener.ready()  # the schema and the key, checked first
            if order == "auto":
                order = await reader.order()
            groups = await reader.groups()
            total, done = sum(group.messages for group in groups), 0
            if progress:
                progress(0, total)
            for group in groups:
                copied, unreadable = await _copy(services, codec, reader, group, order)
                if copied is None:
                    counts["skipped_sessions"] += 1
                    skipped.append(group.session_id)
                else:
                    counts["sessions"] += 1
                    counts["items"] += copied
                    counts["unreadable"] += unreadable
                done += group.messages
                if progress:
                    progress(done, total)
            return ImportReport(**counts, skipped_ids=tuple(skipped))
    finally:
        await services.close()
        await reader.close()


async def _copy(
    services: Services, codec: Codec, reader: SdkSource, group: Any, order: Order
) -> tuple[int | None, int]:
    """Copy one SDK session: (items copied, or None if the target had it; rows unreadable)."""
    key = session_key(group.session_id)
    rows = await reader.rows(key.session_id, order)
    sealer = await services.owners.sealer(key)
    copied, unreadable = await copy_session(
        services.imports, codec, key, rows, (group.first, group.last), sealer
    )
    if copied is not None and (operation := current()) is not None:  # copied, not skipped
        operation.wrote(copied, sum(len(row.message_data or "") for row in rows))
    return copied, unreadable
