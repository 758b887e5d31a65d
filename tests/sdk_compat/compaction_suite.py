"""Which of the SDK's compaction tests of its `SQLAlchemySession` run against ours, and why
the others do not.

`tests/memory/test_sqlalchemy_compaction.py` drives `OpenAIResponsesCompactionSession` (and
the SDK's `EncryptedSession`) over the class, on a SQLite file and in memory. Kept: every
test that uses the class's public API, `session.engine` included (raw SQL and triggers on
it reach the session's own database, in memory too; a trigger's refusal is SQLAlchemy's
`IntegrityError`). Excluded: tests that reach into the SDK class's private attributes or
hook the SDK's own SQL statements, each with its reason.
"""

from __future__ import annotations

from pathlib import PurePosixPath

import cryptography.fernet

from .harness import SDK_IMPORT, SDK_MODULE, Suite

TEST_FILE = PurePosixPath("tests/memory/test_sqlalchemy_compaction.py")

# The SDK's test of expired EncryptedSession rows moves Fernet's clock by patching
# `cryptography.fernet.time`; from cryptography 51 Fernet is Rust, with no such module
# attribute, and the test fails against the SDK's own class too. Kept where it can run.
_FERNET_CLOCK = "test_encrypted_unknown_row_is_retained"
_CLOCK_PATCHABLE = hasattr(cryptography.fernet, "time")

KEPT: tuple[str, ...] = (
    "test_limited_sqlalchemy_compacts_visible_suffix",
    "test_other_instance_mutation_invalidates_suffix",
    "test_compaction_with_engine_managed_sqlite_begin",
    *((_FERNET_CLOCK,) if _CLOCK_PATCHABLE else ()),
    "test_parent_constraint_rejection_propagates",
)

EXCLUDED: dict[str, str] = {
    **(
        {}
        if _CLOCK_PATCHABLE
        else {
            _FERNET_CLOCK: (
                "patches cryptography.fernet.time, which this cryptography (Fernet in Rust) "
                "does not have: it fails against the SDK's own class as well"
            )
        }
    ),
    "test_encrypted_prefix_cleanup_is_atomic": (
        "its reject_insert cases fail the SDK's own 'INSERT INTO custom_messages' through an "
        "event on session.engine; ours writes on its own SQLite connections"
    ),
    "test_replacement_uses_timestamp_order_not_id_order": (
        "rewrites rows through the SDK's private _messages table object"
    ),
    "test_cancelled_replacement_settles_before_other_instance_append": (
        "wraps the SDK's private _session_factory"
    ),
    "test_failed_replacement_preserves_history_during_other_instance_access": (
        "wraps the SDK's private _session_factory"
    ),
}

COMPACTION = Suite(
    TEST_FILE,
    SDK_MODULE,
    "SQLAlchemySession",
    KEPT,
    EXCLUDED,
    by_function=True,
    other_imports=("from agents.extensions.memory.encrypt_session import EncryptedSession",),
)

assert COMPACTION.sdk_import == SDK_IMPORT
