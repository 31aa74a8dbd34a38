"""`rumus serve` as a client sees it: a real uvicorn server in a subprocess on a loopback port."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

import rumus as rm  # noqa: E402
from rumus.serve.engine import Engine  # noqa: E402
from rumus.serve.gpt2 import GPT2LMHeadModel  # noqa: E402
from rumus.serve.sampling import SamplingParams  # noqa: E402
from rumus.serve.tokenizer import decode, encode  # noqa: E402

from serve_client import ServerProcess, sse_events, tiny_checkpoint  # noqa: E402


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, GPT2LMHeadModel]:
    path = str(tmp_path_factory.mktemp("ckpt"))
    return path, tiny_checkpoint(path)


@pytest.fixture(scope="module")
def server(checkpoint: tuple[str, GPT2LMHeadModel],
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    log = str(tmp_path_factory.mktemp("log") / "server.log")
    s = ServerProcess(checkpoint[0], "--token-budget", "64", log=log)
    yield s
    s.stop()


def greedy(model: GPT2LMHeadModel, prompt: list[int], n: int) -> list[int]:
    return Engine(model).run([prompt], SamplingParams(max_tokens=n))[0]


def test_generate_returns_the_prompt_plus_the_models_greedy_tokens(server: ServerProcess,
                                                                  checkpoint: tuple[str, GPT2LMHeadModel]) -> None:
    status, _, body = server.request("POST", "/v1/generate", {"token_ids": [72, 105, 33], "max_new_tokens": 12})
    assert status == 200
    assert body["generated_ids"] == [72, 105, 33] + greedy(checkpoint[1], [72, 105, 33], 12)
    assert isinstance(body["latency_ms"], float) and body["latency_ms"] > 0
    status, _, body = server.request("POST", "/v1/generate", {"token_ids": [1]})
    assert status == 200 and len(body["generated_ids"]) == 1 + 50  # max_new_tokens defaults to 50


def test_completions_plain_and_streamed_give_the_same_text(server: ServerProcess,
                                                           checkpoint: tuple[str, GPT2LMHeadModel]) -> None:
    req = {"prompt": "Hello", "max_tokens": 20, "temperature": 0}
    status, _, body = server.request("POST", "/v1/completions", req)
    assert status == 200
    expected = decode(greedy(checkpoint[1], encode("Hello"), 20))
    assert body["choices"][0]["text"] == expected and body["choices"][0]["finish_reason"] == "length"
    assert body["usage"] == {"prompt_tokens": 5, "completion_tokens": 20, "total_tokens": 25}
    conn = server.connect()
    conn.request("POST", "/v1/completions", body=json.dumps({**req, "stream": True}))
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("content-type", "").startswith("text/event-stream")
    events = sse_events(resp)
    conn.close()
    assert events[-1] == "[DONE]" and events[-2]["choices"][0]["finish_reason"] == "length"
    assert len(events) == 20 + 2  # one chunk per token, the finish chunk, [DONE]
    assert "".join(e["choices"][0]["text"] for e in events[:-1]) == expected


def test_seeded_sampling_and_stop_sequences_over_http(server: ServerProcess,
                                                      checkpoint: tuple[str, GPT2LMHeadModel]) -> None:
    req = {"prompt": "abc", "max_tokens": 15, "temperature": 0.8, "top_p": 0.9, "seed": 7}
    a = server.request("POST", "/v1/completions", req)[2]["choices"][0]["text"]
    b = server.request("POST", "/v1/completions", req)[2]["choices"][0]["text"]
    assert a == b
    full = greedy(checkpoint[1], encode("abc"), 40)
    # a stop string of two ASCII bytes the greedy output contains (the random test model emits any byte)
    at = next(i for i in range(len(full) - 1) if full[i] < 128 and full[i + 1] < 128)
    stop = bytes(full[at:at + 2]).decode()
    first = next(i for i in range(len(full) - 1) if full[i:i + 2] == full[at:at + 2])
    body = server.request("POST", "/v1/completions", {"prompt": "abc", "max_tokens": 40, "temperature": 0,
                                                      "stop": [stop]})[2]
    assert body["choices"][0] == {"index": 0, "text": decode(full[:first]), "finish_reason": "stop",
                                  "logprobs": None}
    assert body["usage"]["completion_tokens"] == first


def test_embeddings_are_unit_vectors_of_the_model_width(server: ServerProcess) -> None:
    status, _, body = server.request("POST", "/v1/embeddings", {"input": ["one text", "another text", "one text"]})
    assert status == 200
    vecs = [np.array(d["embedding"]) for d in body["data"]]
    assert [v.shape for v in vecs] == [(32,)] * 3
    assert np.allclose([np.linalg.norm(v) for v in vecs], 1.0)
    assert np.array_equal(vecs[0], vecs[2]) and not np.allclose(vecs[0], vecs[1])


BAD: list[tuple[str, Any, str]] = [
    ("/v1/generate", b"{not json", "malformed JSON"),
    ("/v1/generate", b"[1, 2]", "must be a JSON object"),
    ("/v1/generate", {"max_new_tokens": 3}, "'token_ids' must be a non-empty list"),
    ("/v1/generate", {"token_ids": []}, "'token_ids' must be a non-empty list"),
    ("/v1/generate", {"token_ids": [1, "x"]}, "'token_ids' must be a non-empty list"),
    ("/v1/generate", {"token_ids": [1, 999]}, r"token ids must be ints in \[0, 256\); 'token_ids'\[1\] is 999"),
    ("/v1/generate", {"token_ids": [1] * 10, "max_new_tokens": 300}, r"\+ max_new_tokens \(300\) exceeds"),
    ("/v1/completions", b'{"prompt": "x", "temperature": 1e999}', "'temperature' must be a number in"),
    ("/v1/completions", {"prompt": "\ud800"}, "'prompt' holds a lone UTF-16 surrogate"),
    ("/v1/completions", b"[" * 50000, "nested too deeply"),
    ("/v1/generate", {"token_ids": [1], "max_new_tokens": 0}, "'max_new_tokens' must be an integer >= 1"),
    ("/v1/generate", {"token_ids": [1] * 65, "max_new_tokens": 1}, "limit of 64 tokens per prompt"),
    ("/v1/generate", {"token_ids": [1] * 10, "max_new_tokens": 300}, "context length of 256 tokens"),
    ("/v1/completions", {"prompt": ""}, "'prompt' must be a non-empty string"),
    ("/v1/completions", {"prompt": "x", "temperature": "hot"}, "'temperature' must be a number"),
    ("/v1/completions", {"prompt": "x", "top_p": 0}, r"'top_p' must be a number in \(0, 1\]"),
    ("/v1/completions", {"prompt": "x", "stream": "yes"}, "'stream' must be true or false"),
    ("/v1/completions", {"prompt": "x", "stop": [""]}, "'stop' must be"),
    ("/v1/embeddings", {"input": 3}, "'input' must be"),
    ("/v1/embeddings", {"input": "y" * 300}, "limit is 256 tokens"),
]


@pytest.mark.parametrize("path,body,message", BAD, ids=[m[:30] for _, _, m in BAD])
def test_every_bad_request_gets_400_and_a_json_error_and_the_server_keeps_serving(
        server: ServerProcess, path: str, body: Any, message: str) -> None:
    raw = body if isinstance(body, bytes) else None
    status, headers, reply = server.request("POST", path, None if raw else body, raw=raw)
    assert status == 400 and headers["content-type"] == "application/json"
    import re
    assert re.search(message, reply["error"]), reply
    assert server.request("POST", "/v1/generate", {"token_ids": [5], "max_new_tokens": 2})[0] == 200


def test_a_body_over_the_limit_gets_413_whether_its_length_is_declared_or_not(server: ServerProcess) -> None:
    status, _, reply = server.request("POST", "/v1/completions", raw=b"{" + b" " * (1 << 20) + b"}")
    assert status == 413 and "exceeds the limit of 1048576 bytes" in reply["error"]
    conn = server.connect()
    conn.putrequest("POST", "/v1/completions")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    piece = b" " * 65536
    try:
        for _ in range(20):
            conn.send(b"%x\r\n" % len(piece) + piece + b"\r\n")
        conn.send(b"0\r\n\r\n")
    except OSError:
        pass  # the server may answer and close before the rest is sent
    resp = conn.getresponse()
    assert resp.status == 413 and "exceeds the limit" in json.loads(resp.read())["error"]
    conn.close()
    assert server.request("POST", "/v1/generate", {"token_ids": [5], "max_new_tokens": 2})[0] == 200


def test_health_and_prometheus_metrics(server: ServerProcess) -> None:
    server.request("POST", "/v1/generate", {"token_ids": [5, 6], "max_new_tokens": 5})
    status, _, body = server.request("GET", "/health")
    assert status == 200 and body["status"] == "ok"
    _, headers, text = server.request("GET", "/metrics")
    assert headers["content-type"].startswith("text/plain")
    for name in ("rumus_queue_depth", "rumus_running_sequences", "rumus_tokens_per_second",
                 "rumus_time_to_first_token_seconds_bucket", "rumus_inter_token_latency_seconds_bucket"):
        assert name in text
    assert server.metric("rumus_time_to_first_token_seconds_count") >= 1
    assert server.metric("rumus_inter_token_latency_seconds_count") >= 4
    assert server.metric("rumus_generated_tokens_total") >= 5


def test_a_client_that_disconnects_frees_its_sequence_and_kv_blocks(server: ServerProcess) -> None:
    free = server.metric("rumus_kv_cache_free_blocks")
    before = server.metric("rumus_generated_tokens_total")
    conn = server.connect()
    conn.request("POST", "/v1/completions", body=json.dumps({"prompt": "x", "max_tokens": 250, "stream": True}))
    resp = conn.getresponse()
    for _ in range(3):
        assert resp.readline().startswith(b"data: ")
        resp.readline()
    conn.sock.close()  # type: ignore[union-attr]
    conn.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (server.metric("rumus_running_sequences")
                                           or server.metric("rumus_kv_cache_free_blocks") != free):
        time.sleep(0.05)
    assert server.metric("rumus_running_sequences") == 0
    assert server.metric("rumus_kv_cache_free_blocks") == free
    assert server.metric("rumus_generated_tokens_total") - before < 250  # it stopped early: cancelled


@pytest.mark.timing
def test_full_queue_gets_429_with_retry_after_and_sigterm_drains_in_flight_requests(
        checkpoint: tuple[str, GPT2LMHeadModel], tmp_path: os.PathLike[str]) -> None:
    s = ServerProcess(checkpoint[0], "--max-running", "1", "--max-queue", "1",
                      log=os.path.join(tmp_path, "server.log"))
    try:
        results: list[int] = []

        def call() -> None:
            results.append(s.request("POST", "/v1/generate", {"token_ids": [1], "max_new_tokens": 200})[0])
        threads = [threading.Thread(target=call) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results.count(200) >= 2 and results.count(429) >= 1 and set(results) <= {200, 429}
        status, headers, body = s.request("POST", "/v1/generate", {"token_ids": [1], "max_new_tokens": 1})
        assert status == 200  # the queue emptied: served again

        over: list[tuple[int, dict[str, str], Any]] = []
        hold = [threading.Thread(target=lambda: over.append(s.request(
            "POST", "/v1/generate", {"token_ids": [2], "max_new_tokens": 200}))) for _ in range(4)]
        for t in hold:
            t.start()
        for t in hold:
            t.join()
        refused = [r for r in over if r[0] == 429]
        assert refused and refused[0][1]["retry-after"] == "1" and "queue is full" in refused[0][2]["error"]

        # SIGTERM while a stream is in flight: the stream completes, then the process exits cleanly
        conn = s.connect()
        conn.request("POST", "/v1/completions", body=json.dumps({"prompt": "q", "max_tokens": 200,
                                                                 "temperature": 0, "stream": True}))
        resp = conn.getresponse()
        assert resp.readline().startswith(b"data: ")
        s.proc.send_signal(signal.SIGTERM)
        events = sse_events(resp)
        assert events[-1] == "[DONE]" and events[-2]["choices"][0]["finish_reason"] == "length"
        assert len(events) == 200 + 1  # the 199 chunks after the first one read above, finish chunk, [DONE]
        # uvicorn re-raises the signal once its graceful shutdown is done: the conventional "ended by SIGTERM"
        assert s.proc.wait(60) in (0, -signal.SIGTERM)
        with open(os.path.join(tmp_path, "server.log")) as f:
            assert "Traceback" not in f.read()
    finally:
        s.stop()
    rm.manual_seed(0)  # leave global RNG state as other tests expect
