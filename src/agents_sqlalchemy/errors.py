"""The library's exceptions: everything it raises derives from `AgentsSQLAlchemyError`.

The tree::

    AgentsSQLAlchemyError
    ├── ConfigurationError (ValueError) ...... an option is invalid: URL, table name, limit
    │   ├── InvalidSessionIdError ............ a session id that cannot be stored
    │   ├── InvalidKeyError .................. `key` is not a passphrase, 32 bytes or a provider
    │   └── SdkHistoryError .................. the SDK's tables hold this session's history
    ├── ItemError (ValueError) ............... an item, metadata or state is not storable JSON
    ├── BranchError (ValueError) ............. no such branch or turn, a branch name already used
    ├── CorruptItemError ..................... a stored row does not read back as an item
    │   └── TamperedItemError ................ (also a DecryptionError) sealed bytes moved/altered
    ├── DecryptionError ...................... sealed bytes fail authentication
    │   └── TamperedItemError
    ├── SchemaError .......................... the tables are missing or at another revision
    ├── DatabaseError ........................ the database failed or went away; rolled back
    │   ├── ConstraintError .................. (also SQLAlchemy's IntegrityError) a constraint
    │   │                                      or trigger of the database refused the write
    │   ├── SessionBusyError ................. another writer held the session past lock_timeout
    │   └── DatabaseTimeoutError ............. no answer within statement_timeout
    ├── KeyringError ......................... the keyring cannot be used
    │   ├── WrongKeyError .................... the key does not open this database
    │   └── OwnerKeyError .................... an owner's key is destroyed or not this owner's
    ├── KeyProviderError ..................... a KMS or secret manager failed
    ├── StoreClosedError (RuntimeError) ...... a call on a store (or session) after close()
    └── SearchError .......................... search could not run
        ├── EmbedderError (ValueError) ....... an embedder returned vectors of the wrong shape
        ├── QueryTooLongError (ValueError) ... a query past its documented length
        └── MissingExtraError (ImportError) .. an optional package is not installed

Nothing that raises one of these has changed what is stored, save a `DatabaseError` whose
message says the connection failed while committing (the write may then have been saved),
and an error of a deletion, archiving or purge that had done some of its work for good
(earlier batches, each its own transaction; an erased user's keys): its message ends by
saying what (`partly_done`).

Beside the tree, two warnings (each a `UserWarning`): `SdkHistoryWarning`, when the Agents
SDK's own tables hold history that this library's tables do not (import it with
`import_sdk`), and `SearchModelWarning`, when a store's embedder is not the model the
database was indexed with.

Example::

    try:
        await session.add_items(items)
    except agents_sqlalchemy.ItemError as exc:
        log.warning("item rejected: %s", exc)
"""

from __future__ import annotations

import asyncio
import os
import sys
import warnings
from typing import Any

from sqlalchemy import exc as sa_exc


class AgentsSQLAlchemyError(Exception):
    """Base class of every error this library raises."""


class ConfigurationError(AgentsSQLAlchemyError, ValueError):
    """An option is invalid: a table name, a URL, a session id, a limit."""


class InvalidSessionIdError(ConfigurationError):
    """A session id that cannot be stored (empty, not a string)."""


class ItemError(AgentsSQLAlchemyError, ValueError):
    """An item, metadata or state value is not JSON that can be stored; nothing was written."""


class BranchError(AgentsSQLAlchemyError, ValueError):
    """A branch operation cannot be done: no such branch or turn, or a branch name that was
    already used (names stay reserved after deletion); nothing was changed."""


class CorruptItemError(AgentsSQLAlchemyError):
    """A stored row cannot be read back as an item; it is left in place, never skipped."""


class SchemaError(AgentsSQLAlchemyError):
    """The database does not hold the tables this library expects.

    `cli_message` says the same with command-line advice (`db upgrade`, `--prefix`) where
    the message gives Python's (`create_tables=True`, `TableNames(...)`); `state` is the
    schema's state (`SchemaStatus.state`) when one was read.
    """

    def __init__(
        self, message: str, *, cli_message: str | None = None, state: str | None = None
    ) -> None:
        super().__init__(message)
        self.cli_message = cli_message or message
        self.state = state


class DatabaseError(AgentsSQLAlchemyError):
    """The database failed or went away; the operation was rolled back."""


class ConstraintError(DatabaseError, sa_exc.IntegrityError):
    """A constraint or trigger of the database refused the write; it was rolled back.

    Also a `sqlalchemy.exc.IntegrityError` (with its `orig`), as the SDK's own
    `SQLAlchemySession` raises, so code written for that class catches it.
    """

    def __init__(
        self, message: str, statement: str | None = None, params: Any = None, orig: Any = None
    ) -> None:
        sa_exc.IntegrityError.__init__(self, statement, params, orig)
        self.args = (message,)

    @property
    def message(self) -> str:
        return str(self.args[0])

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> Any:
        return type(self), (self.message,)


class SessionBusyError(DatabaseError):
    """A write waited longer than `lock_timeout` for another writer; nothing was changed.

    `session_id` names the session whose lock it waited for (None when the wait was not for
    one session's lock, e.g. a bulk delete).
    """

    def __init__(self, message: str, session_id: str | None = None) -> None:
        super().__init__(message)
        self.session_id = session_id


