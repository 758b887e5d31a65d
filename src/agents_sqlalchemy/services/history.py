"""Say so when the Agents SDK's own tables hold history that this library's tables do not.

A user who switches the import from the SDK's `SQLAlchemySession` to ours, on a database
that holds the SDK's conversations, would otherwise see empty sessions without a word.

Example::

    await announce_sdk_history(imports, db.url, TableNames())   # SdkHistoryWarning, or nothing
"""

from __future__ import annotations

import warnings

from sqlalchemy.engine import URL

from ..errors import SdkHistoryWarning
from ..repository.imports import COUNT_CAP, Imports
from ..tables import TableNames

#: The SDK's `SQLAlchemySession` tables, by default.
SDK_SESSIONS, SDK_MESSAGES = "agent_sessions", "agent_messages"
IMPORT_COMMAND = "agents-sqlalchemy import-sdk"


async def announce_sdk_history(imports: Imports, url: URL, tables: TableNames) -> None:
    """Warn (`SdkHistoryWarning`) if the SDK's tables hold rows and ours hold no session."""
    if {SDK_SESSIONS, SDK_MESSAGES} & {tables.sessions_table, tables.items_table}:
        return  # these names are ours
    rows = await imports.sdk_history(SDK_MESSAGES)
    if not rows:
        return
    where = url.render_as_string(hide_password=True)
    count = f"{COUNT_CAP:,}+" if rows >= COUNT_CAP else f"{rows:,}"
    command = tables.command_line(f"--from '{where}'", where, program=IMPORT_COMMAND)
    option = "" if not tables.overrides() else f", tables={tables!r}"
    warnings.warn(
        f"{where} holds {count} message rows of the Agents SDK's own SQLAlchemySession "
        f"({SDK_SESSIONS}/{SDK_MESSAGES}) and this library's tables hold no session: that "
        f"history is not shown until it is copied once, with `{command}` or "
        f"`await agents_sqlalchemy.import_sdk('{where}', '{where}'{option})`",
        SdkHistoryWarning,
        stacklevel=2,
    )
