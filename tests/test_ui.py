"""The session browser served in-process (Starlette's TestClient): every page renders over a
real store, values from the database are shown as text, writes need --allow-writes, a
confirmation and the run's CSRF token, a token guards every request, and nothing from the
items reaches the logs."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from sqlalchemy.engine import make_url
from starlette.testclient import TestClient

from agents_sqlalchemy import ConfigurationError, ErasureReceipt, SessionStore
from agents_sqlalchemy.repository import schema as repository_module
from agents_sqlalchemy.ui import check_bind, create_app

from .support.cli import cli
from .support.clock import travel
from .support.tables import ITEMS, execute, raw_rows
from .support.ui import EVIL, EVIL_BRANCH, EVIL_ID, EVIL_USER, SECRET, demo, fill_demo, fill_evil

# The loggers of the session browser and the servers that run it.
SERVER_LOGGERS = ("agents_sqlalchemy", "uvicorn", "starlette")


def client(store: SessionStore, **options: Any) -> TestClient:
    return TestClient(create_app(store, **options), base_url="http://127.0.0.1")


def fetched(url: str, path: str, params: dict[str, str] | None = None, **options: Any) -> Any:
    """The response to one GET of the browser, on a store opened (`options`) for it alone."""
    store = SessionStore(url, **options)
    try:
        with client(store) as http:
            return http.get(path, params=params)
    finally:
        asyncio.run(store.close())


def act(http: TestClient, form: dict[str, str], **options: Any) -> Any:
    """POST /act as the confirmation page's form does: its target in the address."""
    fields = dict(form)
    return http.post("/act", params={"target": fields.pop("target", "")}, data=fields, **options)


@pytest.fixture
def evil_store(sqlite_url: str) -> Iterator[SessionStore]:
    asyncio.run(fill_evil(sqlite_url))
    store = SessionStore(sqlite_url)
    yield store
    asyncio.run(store.close())


def every_page(http: TestClient, path: str, pattern: str) -> list[Any]:
    """What `pattern` finds on a listing's pages, following each page's link to the next."""
    found: list[Any] = []
    while path:
        page = http.get(path).text
        found += re.findall(pattern, page, re.S)
        after = re.search(r'id="next" rel="next" href="([^"]+)"', page)
        path = unescape(after.group(1)) if after else ""
    return found


def text_of(html: str) -> str:
    """What a browser shows of a page, roughly: tags dropped, entities decoded."""
    return unescape(re.sub(r"<[^>]+>", " ", html))


def assert_escaped(html: str) -> None:
    assert "<script>" not in html and "<b onmouseover" not in html
    assert "<img src=x" not in html and "<svg onload" not in html and "<i>mallory" not in html


def test_every_value_from_the_database_is_shown_as_text(evil_store: SessionStore) -> None:
    from urllib.parse import quote

    with client(evil_store, allow_writes=True) as http:
        pages = {
            "sessions": http.get("/sessions"),
            "users": http.get("/users"),
            "session": http.get(f"/session?id={quote(EVIL_ID)}"),
            "branch": http.get(f"/session?id={quote(EVIL_ID)}&branch={quote(EVIL_BRANCH)}"),
            "search": http.get(f"/search?q={quote('alert bold')}&user={quote(EVIL_USER)}"),
            "charts": http.get(f"/charts?user={quote(EVIL_USER)}"),
            "confirm": http.get(f"/confirm?action=delete-user&target={quote(EVIL_USER)}"),
            "missing": http.get(f"/session?id={quote(EVIL)}"),
        }
    for name, response in pages.items():
        assert response.status_code == (404 if name == "missing" else 200), name
        assert_escaped(response.text)
        assert "&lt;" in response.text, name
    session = text_of(pages["session"].text)
    assert EVIL_ID in session and EVIL_USER in session and EVIL_BRANCH in session
    assert EVIL in session  # the message, the tool's name, arguments and output, as text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in pages["session"].text
    assert 'data-label="&lt;i&gt;mallory&lt;/i&gt;"' in pages["charts"].text
    assert f"on the branch {EVIL}" in text_of(pages["branch"].text)
    assert EVIL_USER in text_of(pages["search"].text)
    for response in pages.values():  # no script could run even if escaping failed
        assert "script-src" not in response.headers["content-security-policy"]
        assert "default-src 'none'" in response.headers["content-security-policy"]


def test_read_only_by_default(evil_store: SessionStore) -> None:
    with client(evil_store) as http:
        page = http.get("/sessions")
        assert "read-only" in page.text and "/confirm" not in page.text
        confirm = http.get(f"/confirm?action=delete-user&target={EVIL_USER}")
        assert confirm.status_code == 403
        csrf = create_app(evil_store).state.ui.guard.csrf
        posted = act(
            http, {"csrf": csrf, "action": "delete-user", "target": EVIL_USER, "confirm": "yes"}
        )
        assert posted.status_code == 403
    assert asyncio.run(evil_store.session_info(EVIL_ID)) is not None


def test_writes_need_a_confirmation_and_the_csrf_token(evil_store: SessionStore) -> None:
    app = create_app(evil_store, allow_writes=True)
    csrf = app.state.ui.guard.csrf
    form = {"action": "archive", "target": EVIL_ID, "confirm": "yes"}
    with TestClient(app, base_url="http://127.0.0.1") as http:
        confirm = http.get("/confirm", params={"action": "archive", "target": EVIL_ID})
        assert f'name="csrf" value="{csrf}"' in confirm.text
        # A NUL travels in the address (%00); a browser sends one in a form as U+FFFD.
        [address] = re.findall(r'<form method="post" action="([^"]+)"', confirm.text)
        assert parse_qs(urlsplit(unescape(address)).query)["target"] == [EVIL_ID]
        assert act(http, form).status_code == 403  # no token
        assert act(http, form | {"csrf": "x" * 43}).status_code == 403
        unconfirmed = act(http, form | {"csrf": csrf, "confirm": "no"})
        assert unconfirmed.status_code == 400
        info = asyncio.run(evil_store.session_info(EVIL_ID))
        assert info is not None and info.archived_at is None
        done = act(http, form | {"csrf": csrf}, follow_redirects=False)
        assert done.status_code == 303 and "done=archived" in done.headers["location"]
        info = asyncio.run(evil_store.session_info(EVIL_ID))
        assert info is not None and info.archived_at is not None
        restore = form | {"csrf": csrf, "action": "restore"}
        assert act(http, restore).status_code == 200
        assert asyncio.run(evil_store.list_sessions())[0].session_id == EVIL_ID
        delete = form | {"csrf": csrf, "action": "delete-user", "target": EVIL_USER}
        page = act(http, delete)
        assert re.search(r"Done: deleted 1 session\(s\), \d+ item\(s\)", text_of(page.text))
    assert asyncio.run(evil_store.session_info(EVIL_ID)) is None
    other = create_app(evil_store, allow_writes=True).state.ui.guard.csrf
    assert other != csrf  # one token per app run


