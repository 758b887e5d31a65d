"""examples/fastapi_app: the chat API under a real uvicorn server, talked to with httpx."""

from __future__ import annotations

import base64
import importlib.util
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
import uvicorn

APP = Path(__file__).resolve().parent.parent / "examples" / "fastapi_app" / "app.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fastapi_chat_example", APP)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def base_url(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The example app served by uvicorn in a thread, on a free loopback port."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(load_example().create_app(db_url), log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=30)
    sock.close()
    assert not thread.is_alive()


def chat(client: httpx.Client, user: str, message: str, session_id: str | None = None) -> Any:
    body = {"message": message} | ({"session_id": session_id} if session_id else {})
    response = client.post("/chat", json=body, headers={"X-User": user})
    assert response.status_code == 200, response.text
    return response.json()


def texts(items: list[dict[str, Any]]) -> list[str]:
    """Each message's text: a user's string content or an assistant's output_text parts."""
    out = []
    for item in items:
        content = item["content"]
        out.append(content if isinstance(content, str) else content[0]["text"])
    return out


ALICE, BOB = {"X-User": "alice"}, {"X-User": "bob"}


def test_chat_list_read_search_delete_and_erase(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=60) as client:
        first = chat(client, "alice", "Remember: my dog is called Mochi.")
        dog = first["session_id"]
        assert first["reply"] == "[offline model] message 1 of this conversation"
        again = chat(client, "alice", "What is my dog called?", dog)
        assert again == {
            "session_id": dog,
            "reply": "[offline model] message 2 of this conversation",
        }
        garden = chat(client, "alice", "The tomatoes need water on Tuesdays.")["session_id"]
        secret = chat(client, "bob", "The surprise party is at the lighthouse.")["session_id"]

        check_listing_and_transcript(client, dog, garden)
        check_other_users_are_kept_out(client, dog, secret)
        check_search(client, dog, garden)
        check_deletion_and_erasure(client, dog, garden, secret)


def check_listing_and_transcript(client: httpx.Client, dog: str, garden: str) -> None:
    seen, cursor = [], None
    while True:  # one session per page, following the cursor to the end
        params: dict[str, Any] = {"limit": 1} | ({"cursor": cursor} if cursor else {})
        page = client.get("/sessions", params=params, headers=ALICE).json()
        seen += [s["session_id"] for s in page["sessions"]]
        if not (cursor := page["next_cursor"]):
            break
    assert seen == [garden, dog]  # most recently active first
    forged = [
        json.dumps(value).encode()
        for value in (["2026-01-01T00:00:00+00:00", 10**30], ["0001-01-01T00:00:00+14:00", 1])
    ]
    for cursor in ["not-a-cursor", *(base64.urlsafe_b64encode(raw).decode() for raw in forged),
                   base64.urlsafe_b64encode(b"[" * 100).decode()]:  # fmt: skip
        bad = client.get("/sessions", params={"cursor": cursor}, headers=ALICE)
        assert bad.status_code == 400, (cursor, bad.text)

    transcript = client.get(f"/sessions/{dog}", headers=ALICE).json()["items"]
    assert texts(transcript) == [
        "Remember: my dog is called Mochi.",
        "[offline model] message 1 of this conversation",
        "What is my dog called?",
        "[offline model] message 2 of this conversation",
    ]


def check_other_users_are_kept_out(client: httpx.Client, dog: str, secret: str) -> None:
    before = client.get(f"/sessions/{dog}", headers=ALICE).json()
    assert client.get(f"/sessions/{dog}", headers=BOB).status_code == 404
    assert client.delete(f"/sessions/{dog}", headers=BOB).status_code == 404
    stolen = client.post("/chat", json={"message": "hi", "session_id": dog}, headers=BOB)
    assert stolen.status_code == 404
    assert client.get("/sessions/no-such-session", headers=ALICE).status_code == 404
    assert client.get(f"/sessions/{dog}").status_code == 401
    assert client.get(f"/sessions/{dog}", headers=ALICE).json() == before
    hits = client.get("/search", params={"q": "dog Mochi"}, headers=BOB).json()["hits"]
    assert hits == []  # none of alice's, and nothing of bob's is about a dog
    hits = client.get("/search", params={"q": "surprise party"}, headers=BOB).json()["hits"]
    assert hits and {hit["session_id"] for hit in hits} == {secret}


def check_search(client: httpx.Client, dog: str, garden: str) -> None:
    params: dict[str, Any] = {"q": "dog Mochi", "limit": 3}
    hits = client.get("/search", params=params, headers=ALICE).json()["hits"]
    assert (hits[0]["session_id"], hits[0]["seq"]) == (dog, 1)
    assert hits[0]["item"]["content"] == "Remember: my dog is called Mochi."
    assert {hit["session_id"] for hit in hits} <= {dog, garden}


def check_deletion_and_erasure(client: httpx.Client, dog: str, garden: str, secret: str) -> None:
    removed = client.delete(f"/sessions/{garden}", headers=ALICE).json()
    assert removed == {"sessions": 1, "items": 2}
    assert client.get(f"/sessions/{garden}", headers=ALICE).status_code == 404

    # Erasure: everything of Alice goes, Bob's session stays.
    assert client.delete("/me", headers=ALICE).json() == {"sessions": 1, "items": 4}
    assert client.get("/sessions", headers=ALICE).json()["sessions"] == []
    assert client.get(f"/sessions/{dog}", headers=ALICE).status_code == 404
    assert client.get("/search", params={"q": "Mochi"}, headers=ALICE).json()["hits"] == []
    assert len(client.get(f"/sessions/{secret}", headers=BOB).json()["items"]) == 2


def test_what_the_store_refuses_is_a_bad_request(base_url: str) -> None:
    """A query past the store's bound and a user id past 255 characters were 500s, and the
    next request on the same connection met a reset one: the app checks both as it reads
    the request (422), as the store would refuse them."""
    with httpx.Client(base_url=base_url, timeout=30) as client:
        long_query = client.get("/search", params={"q": "x" * 2001}, headers=ALICE)
        assert long_query.status_code == 422 and "2000" in long_query.text
        long_user = client.get("/sessions", headers={"X-User": "u" * 300})
        assert long_user.status_code == 422 and "255" in long_user.text
        no_id = client.post("/chat", json={"message": "x", "session_id": ""}, headers=ALICE)
        assert no_id.status_code == 422 and "session id" in no_id.text
        # A lone surrogate, escaped in the JSON (the only way to send one).
        body = '{"message": "x", "session_id": "a\\ud800"}'
        sent = {"Content-Type": "application/json", **ALICE}
        odd = client.post("/chat", content=body, headers=sent)
        assert odd.status_code == 422 and "surrogate" in odd.text, odd.text
        bad_cursor = client.get("/sessions", params={"cursor": "nope"}, headers=ALICE)
        assert bad_cursor.status_code == 400 and bad_cursor.json()["detail"] == "bad cursor"
        assert client.get("/search", params={"q": "Mochi"}, headers=ALICE).json() == {"hits": []}
