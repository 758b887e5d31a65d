"""`agents-sqlalchemy search` and `reindex`, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import doctest
import json
import warnings
from typing import Any

import pytest
from click.testing import CliRunner, Result

import agents_sqlalchemy.cli.options as options_module
import agents_sqlalchemy.cli.search as search_module
from agents_sqlalchemy import SearchModelWarning, SessionStore, upgrade
from agents_sqlalchemy.search import Embedder, HashingEmbedder, Model2VecEmbedder, index_id

from .support.items import FUNCTION_CALL, message
from .support.tables import raw_rows

NO_KEY: dict[str, str | None] = {"AGENTS_SQLALCHEMY_KEY": None}
DEPLOY = message("the deployment failed because the disk was full")
LUNCH = message("lunch plans for friday")
RELEASE = "why did the release break?"


def cli(*args: str, env: dict[str, str | None] | None = None, input: str | None = None) -> Result:
    from agents_sqlalchemy.cli import app

    return CliRunner().invoke(
        app, list(args), env={**NO_KEY, **(env or {})}, input=input, catch_exceptions=False
    )


def seed(url: str, embedder: Embedder | None = None, key: str | None = None) -> None:
    """alice: "ops" (the issue's two items) and "tools"; bob: "bob-ops"."""

    async def write() -> None:
        async with SessionStore(url, create_tables=True, key=key, embedder=embedder) as store:
            await store.session("ops", user_id="alice").add_items([DEPLOY, LUNCH])
            await store.session("tools", user_id="alice").add_items([FUNCTION_CALL])
            await store.session("bob-ops", user_id="bob").add_items([message("disk full again")])

    asyncio.run(write())


def hits(result: Result) -> list[dict[str, Any]]:
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.output.splitlines()]


def test_the_module_doctests() -> None:
    assert doctest.testmod(search_module).failed == 0


def test_search_prints_ranked_hits_readably(db_url: str) -> None:
    seed(db_url)
    result = cli("search", "disk full", "--url", db_url, "--limit", "2")
    assert result.exit_code == 0, result.output
    first, second = result.output.split("\n\n")
    assert first.startswith("1. bob-ops [1]  score ") and "(vector 1.000, keyword " in first
    assert first.splitlines()[1] == "   user: disk full again"
    assert second.startswith("2. ops [1]  score ")
    assert second.splitlines()[1] == "   user: the deployment failed because the disk was full"
    result = cli("search", "lookup_weather", "--url", db_url, "--mode", "keyword")
    assert result.output.splitlines() == [
        result.output.splitlines()[0],
        '   tool call lookup_weather({"city": "Zürich", "units": "metric"})',
    ]
    assert result.output.startswith("1. tools [1]  score ")
    assert cli("search", "zebra", "--url", db_url, "--mode", "keyword").output == "No matches.\n"


def test_search_scopes_modes_and_json(db_url: str) -> None:
    seed(db_url)
    found = hits(cli("search", "disk", "--url", db_url, "--json", "--mode", "keyword"))
    assert [(h["rank"], h["session_id"], h["seq"]) for h in found] == [
        (1, "bob-ops", 1),
        (2, "ops", 1),
    ]
    assert found[1]["item"] == DEPLOY and found[1]["vector"] is None and found[1]["keyword"] > 0
    assert all(0.0 <= h["recency"] <= 1.0 for h in found)
    alice = hits(cli("search", "disk", "--url", db_url, "--user", "alice", "--json"))
    assert [(h["session_id"], h["item"]) for h in alice] == [("ops", DEPLOY)]  # evidence only
    every = cli("search", "disk", "--url", db_url, "--user", "alice", "--json", "--mode", "vector")
    assert {h["session_id"] for h in hits(every)} == {"ops", "tools"}  # not bob's
    ops = hits(cli("search", "friday", "--url", db_url, "--session", "ops", "--json"))
    assert [(h["session_id"], h["item"]) for h in ops] == [("ops", LUNCH)]
    vector = hits(cli("search", "disk", "--url", db_url, "--mode", "vector", "--json"))
    assert len(vector) == 4 and all(h["vector"] is not None for h in vector)

    both = cli("search", "disk", "--url", db_url, "--session", "ops", "--user", "alice")
    assert both.exit_code == 2 and "not both" in both.output
    missing = cli("search", "disk", "--url", db_url, "--session", "nope")
    assert missing.exit_code == 1 and "no session 'nope'" in missing.output
    assert cli("search", "disk", "--url", db_url, "--mode", "fuzzy").exit_code == 2