def test_export_and_erase_need_writes_a_confirmation_and_the_csrf_token(
    evil_store: SessionStore,
) -> None:
    with client(evil_store) as http:  # read-only
        assert http.get("/confirm?action=export-user&target=x").status_code == 403
        form = {"action": "delete", "target": "x", "confirm": "yes"}
        refused = act(http, form)  # said the CSRF token was not valid
        assert refused.status_code == 403 and "--allow-writes" in refused.text
        assert "CSRF" not in refused.text
    app = create_app(evil_store, allow_writes=True)
    csrf = app.state.ui.guard.csrf
    with TestClient(app, base_url="http://127.0.0.1") as http:
        users = http.get("/users")
        assert "action=export-user" in users.text and "action=erase-user" in users.text
        confirm = http.get("/confirm", params={"action": "export-user", "target": EVIL_USER})
        assert f'name="csrf" value="{csrf}"' in confirm.text
        assert "JSON Lines" in confirm.text and "&lt;i&gt;mallory" in confirm.text
        form = {"action": "export-user", "target": EVIL_USER, "confirm": "yes"}
        assert act(http, form).status_code == 403  # no token
        export = act(http, form | {"csrf": csrf})
        assert export.status_code == 200
        disposition = export.headers["content-disposition"]
        assert disposition == 'attachment; filename="i_mallory_i.jsonl"'  # no markup, no quote
        lines = [json.loads(line) for line in export.text.splitlines()]
        assert any(line.get("session_id") == EVIL_ID for line in lines)
        assert SECRET in export.text and lines[-1]["type"] == "done"
        assert asyncio.run(evil_store.session_info(EVIL_ID)) is not None  # only read

        erase = {"action": "erase-user", "target": EVIL_USER, "confirm": "yes"}
        assert act(http, erase | {"csrf": "x" * 43}).status_code == 403
        assert asyncio.run(evil_store.session_info(EVIL_ID)) is not None
        receipt = act(http, erase | {"csrf": csrf})
    assert receipt.status_code == 200
    assert asyncio.run(evil_store.session_info(EVIL_ID)) is None
    shown = text_of(receipt.text)
    assert "Done: erased 1 session(s)" in shown and ErasureReceipt.hash_user(EVIL_USER) in shown
    assert EVIL_USER not in shown and "mallory" not in receipt.text  # the hash only
    kept = re.search(r'<pre id="receipt-json">(.*?)</pre>', receipt.text, re.S)
    assert kept is not None
    values = ErasureReceipt.from_dict(json.loads(unescape(kept.group(1))))
    assert values.sessions == 1 and values.user_sha256 == ErasureReceipt.hash_user(EVIL_USER)


