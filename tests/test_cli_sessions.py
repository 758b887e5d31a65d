"""`agents-sqlalchemy sessions list|show|delete|purge`, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import click
import pytest

from agents_sqlalchemy import SessionStore
from agents_sqlalchemy.cli.transcript import describe, transcript
from agents_sqlalchemy.metadata_text import format_meta, meta_pairs, meta_value
from agents_sqlalchemy.repository import schema as repository_module
from agents_sqlalchemy.shown_text import one_line

from .support.cli import cli
from .support.items import ALL, message

T0 = datetime(2026, 11, 29, 14, 3, 27, tzinfo=timezone.utc)
LONG_ID = "conversation-" + "x" * 60


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[datetime], None]:
    """Set the time the store sees (writes, expiry, inactivity)."""
    now = [T0]
    monkeypatch.setattr(repository_module, "utcnow", lambda: now[0])
    return lambda when: now.__setitem__(0, when)


def seed(url: str, clock: Callable[[datetime], None], key: str | None = None) -> None:
    """Five sessions, one an hour apart from T0 - 4h (oldest) to T0 (newest)."""

    async def write() -> None:
        sessions: list[tuple[str, str | None, dict[str, Any], list[Any]]] = [
            ("old", "carol", {"channel": "email"}, [message("o")]),
            (LONG_ID, None, {}, [message("l1"), message("l2")]),
            ("web-1", "alice", {"channel": "web", "tier": 2}, [message("a"), message("b")]),
            ("web-2", "alice", {"channel": "web", "tier": 1, "code": "7"}, [message("c")]),
            ("support-42", "bob", {"channel": "web", "vip": True}, ALL),
        ]
        async with SessionStore(url, create_tables=True, key=key) as store:
            for hours, (name, user, metadata, items) in enumerate(sessions):
                clock(T0 - timedelta(hours=4 - hours))
                await store.session(name, user_id=user, metadata=metadata).add_items(items)
        clock(T0)

    asyncio.run(write())


def table_rows(output: str) -> list[list[str]]:
    """The cells of a `sessions list` table (two or more spaces apart), header first."""
    lines = [line for line in output.splitlines() if line and not line.startswith("More")]
    return [re.split(r" {2,}", line.strip()) for line in lines]


def ids(output: str) -> list[str]:
    return [row[0] for row in table_rows(output)[1:]]


def next_cursor(output: str) -> str:
    found = re.search(r"--cursor (\S+)", output)
    assert found, output
    return found.group(1)


# -- list ----------------------------------------------------------------------------------------


def test_list_prints_an_aligned_table(db_url: str, clock: Callable[[datetime], None]) -> None:
    seed(db_url, clock)
    result = cli("sessions", "list", "--url", db_url)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert table_rows(result.output)[0] == [
        "SESSION", "USER", "ITEMS", "UPDATED (UTC)", "CREATED (UTC)", "METADATA"
    ]  # fmt: skip
    assert table_rows(result.output)[1:] == [
        ["support-42", "bob", str(len(ALL)), "2026-11-29 14:03", "2026-11-29 14:03",
         "channel=web vip=true"],
        ["web-2", "alice", "1", "2026-11-29 13:03", "2026-11-29 13:03",
         'channel=web tier=1 code="7"'],
        ["web-1", "alice", "2", "2026-11-29 12:03", "2026-11-29 12:03", "channel=web tier=2"],
        [LONG_ID[:39] + "…", "-", "2", "2026-11-29 11:03", "2026-11-29 11:03"],
        ["old", "carol", "1", "2026-11-29 10:03", "2026-11-29 10:03", "channel=email"],
    ]  # fmt: skip
    # Aligned: every row's USER and UPDATED columns start where the header's do.
    for column in ("USER", "UPDATED"):
        start = lines[0].index(column)
        assert all(line[start - 2 : start] == "  " and line[start] != " " for line in lines[1:])
    assert "More sessions" not in result.output


def test_list_pages_with_the_cursor_and_all(db_url: str, clock: Callable[[datetime], None]) -> None:
    seed(db_url, clock)
    first = cli("sessions", "list", "--url", db_url, "--limit", "2")
    assert ids(first.output) == ["support-42", "web-2"]
    assert "More sessions: repeat with --cursor" in first.stderr  # the table alone out
    second = cli(
        "sessions", "list", "--url", db_url, "--limit", "2", "--cursor", next_cursor(first.output)
    )
    assert ids(second.output) == ["web-1", LONG_ID[:39] + "…"]
    third = cli(
        "sessions", "list", "--url", db_url, "--limit", "2", "--cursor", next_cursor(second.output)
    )
    assert ids(third.output) == ["old"] and "--cursor" not in third.output

    every = cli("sessions", "list", "--url", db_url, "--limit", "2", "--all")
    assert ids(every.output) == ["support-42", "web-2", "web-1", LONG_ID[:39] + "…", "old"]
    assert "--cursor" not in every.output
    # Printed a page at a time (nothing held till the end), one header, the columns aligned.
    lines = every.output.splitlines()
    assert [line.startswith("SESSION") for line in lines].count(True) == 1
    assert all(line[40:42] == "  " and line[42] != " " for line in lines)  # USER at 42
    bad = cli("sessions", "list", "--url", db_url, "--cursor", "not-a-cursor")
    assert bad.exit_code == 1
    assert bad.output == "Error: not a cursor of list_sessions: 'not-a-cursor'\n"


def test_list_filters(db_url: str, clock: Callable[[datetime], None]) -> None:
    seed(db_url, clock)
    url = ["--url", db_url]
    assert ids(cli("sessions", "list", *url, "--user", "alice").output) == ["web-2", "web-1"]
    assert ids(cli("sessions", "list", *url, "--meta", "channel=web").output) == [
        "support-42", "web-2", "web-1"
    ]  # fmt: skip
    both = cli("sessions", "list", *url, "--meta", "channel=web", "--meta", "tier=2")
    assert ids(both.output) == ["web-1"]
    assert ids(cli("sessions", "list", *url, "--meta", "vip=true").output) == ["support-42"]
    # JSON quotes ask for the string "7".
    assert ids(cli("sessions", "list", *url, "--meta", 'code="7"').output) == ["web-2"]
    window = cli(
        "sessions", "list", *url, "--updated-after", "2026-11-29T11:30Z",
        "--updated-before", "2026-11-29 14:30:00+01:00",  # 13:30 UTC
    )  # fmt: skip
    assert ids(window.output) == ["web-2", "web-1"]
    naive = cli("sessions", "list", *url, "--updated-after", "2026-11-29T13:30")  # naive: UTC
    assert ids(naive.output) == ["support-42"]
    bad = cli("sessions", "list", *url, "--updated-after", "yesterday")
    assert bad.exit_code == 2 and "not an ISO time" in bad.output
    bad = cli("sessions", "list", *url, "--meta", "channel")
    assert bad.exit_code == 2 and "not KEY=VALUE" in bad.output


def test_list_json_lines(db_url: str, clock: Callable[[datetime], None]) -> None:
    seed(db_url, clock)
    result = cli("sessions", "list", "--url", db_url, "--json", "--limit", "2")
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert rows[0] == {
        "session_id": "support-42",
        "user_id": "bob",
        "item_count": len(ALL),
        "created_at": "2026-11-29T14:03:27+00:00",
        "updated_at": "2026-11-29T14:03:27+00:00",
        "metadata": {"channel": "web", "vip": True},
        "archived_at": None,
    }
    assert [row["session_id"] for row in rows] == ["support-42", "web-2"]
    assert "--cursor" in result.stderr  # the hint stays out of the JSON stream
    every = cli("sessions", "list", "--url", db_url, "--json", "--limit", "2", "--all")
    found = [json.loads(line)["session_id"] for line in every.stdout.splitlines()]
    assert found == ["support-42", "web-2", "web-1", LONG_ID, "old"]
    assert every.stderr == ""


# -- show ----------------------------------------------------------------------------------------

TRANSCRIPT = """\
[1] user: Remember: my dog is called Mochi 🐶, né à Zürich.

