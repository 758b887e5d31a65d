"""What keeps the session browser safe to run: where it may listen, a token for anyone
reaching it from elsewhere, CSRF tokens on every write, strict response headers, and an
access log that names routes only.

Example::

    check_bind("0.0.0.0", token=None)      # ConfigurationError: a token is required
    guard = Guard(token="s3cret")           # ASGI middleware factory arguments
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qsl, quote, urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from ..errors import ConfigurationError
from ..shown_text import one_line
from .fields import root, route

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
TOKEN_COOKIE = "agents_sqlalchemy_ui_token"
#: How long a login (the cookie `?token=` sets) lasts.
LOGIN_SECONDS = 8 * 3600
# No script at all: even a value that escaped escaping could not run.
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
access_log = logging.getLogger("agents_sqlalchemy.ui.access")
logger = logging.getLogger("agents_sqlalchemy.ui")

Handler = Callable[[Request], Awaitable[Response]]


#: The fewest characters a token may have.
MIN_TOKEN = 16


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen beyond this machine's loopback without a token, or with a token of
    fewer than `MIN_TOKEN` characters (`ConfigurationError`).

    >>> check_bind("127.0.0.1", None), check_bind("127.0.0.2", None), check_bind("::1", None)
    (None, None, None)
    >>> check_bind("0.0.0.0", "a-long-enough-token")
    """
    if not token and not loopback(host):
        raise ConfigurationError(
            f"listening on {host} lets other machines in: give --token (or "
            "$AGENTS_SQLALCHEMY_UI_TOKEN), or keep the default 127.0.0.1"
        )
    check_token(token)


def check_token(token: str | None) -> None:
    """Refuse a token of fewer than `MIN_TOKEN` characters (`ConfigurationError`)."""
    if token is not None and len(token) < MIN_TOKEN:
        raise ConfigurationError(f"the token must be at least {MIN_TOKEN} characters long")


def loopback(host: str) -> bool:
    """Whether `host` is this machine's loopback: `localhost`, 127.0.0.0/8 or ::1."""
    if host in LOCAL_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name
        return False


def every_address(host: str) -> bool:
    """Whether listening on `host` listens on every address: `0.0.0.0` or `::`, however
    spelt (`::0`, `0:0:0:0:0:0:0:0`, `[::]`).

    >>> every_address("::0"), every_address("0.0.0.0"), every_address("localhost")
    (True, True, False)
    """
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]")).is_unspecified
    except ValueError:  # a name
        return False


def here(request: Request) -> str:
    """The request's path as a path of this server, under the app's `root_path`, quoted:
    one slash before it, whatever it starts with (`//host/...` would name another host)."""
    return quote("/" + (root(request) + route(request)).lstrip("/\\"))


def same(given: str | None, expected: str) -> bool:
    """A constant-time comparison of a secret."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def derived(token: str, purpose: str) -> str:
    """A value made from `token` for one `purpose`, which does not give the token back."""
    made = hmac.new(token.encode(), f"agents-sqlalchemy ui {purpose}".encode(), "sha256")
    return made.hexdigest()


def bearer(request: Request) -> str | None:
    """The token of an `Authorization: Bearer ...` header, read as UTF-8 (a header's bytes
    come as Latin-1 text: a token of other characters never matched)."""
    header = request.headers.get("authorization", "")
    if not header.lower().startswith("bearer "):
        return None
    return header[7:].encode("latin-1").decode("utf-8", errors="replace")


def cookie_name(request: Request) -> str:
    """The login cookie's name, one per port: a browser sends a host's cookies to each of
    its ports, so two browsers on one machine would otherwise overwrite each other's."""
    port = request.url.port or (443 if request.url.scheme == "https" else 80)
    return f"{TOKEN_COOKIE}_{port}"


class Guard:
    """Per-request checks and headers, as a Starlette `http` middleware callable.

    With `token`, a request needs it: as `Authorization: Bearer ...`, as the cookie a first
    visit with `?token=...` sets (the token then leaves the address bar), or it gets 401.
    The cookie holds a value derived from the token and its expiry, never the token, and
    lasts `LOGIN_SECONDS`: a browser sends it to every port of the host, where another
    local program may read it, and use it until it expires. It and the CSRF token are
    derived the same way in every worker serving one token; without a token, the CSRF
    token is one per app run (one worker then).
    """

    def __init__(self, token: str | None) -> None:
        self.token = token
        self.csrf = secrets.token_urlsafe(32) if token is None else derived(token, "csrf")

    def cookie(self, until: int) -> str:
        """The login cookie's value, good until `until` (Unix time)."""
        assert self.token is not None
        return f"{until}.{derived(self.token, f'cookie {until}')}"

    def logged_in(self, cookie: str | None) -> bool:
        """Whether `cookie` is a login cookie of this token that has not expired."""
        until, _, _ = (cookie or "").partition(".")
        if not (until.isascii() and until.isdigit() and len(until) <= 12):
            return False
        return int(until) > time.time() and same(cookie, self.cookie(int(until)))

    async def __call__(self, request: Request, call_next: Handler) -> Response:
        started = time.perf_counter()
        response = await self._checked(request, call_next)
        for name, value in HEADERS.items():
            response.headers.setdefault(name, value)
        # The route only: never a query string (search text) nor anything from the items.
        access_log.info(
            "%s %s %d %.1f ms",
            request.method,
            one_line(request.url.path),  # a terminal's control sequences shown, not run
            response.status_code,
            (time.perf_counter() - started) * 1000,
        )
        return response

    async def _checked(self, request: Request, call_next: Handler) -> Response:
        try:
            return await self._guarded(request, call_next)
        except Exception as exc:
            # An unexpected failure: its message may quote what was read, so the log (and
            # the page) name only its kind and the route.
            path = one_line(request.url.path)
            logger.error("%s on %s %s", type(exc).__name__, request.method, path)
            return PlainTextResponse(
                f"500: {type(exc).__name__} (the server's log names the route)", status_code=500
            )

    async def _guarded(self, request: Request, call_next: Handler) -> Response:
        if self.token is None:
            return await call_next(request)
        cookie = cookie_name(request)
        # The address with the token logs in, and leaves the address bar, whether or not
        # the browser is logged in already (it was kept, and went into its history).
        if same(request.query_params.get("token"), self.token):
            rest = [(k, v) for k, v in parse_qsl(request.url.query) if k != "token"]
            target = here(request) + (f"?{urlencode(rest)}" if rest else "")
            response = RedirectResponse(target, status_code=303)
            until = int(time.time()) + LOGIN_SECONDS
            value = self.cookie(until)
            response.set_cookie(
                cookie, value, max_age=LOGIN_SECONDS, httponly=True, samesite="strict"
            )
            return response
        if same(bearer(request), self.token) or self.logged_in(request.cookies.get(cookie)):
            return await call_next(request)
        return PlainTextResponse(
            "401: this session browser needs its token (open the address it printed)",
            status_code=401,
        )

    def check_csrf(self, given: str | None) -> bool:
        """Whether a form carried this run's CSRF token."""
        return same(given, self.csrf)
