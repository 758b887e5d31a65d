"""The Agents SDK's own two tables made by hand on MySQL and MariaDB, where the SDK's
`create_tables` fails (its `session_id` is a VARCHAR without a length)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import create_async_engine


def sdk_needs_tables_made(url: str) -> bool:
    return url.startswith(("mysql", "mariadb"))


async def make_sdk_tables(
    url: str, sessions_table: str = "agent_sessions", messages_table: str = "agent_messages"
) -> None:
    """The SDK's tables, columns and index as an app on MySQL or MariaDB makes them."""
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.exec_driver_sql(
                f"CREATE TABLE IF NOT EXISTS {sessions_table} ("
                "session_id VARCHAR(255) PRIMARY KEY, "
                "created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, "
                "updated_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP) CHARSET utf8mb4"
            )
            await conn.exec_driver_sql(
                f"CREATE TABLE IF NOT EXISTS {messages_table} ("
                "id INTEGER AUTO_INCREMENT PRIMARY KEY, "
                f"session_id VARCHAR(255) NOT NULL REFERENCES {sessions_table} (session_id) "
                "ON DELETE CASCADE, message_data TEXT NOT NULL, "
                "created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, "
                f"INDEX idx_{messages_table}_session_time (session_id, created_at)) CHARSET utf8mb4"
            )
    finally:
        await engine.dispose()
