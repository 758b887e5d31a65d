"""`agents-sqlalchemy users export|import|erase`, on every dialect, with keys."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from click.testing import CliRunner, Result

from agents_sqlalchemy import ErasureReceipt, SessionStore
from agents_sqlalchemy.cli import app

from .support.portability import fill

KEY = "AGENTS_SQLALCHEMY_KEY"


def cli(*args: str, key: str | None = None, input: str | None = None) -> Result:
    return CliRunner().invoke(app, list(args), env={KEY: key}, input=input)


def seed(url: str, key: str | None) -> None:
    async def run() -> None:
        async with SessionStore(url, create_tables=True, key=key) as store:
            await fill(store)

    asyncio.run(run())


def sessions_of(url: str, key: str | None, user_id: str) -> list[str]:
    async def run() -> list[str]:
        async with SessionStore(url, key=key) as store:
            page = await store.list_sessions(user_id=user_id, archived=None)
            return sorted(info.session_id for info in page)

    return asyncio.run(run())


def test_export_import_erase(db_url: str, tmp_path: Path) -> None:
    seed(db_url, "source key")
    export = tmp_path / "alice.jsonl"
    done = cli("users", "export", "alice", "--url", db_url, "-o", str(export), key="source key")
    assert done.exit_code == 0, done.output
    assert "Exported 2 sessions of 'alice'" in done.stderr
    lines = export.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["format"] == "agents-sqlalchemy/user-export"
    # To standard output, the progress bar (on stderr) leaves the stream whole.
    piped = cli("users", "export", "alice", "--url", db_url, key="source key")
    assert piped.exit_code == 0, piped.output
    assert [json.loads(line) for line in piped.stdout.splitlines()][1:-1] == [
        json.loads(line) for line in lines
    ][1:-1]
    refused = cli("users", "export", "alice", "--url", db_url)
    assert refused.exit_code == 1 and "is encrypted" in refused.output

    target = str(tmp_path / "target.db")
    imported = cli("users", "import", str(export), "--url", target, "--create", key="new key")
    assert imported.exit_code == 0, imported.output
    assert "Imported 2 sessions" in imported.stdout
    assert sessions_of(target, "new key", "alice") == ["chat-1", "chat-2"]
    again = cli("users", "import", str(export), "--url", target, key="new key")
    assert again.exit_code == 1 and "already in this store" in again.output
    skipped = cli("users", "import", str(export), "--url", target, "--skip-existing", key="new key")
    assert skipped.exit_code == 0 and "skipped 2 already present" in skipped.stdout

    kept = cli("users", "erase", "alice", "--url", target, key="new key", input="n\n")
    assert kept.exit_code == 1 and "Aborted" in kept.output
    assert sessions_of(target, "new key", "alice") == ["chat-1", "chat-2"]
    path = tmp_path / "receipt.json"
    erased = cli(  # answered from a pipe: the prompt goes to stderr, the receipt alone out
        "users",
        "erase",
        "alice",
        "--url",
        target,
        "--receipt",
        str(path),
        key="new key",
        input="y\n",
    )
    assert erased.exit_code == 0, erased.output
    assert "Erase every session" in erased.stderr
    receipt = ErasureReceipt.from_dict(json.loads(path.read_text(encoding="utf-8")))
    assert json.loads(erased.stdout) == receipt.as_dict()
    assert (receipt.sessions, receipt.encrypted, receipt.dialect) == (2, True, "sqlite")
    assert receipt.user_sha256 == ErasureReceipt.hash_user("alice")
    assert sessions_of(target, "new key", "alice") == []
    assert sessions_of(db_url, "source key", "alice") == ["chat-1", "chat-2"]
    # Run again (a retried script): the receipt of nothing took the real one's place.
    again = cli("users", "erase", "alice", "--url", target, "--receipt", str(path), "-y")
    assert again.exit_code == 2 and "exists: keep that receipt" in again.output
    assert ErasureReceipt.from_dict(json.loads(path.read_text(encoding="utf-8"))) == receipt


def test_files_that_cannot_be_read_or_written_are_usage_errors(tmp_path: Path) -> None:
    """A missing export to import, an output or receipt in a directory that does not exist
    were tracebacks (FileNotFoundError); the receipt's failed only after the erasure, so
    the receipt was lost. Now each is refused first, and nothing is erased."""
    url = str(tmp_path / "agent.db")
    seed(url, None)
    nowhere = tmp_path / "no such directory"
    refusals = {
        "import": cli("users", "import", str(tmp_path / "missing.jsonl"), "--url", url),
        "export": cli("users", "export", "alice", "--url", url, "-o", str(nowhere / "a.jsonl")),
        "erase": cli(
            "users", "erase", "alice", "--url", url, "--yes", "--receipt", str(nowhere / "r")
        ),
    }
    for name, done in refusals.items():
        assert done.exit_code == 2, (name, done.output)
        assert done.exception is None or isinstance(done.exception, SystemExit), name
    assert "does not exist" in refusals["import"].output
    assert "cannot write" in refusals["export"].output
    assert "cannot write" in refusals["erase"].output
    assert sessions_of(url, None, "alice") == ["chat-1", "chat-2"]
    assert not nowhere.exists()


def test_a_failed_export_or_erasure_leaves_the_files_there_as_they_were(tmp_path: Path) -> None:
    """`users export -o FILE` emptied FILE before the export failed (a missing key), and
    `-o` or `--receipt` naming the database overwrote it (after the erasure, for the
    receipt: every other user's sessions were gone). Files are now written beside their
    target and moved into place once complete; the database's own files are refused."""
    url = str(tmp_path / "agent.db")
    seed(url, "a key")
    earlier = tmp_path / "earlier.jsonl"
    earlier.write_text("an export kept\n", encoding="utf-8")
    failed = cli("users", "export", "alice", "--url", url, "-o", str(earlier))
    assert failed.exit_code == 1 and "is encrypted" in failed.output
    assert earlier.read_text(encoding="utf-8") == "an export kept\n"
    failed = cli("users", "erase", "alice", "--url", url, "--yes", "--receipt", str(earlier))
    assert failed.exit_code == 2 and "exists: keep that receipt" in failed.output
    assert earlier.read_text(encoding="utf-8") == "an export kept\n"
    fresh = tmp_path / "receipt.json"
    failed = cli("users", "erase", "alice", "--url", url, "--yes", "--receipt", str(fresh))
    assert failed.exit_code == 1 and "is encrypted" in failed.output
    assert not fresh.exists() and not list(tmp_path.glob(".receipt.json.*"))
    database = Path(url).read_bytes()
    for target in (url, f"{url}-wal", str(tmp_path / "." / "agent.db")):
        for args in (
            ("export", "alice", "-o", target),
            ("erase", "bob", "--yes", "--receipt", target),
        ):
            refused = cli("users", *args, "--url", url, key="a key")
            assert refused.exit_code == 2 and "is the database" in refused.output, refused.output
    assert Path(url).read_bytes() == database
    assert sessions_of(url, "a key", "bob") != []
    assert sorted(path.name for path in tmp_path.iterdir()) == ["agent.db", "earlier.jsonl"]
    done = cli("users", "erase", "bob", "--url", url, "--yes", "--receipt", str(fresh), key="a key")
    assert done.exit_code == 0, done.output
    assert json.loads(fresh.read_text(encoding="utf-8")) == json.loads(done.stdout)


def test_an_import_takes_a_ttl(tmp_path: Path) -> None:
    """`users import` had no --ttl: every imported item was kept for ever, where the store
    the app opens with `ttl=` would have them expire (`import-sdk` has it)."""
    import sqlite3
    from contextlib import closing

    source = str(tmp_path / "source.db")
    seed(source, None)
    export = tmp_path / "alice.jsonl"
    assert cli("users", "export", "alice", "--url", source, "-o", str(export)).exit_code == 0
    for name, ttl in (("kept.db", None), ("expiring.db", "3600")):
        target = str(tmp_path / name)
        given = ["--ttl", ttl] if ttl else []
        done = cli("users", "import", str(export), "--url", target, "--create", *given)
        assert done.exit_code == 0, done.output
        with closing(sqlite3.connect(target)) as db:
            rows = db.execute("SELECT expires_at FROM agents_sqlalchemy_items").fetchall()
        assert rows and all((value is None) == (ttl is None) for (value,) in rows)


def test_an_import_with_create_makes_the_tables_first_even_if_the_export_fails(
    tmp_path: Path,
) -> None:
    """`--create` makes (or upgrades) the tables first, as it says: an export that failed at
    its first lines left a new file of 0 bytes, without them."""
    import sqlite3
    from contextlib import closing

    source = str(tmp_path / "source.db")
    seed(source, None)
    export = tmp_path / "alice.jsonl"
    assert cli("users", "export", "alice", "--url", source, "-o", str(export)).exit_code == 0
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(export.read_bytes()[:150])
    target = tmp_path / "target.db"
    done = cli("users", "import", str(cut), "--url", str(target), "--create")
    assert done.exit_code == 1 and "not JSON" in done.output
    with closing(sqlite3.connect(target)) as db:
        names = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
        assert "agents_sqlalchemy_items" in names
        assert db.execute("SELECT COUNT(*) FROM agents_sqlalchemy_sessions").fetchone() == (0,)


def test_an_interrupted_command_says_what_was_kept() -> None:
    """Ctrl-C printed click's "Aborted!", though a purge had finished its batch and an
    import had committed its first sessions."""
    import click
    import pytest

    from agents_sqlalchemy.cli.options import run

    async def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(click.ClickException, match="what was done before stays done"):
        run(interrupted())


def test_an_export_on_stdin_is_not_read_as_the_key(tmp_path: Path) -> None:
    """With the export piped in, --ask-key (no terminal: the key is read as a line of
    stdin) took the export's first line as the key; now the two are refused together."""
    import os
    import subprocess
    import sys

    source = str(tmp_path / "source.db")
    seed(source, None)
    export = tmp_path / "alice.jsonl"
    assert cli("users", "export", "alice", "--url", source, "-o", str(export)).exit_code == 0
    target = str(tmp_path / "target.db")
    command = [sys.executable, "-m", "agents_sqlalchemy.cli", "users", "import", "-"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTS_SQL")}
    proc = subprocess.run([*command, "--url", target, "--create", "--ask-key"],
                          input=export.read_bytes(), capture_output=True, env=env,
                          timeout=120)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert b"the export and the key cannot both come from stdin" in proc.stderr
    assert not Path(target).exists()
    # A key from the environment leaves stdin to the export.
    proc = subprocess.run([*command, "--url", target, "--create", "--no-progress"],
                          input=export.read_bytes(), capture_output=True,
                          env={**env, KEY: "a key"}, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert sessions_of(target, "a key", "alice") == sessions_of(source, None, "alice")
