"""The session browser: a Starlette app over a `SessionStore`, pages rendered on the server
with Jinja (autoescaped), charts as inline SVG, no script.

Read-only unless built with `allow_writes=True`, which adds archive, restore, delete,
export and erase behind a confirmation page and this run's CSRF token.

Example::

    store = SessionStore("agent.db")
    app = create_app(store)                 # serve with any ASGI server
    uvicorn.run(app, host="127.0.0.1", port=8300, access_log=False)
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from io import BytesIO
from pathlib import Path
from tempfile import SpooledTemporaryFile
from typing import IO, Any, Literal
from urllib.parse import parse_qsl

from jinja2 import Environment, PackageLoader, StrictUndefined, pass_context, select_autoescape
from jinja2.runtime import Context
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from ..errors import (
    AgentsSQLAlchemyError,
    BranchError,
    ConfigurationError,
    DatabaseError,
    ItemError,
    QueryTooLongError,
)
from ..metadata_text import format_meta
from ..records import SessionInfo
from ..shown_text import one_line
from ..store import SessionStore
from . import charts, queries
from .fields import (
    BadRequest,
    address,
    archived_filter,
    day,
    form_field,
    metadata_filter,
    param,
    route,
    size,
    when,
    whole,
)
from .security import LOCAL_HOSTS, Guard, check_token, every_address
from .transcript import describe, problems_at, shape, turn_numbers

logger = logging.getLogger("agents_sqlalchemy.ui")
PAGE_SIZES = (20, 50, 100, 200)
TRANSCRIPT_PAGE = 50
# Outputs of calls on a page may come a little later: looked for this far past it.
_LOOKAHEAD = 50
_CACHE_SECONDS = 60.0
_CACHE_ENTRIES = 1000
# An export is kept in memory up to this size, then in a temporary file; sent in chunks.
_SPOOL_IN_MEMORY = 1 << 20
_CHUNK = 1 << 16
Mode = Literal["hybrid", "vector", "keyword"]
MODES: dict[str, Mode] = {"hybrid": "hybrid", "vector": "vector", "keyword": "keyword"}
ACTIONS = {
    "archive": "Archive session",
    "restore": "Restore session",
    "delete-session": "Delete session",
    "delete-user": "Delete every session of user",
    "export-user": "Export every session of user",
    "erase-user": "Erase user",
}
# The actions whose target is a user id (the others name a session).
USER_ACTIONS = frozenset({"delete-user", "export-user", "erase-user"})
# What a write's redirect says it did (`act`); any other `done=` is not shown.
NOTICE = re.compile(r"(not )?(archived|restored)|deleted \d+ session\(s\), \d+ item\(s\)")
# The library's errors that say what was asked cannot be (400); others are the server's.
REQUEST_ERRORS = (ConfigurationError, BranchError, ItemError, QueryTooLongError)


class NotFound(Exception):
    """No such session or branch; shown as a 404 page."""


@dataclass
class Browser:
    """What every page needs: the store, the templates, the guard and the options."""

    store: SessionStore
    templates: Jinja2Templates
    guard: Guard
    allow_writes: bool
    title: str
    cache: dict[Any, tuple[float, Any]] = field(default_factory=dict)

    def page(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        context |= {
            "title": self.title,
            "allow_writes": self.allow_writes,
            "csrf": self.guard.csrf,
            "path": route(request),
        }
        return self.templates.TemplateResponse(request, name, context, status_code=status)

    async def cached(self, key: Any, make: Any) -> Any:
        """`await make()`, kept for a minute (charts aggregate whole tables; a long
        transcript's branches and usage are read once while it is paged through)."""
        now = time.monotonic()
        hit = self.cache.get(key)
        if hit is not None and now - hit[0] < _CACHE_SECONDS:
            return hit[1]
        value = await make()
        if len(self.cache) >= _CACHE_ENTRIES:
            self.cache.clear()
        self.cache[key] = (now, value)
        return value


def _templates() -> Jinja2Templates:
    env = Environment(
        loader=PackageLoader("agents_sqlalchemy.ui", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals |= {
        "link": _link,
        "form_field": form_field,
        "when": when,
        "size": size,
        "format_meta": format_meta,
    }
    env.filters["thousands"] = lambda value: f"{int(value or 0):,}"
    env.filters["shown"] = one_line  # ids and names: no control nor reversing character
    return Jinja2Templates(env=env)


@pass_context
def _link(context: Context, path: str, **params: Any) -> str:
    """`link` in a template: under the path the app is mounted at."""
    return address(context["request"], path, **params)


# -- pages -----------------------------------------------------------------------------------


async def home(request: Request) -> Response:
    return RedirectResponse(address(request, "/sessions"), status_code=303)


async def sessions_page(request: Request) -> Response:
    ui: Browser = request.app.state.ui
    params = request.query_params
    user = param(request, "user") or None
    meta_raw = params.get("meta", "")
    archived = params.get("archived", "")
    limit = whole(request, "limit", 50, 1, 500)
    page = await ui.store.list_sessions(
        user_id=user,
        metadata=metadata_filter(meta_raw),
        updated_after=day(request, "after"),
        updated_before=day(request, "before", end=True),
        limit=limit,
        cursor=params.get("cursor") or None,
        archived=archived_filter(archived),
    )
    sizes = await queries.sizes(ui.store, list(page))
    filters = {
        "user": user,
        "meta": meta_raw,
        "after": params.get("after", ""),
        "before": params.get("before", ""),
        "archived": archived,
        "limit": limit if limit != 50 else None,
    }
    return ui.page(
        request,
        "sessions.html",
        sessions=list(page),
        sizes=sizes,
        filters=filters,
        next_cursor=page.next_cursor,
        first_page=not params.get("cursor"),
        done=_notice(params.get("done", "")),
    )


async def users_page(request: Request) -> Response:
    ui: Browser = request.app.state.ui
    archived = request.query_params.get("archived") == "with"
    prefix = param(request, "prefix")
    limit = whole(request, "limit", 50, 1, 500)
    owners, after = await queries.owners(
        ui.store,
        after=request.query_params.get("after") or None,
        limit=limit,
        archived=archived,
        prefix=prefix,
    )
    return ui.page(
        request,
        "users.html",
        owners=owners,
        next_after=after,
        archived="with" if archived else "",
        prefix=prefix,
        limit=limit if limit != 50 else None,
        first_page=not request.query_params.get("after"),
    )


async def _session_info(ui: Browser, session_id: str) -> SessionInfo:
    if not session_id:
        raise BadRequest("which session? (id=...)")
    info = await ui.store.session_info(session_id)
    if info is None:
        raise NotFound(f"no session {session_id!r}")
    return info


async def session_page(request: Request) -> Response:
    ui: Browser = request.app.state.ui
    session_id = request.query_params.get("id", "")
    info = await _session_info(ui, session_id)
    session = ui.store.session(session_id)
    # What only a write of items changes, kept per version of the session (its last
    # activity and size): paging through a long transcript reads its branches once. Usage
    # is read each time: recording it changes neither.
    version = (session_id, info.updated_at, info.item_count)
    branches = await ui.cached(("branches", *version), session.list_branches)
    branch = request.query_params.get("branch") or "main"
    line = next((b for b in branches if b["branch_id"] == branch), None)
    if line is None and branch != "main":
        raise NotFound(f"no branch {branch!r} in this session")
    total = info.item_count if branch == "main" else int(line["message_count"]) if line else 0

    async def last_turn() -> int:  # not the count of turns: purged ones keep their numbers
        return max(await session.get_conversation_by_turns(branch), default=0)

    turns = await ui.cached(("turns", branch, *version), last_turn)
    size_ = whole(request, "size", TRANSCRIPT_PAGE, 10, 1000)
    pages = max(1, -(-total // size_))
    number = whole(request, "page", 1, 1, max(pages, 1))
    read = await session.get_items(limit=number * size_, branch_id=branch)
    end = max(0, len(read) - (number - 1) * size_)
    start = max(0, end - size_)
    first = total - len(read) + 1
    numbers = turn_numbers(read, turns)

    rows = await session.get_turn_usage(branch_id=branch)
    usage = {row["user_turn_number"]: row for row in rows} if isinstance(rows, list) else {}

    async def check() -> Any:
        return await session.check(branch)

    report = await ui.cached(("check", branch, *version), check)
    problems = problems_at(report)
    window = slice(start, min(len(read), end + _LOOKAHEAD))
    shaped = shape(
        read[window],
        first=first + start,
        numbers=numbers[window],
        usage=usage,
        problems=problems,
    )
    entries = [entry for entry in shaped if entry.position < first + end]

    async def stored() -> Any:
        return await queries.sizes(ui.store, [info])

    totals = await session.get_session_usage(branch_id=branch)
    sizes = await ui.cached(("size", *version), stored)
    return ui.page(
        request,
        "session.html",
        info=info,
        stored=sizes.get(info.session_id),
        branches=branches,
        branch=branch,
        entries=entries,
        page=number,
        pages=pages,
        page_size=size_ if size_ != TRANSCRIPT_PAGE else None,
        total=total,
        first=first + start,
        last=first + end - 1,
        usage=totals,
        report=report,
        # Each with the page it is on (1: the latest).
        problems=[(at, note, (total - at) // size_ + 1) for at, note in sorted(problems.items())],
        turn_usage=[usage[k] for k in sorted({e.turn for e in entries}) if k in usage],
    )


async def search_page(request: Request) -> Response:
    ui: Browser = request.app.state.ui
    params = request.query_params
    query = params.get("q", "").strip()
    user = param(request, "user") or None
    session_id = param(request, "session") or None
    mode = MODES.get(params.get("mode") or "hybrid")
    if mode is None:
        raise BadRequest("mode is hybrid, vector or keyword")
    limit = whole(request, "limit", 10, 1, 100)
    hits: list[Any] = []
    archived: set[str] = set()
    elapsed = None
    if query:
        started = time.perf_counter()
        if session_id is not None:
            await _session_info(ui, session_id)
            found = await ui.store.session(session_id).search_hits(query, limit=limit, mode=mode)
        else:
            found = await ui.store.search(query, user_id=user, limit=limit, mode=mode)
        elapsed = (time.perf_counter() - started) * 1000
        hits = [(hit, describe(hit.item, hit.seq, 0)) for hit in found]
        for session in {hit.session_id for hit in found}:  # hits of archived sessions marked
            info = await ui.store.session_info(session)
            if info is not None and info.archived_at is not None:
                archived.add(session)
    return ui.page(
        request,
        "search.html",
        query=query,
        user=user or "",
        session_id=session_id or "",
        mode=mode,
        limit=limit,
        hits=hits,
        archived=archived,
        elapsed=elapsed,
    )


async def charts_page(request: Request) -> Response:
    ui: Browser = request.app.state.ui
    days = whole(request, "days", 30, 1, 3650)
    user = param(request, "user") or None
    since = queries.days_back(days)
    start = datetime.combine(since, datetime.min.time(), timezone.utc)

    async def usage() -> Any:
        return await ui.store.usage(user_id=user, since=start)

    async def made(what: str) -> Any:
        return await queries.made_per_day(ui.store, what, since=since, user_id=user)

    report = await ui.cached(("usage", days, user), usage)
    sessions = await ui.cached(("sessions", days, user), lambda: made("sessions"))
    items = await ui.cached(("items", days, user), lambda: made("items"))
    per_day: dict[date, int] = {}
    per_user: dict[str | None, int] = {}  # None: sessions without a user
    for row in report.days:
        per_day[row.day] = per_day.get(row.day, 0) + row.usage.total_tokens
        per_user[row.user_id] = per_user.get(row.user_id, 0) + row.usage.total_tokens
    by_total = sorted(per_user.items(), key=lambda kv: (-kv[1], kv[0] is None, kv[0] or ""))
    top_users = by_total[:15]
    titles = {
        "tokens-per-day": "Tokens per day (UTC)",
        "tokens-per-user": "Tokens per user (the top 15)",
        "sessions-per-day": "Sessions started per day (UTC)",
        "items-per-day": "Items added per day (UTC)",
    }
    drawn = {
        "tokens-per-day": charts.columns(
            _daily(since, days, per_day), title=titles["tokens-per-day"], unit=" tokens"
        ),
        "tokens-per-user": charts.rows(
            [(name, float(total)) for name, total in top_users],
            title=titles["tokens-per-user"],
            unit=" tokens",
            unnamed="(no user)",
        ),
        "sessions-per-day": charts.columns(
            _daily(since, days, dict(sessions)), title=titles["sessions-per-day"]
        ),
        "items-per-day": charts.columns(
            _daily(since, days, dict(items)), title=titles["items-per-day"]
        ),
    }
    figures = [(name, titles[name], svg) for name, svg in drawn.items()]
    return ui.page(
        request,
        "charts.html",
        figures=figures,
        days=days,
        user=user or "",
        total=report.total,
    )


def _daily(since: date, days: int, values: dict[date, int]) -> list[tuple[str, float]]:
    """One point per day of the window, zero on days without any."""
    return [
        ((since + timedelta(days=n)).isoformat(), float(values.get(since + timedelta(days=n), 0)))
        for n in range(days)
    ]


# -- writes ----------------------------------------------------------------------------------


def _writable(ui: Browser) -> None:
    if not ui.allow_writes:
        raise PermissionError("this session browser is read-only (start it with --allow-writes)")


def _action(ui: Browser, action: str, target: str) -> None:
    _writable(ui)
    if action not in ACTIONS:
        raise BadRequest(f"unknown action {action!r}")
    if not target:
        raise BadRequest("the action needs a target")


async def confirm_page(request: Request) -> Response:
    ui: Browser = request.app.state.ui
    action = request.query_params.get("action", "")
    target = request.query_params.get("target", "")
    _action(ui, action, target)
    info = None if action in USER_ACTIONS else await _session_info(ui, target)
    return ui.page(
        request, "confirm.html", action=action, label=ACTIONS[action], target=target, info=info
    )


async def act(request: Request) -> Response:
    ui: Browser = request.app.state.ui
    _writable(ui)  # said first: a read-only browser's form has no valid CSRF token either
    form = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
    if not ui.guard.check_csrf(form.get("csrf")):
        return ui.page(request, "error.html", 403, message="the form's CSRF token is not valid")
    action, target = form.get("action", ""), request.query_params.get("target", "")
    _action(ui, action, target)
    if form.get("confirm") != "yes":
        raise BadRequest("the action was not confirmed")
    store = ui.store
    if action == "export-user":
        # Built whole before any answer: a failure is then an error page, not a download
        # that stops short after an HTTP 200.
        export, length = await _spooled(store.export_user(target), store.key is not None)
        logger.info("write: %s", action)  # the action only: no id, nothing from the items
        return StreamingResponse(
            _chunks(export),
            media_type="application/jsonl; charset=utf-8",
            headers={
                "Content-Disposition": f'attachment; filename="{_export_name(target)}"',
                "Content-Length": str(length),
            },
        )
    if action == "erase-user":
        receipt = await store.erase_user(target)
        ui.cache.clear()
        logger.info("write: %s", action)
        return ui.page(request, "receipt.html", receipt=receipt.as_dict())
    if action == "archive":
        done = "archived" if await store.archive_session(target) else "not archived"
    elif action == "restore":
        done = "restored" if await store.restore_session(target) else "not restored"
    elif action == "delete-session":
        removed = await store.delete_session(target)
        done = f"deleted {removed.sessions} session(s), {removed.items} item(s)"
    else:
        removed = await store.delete_user(target)
        done = f"deleted {removed.sessions} session(s), {removed.items} item(s)"
    ui.cache.clear()
    logger.info("write: %s", action)  # the action only: no id, nothing from the items
    return RedirectResponse(address(request, "/sessions", done=done, archived="with"), 303)


async def _spooled(lines: AsyncIterator[str], sealed: bool) -> tuple[IO[bytes], int]:
    """The lines written whole to a temporary file (in memory while small; always, for a
    `sealed` store, whose plaintext must not reach a disk), rewound, and their size in
    bytes; the file is closed if they fail."""
    with ExitStack() as on_failure:
        spool: IO[bytes] = (
            on_failure.enter_context(BytesIO())
            if sealed
            else on_failure.enter_context(SpooledTemporaryFile(max_size=_SPOOL_IN_MEMORY))
        )
        async for line in lines:
            spool.write(line.encode("utf-8"))
        length = spool.tell()
        spool.seek(0)
        on_failure.pop_all()  # complete: the caller closes it
    return spool, length


def _chunks(spool: IO[bytes]) -> Iterator[bytes]:
    """A spooled file's bytes, in chunks; the file is closed after them."""
    with spool:
        while chunk := spool.read(_CHUNK):
            yield chunk


def _notice(done: str) -> str:
    """A `done=` notice if it is one that `act` writes, else nothing: any link can set it."""
    return done if NOTICE.fullmatch(done) else ""


def _export_name(user_id: str) -> str:
    """A file name for a user's export: the id's letters, digits, dots, dashes and
    underscores (any other character is not safe in a header), then `.jsonl`."""
    kept = re.sub(r"[^A-Za-z0-9._-]+", "_", user_id).strip("._")[:60]
    return f"{kept or 'user'}.jsonl"


# -- the app ---------------------------------------------------------------------------------


async def _bad_request(request: Request, exc: Exception) -> Response:
    ui: Browser = request.app.state.ui
    return ui.page(request, "error.html", 400, message=str(exc))


async def _not_found(request: Request, exc: Exception) -> Response:
    ui: Browser = request.app.state.ui
    return ui.page(request, "error.html", 404, message=str(exc))


async def _forbidden(request: Request, exc: Exception) -> Response:
    ui: Browser = request.app.state.ui
    return ui.page(request, "error.html", 403, message=str(exc))


async def _library_error(request: Request, exc: Exception) -> Response:
    ui: Browser = request.app.state.ui
    logger.warning("%s on %s", type(exc).__name__, one_line(request.url.path))  # no message
    if isinstance(exc, DatabaseError):
        status = 503  # the database
    elif isinstance(exc, REQUEST_ERRORS):
        status = 400  # what was asked
    else:
        status = 500  # the server's: a stored item that fails to open, a key that is not it
    return ui.page(request, "error.html", status, message=f"{type(exc).__name__}: {exc}")


def create_app(
    store: SessionStore,
    *,
    allow_writes: bool = False,
    token: str | None = None,
    hosts: Sequence[str] = (),
    title: str = "Sessions",
) -> Starlette:
    """The session browser over `store` (which the caller opens and closes).

    `allow_writes` adds archive, restore, delete, export and erase (each confirmed,
    CSRF-checked);
    `token` (at least `MIN_TOKEN` characters, 16), required by the command line off this
    machine, guards every request; `hosts`
    are the Host names accepted besides this machine's own (a guard against DNS rebinding).

    Example::

        store = SessionStore("agent.db")
        token = os.environ["AGENTS_SQLALCHEMY_UI_TOKEN"]      # asked of every request
        app = create_app(store, allow_writes=True, token=token, hosts=["sessions.internal"])
        uvicorn.run(app, host="0.0.0.0", port=8300)           # another Host name gets 400
    """
    check_token(token)
    ui = Browser(store, _templates(), Guard(token), allow_writes, title)
    static = Path(__file__).with_name("static")
    routes = [
        Route("/", home),
        Route("/sessions", sessions_page),
        Route("/users", users_page),
        Route("/session", session_page),
        Route("/search", search_page),
        Route("/charts", charts_page),
        Route("/confirm", confirm_page),
        Route("/act", act, methods=["POST"]),
        Mount("/static", StaticFiles(directory=static), name="static"),
    ]
    # Listening on every address (0.0.0.0, ::), the machine's names are not known: any Host
    # is served, behind the token the command line then requires.
    wildcard = any(host == "*" or every_address(host) for host in hosts)
    allowed = ["*"] if wildcard else sorted({*LOCAL_HOSTS, "[::1]", *hosts})
    app = Starlette(
        routes=routes,
        # The guard first: its headers and its log line go with a refused Host's 400 too.
        middleware=[
            Middleware(BaseHTTPMiddleware, dispatch=ui.guard),
            Middleware(TrustedHostMiddleware, allowed_hosts=allowed),
        ],
        exception_handlers={
            BadRequest: _bad_request,
            NotFound: _not_found,
            PermissionError: _forbidden,
            AgentsSQLAlchemyError: _library_error,
        },
    )
    app.state.ui = ui
    return app