@pytest.mark.slow
def test_encrypted_database_needs_its_key(sqlite_url: str) -> None:
    seed(sqlite_url, key="correct horse")
    refused = cli("search", "disk", "--url", sqlite_url)
    assert refused.exit_code == 1 and "AGENTS_SQLALCHEMY_KEY" in refused.output
    wrong = cli("search", "disk", "--url", sqlite_url, env={"AGENTS_SQLALCHEMY_KEY": "nope"})
    assert wrong.exit_code == 1 and "Error:" in wrong.output
    env = {"AGENTS_SQLALCHEMY_KEY": "correct horse"}
    found = hits(cli("search", "disk full", "--url", sqlite_url, "--json", env=env))
    assert [h["session_id"] for h in found[:2]] == ["bob-ops", "ops"] and found[1]["item"] == DEPLOY
    asked = cli("search", "friday", "--url", sqlite_url, "--ask-key", input="correct horse\n")
    assert asked.exit_code == 0 and "lunch plans for friday" in asked.output
    reindexed = cli("reindex", "--url", sqlite_url, "--no-progress", env=env)
    assert reindexed.exit_code == 0 and "Indexed 0 items" in reindexed.output


@pytest.mark.slow
def test_reindex_moves_the_database_to_the_bundled_model(db_url: str) -> None:
    seed(db_url, HashingEmbedder())
    before = cli("search", RELEASE, "--url", db_url, "--json")  # the database's model
    assert before.exit_code == 0 and "Note:" not in before.stderr
    result = cli("reindex", "--url", db_url, "--embedder", "model2vec", "--batch-size", "2")
    assert result.exit_code == 0, result.output
    model_id = Model2VecEmbedder.bundled().model_id
    assert "Indexing items" in result.stderr  # the progress bar's label: not with the output
    assert "Indexing items" not in result.stdout
    assert f"Indexed 4 items for {model_id}" in result.output
    models = asyncio.run(
        raw_rows(db_url, "SELECT DISTINCT model_id FROM agents_sqlalchemy_search_index")
    )
    assert models == [(index_id(model_id),)]
    after = cli("search", RELEASE, "--url", db_url, "--limit", "1")  # now model2vec's
    assert after.output.startswith("1. ops [1]") and "disk was full" in after.output
    again = cli("reindex", "--url", db_url, "--no-progress")
    assert f"Indexed 0 items for {model_id}" in again.output
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        other = cli("search", RELEASE, "--url", db_url, "--embedder", "hashing", "--json")
    assert other.exit_code == 0 and f"indexed with {model_id}" in other.stderr
    # said once, as a note: not again as the library's warning (printed with a source path)
    assert not [w for w in seen if issubclass(w.category, SearchModelWarning)]


def test_a_missing_extra_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, sqlite_url: str) -> None:
    from agents_sqlalchemy.search import MissingExtraError

    def missing(name: str) -> Embedder:
        raise MissingExtraError("Model2VecEmbedder needs the model2vec extra")

    monkeypatch.setattr(options_module, "embedder_by_name", missing)
    asyncio.run(upgrade(sqlite_url))  # the database exists (a missing file is refused first)
    result = cli("reindex", "--url", sqlite_url, "--embedder", "model2vec")
    assert result.exit_code == 2 and "model2vec extra" in result.output
