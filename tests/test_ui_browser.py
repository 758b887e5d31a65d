"""The session browser in a real browser: headless Chromium (Debian's `chromium` and
`chromium-driver`, installed by scripts/browser.sh) drives the `agents-sqlalchemy ui`
command, served by uvicorn in its own process, over SQLite and PostgreSQL.

Every page renders, links and pagination work, search answers, the charts have their data
points, markup from the database stays text (no script runs), a write goes through its
confirmation, and the server's output holds nothing of the items. Screenshots go to
.artifacts/ui/ (and, with AGENTS_SQLALCHEMY_UI_DOCS=DIR, the docs' ones to DIR).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from agents_sqlalchemy.metadata_text import format_meta

from .support.ui import EVIL, EVIL_BRANCH, EVIL_ID, EVIL_USER, SECRET, fill_demo, fill_evil

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow  # a server process and a browser per test
ARTIFACTS = ROOT / ".artifacts" / "ui"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
# The screenshots of the demo the docs show (docs/images/ui-NAME.png).
DOCS = frozenset({"sessions", "users", "transcript", "refused", "search", "charts", "confirm"})


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    """Headless Chromium; missing, it fails: `make test` installs it (scripts/browser.sh)."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not Path(path).exists():
            pytest.fail(f"{path} is missing: run `bash scripts/browser.sh` (as root)")
    options = Options()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.add_argument("--window-size=1280,900")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Server:
    """`agents-sqlalchemy ui` in a child process; its output kept in a file."""

    def __init__(
        self, url: str, log: Path, *options: str, env: dict[str, str] | None = None
    ) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = log
        command = [sys.executable, "-m", "agents_sqlalchemy.cli", "ui", "--url", url]
        env = {k: v for k, v in os.environ.items() if k != "AGENTS_SQLALCHEMY_KEY"} | (env or {})
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [*command, "--port", str(self.port), *options],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the server stopped: {log.read_text()}")
            try:
                if httpx.get(f"{self.base}/sessions", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise AssertionError(f"the server did not answer: {log.read_text()}")

    def stop(self) -> str:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        return self.log.read_text(errors="replace")


def shoot(driver: WebDriver, name: str) -> Path:
    """A screenshot of the whole page as test artifact (and for the docs, when asked)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(max(int(height), 600), 2400))
    path = ARTIFACTS / f"{name}.png"
    driver.save_screenshot(str(path))
    driver.set_window_size(1280, 900)
    docs = os.environ.get("AGENTS_SQLALCHEMY_UI_DOCS")
    if docs and name.removeprefix("sqlite-") in DOCS:
        Path(docs).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, Path(docs) / f"ui-{name.removeprefix('sqlite-')}.png")
    assert path.stat().st_size > 10_000  # a page was drawn, not a blank window
    return path


def go(driver: WebDriver, link_text: str) -> None:
    """Click a link and wait for the page it opens."""
    old = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(By.LINK_TEXT, link_text).click()
    WebDriverWait(driver, 20).until(lambda d: old.id != d.find_element(By.TAG_NAME, "html").id)


def texts(driver: WebDriver, css: str) -> list[str]:
    return [element.text for element in driver.find_elements(By.CSS_SELECTOR, css)]


def no_alert(driver: WebDriver) -> None:
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.accept()


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest) -> tuple[str, str]:
    """An empty database of each kind: its name and URL."""
    url = str(request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url"))
    return request.param, url


def test_markup_from_the_database_stays_text(
    browser: WebDriver, database: tuple[str, str], tmp_path: Path
) -> None:
    """Markup in a session id, a user id, metadata, a branch name and items of an
    encrypted store (its key given as to every command): shown as text on every page, and
    no script runs."""
    dialect, url = database
    asyncio.run(fill_evil(url, key="browser passphrase"))
    key = {"UI_TEST_KEY": "browser passphrase"}
    server = Server(url, tmp_path / "server.log", "--key-env", "UI_TEST_KEY", env=key)
    try:
        base = server.base
        browser.get(f"{base}/sessions")
        assert texts(browser, "#sessions a.session-link") == [EVIL_ID]
        no_alert(browser)
        browser.get(f"{base}/users")
        assert texts(browser, "#users a.user-link") == [EVIL_USER]
        browser.get(f"{base}/session?id={quote(EVIL_ID)}&branch={quote(EVIL_BRANCH)}")
        assert browser.find_element(By.ID, "session-id").text == EVIL_ID
        assert browser.find_element(By.ID, "metadata").text == format_meta({"<k>": EVIL})
        assert EVIL_BRANCH in browser.find_element(By.ID, "branches").text
        assert f"on the branch {EVIL}" in browser.find_element(By.ID, "transcript").text
        assert not browser.find_elements(By.CSS_SELECTOR, "main script, main img, main b")
        no_alert(browser)
        shoot(browser, f"{dialect}-markup")
        browser.get(f"{base}/search?q={quote(SECRET)}")
        assert EVIL in browser.find_element(By.CSS_SELECTOR, "article.hit").text
        browser.get(f"{base}/charts?user={quote(EVIL_USER)}")
        users = browser.find_elements(By.CSS_SELECTOR, "#tokens-per-user rect.point")
        assert [u.get_attribute("data-label") for u in users] == [EVIL_USER]
        assert not browser.find_elements(By.CSS_SELECTOR, "main script, main img, main i")
        no_alert(browser)
    finally:
        output = server.stop()
    assert SECRET not in output and "alert" not in output


def test_the_browser_walks_every_page(
    browser: WebDriver,
    database: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """The demo's conversations (the SDK's Runner, tools, branches, usage over six days)."""
    dialect, url = database
    fill_demo(url, monkeypatch)
    server = Server(url, tmp_path / "server.log", "--allow-writes")
    try:
        walk(browser, server.base, dialect)
    finally:
        output = server.stop()
    assert "Browsing" in output and "GET /session 200" in output  # routes only
    for word in ("Mochi", "Atlantis", "weather", "ticket"):
        assert word not in output, word


def walk(driver: WebDriver, base: str, dialect: str) -> None:
    # Sessions: every demo session, most recently active first, but the archived one.
    driver.get(f"{base}/sessions")
    ids = texts(driver, "#sessions a.session-link")
    assert sorted(ids) == ["dog-names", "release-notes", "sql-help", "support-42", "trip-planning"]
    shoot(driver, f"{dialect}-sessions")

    # Keyset pages of two sessions: following "Next page" reaches every one, once.
    driver.get(f"{base}/sessions?limit=2&archived=with")
    seen = texts(driver, "#sessions a.session-link")
    while driver.find_elements(By.ID, "next"):
        go(driver, "Next page →")
        seen += texts(driver, "#sessions a.session-link")
    assert len(seen) == len(set(seen)) == 6

    # Users, and a user's sessions.
    driver.get(f"{base}/users")
    assert texts(driver, "#users a.user-link") == ["alice", "bob", "carol", "dave"]
    shoot(driver, f"{dialect}-users")
    go(driver, "alice")
    assert sorted(texts(driver, "#sessions a.session-link")) == ["dog-names", "trip-planning"]

    # A transcript: turns, tool calls with their outputs, a failure, usage; then a branch.
    go(driver, "trip-planning")
    assert driver.find_element(By.ID, "session-id").text == "trip-planning"
    calls = driver.find_elements(By.CSS_SELECTOR, "article.tool_call")
    assert len(calls) == 3 and all(c.find_elements(By.CSS_SELECTOR, ".output") for c in calls)
    assert len(driver.find_elements(By.CSS_SELECTOR, "article.failed")) == 1
    assert texts(driver, ".turn-number") == ["Turn 1", "Turn 2", "Turn 3", "Turn 4"]
    reasoning = driver.find_element(By.CSS_SELECTOR, "details.reasoning-body")
    assert not reasoning.get_attribute("open")  # collapsed until asked
    shoot(driver, f"{dialect}-transcript")
    go(driver, "retry-lisbon (10 items, 2 turns)")
    assert driver.find_element(By.CSS_SELECTOR, ".branch.current").text.startswith("retry-lisbon")
    assert "In Lisbon it is 19 °C, clear." in driver.find_element(By.ID, "transcript").text

    # A history the model API would refuse: the call a stopped run never answered.
    driver.get(f"{base}/session?id=support-42")
    assert "would refuse it" in driver.find_element(By.ID, "history-check").text
    refused = driver.find_elements(By.CSS_SELECTOR, "article.refused")
    assert len(refused) == 1 and "call-interrupted" in refused[0].text
    assert "never answered" in refused[0].find_element(By.CSS_SELECTOR, ".problem").text
    shoot(driver, f"{dialect}-refused")

    # Transcript pages, newest first.
    driver.get(f"{base}/session?id=trip-planning&size=10")
    assert texts(driver, "article.item .pos")[0] == "#8"
    go(driver, "Older →")
    items = driver.find_elements(By.CSS_SELECTOR, "article.item")
    positions = [item.get_attribute("data-position") for item in items]
    assert positions == ["1", "2", "3", "5", "6", "7"]  # 4 is the output of call 3
    assert texts(driver, "article.item .output .pos") == ["#4"]

    # Search across sessions, from the form; each hit with its evidence.
    driver.get(f"{base}/search")
    box = driver.find_element(By.NAME, "q")
    box.send_keys("weather in Oslo")
    old = driver.find_element(By.TAG_NAME, "html")
    box.submit()
    WebDriverWait(driver, 20).until(lambda d: old.id != d.find_element(By.TAG_NAME, "html").id)
    hits = driver.find_elements(By.CSS_SELECTOR, "article.hit")
    assert hits and "Oslo" in hits[0].text
    assert {"keyword", "vector", "recency"} <= set(texts(driver, "article.hit dt")[:4])
    shoot(driver, f"{dialect}-search")

    # Charts: a data point per day and per user.
    driver.get(f"{base}/charts?days=14")
    days = driver.find_elements(By.CSS_SELECTOR, "#tokens-per-day rect.point")
    assert len(days) == 14 and sum(float(d.get_attribute("data-value") or 0) for d in days) > 0
    users = driver.find_elements(By.CSS_SELECTOR, "#tokens-per-user rect.point")
    assert [u.get_attribute("data-label") for u in users][:2] == ["alice", "bob"]
    made = driver.find_elements(By.CSS_SELECTOR, "#sessions-per-day rect.point")
    assert sum(float(m.get_attribute("data-value") or 0) for m in made) == 6
    shoot(driver, f"{dialect}-charts")

    # A write: archive through its confirmation (the form carries the CSRF token).
    driver.get(f"{base}/session?id=dog-names")
    go(driver, "Archive…")
    shoot(driver, f"{dialect}-confirm")
    old = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(By.ID, "confirm").click()
    WebDriverWait(driver, 20).until(lambda d: old.id != d.find_element(By.TAG_NAME, "html").id)
    assert driver.find_element(By.ID, "done").text == "Done: archived"
    driver.get(f"{base}/sessions")
    assert "dog-names" not in texts(driver, "#sessions a.session-link")


def submit(driver: WebDriver, css: str) -> None:
    """Submit the form of the element `css` finds, and wait for the page it opens."""
    old = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(By.CSS_SELECTOR, css).submit()
    WebDriverWait(driver, 20).until(lambda d: old.id != d.find_element(By.TAG_NAME, "html").id)


def test_ids_holding_nul_cr_or_lf_come_back_from_the_forms(
    browser: WebDriver, sqlite_url: str, tmp_path: Path
) -> None:
    """A browser sends a form's NUL as U+FFFD and its CR or LF as CRLF: "search this
    session" of such an id said "no session", and the sessions' filter lost its user."""
    from agents_sqlalchemy import SessionStore
    from agents_sqlalchemy.shown_text import one_line

    session_id, user = "a\r\nb\x00c", "u\r\nv"

    async def fill() -> None:
        async with SessionStore(sqlite_url, create_tables=True) as store:
            await store.session(session_id, user_id=user).add_items(
                [{"role": "user", "content": "the zanzibar plan"}]
            )

    asyncio.run(fill())
    server = Server(sqlite_url, tmp_path / "server.log")
    try:
        browser.get(f"{server.base}/session?id={quote(session_id)}")
        browser.find_element(By.CSS_SELECTOR, "form.filters input[name=q]").send_keys("zanzibar")
        submit(browser, "form.filters input[name=q]")
        assert (
            browser.find_element(By.TAG_NAME, "h1").text
            == f"Search in session {one_line(session_id)}"
        )
        assert texts(browser, "article.hit a.session-link") == [one_line(session_id)]
        browser.get(f"{server.base}/sessions?user={quote(user)}")
        submit(browser, "form.filters input[name^=user]")
        assert texts(browser, "#sessions a.session-link") == [one_line(session_id)]
        assert browser.find_element(By.TAG_NAME, "h1").text == f"Sessions of {one_line(user)}"
    finally:
        server.stop()
