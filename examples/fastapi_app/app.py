"""A multi-user chat API on FastAPI whose conversations live in SQL through agents_sqlalchemy.

    pip install -e . fastapi uvicorn   # from a checkout, until the first release
    CHAT_DATABASE_URL=chat.db uvicorn app:app --app-dir examples/fastapi_app
    curl -s localhost:8000/chat -H 'X-User: alice' -H 'Content-Type: application/json' \\
        -d '{"message": "my dog is called Mochi"}'

One `SessionStore` lives as long as the app (FastAPI's lifespan). Each session belongs to the
user who started it; asking for another user's session gives 404, as if it did not exist.
Without OPENAI_API_KEY an offline stand-in model answers.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from agents import Agent, Runner, set_tracing_disabled
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message
from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from agents_sqlalchemy import ConfigurationError, InvalidSessionIdError, ItemError, SessionStore
from agents_sqlalchemy.search import MAX_QUERY_CHARS


class ChatRequest(BaseModel):
    message: str = Field(min_length=1)
    session_id: str | None = None  # None: start a new conversation


def offline_reply(call: ModelCall) -> list[Any]:
    """The stand-in model: says how many user messages of the conversation it was given."""
    turns = sum(1 for item in call.input if item.get("role") == "user")
    return [assistant_message(f"[offline model] message {turns} of this conversation")]


def make_agent() -> Agent[Any]:
    if os.environ.get("OPENAI_API_KEY"):
        return Agent(name="assistant", instructions="Answer in one or two sentences.")
    set_tracing_disabled(True)
    return Agent(name="assistant", model=ScriptedModel([ModelStep.respond(offline_reply)]))


def current_user(x_user: Annotated[str | None, Header(max_length=255)] = None) -> str:
    """The caller. A header keeps the example short: a real app takes the identity from its
    authentication (a verified token or session cookie), never from a header anyone can set."""
    if not x_user:
        raise HTTPException(401, "send an X-User header")
    return x_user


def get_store(request: Request) -> SessionStore:
    store: SessionStore = request.app.state.store
    return store


User = Annotated[str, Depends(current_user)]
Store = Annotated[SessionStore, Depends(get_store)]
Limit = Annotated[int, Query(ge=1, le=100)]


async def check_owner(store: SessionStore, session_id: str, user: str) -> None:
    """404 unless `user` owns the session: another user's session looks like a missing one."""
    info = await store.session_info(session_id)
    if info is None or info.user_id != user:
        raise HTTPException(404, "no such session")


def create_app(database_url: str) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # create_tables suits a demo; in production run the migrations (docs/guide/migrations.md).
        # statement_timeout: a database that stops answering fails requests in 10 s rather
        # than holding them (and the server's shutdown) until it answers again.
        async with SessionStore(database_url, create_tables=True, statement_timeout=10) as store:
            app.state.store = store
            yield

    app = FastAPI(title="chat", lifespan=lifespan)

    @app.exception_handler(ItemError)
    @app.exception_handler(InvalidSessionIdError)
    async def refused(request: Request, exc: Exception) -> JSONResponse:
        """What the store refuses of the client's own input (an empty session id, a message
        that is not valid Unicode): 422, saying why; nothing was stored."""
        return JSONResponse({"detail": str(exc)}, status_code=422)

    @app.post("/chat")
    async def chat(body: ChatRequest, user: User, store: Store) -> dict[str, str]:
        if body.session_id is None:
            session_id = uuid.uuid4().hex
        else:
            session_id = body.session_id
            await check_owner(store, session_id, user)
        session = store.session(session_id, user_id=user)
        result = await Runner.run(make_agent(), body.message, session=session)
        return {"session_id": session_id, "reply": str(result.final_output)}

    @app.get("/sessions")
    async def list_sessions(
        user: User, store: Store, cursor: str | None = None, limit: Limit = 20
    ) -> dict[str, Any]:
        try:
            page = await store.list_sessions(user_id=user, limit=limit, cursor=cursor)
        except ConfigurationError as exc:  # a cursor that list_sessions did not make
            raise HTTPException(400, "bad cursor") from exc
        sessions = [
            {"session_id": s.session_id, "updated_at": s.updated_at, "items": s.item_count}
            for s in page
        ]
        return {"sessions": sessions, "next_cursor": page.next_cursor}

    @app.get("/sessions/{session_id}")
    async def transcript(session_id: str, user: User, store: Store) -> dict[str, Any]:
        await check_owner(store, session_id, user)
        items = await store.session(session_id).get_items()
        return {"session_id": session_id, "items": items}

    @app.get("/search")
    async def search(
        q: Annotated[str, Query(min_length=1, max_length=MAX_QUERY_CHARS)],
        user: User,
        store: Store,
        limit: Limit = 5,
    ) -> dict[str, Any]:
        hits = await store.search(q, user_id=user, limit=limit)  # this user's sessions only
        found = [
            {"session_id": h.session_id, "seq": h.seq, "score": h.score, "item": h.item}
            for h in hits
        ]
        return {"hits": found}

    @app.delete("/sessions/{session_id}")
    async def delete_session(session_id: str, user: User, store: Store) -> dict[str, int]:
        await check_owner(store, session_id, user)
        removed = await store.delete_session(session_id)
        return {"sessions": removed.sessions, "items": removed.items}

    @app.delete("/me")
    async def erase_me(user: User, store: Store) -> dict[str, int]:
        removed = await store.delete_user(user)  # an erasure request: every session of the user
        return {"sessions": removed.sessions, "items": removed.items}

    return app


app = create_app(os.environ.get("CHAT_DATABASE_URL", "chat.db"))
