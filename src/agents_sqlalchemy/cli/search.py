"""`agents-sqlalchemy search` and `reindex`: query the search index, rebuild it for a model.

Both use the model the database was indexed with, unless --embedder names another:
vectors of two models are never compared. `reindex` moves every item to the chosen
embedder, a batch at a time, and deletes the other models' rows.

Example::

    agents-sqlalchemy search "why did the release break?" --url agent.db --user alice
    agents-sqlalchemy reindex --url postgresql://app@db/app --embedder model2vec
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from typing import Any

import click

from ..crypto import Key
from ..errors import SearchModelWarning
from ..records import SearchHit
from ..search import (
    BUILTIN_EMBEDDERS,
    SEARCH_MODES,
    Embedder,
    SearchMode,
    builtin_for,
    index_id,
)
from ..shown_text import clean, one_id
from ..tables import TableNames
from .layout import ProgressBar, counted
from .options import (
    database_options,
    key_options,
    load_embedder,
    max_chars_option,
    opened,
    run,
    shown,
)
from .transcript import describe


def embedder_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add `--embedder NAME`; the command receives the name, or None for the database's."""
    return click.option(
        "--embedder",
        "embedder_name",
        type=click.Choice(BUILTIN_EMBEDDERS),
        default=None,
        help="The embedding model: by default the one the database was indexed with "
        "(hashing when it has none yet).",
    )(command)


async def chosen_embedder(
    url: str, tables: TableNames, key: Key | None, name: str | None
) -> Embedder:
    """The embedder named, else the built-in one the database's latest item was indexed with.

    A database indexed with a model the command line cannot load needs `--embedder`; a
    model other than the database's is named on stderr: until `reindex`, it finds items
    by keyword only.
    """
    embedder = load_embedder(name) if name else None
    async with opened(url, tables, key, search=False) as store:
        indexed = await store.indexed_model()
    if embedder is None:
        known = builtin_for(indexed) if indexed else "hashing"
        if known is None:
            raise click.UsageError(
                f"the database is indexed with {indexed!r}, which the command line cannot "
                f"load: pass --embedder ({', '.join(BUILTIN_EMBEDDERS)})"
            )
        embedder = load_embedder(known)
    if indexed and index_id(embedder.model_id) != indexed:
        click.secho(
            f"Note: the database is indexed with {indexed}, not {index_id(embedder.model_id)}: "
            "`reindex` moves every item to it; until then search finds items by keyword only.",
            fg="yellow",
            err=True,
        )
    return embedder


@click.command("search")
@click.argument("query")
@click.option("--session", "session_id", metavar="ID", help="Search this session only.")
@click.option("--user", "user_id", metavar="ID", help="Search this user's sessions only.")
@click.option(
    "--limit", type=click.IntRange(1, 1000), default=5, show_default=True, help="Hits to show."
)
@click.option(
    "--mode",
    type=click.Choice(SEARCH_MODES),
    default="hybrid",
    show_default=True,
    help="Rank by meaning and keywords (hybrid), or by one of them.",
)
@max_chars_option(300)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per hit, for scripts.")
@embedder_option
@key_options
@database_options
def search(
    url: str,
    tables: TableNames,
    key: Key | None,
    embedder_name: str | None,
    query: str,
    session_id: str | None,
    user_id: str | None,
    limit: int,
    mode: SearchMode,
    max_chars: int,
    as_json: bool,
) -> None:
    """The stored items that best answer QUERY, best first, and where each is.

    Searches every session, one user's (--user) or one session (--session). Items in
    that scope not indexed yet are indexed first: their search-index rows are written.

    \b
    Example:
      agents-sqlalchemy search "disk full" --url agent.db --user alice --limit 3
      agents-sqlalchemy search ERR-4411 --url agent.db --mode keyword --json
    """
    if session_id is not None and user_id is not None:
        raise click.UsageError("give --session or --user, not both")
    hits = run(_search(url, tables, key, embedder_name, query, session_id, user_id, limit, mode))
    if as_json:
        for rank, hit in enumerate(hits, 1):
            click.echo(json.dumps({"rank": rank, **_hit_json(hit)}, ensure_ascii=False))
        return
    if not hits:
        click.echo("No matches.")
    for rank, hit in enumerate(hits, 1):
        header, *body = hit_lines(rank, hit, max_chars)
        click.secho(f"\n{header}" if rank > 1 else header, bold=True)
        for line in body:
            click.echo(line)


