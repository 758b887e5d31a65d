"""Adopting existing data: copy the SDK's own `SQLiteSession`/`SQLAlchemySession` tables.

The source is only read (a SQLite file is opened read-only). Each session is copied in one
transaction, as the SDK reads it, and a session already in the target is skipped, so an
interrupted or repeated import is safe to run again. Items are encoded by the target's
codec: with a key, they are sealed exactly as `SessionStore(target, key=...)` seals them.

A session is copied whole or not at all: one whose id this library refuses (the SDK allows
""), or that holds an item the SDK reads but this store cannot hold (NaN, a lone surrogate,
nesting past 128 levels), is not imported and is named in `ImportReport.refused`, while the
others are; `skip_unstorable=True` imports such a session without those items, each named
in `ImportReport.left_out`. Of an `AdvancedSQLiteSession` the main line is imported; its
other branches and its usage per turn are not, and are named in `left_out`.

Example::

    report = await import_sdk("conversations.db", "postgresql://app@db/app")
    print(report.sessions, report.items)
    for omission in report.refused:
        print("not imported:", omission.session_id, omission.reason)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, get_args

from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from ..codec import Codec, json_size
from ..crypto import Key
from ..errors import ConfigurationError, InvalidSessionIdError, ItemError
from ..repository import SdkSource
from ..repository.imports import Order
from ..tables import TableNames, table_names
from ..telemetry import Telemetry, current, telemetry_option
from ..validation import check_flag, check_progress, session_key, ttl_delta
from . import Services
from .adoption import Copied, beyond_main, copy_session

__all__ = ["ImportOmission", "ImportReport", "Order", "import_sdk"]


@dataclass(frozen=True)
class ImportOmission:
    """A session of the source not imported, or a part of one left out: which, and why;
    `unstorable`: refused for items this store cannot hold (`skip_unstorable` imports the
    session without them).

    Example::

        report = await import_sdk("conversations.db", "agent.db", skip_unstorable=True)
        for omission in (*report.refused, *report.left_out):
            print(omission.session_id, omission.reason, omission.unstorable)
    """

    session_id: str
    reason: str
    unstorable: bool = False


@dataclass(frozen=True)
class ImportReport:
    """What an import did: sessions and items copied, sessions skipped, what was not copied.

    Example::

        report = await import_sdk("conversations.db", "agent.db")
        assert not report.refused, [(o.session_id, o.reason) for o in report.refused]
    """

    sessions: int = 0
    items: int = 0
    skipped_sessions: int = 0  # already in the target: an earlier import, or written since
    unreadable: int = 0  # rows that are not valid JSON (the SDK skips them as well)
    #: The ids of the sessions skipped: present on both sides, left as they are in the target.
    skipped_ids: tuple[str, ...] = ()
    #: Sessions not imported, nothing of them written: an id this library refuses, or an
    #: item the SDK reads that this store cannot hold (without `skip_unstorable`).
    refused: tuple[ImportOmission, ...] = ()
    #: Parts of imported sessions not copied: an `AdvancedSQLiteSession`'s branches other
    #: than main and its usage per turn; items left out with `skip_unstorable`.
    left_out: tuple[ImportOmission, ...] = ()


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
    skip_unstorable: bool = False,
    ttl: float | timedelta | None = None,
    telemetry: Telemetry | bool | None = None,
) -> ImportReport:
    """Copy every SDK session of `source` into the library's tables in `target`.

    `order` is the SDK's reading order: `id` (`SQLiteSession`), `created_at` then id
    (`SQLAlchemySession`), or `auto` (told apart by the index each creates). `progress` is
    called with (rows done, rows in all) as sessions are copied. The target's schema must be
    at head (`agents-sqlalchemy db upgrade`), or `create_tables=True` migrates it there
    first. `key` is the target's key: an encrypted target
    refuses an import without it, and with it every item is sealed on the way in.
    A session that cannot be copied whole is not imported (`ImportReport.refused` says why)
    and the others are; `skip_unstorable=True` copies such a session without the items this
    store cannot hold (`ImportReport.left_out` names each). `ttl` is the target store's
    option: the imported items expire that long from now (default: never).
    `telemetry` is the target store's option (`Telemetry`): the import is one operation.

    Example::

        report = await import_sdk("conversations.db", "agent.db", messages_table="msgs")
    """
    if order not in get_args(Order):
        raise ConfigurationError(f"order must be one of {get_args(Order)}, got {order!r:.80}")
    progress, names = check_progress(progress), table_names(tables)
    skip_unstorable = check_flag("skip_unstorable", skip_unstorable)
    lifetime = ttl_delta(ttl)
    reader = SdkSource(source, sessions_table, messages_table)
    services = Services.build(
        target,
        tables=names,
        key=key,
        ttl=lifetime,
        embedder=None,
        create_tables=create_tables,
        telemetry=telemetry_option(telemetry),
    )
    services.opener.announce_history = False  # the history is being imported
    counts = {"sessions": 0, "items": 0, "skipped_sessions": 0, "unreadable": 0}
    skipped: list[str] = []
    refused: list[ImportOmission] = []
    left_out: list[ImportOmission] = []
    try:
        with services.db.telemetry.operation("import"):
            order = await reader.order(order)  # the source read first, then the target
            codec = await services.opener.ready()  # its schema and its key
            groups = await reader.groups()
            total, done = sum(group.messages for group in groups), 0
            if progress:
                progress(0, total)
            for group in groups:
                try:
                    copied, missing = await _copy(
                        services, codec, reader, group, order, skip_unstorable
                    )
                except (InvalidSessionIdError, ItemError) as exc:
                    unstorable = isinstance(exc, ItemError)
                    refused.append(ImportOmission(group.session_id, str(exc), unstorable))
                else:
                    if copied.items is None:
                        counts["skipped_sessions"] += 1
                        skipped.append(group.session_id)
                    else:
                        counts["sessions"] += 1
                        counts["items"] += copied.items
                        counts["unreadable"] += copied.unreadable
                        left_out += (ImportOmission(group.session_id, why) for why in missing)
                done += group.messages
                if progress:
                    progress(done, total)
            return ImportReport(
                **counts,
                skipped_ids=tuple(skipped),
                refused=tuple(refused),
                left_out=tuple(left_out),
            )
    finally:
        await services.close()
        await reader.close()


async def _copy(
    services: Services,
    codec: Codec,
    reader: SdkSource,
    group: Any,
    order: Order,
    skip_unstorable: bool,
) -> tuple[Copied, list[str]]:
    """Copy one SDK session: what was copied, and what of it was left out, in words.

    `InvalidSessionIdError` or `ItemError`: nothing of it was written."""
    key = session_key(group.session_id)
    rows = await reader.rows(key.session_id, order)
    beyond = await reader.beyond(key.session_id)
    sealer = await services.owners.sealer(key)
    copied = await copy_session(
        services.imports,
        codec,
        key,
        rows,
        (group.first, group.last),
        sealer,
        skip_unstorable=skip_unstorable,
        ttl=services.conversation.ttl,
    )
    if copied.items is not None and (operation := current()) is not None:  # not skipped
        operation.wrote(copied.items, json_size(row.message_data or "" for row in rows))
    return copied, [*copied.left_out, *beyond_main(beyond)]
