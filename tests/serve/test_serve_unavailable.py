"""SPEC F's 503: a server whose engine worker is not running answers JSON errors, never hangs (the ASGI app
called directly: no worker thread is started here)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("starlette")

import rumus as rm  # noqa: E402
from rumus.serve.api import Server  # noqa: E402
from rumus.serve.engine import Engine  # noqa: E402
from rumus.serve.gpt2 import GPT2Config, GPT2LMHeadModel  # noqa: E402


async def call(app: Any, method: str, path: str, body: bytes = b"") -> tuple[int, Any]:
    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
             "method": method, "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "scheme": "http", "headers": [(b"content-type", b"application/json")], "client": ("127.0.0.1", 1),
             "server": ("127.0.0.1", 80)}
    sent: list[dict[str, Any]] = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
    await asyncio.wait_for(app(scope, receive, send), 10)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, json.loads(b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"))


def test_without_a_running_engine_worker_requests_get_503_and_health_says_so() -> None:
    rm.manual_seed(0)
    server = Server(Engine(GPT2LMHeadModel(GPT2Config(vocab_size=16, n_positions=16, n_embd=8, n_layer=1,
                                                      n_head=2))))
    status, body = asyncio.run(call(server.app, "POST", "/v1/generate", b'{"token_ids": [1, 2]}'))
    assert status == 503 and "not available" in body["error"]
    status, body = asyncio.run(call(server.app, "POST", "/v1/completions", b'{"prompt": "a"}'))
    assert status == 503
    status, body = asyncio.run(call(server.app, "GET", "/health"))
    assert status == 503 and body["status"] == "unavailable"