def test_an_export_that_fails_is_an_error_page_and_logs_no_content(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An item altered in an encrypted store: the export answers an error page, never a
    download that merely stops (HTTP 200, its `done` line missing); the log names the kind
    of failure and the route, not its message (which names the session)."""
    asyncio.run(fill_evil(sqlite_url, key="passphrase"))
    [(first,)] = asyncio.run(raw_rows(sqlite_url, f"SELECT ciphertext FROM {ITEMS} LIMIT 1"))
    assert isinstance(first, bytes)
    change = f"UPDATE {ITEMS} SET ciphertext = :c WHERE ciphertext = :was"
    asyncio.run(execute(sqlite_url, change, {"c": first[:-1] + b"!", "was": first}))
    caplog.set_level(logging.INFO)
    store = SessionStore(sqlite_url, key="passphrase")
    try:
        app = create_app(store, allow_writes=True)
        form = {"action": "export-user", "target": EVIL_USER, "confirm": "yes"}
        with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as http:
            export = act(http, form | {"csrf": app.state.ui.guard.csrf})
    finally:
        asyncio.run(store.close())
    assert export.status_code >= 400
    assert "content-disposition" not in export.headers
    assert "TamperedItemError" in text_of(export.text)
    # The server's loggers: an asyncio record left by another test's connections is not it.
    server = [r for r in caplog.records if r.name.startswith(SERVER_LOGGERS)]
    logged = "\n".join(record.getMessage() for record in server)
    assert f"POST /act {export.status_code}" in logged
    assert all(record.exc_info is None for record in server)  # no traceback
    assert "mallory" not in logged and "session" not in logged.replace("/session", "")


def test_a_store_moved_away_while_browsed_is_an_error_never_a_new_file(
    evil_store: SessionStore, sqlite_url: str
) -> None:
    """The browser's store does not create tables: its file moved away, the pages fail;
    none makes a new, empty database at its path."""
    from urllib.parse import quote

    path = Path(str(make_url(sqlite_url).database))
    with client(evil_store) as http:
        assert http.get("/sessions").status_code == 200
    path.rename(path.with_name("moved.db"))
    app = create_app(evil_store)
    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as http:
        pages = [http.get(p) for p in ("/sessions", f"/session?id={quote(EVIL_ID)}", "/users")]
    assert not path.exists()
    assert [page.status_code for page in pages] == [503, 503, 503]  # the database is away


def test_the_transcript_marks_what_the_model_api_would_refuse(sqlite_url: str) -> None:
    """A tool output whose call is gone (on the oldest page) and a call never answered (on
    the latest), on main; the branch made before that call has only the first."""

    async def fill() -> None:
        async with SessionStore(sqlite_url, create_tables=True) as store:
            session = store.session("broken")
            await session.add_items(
                [{"type": "function_call_output", "call_id": "gone", "output": "x"}]
            )
            for n in range(30):
                await session.add_items(
                    [{"role": "user", "content": f"q{n}"}, {"role": "assistant", "content": "a"}]
                )
            call = {"type": "function_call", "call_id": "stopped", "name": "f", "arguments": "{}"}
            await session.add_items([{"role": "user", "content": "last"}, call])
            await session.create_branch_from_turn(2, "early")
            assert len((await session.check("main")).problems) == 2
            assert [p.kind for p in (await session.check()).problems] == ["orphan_output"]

    asyncio.run(fill())
    store = SessionStore(sqlite_url)
    try:
        with client(store) as http:
            latest = http.get("/session?id=broken")
            oldest = http.get("/session?id=broken&page=2")
            early = http.get("/session?id=broken&branch=early")
    finally:
        asyncio.run(store.close())
    summary = text_of(re.search(r'<dd id="history-check">.*?</dd>', latest.text, re.S).group())  # type: ignore[union-attr]
    assert (
        "would refuse it" in summary and "1 orphaned tool output, 1 unanswered tool call" in summary
    )
    assert 'href="/session?id=broken&amp;page=2#item-1"' in latest.text  # on the oldest page
    assert 'href="/session?id=broken#item-63"' in latest.text
    refused = re.findall(r'class="item [^"]*refused" id="item-(\d+)"', latest.text)
    assert refused == ["63"] and "call &#39;stopped&#39; is never answered" in latest.text
    assert re.findall(r'class="item [^"]*refused" id="item-(\d+)"', oldest.text) == ["1"]
    assert "the output of call &#39;gone&#39;, which is not in the history" in oldest.text
    assert "1 orphaned tool output" in text_of(early.text)
    assert "unanswered" not in text_of(early.text)
    labels = re.findall(r"<small>\(([^<]*)\)</small>", early.text)
    assert labels == ["63 items, 31 turns", "3 items, 1 turn"]  # was "1 turns"


def test_a_token_guards_every_request(evil_store: SessionStore) -> None:
    with pytest.raises(ConfigurationError, match="at least 16 characters"):
        create_app(evil_store, token="short")  # the command line's minimum, for an app's too
    token = "t" * 24
    with client(evil_store, token=token) as http:
        assert http.get("/sessions").status_code == 401
        assert http.get("/static/style.css").status_code == 401
        assert http.get("/sessions?token=wrong").status_code == 401
        bearer = http.get("/sessions", headers={"Authorization": f"Bearer {token}"})
        assert bearer.status_code == 200
        first = http.get(f"/sessions?token={token}&user=x", follow_redirects=False)
        assert first.status_code == 303 and first.headers["location"] == "/sessions?user=x"
        assert "httponly" in first.headers["set-cookie"].lower()
        assert http.get("/sessions").status_code == 200  # the cookie it set
    with pytest.raises(ValueError, match="--token"):
        check_bind("0.0.0.0", None)
    check_bind("0.0.0.0", token)
    for loopback in (
        "localhost",
        "127.0.0.2",
        "::1",
    ):  # 127.0.0.2 was refused, said "other machines"
        check_bind(loopback, None)
    for beyond in ("192.168.1.20", "db.internal", "::"):
        with pytest.raises(ValueError, match="lets other machines in"):
            check_bind(beyond, None)
    with pytest.raises(ValueError, match="at least 16 characters"):
        check_bind("0.0.0.0", "t" * 15)


@pytest.mark.parametrize("token", ["t" * 24, "€uro-token-1234567890", "秘密のトークン-0123456789"])
def test_the_login_cookie_never_holds_the_token(evil_store: SessionStore, token: str) -> None:
    """A browser sends a host's cookies to every port of it: the cookie held the token, so
    a program listening on another port of the machine got it, and it opened every page
    as a bearer token. A token outside Latin-1 made the login a 500."""
    with client(evil_store, token=token) as http:
        first = http.get("/sessions", params={"token": token}, follow_redirects=False)
        assert first.status_code == 303
        name, _, rest = first.headers["set-cookie"].partition("=")
        value = rest.split(";")[0]
        assert name == "agents_sqlalchemy_ui_token_80"  # one per port
        assert token not in rest and value
        assert http.get("/sessions").status_code == 200  # the cookie it set
        http.cookies.clear()
        as_bearer = http.get("/sessions", headers={"Authorization": f"Bearer {value}"})
        assert as_bearer.status_code == 401
        http.cookies.set("agents_sqlalchemy_ui_token_81", value)  # another port's
        assert http.get("/sessions").status_code == 401
        assert "max-age=28800" in first.headers["set-cookie"].lower()  # a login lasts 8 h
        until, _, signed = value.partition(".")
        expired = http.app.state.ui.guard.cookie(int(time.time()) - 1)  # type: ignore[attr-defined]
        for forged in (f"{int(until) + 1}.{signed}", expired, "9" * 5000):
            http.cookies.set("agents_sqlalchemy_ui_token_80", forged)
            assert http.get("/sessions").status_code == 401


def test_the_address_with_the_token_always_leaves_the_address_bar(
    evil_store: SessionStore,
) -> None:
    """Opened again once logged in (a bookmark, the printed address), it was served as it
    was: the token stayed in the address bar and the history."""
    token = "t" * 24
    with client(evil_store, token=token) as http:
        for _ in range(2):
            again = http.get(f"/sessions?token={token}&user=x", follow_redirects=False)
            assert again.status_code == 303 and again.headers["location"] == "/sessions?user=x"


@pytest.mark.parametrize("token", ["pässwörd-sehr-lang-1234", "秘密のトークン-0123456789"])
def test_a_token_beyond_ascii_is_taken_as_a_bearer(evil_store: SessionStore, token: str) -> None:
    """A header's bytes reach the app as Latin-1 text: a UTF-8 token sent as a bearer never
    matched, though the docs point a shared machine's user to bearer tokens."""
    with client(evil_store, token=token) as http:
        sent = {"Authorization": b"Bearer " + token.encode()}
        assert http.get("/sessions", headers=sent).status_code == 200  # type: ignore[arg-type]
        wrong = {"Authorization": b"Bearer " + token[:-1].encode() + b"x"}
        assert http.get("/sessions", headers=wrong).status_code == 401  # type: ignore[arg-type]


def test_ids_are_shown_with_control_and_reversing_characters_escaped(sqlite_url: str) -> None:
    """`nul\\0id` showed as `nulid`, and a call id holding U+202E read backwards: two ids
    looked alike, or like another. They show escaped, as the command line shows them."""

    async def fill() -> None:
        async with SessionStore(sqlite_url, create_tables=True, search=False) as store:
            await store.session("nul\x00id", user_id="u\u202eser").add_items(
                [{"type": "function_call", "call_id": "call_\u202eabc", "name": "t\x1bool",
                  "arguments": "{}"}, {"role": "user\u202eevil", "content": "hi"}]
            )  # fmt: skip

    asyncio.run(fill())
    store = SessionStore(sqlite_url, search=False)
    try:
        with client(store) as http:
            listed = http.get("/sessions").text
            page = http.get("/session", params={"id": "nul\x00id"}).text
    finally:
        asyncio.run(store.close())
    for text in (listed, re.sub(r'value="[^"]*"', "", page)):  # a form's value stays as is
        assert "nul\\x00id" in text and "u\\u202eser" in text
        assert "\x00" not in text and "\u202e" not in text
    assert "call_\\u202eabc" in page and "t\\x1bool" in page and "\x1b" not in page
    assert "user\\u202eevil" in page  # a role, shown as the item's label


def test_workers_serving_one_token_take_each_others_forms(evil_store: SessionStore) -> None:
    """Each worker of an ASGI server made its own CSRF token: a confirmation page from one
    and its POST to another was refused (403)."""
    token = "t" * 24
    one = create_app(evil_store, allow_writes=True, token=token).state.ui.guard
    two = create_app(evil_store, allow_writes=True, token=token).state.ui.guard
    other = create_app(evil_store, allow_writes=True, token="u" * 24).state.ui.guard
    assert two.check_csrf(one.csrf) and not other.check_csrf(one.csrf)
    assert one.cookie(2**40) == two.cookie(2**40) != other.cookie(2**40)


def test_a_foreign_host_name_is_refused(evil_store: SessionStore) -> None:
    """DNS rebinding: a page of another site whose name now points here is not served."""
    with client(evil_store) as http:
        refused = http.get("/sessions", headers={"Host": "attacker.example"})
        assert refused.status_code == 400
        assert http.get("/sessions", headers={"Host": "localhost:8300"}).status_code == 200
    # The refusal carries the headers of every answer.
    assert "default-src 'none'" in refused.headers.get("content-security-policy", "")
    assert refused.headers.get("x-frame-options") == "DENY"
    assert refused.headers.get("x-content-type-options") == "nosniff"
    named = client(evil_store, hosts=["browser.internal"])
    with named as http:
        assert http.get("/sessions", headers={"Host": "browser.internal"}).status_code == 200
        assert http.get("/sessions", headers={"Host": "attacker.example"}).status_code == 400
    # On every address the machine's names are unknown: any is served, behind the token.
    token = "t" * 24
    with client(evil_store, hosts=["0.0.0.0"], token=token) as http:
        answer = http.get(
            "/sessions", headers={"Host": "10.1.2.3:8300", "Authorization": f"Bearer {token}"}
        )
        assert answer.status_code == 200
        assert http.get("/sessions", headers={"Host": "10.1.2.3:8300"}).status_code == 401


def test_the_command_says_when_its_port_is_taken(sqlite_url: str) -> None:
    """A port in use: a one-line error and exit code 1, before any address is printed."""
    asyncio.run(fill_evil(sqlite_url))
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = cli("ui", "--url", sqlite_url, "--port", str(port))
    assert result.exit_code == 1
    assert f"cannot listen on 127.0.0.1 port {port}" in result.output
    assert "Browsing" not in result.output


def test_the_command_refuses_other_hosts_without_a_token(sqlite_url: str) -> None:
    asyncio.run(fill_evil(sqlite_url))
    result = cli("ui", "--url", sqlite_url, "--host", "0.0.0.0")
    assert result.exit_code == 2 and "--token" in result.output
    short = cli("ui", "--url", sqlite_url, "--host", "0.0.0.0", "--token", "short")
    assert short.exit_code == 2 and "16 characters" in short.output


def test_the_command_asks_for_the_key_of_an_encrypted_store(sqlite_url: str) -> None:
    asyncio.run(fill_evil(sqlite_url, key="passphrase"))
    result = cli("ui", "--url", sqlite_url)
    assert result.exit_code == 1 and "is encrypted" in result.output


def test_an_encrypted_store_is_browsed_with_its_key(sqlite_url: str) -> None:
    asyncio.run(fill_evil(sqlite_url, key="passphrase"))
    store = SessionStore(sqlite_url, key="passphrase")
    try:
        with client(store) as http:
            page = http.get("/session", params={"id": EVIL_ID})
            hits = http.get("/search", params={"q": SECRET})
        assert page.status_code == 200 and SECRET in page.text
        assert hits.status_code == 200 and SECRET in text_of(hits.text)
    finally:
        asyncio.run(store.close())
    wrong = SessionStore(sqlite_url, key="not it")
    try:
        with client(wrong) as http:
            refused = http.get("/sessions")
        assert refused.status_code == 500 and "WrongKeyError" in refused.text  # not the request's
    finally:
        asyncio.run(wrong.close())


def test_nothing_from_the_items_reaches_the_logs(
    evil_store: SessionStore, caplog: pytest.LogCaptureFixture
) -> None:
    from urllib.parse import quote

    caplog.set_level(logging.INFO)  # as the command serves: uvicorn's, the app's, the library's
    app = create_app(evil_store, allow_writes=True)
    csrf = app.state.ui.guard.csrf
    with TestClient(app, base_url="http://127.0.0.1") as http:
        http.get(f"/session?id={quote(EVIL_ID)}")
        http.get(f"/search?q={SECRET}")
        http.get(f"/session?id={quote(SECRET)}")  # a 404 whose message names the id
        act(http, {"csrf": csrf, "action": "archive", "target": EVIL_ID, "confirm": "yes"})
        http.get("/x%1b[2J%1b[31mPOST%20/act%20303%08%08")  # a terminal's controls
    server = [r for r in caplog.records if not r.name.startswith("httpx")]  # not the client's
    logged = "\n".join(record.getMessage() for record in server)
    assert "GET /search 200" in logged and "GET /session 200" in logged
    assert SECRET not in logged and "alert" not in logged and "mallory" not in logged
    assert "\x1b" not in logged and "\x08" not in logged and "/x\\x1b[2J" in logged


def test_pages_follow_their_cursors(sqlite_url: str) -> None:
    async def fill() -> None:
        async with SessionStore(sqlite_url, create_tables=True, search=False) as store:
            for n in range(7):
                await store.session(f"s{n}", user_id=f"user-{n % 3}").add_items(
                    [{"role": "user", "content": f"turn {t}"} for t in range(25 if n == 0 else 1)]
                )

    asyncio.run(fill())
    store = SessionStore(sqlite_url, search=False)
    try:
        with client(store) as http:
            seen = every_page(
                http, "/sessions?limit=3", r'class="id session-link" href="/session\?id=(s\d)"'
            )
            assert sorted(seen) == [f"s{n}" for n in range(7)]
            users = every_page(http, "/users?limit=2", r'class="id user-link"[^>]*>([^<]+)<')
            assert users == ["user-0", "user-1", "user-2"]
            ones = http.get("/users?prefix=user-1")
            assert re.findall(r'class="id user-link"[^>]*>([^<]+)<', ones.text) == ["user-1"]
            assert re.search(r"<td class=\"num\">2</td>", ones.text)  # s1 and s4
            latest = http.get("/session?id=s0&size=10")
            oldest = http.get("/session?id=s0&size=10&page=3")
            too_far = http.get("/session?id=s0&size=10&page=4")
    finally:
        asyncio.run(store.close())
    positions = [int(p) for p in re.findall(r'data-position="(\d+)"', latest.text)]
    assert positions == list(range(16, 26))
    assert re.findall(r'data-turn="(\d+)"', latest.text) == [str(t) for t in range(16, 26)]
    assert [int(p) for p in re.findall(r'data-position="(\d+)"', oldest.text)] == [1, 2, 3, 4, 5]
    assert "turn 0" in text_of(oldest.text) and "Older" not in oldest.text
    assert too_far.status_code == 400


def test_a_session_id_holding_nul_is_browsed_on_every_database(db_url: str) -> None:
    """The library takes any Unicode session id, NUL too (PostgreSQL stores it escaped):
    its size is found by the id's hash, as the library finds sessions; NUL, which no user
    id holds, asked of the users page is a bad request."""
    nul = "nul\x00id"

    async def fill() -> None:
        async with SessionStore(db_url, create_tables=True, search=False) as store:
            await store.session(nul, user_id="u").add_items([{"role": "user", "content": "hi"}])
            await store.session("plain").add_items([{"role": "user", "content": "hello"}])

    asyncio.run(fill())
    store = SessionStore(db_url, search=False)
    try:
        with client(store) as http:
            sessions = http.get("/sessions")
            page = http.get("/session", params={"id": nul})
            refused = [http.get("/users", params={name: "\x00"}) for name in ("prefix", "after")]
    finally:
        asyncio.run(store.close())
    assert sessions.status_code == 200 and page.status_code == 200
    shown = re.findall(r'<td class="num">([^<]+)</td>\s*<td>\d{4}-', sessions.text)
    assert sorted(shown) == ["30 B", "33 B"]  # each session's stored items, NUL's included
    assert re.search(r"<dd>1 on main · \d+ B</dd>", page.text)
    assert [answer.status_code for answer in refused] == [400, 400]
    assert all("NUL" in answer.text for answer in refused)


def test_user_ids_that_differ_by_trailing_spaces_are_two_users_everywhere(db_url: str) -> None:
    """MariaDB's collations pad: its users page counted "alice " with "alice" (5 sessions,
    of which the sessions page showed 3) and never listed "alice "; so did `store.usage`."""
    from agents.run_context import RunContextWrapper
    from agents.usage import Usage

    used = RunContextWrapper(None, usage=Usage(requests=1, input_tokens=3, total_tokens=3))
    names = {"alice": 3, "alice ": 2, "alice  ": 1}

    async def fill() -> list[tuple[str | None, int]]:
        async with SessionStore(db_url, create_tables=True, search=False) as store:
            for user, count in names.items():
                for n in range(count):
                    session = store.session(f"{user}-{n}", user_id=user)
                    await session.add_items([{"role": "user", "content": "hi"}], wrapper=used)
            report = await store.usage()
            return [(day.user_id, day.usage.input_tokens) for day in report.days]

    by_user = asyncio.run(fill())
    assert sorted(by_user) == [("alice", 9), ("alice ", 6), ("alice  ", 3)]
    store = SessionStore(db_url, search=False)
    try:
        with client(store) as http:
            row = r'class="id user-link"[^>]*>([^<]+)</a>.*?<td class="num">(\d+)</td>'
            seen = every_page(http, "/users?limit=1", row)
    finally:
        asyncio.run(store.close())
    assert [(unescape(user), int(count)) for user, count in seen] == list(names.items())


def test_pages_show_only_what_holds(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session whose items all expired has none to show (not "Items 1-0 of 0"); a date
    past the last day is a bad request; the users' next page keeps its size; a notice of a
    write is shown only as a write says it (any link can set `done=`)."""
    an_hour_ago = datetime.now(timezone.utc) - timedelta(hours=1)

    async def fill() -> None:
        async with SessionStore(sqlite_url, create_tables=True, search=False) as store:
            monkeypatch.setattr(repository_module, "utcnow", lambda: an_hour_ago)
            await store.session("gone", user_id="u1", ttl=60).add_items(
                [{"role": "user", "content": "expired"}]
            )
            monkeypatch.undo()
            for n in range(2, 5):
                await store.session(f"s{n}", user_id=f"u{n}").add_items(
                    [{"role": "user", "content": "kept"}]
                )

    asyncio.run(fill())
    store = SessionStore(sqlite_url, search=False)
    try:
        with client(store) as http:
            expired = http.get("/session?id=gone")
            last_day = http.get("/sessions?before=9999-12-31")
            users = http.get("/users?limit=2")
            forged = http.get("/sessions", params={"done": "your account is locked, call us"})
            archived = http.get("/sessions?done=archived")
            deleted = http.get("/sessions", params={"done": "deleted 1 session(s), 3 item(s)"})
    finally:
        asyncio.run(store.close())
    assert expired.status_code == 200
    assert "Items 1\u20130" not in expired.text and "No items to show" in expired.text
    assert last_day.status_code == 400 and "before" in text_of(last_day.text)
    found = re.search(r'id="next" rel="next" href="([^"]+)"', users.text)
    assert found is not None and "limit=2" in unescape(found.group(1))
    assert "Done:" not in forged.text and "locked" not in forged.text
    assert "Done: archived" in text_of(archived.text)
    assert "Done: deleted 1 session(s), 3 item(s)" in text_of(deleted.text)


def test_a_run_s_transcript_pairs_tool_calls_and_marks_failures(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo's conversations, run by the SDK's Runner, on every database."""
    fill_demo(db_url, monkeypatch)
    store = SessionStore(db_url)
    try:
        with client(store) as http:
            trip = http.get("/session?id=trip-planning")
            support = http.get("/session?id=support-42")
            branch = http.get("/session?id=trip-planning&branch=retry-lisbon")
            sessions = http.get("/sessions?archived=with")
            charts = http.get("/charts?days=10")
            search = http.get("/search?q=weather+Oslo&user=alice&mode=hybrid")
            in_session = http.get("/search?q=Mochi&session=dog-names")
            meta = http.get("/sessions?meta=channel%3Dweb+tier%3D3")
    finally:
        asyncio.run(store.close())
    assert trip.status_code == 200
    calls = trip.text.count('class="item tool_call tool-call')
    assert calls == 3 and trip.text.count('<span class="label">output</span>') == 3
    assert trip.text.count("tag fail") == 1  # Atlantis has no weather station
    assert "An error occurred while running the tool" in text_of(trip.text)
    assert trip.text.count("reasoning (collapsed)") == 3
    assert "Turn 4" in trip.text and 'id="turn-usage"' in trip.text
    assert "2,250 tokens (1,800 in, 450 out, 2 requests)" in text_of(trip.text)
    assert 'class="branch current"' in branch.text and "Lisbon" in text_of(branch.text)
    assert branch.text.count('<div class="text">What is the weather in') == 2
    rows = re.findall(r'session-link" href="/session\?id=([\w-]+)"', sessions.text)
    assert sorted(rows) == sorted(session for _, session in demo().SCRIPTS)
    assert "archived" in sessions.text
    assert re.findall(r'session-link" href="/session\?id=([\w-]+)"', meta.text) == ["sql-help"]
    per_user = re.search(r'id="tokens-per-user">.*?</figure>', charts.text, re.S)
    assert per_user is not None
    points = re.findall(r'data-label="(\w+)" data-value="(\d+)"', per_user.group())
    assert [name for name, _ in points] == ["alice", "bob", "carol", "dave"]
    assert re.findall(r'id="sessions-per-day">.*?</figure>', charts.text, re.S)[0].count(
        'data-value="1"'
    ) == len(demo().SCRIPTS)
    hits = re.findall(r'session-link" href="/session\?id=([\w-]+)"', search.text)
    assert hits and set(hits) <= {"trip-planning", "dog-names"}
    assert 'class="keyword"' in search.text and 'class="recency"' in search.text
    assert "Your dog is called Mochi" in text_of(in_session.text)
    assert "would take it" in text_of(trip.text) and "refused" not in trip.text
    refused = re.findall(r'class="item [^"]*refused" id="item-(\d+)"', support.text)
    assert len(refused) == 1 and "call &#39;call-interrupted&#39; is never answered" in support.text


def test_an_encrypted_store_s_export_is_built_in_memory_never_in_a_file() -> None:
    """An export is built whole before it is sent: past 1 MiB in a temporary file, except
    an encrypted store's, whose plaintext stays in memory (no file descriptor behind it)."""
    from agents_sqlalchemy.ui.app import _spooled

    async def lines() -> Any:
        for _ in range(40):
            yield json.dumps({"content": "x" * 65536}) + "\n"

    sealed, length = asyncio.run(_spooled(lines(), sealed=True))
    plain, _ = asyncio.run(_spooled(lines(), sealed=False))
    with sealed, plain:
        assert length > 2 * 2**20 and len(sealed.read()) == length
        with pytest.raises(OSError):  # io.UnsupportedOperation: nothing on disk
            sealed.fileno()
        assert plain.fileno() >= 0  # the plaintext store's: a file


def test_a_transcript_shows_usage_recorded_since_it_was_last_shown(sqlite_url: str) -> None:
    """The page kept a session's usage for a minute by its last activity and size, which
    recording usage changes neither: it said "none recorded" after a run was recorded."""
    from agents.run_context import RunContextWrapper
    from agents.usage import Usage

    async def write() -> None:
        async with SessionStore(sqlite_url, create_tables=True) as store:
            await store.session("s").add_items([{"role": "user", "content": "hi"}])

    async def record() -> None:
        used = Usage(requests=1, input_tokens=500, output_tokens=50, total_tokens=550)
        ran = type("Result", (), {"context_wrapper": RunContextWrapper(None, usage=used)})()
        await store.session("s").store_run_usage(ran)

    asyncio.run(write())
    store = SessionStore(sqlite_url)
    try:
        with client(store) as http:
            before = text_of(http.get("/session?id=s").text)
            http.portal.call(record)  # on the app's own loop, as another request would
            after = text_of(http.get("/session?id=s").text)
    finally:
        asyncio.run(store.close())
    assert "none recorded" in before
    assert "none recorded" not in after and "550" in after, after


def test_a_transcript_numbers_turns_as_the_api_does_after_a_purge(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page counted a line's turns back from how many it holds: after a purge its turns
    read 1, 2... where the API (and the usage shown beside them) says 3, 4..."""
    from agents.run_context import RunContextWrapper
    from agents.usage import Usage

    used = RunContextWrapper(None, usage=Usage(requests=1, input_tokens=7, total_tokens=7))

    async def write(texts: list[str], role: str = "user") -> list[int]:
        async with SessionStore(sqlite_url, create_tables=True) as store:
            session = store.session("s", ttl=60)
            for text in texts:
                await session.add_items([{"role": role, "content": text}], wrapper=used)
            await store.purge_expired()
            return list(await session.get_conversation_by_turns())

    asyncio.run(write(["one", "two"]))
    travel(monkeypatch, timedelta(seconds=50))
    asyncio.run(write(["answer 2"], role="assistant"))
    travel(monkeypatch, timedelta(seconds=20))
    assert asyncio.run(write([])) == [2]  # turn 2's answer, its question purged
    store = SessionStore(sqlite_url)
    try:
        with client(store) as http:
            answer = http.get("/session?id=s").text
            asyncio.run(write(["three", "four"]))
            later = http.get("/session?id=s").text
    finally:
        asyncio.run(store.close())
    assert re.findall(r'data-turn="(\d+)"', answer) == ["2"]
    assert re.findall(r'data-turn="(\d+)"', later) == ["2", "3", "4"]


def test_tool_data_nested_past_python_s_stack_is_shown_as_text(sqlite_url: str) -> None:
    """1,500 nested brackets in a tool's arguments made the session's page, and every search
    page, answer 500 (RecursionError)."""
    deep = "[" * 1500 + "]" * 1500
    call = {"type": "function_call", "call_id": "c1", "name": "parse", "arguments": deep}
    answer = {"type": "function_call_output", "call_id": "c1", "output": "ok"}

    async def write() -> None:
        async with SessionStore(sqlite_url, create_tables=True, search=True) as store:
            await store.session("deep").add_items(
                [{"role": "user", "content": "zanzibar"}, call, answer]
            )

    asyncio.run(write())
    store = SessionStore(sqlite_url, search=True)
    try:
        with client(store) as http:
            page, found = http.get("/session?id=deep"), http.get("/search?q=zanzibar")
    finally:
        asyncio.run(store.close())
    assert page.status_code == 200 and deep in unescape(page.text)
    assert found.status_code == 200 and "/session?id=deep" in found.text


def test_the_metadata_filter_reads_metadata_as_the_page_shows_it(sqlite_url: str) -> None:
    """A string value is shown `code="7"`; typed so into the filter it matched nothing (its
    quotes were taken as the shell's, leaving the number 7), where `--meta` matched."""
    from urllib.parse import quote

    async def write() -> None:
        async with SessionStore(sqlite_url, create_tables=True) as store:
            for sid, meta in (("s7", {"code": "7", "note": "a b"}), ("n7", {"code": 7})):
                await store.session(sid, metadata=meta).add_items(
                    [{"role": "user", "content": sid}]
                )

    asyncio.run(write())
    store = SessionStore(sqlite_url)
    try:
        with client(store) as http:
            listed = text_of(http.get("/sessions").text)
            shown = 'code="7" note="a b"'
            found = text_of(http.get(f"/sessions?meta={quote(shown)}").text)
            number = text_of(http.get(f"/sessions?meta={quote('code=7')}").text)
            bad = http.get(f"/sessions?meta={quote('code=' + chr(34) + '7')}")
    finally:
        asyncio.run(store.close())
    assert shown in listed
    assert "s7" in found and "n7" not in found
    assert "n7" in number and "s7" not in number
    assert bad.status_code == 400


async def test_sizes_are_bytes_on_every_database(db_url: str) -> None:
    """SQLite's length() of text counts characters: a session of non-ASCII items showed a
    smaller size there than on PostgreSQL or MariaDB."""
    from agents_sqlalchemy.ui import queries

    items = [
        {"role": "user", "content": "Zürich 日本語 🐶"},
        {"role": "assistant", "content": "ok"},
    ]
    async with SessionStore(db_url, create_tables=True) as store:
        await store.session("s").add_items(items)
        short = store.session("s", ttl=1)  # an expired item, not purged yet: no size
        await short.add_items([{"role": "user", "content": "gone soon " * 50}])
        await asyncio.sleep(1.1)
        [info] = await store.list_sessions()
        found = await queries.sizes(store, [info])
    compact = [json.dumps(item, ensure_ascii=False, separators=(",", ":")) for item in items]
    assert found == {"s": sum(len(text.encode()) for text in compact)}


def test_search_hits_of_archived_sessions_are_marked(sqlite_url: str) -> None:
    """A search finds archived sessions' items too; their hits looked like any other."""

    async def fill() -> None:
        async with SessionStore(sqlite_url, create_tables=True) as store:
            for session_id in ("kept", "old"):
                await store.session(session_id).add_items(
                    [{"role": "user", "content": f"the zanzibar plan of {session_id}"}]
                )
            await store.archive_session("old")

    asyncio.run(fill())
    page = fetched(sqlite_url, "/search", {"q": "zanzibar"})
    head = r'session-link" href="/session\?id=(\w+)">\w+</a>(.*?)<span class="muted">item seq'
    heads = dict(re.findall(head, page.text))
    assert sorted(heads) == ["kept", "old"]
    assert "archived" in heads["old"] and "archived" not in heads["kept"]


def test_a_read_only_browser_s_search_writes_search_index_rows_only(sqlite_url: str) -> None:
    """A search first indexes the items not indexed yet (the library's search does, and
    has no way to be asked not to): the guide said a read-only browser writes no row."""

    async def fill() -> None:
        async with SessionStore(sqlite_url, create_tables=True, search=False) as store:
            await store.session("s", user_id="u").add_items(
                [{"role": "user", "content": "the zanzibar plan"}]
            )

    async def tables() -> dict[str, list[tuple[object, ...]]]:
        names = await raw_rows(sqlite_url, "SELECT name FROM sqlite_master WHERE type='table'")
        return {str(n): sorted(await raw_rows(sqlite_url, f'SELECT * FROM "{n}"'), key=repr)
                for (n,) in names}  # fmt: skip

    asyncio.run(fill())
    before = asyncio.run(tables())
    found = fetched(sqlite_url, "/search", {"q": "zanzibar"})
    after = asyncio.run(tables())
    assert found.status_code == 200 and "/session?id=s" in found.text
    changed = {name for name in after if after[name] != before.get(name)}
    assert changed == {"agents_sqlalchemy_search_index"}  # nothing of the conversations
    guide = (Path(__file__).parents[1] / "docs" / "guide" / "ui.md").read_text()
    assert "Read-only means no row is written;" not in guide
    assert "search index" in " ".join(guide.split())


def form_values(html: str, action: str) -> dict[str, str]:
    """The inputs of the form sent to `action`, as a browser reads them from the page."""
    form = re.search(rf'<form[^>]*action="{re.escape(action)}"[^>]*>(.*?)</form>', html, re.S)
    assert form is not None, action
    inputs = re.findall(r'<input[^>]*?name="([^"]+)"[^>]*?value="([^"]*)"', form.group(1))
    return {unescape(name): unescape(value) for name, value in inputs}


def test_ids_holding_nul_cr_or_lf_come_back_from_the_forms_as_they_are(sqlite_url: str) -> None:
    """A browser sends a form's NUL as U+FFFD and its CR or LF as CRLF (a text field drops
    them): "search this session" said "no session", and the sessions' and charts' forms
    lost their user. Such a value goes percent-encoded; an ordinary one as it is."""
    from agents_sqlalchemy.shown_text import one_line

    session_id, user = "a\r\nb\x00c", "u\r\nv"

    async def fill() -> None:
        async with SessionStore(sqlite_url, create_tables=True) as store:
            for sid, owner in ((session_id, user), ("plain", "alice")):
                await store.session(sid, user_id=owner).add_items(
                    [{"role": "user", "content": f"the zanzibar plan of {owner}"}]
                )

    asyncio.run(fill())
    store = SessionStore(sqlite_url)
    try:
        with client(store) as http:
            session = form_values(http.get("/session", params={"id": session_id}).text, "/search")
            listed = form_values(http.get("/sessions", params={"user": user}).text, "/sessions")
            charted = form_values(http.get("/charts", params={"user": user}).text, "/charts")
            plain = form_values(http.get("/session?id=plain").text, "/search")
            for sent in (session, listed, charted):  # nothing a browser would change
                assert not re.search("[\x00\r\n]", "".join(sent.values())), sent
            found = http.get("/search", params=session | {"q": "zanzibar"})
            sessions = http.get("/sessions", params=listed)
            charts = http.get("/charts", params=charted)
    finally:
        asyncio.run(store.close())
    assert plain == {"session": "plain"}  # readable in the address
    heading = " ".join(text_of(found.text).split())
    assert found.status_code == 200 and f"Search in session {one_line(session_id)}" in heading
    assert re.findall(r'session-link" href="([^"]+)"', found.text) == ["/session?id=a%0D%0Ab%00c"]
    assert re.findall(r'session-link" href="([^"]+)"', sessions.text) == [
        "/session?id=a%0D%0Ab%00c"
    ]
    assert f"Charts of {one_line(user)}" in " ".join(text_of(charts.text).split())


def test_a_mounted_browser_keeps_every_path_under_its_mount(evil_store: SessionStore) -> None:
    """Mounted under /browse (the guide says an app can mount it), its links, forms,
    stylesheet and redirects named paths from the top of the site: each was a 404."""
    from urllib.parse import quote

    from starlette.applications import Starlette
    from starlette.routing import Mount

    token = "t" * 24
    inner = create_app(evil_store, allow_writes=True, token=token)
    app = Starlette(routes=[Mount("/browse", app=inner)])
    with TestClient(app, base_url="http://127.0.0.1") as http:
        login = http.get(f"/browse/users?token={token}&archived=with", follow_redirects=False)
        assert login.headers["location"] == "/browse/users?archived=with"
        home = http.get("/browse/", follow_redirects=False)
        assert home.status_code == 303 and home.headers["location"] == "/browse/sessions"
        pages = [
            http.get(f"/browse/{page}")
            for page in (
                "sessions",
                "users",
                f"session?id={quote(EVIL_ID)}",
                "search?q=second",
                "charts",
                f"confirm?action=archive&target={quote(EVIL_ID)}",
            )
        ]
        found = {
            unescape(path)
            for page in pages
            for path in re.findall(r'(?:href|action)="([^"#][^"]*)"', page.text)
        }
        assert "/browse/static/style.css" in found and "/browse/charts" in found
        assert all(path.startswith("/browse/") for path in found), found
        assert all(http.get(path).status_code != 404 for path in found)
        assert re.search(r'href="/browse/users" aria-current="page"', pages[1].text)
        csrf = inner.state.ui.guard.csrf
        form = {"csrf": csrf, "action": "archive", "confirm": "yes"}
        done = http.post(
            "/browse/act", params={"target": EVIL_ID}, data=form, follow_redirects=False
        )
    assert done.status_code == 303 and done.headers["location"].startswith("/browse/sessions?")


def test_sessions_without_a_user_are_not_counted_as_a_user_named_like_them(
    sqlite_url: str,
) -> None:
    """The tokens per user were summed by the label "(no user)": a user of that very id
    was merged with the sessions that have none."""

    charts = _charts_of(sqlite_url, [("a", "(no user)", 5), ("b", None, 7)])
    figure = re.search(r'id="tokens-per-user">.*?</figure>', charts, re.S)
    assert figure is not None
    points = re.findall(r'class="(point[^"]*)"[^>]*data-label="([^"]*)" data-value="(\d+)"',
                        figure.group())  # fmt: skip
    assert points == [("point unnamed", "", "7"), ("point", "(no user)", "5")]


def test_chart_labels_show_control_and_reversing_characters_escaped(sqlite_url: str) -> None:
    """A user id holding U+202E was drawn as it is in the tokens-per-user chart (its
    label, its hover title), reading backwards, where every other place escapes it."""

    charts = _charts_of(sqlite_url, [("s", "u\u202eser\x1b", 3)])
    assert "\u202e" not in charts and "\x1b" not in charts
    assert 'data-label="u\\u202eser\\x1b"' in charts
    assert "<title>u\\u202eser\\x1b: 3 tokens</title>" in charts


def _charts_of(url: str, runs: list[tuple[str, str | None, int]]) -> str:
    """The charts page of a database holding one run per (session, user, tokens)."""
    from agents.run_context import RunContextWrapper
    from agents.usage import Usage

    async def fill() -> None:
        async with SessionStore(url, create_tables=True, search=False) as store:
            for session_id, owner, tokens in runs:
                used = RunContextWrapper(None, usage=Usage(requests=1, total_tokens=tokens))
                await store.session(session_id, user_id=owner).add_items(
                    [{"role": "user", "content": "hi"}], wrapper=used
                )

    asyncio.run(fill())
    return str(fetched(url, "/charts", search=False).text)


def test_an_unreadable_stored_item_is_a_server_error_not_a_bad_request(
    sqlite_url: str,
) -> None:
    """An item altered in an encrypted store, or a key that does not open the keyring, was
    answered 400, as if the request were wrong; a bad parameter still is."""
    asyncio.run(fill_evil(sqlite_url, key="passphrase"))
    change = f"UPDATE {ITEMS} SET ciphertext = :c WHERE ciphertext = :was"
    for (first,) in asyncio.run(raw_rows(sqlite_url, f"SELECT ciphertext FROM {ITEMS}")):
        assert isinstance(first, bytes)
        asyncio.run(execute(sqlite_url, change, {"c": first[:-1] + b"!", "was": first}))
    store = SessionStore(sqlite_url, key="passphrase")
    try:
        with client(store) as http:
            tampered = http.get("/session", params={"id": EVIL_ID})
            bad = http.get("/users", params={"prefix": "\x00"})
    finally:
        asyncio.run(store.close())
    assert tampered.status_code == 500 and "TamperedItemError" in text_of(tampered.text)
    assert bad.status_code == 400 and "ConfigurationError" in text_of(bad.text)


def test_the_login_redirect_stays_on_this_server(evil_store: SessionStore) -> None:
    """The address with the token, its path starting `//evil.example/`, redirected there
    (`//host/...` names another host): off-site, with the rest of the query."""
    token = "t" * 24
    with client(evil_store, token=token) as http:
        for path in ("//evil.example/x", "///evil.example/x", "/\\evil.example/x"):
            answer = http.get(f"http://127.0.0.1{path}?token={token}&q=1", follow_redirects=False)
            assert answer.status_code == 303
            target = answer.headers["location"]
            assert target.startswith("/") and target[1:2] not in ("/", "\\"), target
            assert target.endswith("evil.example/x?q=1"), target


def test_a_day_without_a_time_ends_a_window_whole(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`before=2025-12-08` took the day whole, `before=20251208` (the same date, as
    Python reads it too) as its midnight: by the length of the text."""
    from datetime import date

    noon = datetime(2025, 12, 8, 12, tzinfo=timezone.utc)

    async def fill() -> None:
        async with SessionStore(sqlite_url, create_tables=True, search=False) as store:
            monkeypatch.setattr(repository_module, "utcnow", lambda: noon)
            await store.session("on-the-day").add_items([{"role": "user", "content": "hi"}])
            monkeypatch.undo()

    def readable(raw: str) -> bool:  # Python 3.11 reads more forms of a date than 3.10
        try:
            return bool(date.fromisoformat(raw))
        except ValueError:
            return False

    asyncio.run(fill())
    whole_day = [raw for raw in ("2025-12-08", "20251208", "2025-W50-1") if readable(raw)]
    store = SessionStore(sqlite_url, search=False)
    try:
        with client(store) as http:
            listed = {
                raw: "on-the-day" in http.get("/sessions", params={"before": raw}).text
                for raw in [*whole_day, "2025-12-08T00:00", "2025-12-07"]
            }
    finally:
        asyncio.run(store.close())
    assert listed == {raw: raw in whole_day for raw in listed}


@pytest.mark.parametrize("host", ["::0", "0:0:0:0:0:0:0:0", "[::]", "0.0.0.0"])
def test_every_spelling_of_every_address_serves_any_host_name(
    evil_store: SessionStore, host: str
) -> None:
    """`0.0.0.0` and `::` served any Host (behind the token); `::0` and `0:0:0:0:0:0:0:0`,
    the same address, refused every name but this machine's."""
    token = "t" * 24
    with client(evil_store, hosts=[host], token=token) as http:
        answer = http.get(
            "/sessions", headers={"Host": "10.1.2.3:8300", "Authorization": f"Bearer {token}"}
        )
    assert answer.status_code == 200


async def test_the_users_prefix_filter_misses_no_id_on_every_database(db_url: str) -> None:
    """Ids starting with the prefix were those below it + U+10FFFF: one whose next
    character is U+10FFFF was missed. MariaDB's padding collation must not match "ab ",
    and there "ab\t1" sorts before "ab": it was missed too."""
    from agents_sqlalchemy.ui import queries

    top = "\U0010ffff"
    users = ["a", "ab", "ab ", "ab\t1", f"ab{top}", f"ab{top}z", f"ab{top}{top}", "ac", "b"]
    async with SessionStore(db_url, create_tables=True, search=False) as store:
        for n, user in enumerate(users):
            await store.session(f"s{n}", user_id=user).add_items(
                [{"role": "user", "content": "hi"}]
            )
        found = {
            prefix: sorted(owner.user_id for owner in (await queries.owners(
                store, after=None, limit=50, prefix=prefix))[0])
            for prefix in ("ab", f"ab{top}", "ab ", top)
        }  # fmt: skip
    assert found == {
        "ab": sorted(["ab", "ab ", "ab\t1", f"ab{top}", f"ab{top}z", f"ab{top}{top}"]),
        f"ab{top}": sorted([f"ab{top}", f"ab{top}z", f"ab{top}{top}"]),
        "ab ": ["ab "],
        top: [],
    }
