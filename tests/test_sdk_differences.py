"""Where ours once differed from the SDK's `SQLAlchemySession` in what its users rely on: an
in-memory database reached through `session.engine`, a new in-memory database per
`from_url(":memory:")`, and constraint failures catchable as SQLAlchemy's `IntegrityError`."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from agents_sqlalchemy import ConstraintError, DatabaseError, SessionStore, SQLAlchemySession

from .support.items import ASSISTANT, USER

MEMORY = "sqlite+aiosqlite:///:memory:"


async def test_engine_of_an_in_memory_session_reaches_its_database() -> None:
    """`SQLAlchemySession(id, engine=s.engine)` and raw SQL on `s.engine` see what `s` wrote."""
    first = SQLAlchemySession.from_url("shared", url=MEMORY, create_tables=True)
    await first.add_items([USER])
    other = SQLAlchemySession("shared", engine=first.engine)
    assert await other.get_items() == [USER]
    await other.add_items([ASSISTANT])
    assert await first.get_items() == [USER, ASSISTANT]
    async with first.engine.connect() as conn:
        count = await conn.execute(text("SELECT COUNT(*) FROM agents_sqlalchemy_items"))
        assert count.scalar() == 2
    await other.close()
    await first.close()


async def test_each_in_memory_session_gets_a_database_of_its_own() -> None:
    """As the SDK's class: two `from_url(":memory:")` sessions share nothing."""
    one = SQLAlchemySession.from_url("same-id", url=MEMORY, create_tables=True)
    two = SQLAlchemySession.from_url("same-id", url=MEMORY, create_tables=True)
    await one.add_items([USER])
    assert await two.get_items() == []
    assert one.store is not two.store
    await one.close()
    await two.close()


async def test_a_constraint_failure_is_an_integrity_error(db_url: str) -> None:
    """A constraint the app added refuses a write: the error is ours (a `DatabaseError`)
    and SQLAlchemy's `IntegrityError`, as the SDK's class raises; nothing is written."""
    async with SessionStore(db_url, create_tables=True, search=False) as store:
        await store.session("first", user_id="alice").add_items([USER])
        async with store.engine.begin() as conn:
            await conn.execute(
                text("CREATE UNIQUE INDEX one_first_item ON agents_sqlalchemy_items (seq)")
            )
        second = store.session("second", user_id="alice")
        with pytest.raises(IntegrityError) as caught:
            await second.add_items([USER])
        assert isinstance(caught.value, ConstraintError)
        assert isinstance(caught.value, DatabaseError)
        assert "nothing was changed" in str(caught.value)
        assert caught.value.orig is not None
        assert await second.get_items() == []
        assert [info.session_id for info in await store.list_sessions()] == ["first"]


_TRIGGERS = {
    "postgresql": [
        "CREATE FUNCTION no_secrets() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.payload LIKE '%secret%' THEN RAISE EXCEPTION 'no secrets here'; END IF; "
        "RETURN NEW; END $$",
        "CREATE TRIGGER no_secrets BEFORE INSERT ON agents_sqlalchemy_items "
        "FOR EACH ROW EXECUTE FUNCTION no_secrets()",
    ],
    "mariadb": [
        "CREATE TRIGGER no_secrets BEFORE INSERT ON agents_sqlalchemy_items FOR EACH ROW "
        "BEGIN IF INSTR(NEW.payload, 'secret') > 0 THEN "
        "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'no secrets here'; END IF; END",
    ],
    "sqlite": [
        "CREATE TRIGGER no_secrets BEFORE INSERT ON agents_sqlalchemy_items "
        "WHEN NEW.payload LIKE '%secret%' BEGIN SELECT RAISE(ABORT, 'no secrets here'); END",
    ],
}


async def test_a_triggers_refusal_is_a_constraint_error(db_url: str) -> None:
    """A trigger of the app refusing a write raised a plain DatabaseError on PostgreSQL and
    MariaDB (RAISE EXCEPTION, SIGNAL), where the docs say ConstraintError."""
    async with SessionStore(db_url, create_tables=True, search=False) as store:
        await store.session("s").add_items([USER])
        dialect = store.engine.dialect.name
        async with store.engine.begin() as conn:
            for statement in _TRIGGERS["mariadb" if dialect == "mysql" else dialect]:
                await conn.exec_driver_sql(statement)
        with pytest.raises(ConstraintError, match="no secrets here"):
            await store.session("s").add_items([{"role": "user", "content": "a secret"}])
        assert await store.session("s").get_items() == [USER]