async def _search(
    url: str,
    tables: TableNames,
    key: Key | None,
    embedder_name: str | None,
    query: str,
    session_id: str | None,
    user_id: str | None,
    limit: int,
    mode: SearchMode,
) -> list[SearchHit]:
    embedder = await chosen_embedder(url, tables, key, embedder_name)
    with warnings.catch_warnings():  # `chosen_embedder` printed it as a note already
        warnings.simplefilter("ignore", SearchModelWarning)
        async with opened(url, tables, key, embedder=embedder) as store:
            if session_id is None:
                return await store.search(query, user_id=user_id, limit=limit, mode=mode)
            if await store.session_info(session_id) is None:
                raise click.ClickException(f"no session {session_id!r} in {shown(url)}")
            return await store.session(session_id).search_hits(query, limit=limit, mode=mode)


def hit_lines(rank: int, hit: SearchHit, max_chars: int) -> list[str]:
    """A hit as a person reads it: rank, session and item number, scores, then the item.

    >>> from agents_sqlalchemy.records import SearchHit
    >>> hit = SearchHit("ops", 3, {"role": "user", "content": "disk full"}, 0.05, 0.61, 2.3, 1.0)
    >>> hit_lines(1, hit, 300)
    ['1. ops [3]  score 0.0500  (vector 0.610, keyword 2.30)', '   user: disk full']
    """
    signals = [f"vector {hit.vector:.3f}"] if hit.vector is not None else []
    signals += [f"keyword {hit.keyword:.2f}"] if hit.keyword else []
    header = f"{rank}. {one_id(hit.session_id)} [{hit.seq}]  score {hit.score:.4f}"
    header += f"  ({', '.join(signals)})" if signals else ""
    entry = describe(hit.item, max_chars)
    body = clean(f"{entry.label} {entry.body}").split("\n")
    return [header, *(f"   {line}".rstrip() for line in body)]


def _hit_json(hit: SearchHit) -> dict[str, Any]:
    return {
        "session_id": hit.session_id,
        "seq": hit.seq,
        "score": hit.score,
        "vector": hit.vector,
        "keyword": hit.keyword,
        "recency": hit.recency,
        "item": hit.item,
    }


@click.command("reindex")
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=200,
    show_default=True,
    help="Items embedded and written per transaction.",
)
@click.option("--progress/--no-progress", default=True, help="Show a progress bar.")
@embedder_option
@key_options
@database_options
def reindex(
    url: str,
    tables: TableNames,
    key: Key | None,
    embedder_name: str | None,
    batch_size: int,
    progress: bool,
) -> None:
    """Index every item for the embedder's model, and delete other models' vectors.

    Run it after the application changes its embedder (--embedder: the new one; by
    default the database's own). Until then, a store with the new model finds items by
    keyword only and indexes nothing. It can run while the application does; if
    interrupted, run it again: items already indexed are skipped.

    \b
    Example:
      agents-sqlalchemy reindex --url agent.db --embedder model2vec
    """
    bar = ProgressBar(progress, "Indexing items")
    try:
        model_id, done = run(_reindex(url, tables, key, embedder_name, batch_size, bar))
    finally:
        bar.close()
    click.secho(f"Indexed {counted(done, 'item')} for {model_id} in {shown(url)}", fg="green")


async def _reindex(
    url: str,
    tables: TableNames,
    key: Key | None,
    embedder_name: str | None,
    batch_size: int,
    bar: ProgressBar,
) -> tuple[str, int]:
    embedder = await chosen_embedder(url, tables, key, embedder_name)
    async with opened(url, tables, key, embedder=embedder) as store:
        return embedder.model_id, await store.reindex(batch_size=batch_size, progress=bar)


commands = (search, reindex)