[2] reasoning: The user wants the weather; call the tool.

[3] tool call lookup_weather({"city": "Zürich", "units": "metric"})

[4] tool result: {"temp_c": 21.5, "sky": "☀️"}

[5] assistant: It is 21.5 °C and sunny.

[6] user: What is in this picture? 日本語も
    [image]

[7] tool result: nested
"""


def test_show_prints_the_header_and_transcript(
    db_url: str, clock: Callable[[datetime], None]
) -> None:
    seed(db_url, clock)
    result = cli("sessions", "show", "support-42", "--url", db_url)
    assert result.exit_code == 0, result.output
    header, body = result.output.split("\n\n", 1)
    assert header.splitlines() == [
        "Session   support-42",
        "Owner     bob",
        "Metadata  channel=web vip=true",
        "Created   2026-11-29 14:03:27 UTC",
        "Updated   2026-11-29 14:03:27 UTC",
        f"Items     {len(ALL)}",
    ]
    assert body == TRANSCRIPT

    latest = cli("sessions", "show", "support-42", "--url", db_url, "--limit", "2")
    assert f"Items     {len(ALL)} (showing the latest 2)" in latest.output
    assert latest.output.split("\n\n", 1)[1] == TRANSCRIPT[TRANSCRIPT.index("[6]") :]

    as_json = json.loads(cli("sessions", "show", "support-42", "--url", db_url, "--json").stdout)
    assert as_json["items"] == ALL and as_json["session"]["user_id"] == "bob"

    missing = cli("sessions", "show", "nope", "--url", db_url)
    assert missing.exit_code == 1 and missing.output.startswith("Error: no session 'nope' in ")
    assert missing.output.count("\n") == 1


def test_show_cuts_long_tool_data_and_escapes_terminal_controls(sqlite_url: str) -> None:
    output = json.dumps({"rows": ["r" * 50] * 40})
    items = [
        {"type": "function_call", "name": "dump", "arguments": "{}", "call_id": "c"},
        {"type": "function_call_output", "call_id": "c", "output": output},
        {"role": "assistant", "content": "line one\nline two \x1b[2J\x07"},
        {"type": "compaction", "encrypted_content": "abc"},
    ]

    async def write() -> None:
        async with SessionStore(sqlite_url, create_tables=True) as store:
            await store.session("s").add_items(items)

    asyncio.run(write())
    shown = cli("sessions", "show", "s", "--url", sqlite_url, "--max-chars", "100").output
    result_line = next(line for line in shown.splitlines() if line.startswith("[2]"))
    assert result_line.startswith('[2] tool result: {"rows": ["rrrr')
    assert result_line.endswith(f"… [+{len(output) - 100:,} characters; --max-chars 0 shows all]")
    assert "[3] assistant: line one\n    line two \\x1b[2J\\x07\n" in shown
    assert "\x1b" not in shown and "\x07" not in shown
    assert '[4] compaction: {"encrypted_content": "abc"}' in shown
    whole = cli("sessions", "show", "s", "--url", sqlite_url, "--max-chars", "0").output
    assert f"[2] tool result: {output}\n" in whole


@pytest.mark.slow
def test_show_an_encrypted_session(db_url: str, clock: Callable[[datetime], None]) -> None:
    seed(db_url, clock, key="correct horse")
    with_key = cli("sessions", "show", "support-42", "--url", db_url,
                   env={"AGENTS_SQLALCHEMY_KEY": "correct horse"})  # fmt: skip
    assert with_key.exit_code == 0, with_key.output
    assert with_key.output.endswith(TRANSCRIPT)

    named = cli("sessions", "show", "web-1", "--url", db_url, "--key-env", "APP_KEY",
                env={"APP_KEY": "correct horse"})  # fmt: skip
    assert "[2] user: b" in named.output
    asked = cli("sessions", "show", "web-1", "--url", db_url, "--ask-key", input="correct horse\n")
    assert "[2] user: b" in asked.output and "correct horse" not in asked.output

    without = cli("sessions", "show", "support-42", "--url", db_url)
    assert without.exit_code == 1
    assert without.output.startswith("Error: ") and without.output.count("\n") == 1
    assert "is encrypted: give its key in $AGENTS_SQLALCHEMY_KEY" in without.output
    wrong = cli("sessions", "show", "support-42", "--url", db_url,
                env={"AGENTS_SQLALCHEMY_KEY": "wrong"})  # fmt: skip
    assert wrong.exit_code == 1 and wrong.output.startswith("Error: wrong key")
    unset = cli("sessions", "show", "support-42", "--url", db_url, "--key-env", "UNSET_KEY_VAR",
                env={"UNSET_KEY_VAR": None})  # fmt: skip
    assert unset.exit_code == 2 and "UNSET_KEY_VAR" in unset.output
    listed = cli(
        "sessions", "list", "--url", db_url, env={"AGENTS_SQLALCHEMY_KEY": "correct horse"}
    )
    assert ids(listed.output)[0] == "support-42"


# -- delete and purge --------------------------------------------------------------------------


def test_delete_sessions_and_users(db_url: str, clock: Callable[[datetime], None]) -> None:
    seed(db_url, clock)
    url = ["--url", db_url]
    refused = cli("sessions", "delete", "web-1", *url, input="n\n")
    assert refused.exit_code == 1 and "Delete session 'web-1' from" in refused.output
    assert "web-1" in ids(cli("sessions", "list", *url).output)
    confirmed = cli("sessions", "delete", "web-1", *url, input="y\n")
    assert confirmed.exit_code == 0 and "Removed 1 session (2 items)" in confirmed.output
    assert "web-1" not in ids(cli("sessions", "list", *url).output)

    several = cli("sessions", "delete", "old", "ghost", LONG_ID, *url, "--yes")
    assert several.exit_code == 1  # a session named was not there
    assert "No session 'ghost'" in several.stderr
    assert several.stdout == "Removed 2 sessions (3 items)\n"

    user = cli("sessions", "delete", "--user", "alice", *url, "-y")
    assert user.stdout == "Removed 1 session (1 item)\n"
    assert ids(cli("sessions", "list", *url).output) == ["support-42"]

    assert cli("sessions", "delete", *url).exit_code == 2
    both = cli("sessions", "delete", "x", "--user", "bob", *url)
    assert both.exit_code == 2 and "not both" in both.output
    empty_id = cli("sessions", "delete", "", *url, "--yes")
    assert empty_id.exit_code == 1 and empty_id.output.startswith("Error: session id must be")


def test_purge_expired_and_inactive(db_url: str, clock: Callable[[datetime], None]) -> None:
    async def write() -> None:
        async with SessionStore(db_url, create_tables=True, ttl=3600) as store:
            clock(T0 - timedelta(days=40))
            await store.session("dormant").add_items([message("1"), message("2")])
            clock(T0 - timedelta(hours=2))
            await store.session("recent").add_items([message("3")])
            clock(T0)
            await store.session("recent").add_items([message("4")])

    asyncio.run(write())
    url = ["--url", db_url]
    # "dormant" (2 items) and the first of "recent" are past their hour.
    assert cli("sessions", "purge", *url, "--expired").output == "Removed 3 expired items\n"
    assert cli("sessions", "purge", *url, "--expired").output == "Removed 0 expired items\n"

    refused = cli("sessions", "purge", *url, "--inactive-days", "30", input="n\n")
    assert refused.exit_code == 1 and "inactive for 30 days?" in refused.output
    assert ids(cli("sessions", "list", *url).output) == ["recent", "dormant"]
    purged = cli("sessions", "purge", *url, "--inactive-days", "30", "--yes")
    assert purged.output == "Removed 1 inactive session (0 items)\n"
    assert ids(cli("sessions", "list", *url).output) == ["recent"]

    nothing = cli("sessions", "purge", *url)
    assert nothing.exit_code == 2 and "--expired and/or --inactive-days" in nothing.output
    assert cli("sessions", "purge", *url, "--inactive-days", "0").exit_code == 2
    too_far = cli("sessions", "purge", *url, "--inactive-days", "1e12", "--yes")
    assert too_far.exit_code == 2 and "0<x<=365000" in too_far.output


def test_a_database_without_tables_is_a_one_line_error(sqlite_url: str) -> None:
    for command in (["list"], ["show", "s"], ["delete", "s", "--yes"], ["purge", "--expired"]):
        result = cli("sessions", *command, "--url", sqlite_url)
        assert result.exit_code == 1, command
        assert result.output.startswith("Error: ") and result.output.count("\n") == 1
        assert "agents-sqlalchemy db upgrade" in result.output


def test_every_sessions_command_has_help() -> None:
    for command in ([], ["list"], ["show"], ["delete"], ["purge"]):
        result = cli("sessions", *command, "--help")
        assert result.exit_code == 0 and "Usage: " in result.output
        assert f"sessions {' '.join(command)}".strip() + " [OPTIONS]" in result.output
    assert "--ask-key" in cli("sessions", "show", "--help").output


# -- formatting ----------------------------------------------------------------------------------


def test_metadata_values_read_and_print_alike() -> None:
    assert [meta_value(v) for v in ("3", "-2.5", "true", "false", "web", '"7"', "null", "[1]")] == [
        3, -2.5, True, False, "web", "7", "null", "[1]"
    ]  # fmt: skip
    # Words JSON has no number for are text: a filter for status=NaN matches "NaN".
    assert [meta_value(v) for v in ("NaN", "Infinity", "-Infinity")] == [
        "NaN", "Infinity", "-Infinity"
    ]  # fmt: skip
    metadata = {"a": "web", "b": 1, "c": "1", "d": "two words", "e": True, "f": {"x": [1]}}
    assert format_meta(metadata) == 'a=web b=1 c="1" d="two words" e=true f={"x":[1]}'
    assert format_meta({}) == ""


def test_metadata_shown_reads_back_as_the_same_pairs() -> None:
    """Keys were never quoted: `{"a=b": "c"}` showed as `a=b=c`, which a filter read as
    `{"a": "b=c"}`, the other session's, and a key with a space was refused; a JSON value
    with a space cut the pairs after it."""
    for metadata in (
        {"a=b": "c"},
        {"a": "b=c"},
        {"plan name": "pro", "": "empty key"},
        {'say "hi"': "x", "k": " ", "é ü": "ß"},
        {"n": 1.5, "flag": False, "after": "ok"},
    ):
        assert meta_pairs(format_meta(metadata)) == metadata
    assert format_meta({"a=b": "c", "a": "b=c"}) == '"a=b"=c a="b=c"'
    assert meta_pairs('f={"x":[1]} after=ok') == {"f": '{"x":[1]}', "after": "ok"}
    # Shown escaped (as the command line and the browser show them), a character and the
    # text of its escape looked alike, and read back as the text.
    lookalikes = ({"v": "x\u202ey"}, {"v": "x\\u202ey"}, {"k\u200b": "1"})
    shown = [one_line(format_meta(metadata)) for metadata in lookalikes]
    assert len(set(shown)) == 3
    assert [meta_pairs(text) for text in shown] == list(lookalikes)


def test_the_meta_option_reads_a_key_as_the_metadata_column_shows_it(
    tmp_path: Path,
) -> None:
    """`sessions list` showed `"plan name"=pro`, which `--meta` took for a key with quotes."""
    url = str(tmp_path / "s.db")

    async def fill() -> None:
        async with SessionStore(url, create_tables=True, search=False) as store:
            for session_id, metadata in (("s1", {"plan name": "pro"}), ("s2", {"plan": "pro"})):
                await store.session(session_id, metadata=metadata).add_items([message("hi")])

    asyncio.run(fill())
    listed = cli("sessions", "list", "--url", url, "--meta", '"plan name"=pro', "--json")
    assert listed.exit_code == 0, listed.output
    assert [json.loads(line)["session_id"] for line in listed.stdout.splitlines()] == ["s1"]
    refused = cli("sessions", "list", "--url", url, "--meta", '"plan name=pro')
    assert refused.exit_code == 2 and "not a closed JSON string" in refused.output


def test_entries_of_other_item_types() -> None:
    def line(item: Any) -> str:
        return click.unstyle("\n".join(transcript([item], first=9)))

    assert line({"role": "system", "content": "Be brief."}) == "[9] system: Be brief."
    refusal = {"type": "message", "role": "assistant",
               "content": [{"type": "refusal", "refusal": "I can't help with that."}]}  # fmt: skip
    assert line(refusal) == "[9] assistant: (refused) I can't help with that."
    picture = {"role": "user", "content": [
        {"type": "input_image", "image_url": "https://example.com/cat.png"},
        {"type": "input_file", "filename": "report.pdf", "file_data": "..."},
    ]}  # fmt: skip
    assert line(picture) == "[9] user: [image: https://example.com/cat.png]\n    [file: report.pdf]"
    mcp = {"type": "mcp_call", "server_label": "docs", "name": "search",
           "arguments": '{"q": "ttl"}', "output": "3 hits"}  # fmt: skip
    assert line(mcp) == '[9] tool call docs.search({"q": "ttl"})\n    → 3 hits'
    custom = {"type": "custom_tool_call", "name": "patch", "input": "*** Begin Patch"}
    assert line(custom) == "[9] tool call patch(*** Begin Patch)"
    search = {"type": "web_search_call", "status": "completed",
              "action": {"type": "search", "query": "zurich weather"}}  # fmt: skip
    assert line(search) == "[9] web search: zurich weather"
    assert line({"type": "reasoning", "summary": []}) == "[9] reasoning: (no summary)"
    assert describe({"type": "item_reference", "id": "x"}).body == '{"id": "x"}'
    parts = {"type": "function_call_output", "call_id": "c",
             "output": [{"type": "input_text", "text": "a"}, {"type": "input_image"}]}  # fmt: skip
    assert line(parts) == "[9] tool result: a\n    [image]"


def test_show_json_gives_every_time_in_iso_8601(sqlite_url: str) -> None:
    """A branch's `created_at` came out as Python prints a datetime (a space, no `T`)."""

    async def write() -> None:
        async with SessionStore(sqlite_url, create_tables=True) as store:
            session = store.session("s")
            await session.add_items([message("one"), message("two")])
            await session.create_branch_from_turn(2, "retry")
            await session.add_items([message("again")])

    asyncio.run(write())
    shown = json.loads(cli("sessions", "show", "s", "--url", sqlite_url, "--json").stdout)
    times = [shown["session"]["created_at"], *(b["created_at"] for b in shown["branches"])]
    assert len(times) == 3
    for text in times:
        assert "T" in text and datetime.fromisoformat(text).utcoffset() == timedelta(0), text