class DatabaseTimeoutError(DatabaseError):
    """The database did not answer within `statement_timeout`: the operation was abandoned
    and rolled back (the message says so when it timed out while committing, when it may
    have been saved)."""


class InvalidKeyError(ConfigurationError):
    """The `key` option is not a non-empty passphrase, 32 raw bytes, or a key provider."""


class KeyringError(AgentsSQLAlchemyError):
    """The database's keyring cannot be used: a stored row is malformed or missing."""


class WrongKeyError(KeyringError):
    """The key given does not open this database's keyring; nothing was read or written."""


class OwnerKeyError(KeyringError):
    """A session's items cannot be sealed or opened under its owner's key: the key was
    destroyed (the owner erased), or the session's `user_id` was changed outside the
    library, so its items are not its owner's. Nothing was read or written."""


class KeyProviderError(AgentsSQLAlchemyError):
    """A key provider (KMS, secret manager) failed to wrap or unwrap; nothing was changed."""


class DecryptionError(AgentsSQLAlchemyError):
    """Sealed bytes fail authentication: altered, truncated, or moved from their place."""


class TamperedItemError(DecryptionError, CorruptItemError):
    """An item's ciphertext or wrapped key fails to open at its place; it is never skipped."""


class StoreClosedError(AgentsSQLAlchemyError, RuntimeError):
    """A store (or a session) was used after `close()`; nothing was read or written."""


class SearchError(AgentsSQLAlchemyError):
    """Search could not run: base class of the search layer's errors."""


class EmbedderError(SearchError, ValueError):
    """An embedder returned vectors of the wrong shape, or was given text it cannot embed."""


class QueryTooLongError(SearchError, ValueError):
    """A search query is longer than `search.MAX_QUERY_CHARS` characters."""


class MissingExtraError(SearchError, ImportError):
    """An optional package is not installed; the message names the extra that brings it."""


class SdkHistoryError(ConfigurationError):
    """A session id has history in the Agents SDK's own tables and none in ours: it is not
    used as a new, empty session. Import it first (the message names the command), or open
    the store with `import_sdk_history=True` to import each such session on first use."""


class SearchModelWarning(UserWarning):
    """The database was indexed with another embedding model than this store's: until
    `store.reindex()` re-indexes it, the store searches by keyword only and indexes nothing
    with its own model. The message names both models."""


class SdkHistoryWarning(UserWarning):
    """The Agents SDK's own session tables hold history that this library's tables do not.

    Copy it once with `agents-sqlalchemy import-sdk` or `import_sdk(...)`; the warning names
    both. Turn it into an error with `warnings.simplefilter("error", SdkHistoryWarning)`.
    """


#: Where this package's files are, and asyncio's (`warn`).
_PACKAGE = os.path.join(os.path.dirname(__file__), "")
_ASYNCIO = os.path.join(os.path.dirname(asyncio.__file__), "")


def warn(message: str, category: type[Warning]) -> None:
    """Warn `message`, pointed at the app's line that called the library: the first frame
    outside this package (a filter by module or line then applies to the app's code). Where
    that is asyncio's, the call came from a task of the library's own: the warning points at
    the library's line that gave it."""
    level, frame = 2, sys._getframe(1)  # 2: `warn`'s caller
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        level, frame = level + 1, frame.f_back
    if frame.f_code.co_filename.startswith(_ASYNCIO):
        level = 2
    warnings.warn(message, category, stacklevel=level)


def plural(count: int, noun: str) -> str:
    """`count` `noun`s, as a note says them.

    >>> plural(1, "session"), plural(3, "item")
    ('1 session', '3 items')
    """
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def partly_done(
    exc: AgentsSQLAlchemyError, done: str, *, first: bool = False, then: str | None = None
) -> None:
    """Note in `exc`'s message what its operation had done for good before it failed
    (`done`: earlier batches, each its own transaction, or keys destroyed; `first`: done
    before what a note already there says), and that running it again finishes it (or
    what to do instead: `then`). The notes of one error go in one sentence; a
    `SchemaError`'s command-line message has it too.

    >>> exc = DatabaseError("the server went away, nothing was changed")
    >>> partly_done(exc, "3 sessions deleted")
    >>> partly_done(exc, "1 owner key destroyed", first=True)
    >>> print(exc)  # doctest: +NORMALIZE_WHITESPACE
    the server went away, nothing was changed (in this step; before it: 1 owner key
    destroyed; 3 sessions deleted. Run it again to finish)
    """
    notes: list[str] = exc.__dict__.setdefault("_done_before", [])
    if not notes:  # the messages as they were, before any note
        exc.__dict__["_said"] = (str(exc), getattr(exc, "cli_message", None))
    notes.insert(0, done) if first else notes.append(done)
    if then is not None:
        exc.__dict__["_then"] = then
    then = exc.__dict__.get("_then")
    step = "in this step; " if then is None else ""
    note = f" ({step}before it: {'; '.join(notes)}. {then or 'Run it again to finish'})"
    message, cli_message = exc.__dict__["_said"]
    exc.args = (message + note, *exc.args[1:])
    if cli_message is not None:
        exc.cli_message = cli_message + note  # type: ignore[attr-defined]
