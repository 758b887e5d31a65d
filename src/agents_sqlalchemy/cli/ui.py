"""`agents-sqlalchemy ui`: the session browser, served on this machine.

Example::

    agents-sqlalchemy ui --url agent.db                       # http://127.0.0.1:8300/
    AGENTS_SQLALCHEMY_KEY=... agents-sqlalchemy ui --url postgresql://app@db/app --allow-writes
    agents-sqlalchemy ui --url agent.db --host 0.0.0.0 --token "$(openssl rand -hex 24)"
"""

from __future__ import annotations

import copy
import gc
import socket
from typing import Any

import click

from ..crypto import Key
from ..errors import ConfigurationError, MissingExtraError
from ..tables import TableNames
from .options import ENV_PREFIX, database_options, key_options, opened, run, shown
from .search import chosen_embedder, embedder_option


def listening(host: str, port: int) -> socket.socket:
    """A socket bound to `host`:`port`, or a `ClickException` that says why not (a port in
    use, a name that does not resolve)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host} port {port}: {exc}") from None


def log_config(base: dict[str, Any]) -> dict[str, Any]:
    """uvicorn's logging, with the app's own lines (method, route, status, time) beside it."""
    config = copy.deepcopy(base)
    config["loggers"]["agents_sqlalchemy.ui"] = {
        "handlers": ["default"],
        "level": "INFO",
        "propagate": False,
    }
    return config


@click.command("ui")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=8300,
    show_default=True,
    help="Port to listen on.",
)
@click.option(
    "--token",
    metavar="TOKEN",
    envvar=f"{ENV_PREFIX}UI_TOKEN",
    show_envvar=True,
    help="Required of every request (needed to listen beyond this machine's loopback; "
    "16 characters at least): open "
    "http://HOST:PORT/?token=TOKEN once, or send 'Authorization: Bearer TOKEN'.",
)
@click.option(
    "--allow-writes",
    is_flag=True,
    help="Offer archive, restore, delete, export (a plaintext download, even of an "
    "encrypted store) and erase, each confirmed; read-only without it.",
)
@embedder_option
@key_options
@database_options
def command(
    url: str,
    tables: TableNames,
    key: Key | None,
    embedder_name: str | None,
    host: str,
    port: int,
    token: str | None,
    allow_writes: bool,
) -> None:
    """Browse sessions, transcripts, search and usage charts in a web browser.

    Read-only unless --allow-writes. Listens on 127.0.0.1 unless --host says otherwise,
    which needs --token. Nothing of the items is logged; pages need no script and fetch
    nothing from elsewhere.

    \b
    Example:
      agents-sqlalchemy ui --url agent.db
      agents-sqlalchemy ui --url agent.db --allow-writes --port 8080
    """
    try:
        import uvicorn

        from ..ui import check_bind, create_app  # MissingExtraError names the extra
    except MissingExtraError as exc:
        raise click.ClickException(str(exc)) from exc
    except ImportError as exc:
        raise click.ClickException(
            f"the session browser needs the ui extra ({exc.name} is missing): "
            "pip install 'openai-agents-sqlalchemy[ui]'"
        ) from exc
    try:
        check_bind(host, token)
    except ConfigurationError as exc:
        raise click.UsageError(str(exc)) from exc

    async def serve() -> None:
        embedder = await chosen_embedder(url, tables, key, embedder_name)
        async with opened(url, tables, key, embedder=embedder) as store:
            await store.list_sessions(limit=1)  # a wrong or missing key fails here
            _ = store.session_settings  # made now (the SDK loads), not on a first transcript
            app = create_app(store, allow_writes=allow_writes, token=token, hosts=[host])
            # What was loaded to start (the SDK, the templates) is kept for good: the
            # collector's full passes, which a long transcript's page sets off, skip it
            # (measured on a 10,000-item transcript: 500-650 ms pauses gone).
            gc.collect()
            gc.freeze()
            config: Any = uvicorn.Config(
                app,
                host=host,
                port=port,
                access_log=False,  # it would log query strings: the app logs routes only
                server_header=False,
                log_config=log_config(uvicorn.config.LOGGING_CONFIG),
            )
            server = uvicorn.Server(config)
            where = f"[{host}]" if ":" in host else host
            mode = "writes allowed" if allow_writes else "read-only"
            with listening(host, port) as sock:  # bound before the address is printed
                click.echo(f"Browsing {shown(url)} ({mode}) at http://{where}:{port}/")
                if token:
                    click.echo(f"Open http://{where}:{port}/?token=... once (the token given).")
                await server.serve(sockets=[sock])

    run(serve())
