"""Hostile clients against a real `rumus serve` (uvicorn on 127.0.0.1, a tiny GPT-2 checkpoint).

Every bad field of every endpoint must get 400 with a JSON error naming the field while good requests
sent alongside still get the model's exact output; every endpoint counts against --max-queue; a body over
the limit is refused from its Content-Length header (413) before it is read, a chunked one as soon as it
passes the limit; deep nesting and lone surrogates are 400, never 500. Cases are fixed lists and a seeded
fuzz, so CI replays the same requests.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from adversarial_cases import Case

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serve"))

from serve_client import ServerProcess, tiny_checkpoint  # noqa: E402

HUGE_INT = 10**30
BAD_NUMBERS: list[Any] = [None, "1", True, [], {}, -1, -1e308, 1e308, -HUGE_INT]  # bad for every numeric field
# values written into the body as raw JSON text (json.dumps cannot write them)
RAW_NUMBERS = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1" + "0" * 5000]

FIELDS: dict[str, dict[str, list[Any]]] = {
    # endpoint -> field -> bad values (beyond BAD_NUMBERS where the field is numeric)
    "/v1/generate": {
        "token_ids": [None, [], "abc", [1.5], [True], [-1], [256], [HUGE_INT], [[1]], [None], {"a": 1}],
        "max_new_tokens": [0, 300, 2.0, 0.5, HUGE_INT],
    },
    "/v1/completions": {
        "prompt": [None, "", 5, ["a"], {"a": 1}, "x" * 65],
        "max_tokens": [0, 300, 2.0, 0.5, HUGE_INT],
        "temperature": [-0.1, 100.5, -1e-300, -5e-324, HUGE_INT],
        "top_p": [0, 0.0, 1.0001, -0.5, -5e-324, HUGE_INT],
        "top_k": [-1, 2.5, 0.5],
        "seed": [-1, 2**64, 1.5, HUGE_INT],
        "stop": [5, "", [""], [1], ["a"] * 5, ["a" * 257], {"a": "b"}],
        "stream": ["yes", 1, None],
    },
    "/v1/embeddings": {
        "input": [None, 3, "", [], [""], [1], ["a"] * 65, "y" * 300, {"a": 1}],
    },
}
NUMERIC = {"max_new_tokens", "max_tokens", "temperature", "top_p", "top_k", "seed"}
BASE: dict[str, dict[str, Any]] = {
    "/v1/generate": {"token_ids": [1, 2], "max_new_tokens": 2},
    "/v1/completions": {"prompt": "ab", "max_tokens": 2},
    "/v1/embeddings": {"input": "ab"},
}
# accepted although extreme: they must work and fail nothing else in flight
EXTREME_GOOD: list[dict[str, Any]] = [
    {"prompt": "hi", "max_tokens": 8, "temperature": 1e-310},
    {"prompt": "hi", "max_tokens": 8, "temperature": 5e-324},
    {"prompt": "hi", "max_tokens": 8, "temperature": 100},
    {"prompt": "hi", "max_tokens": 8, "temperature": 1e-310, "top_k": 1},
    {"prompt": "hi", "max_tokens": 8, "temperature": 0.7, "top_p": 1e-300},
    {"prompt": "hi", "max_tokens": 8, "temperature": 0.7, "top_k": 10**18},
    {"prompt": "hi", "max_tokens": 8, "temperature": 0.7, "seed": 2**64 - 1},
    {"prompt": "hi", "max_tokens": 8, "temperature": 1e-310, "top_p": 1e-300, "top_k": 1, "seed": 0},
    {"prompt": "\U0001F600" * 16, "max_tokens": 8, "temperature": 2.0, "stop": ["\U0001F600", "a" * 256]},
]


class _Served:
    """One server per class (started lazily, stopped when the class's cases are done)."""

    def __init__(self, *args: str) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.model = tiny_checkpoint(self.dir.name)
        self.server = ServerProcess(self.dir.name, *args, log=os.path.join(self.dir.name, "server.log"))

    def close(self) -> list[str]:
        self.server.stop()
        with open(os.path.join(self.dir.name, "server.log")) as f:
            log = f.read()
        self.dir.cleanup()
        return [ln for ln in log.splitlines() if "Traceback" in ln]


def _greedy(model: Any, prompt: list[int], n: int) -> list[int]:
    from rumus.serve.engine import Engine
    from rumus.serve.sampling import SamplingParams
    return Engine(model).run([prompt], SamplingParams(max_tokens=n))[0]


def _check_error(name: str, field: str | None, status: int, body: Any, want: int = 400) -> Case:
    if status != want:
        return Case(name, f"status {status}, expected {want}: {str(body)[:100]}")
    if not isinstance(body, dict) or not isinstance(body.get("error"), str):
        return Case(name, f"no JSON error: {str(body)[:100]}")
    if field is not None and field not in body["error"]:
        return Case(name, f"the error does not name {field!r}: {body['error'][:100]}")
    return Case(name, None)


class _Background:
    """Good greedy requests sent in a loop while the hostile ones run: each must be 200 and exact."""

    def __init__(self, s: ServerProcess, want: list[int]) -> None:
        self.s, self.want = s, want
        self.problems: list[str] = []
        self.done = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            status, _, body = self.s.request("POST", "/v1/generate", {"token_ids": [7, 8, 9], "max_new_tokens": 6})
            if status != 200 or body.get("generated_ids") != [7, 8, 9] + self.want:
                self.problems.append(f"{status}: {str(body)[:80]}")
            self.done += 1

    def stop(self) -> Case:
        self._stop.set()
        self._thread.join(120)
        if self.problems:
            return Case("good requests alongside", f"{len(self.problems)} of {self.done} failed: {self.problems[0]}")
        return Case("good requests alongside", None if self.done else "none completed")


def hostile_fields() -> Iterator[Case]:
    srv = _Served("--token-budget", "64")
    s = srv.server
    try:
        bg = _Background(s, _greedy(srv.model, [7, 8, 9], 6))
        for path, fields in FIELDS.items():
            for field, values in fields.items():
                tried = values + (BAD_NUMBERS if field in NUMERIC else [])
                for v in tried:
                    body = {**BASE[path], field: v}
                    if v is None and field not in BASE[path]:
                        continue  # an absent optional field is the default
                    status, _, reply = s.request("POST", path, body)
                    yield _check_error(f"{path} {field}={str(v)[:30]}", field, status, reply)
                if field in NUMERIC:
                    for raw in RAW_NUMBERS:
                        text = json.dumps({**BASE[path], field: 0})[:-1].replace(f'"{field}": 0', f'"{field}": {raw}')
                        status, _, reply = s.request("POST", path, raw=(text + "}").encode())
                        # NaN / Infinity are not JSON: a malformed-JSON error is as right as naming the field
                        ok_field = None if raw in ("NaN", "Infinity", "-Infinity") or len(raw) > 100 else field
                        yield _check_error(f"{path} {field}={raw[:12]} (raw)", ok_field, status, reply)
        yield from _fuzz_bodies(s, np.random.default_rng(33))
        for i, req in enumerate(EXTREME_GOOD):
            status, _, reply = s.request("POST", "/v1/completions", req)
            ok = status == 200 and reply["choices"][0]["finish_reason"] in ("length", "stop")
            yield Case(f"extreme but valid #{i} {str(req)[:60]}", None if ok else f"{status}: {str(reply)[:100]}")
        yield bg.stop()
    finally:
        tracebacks = srv.close()
    yield Case("no traceback in the server log", f"{len(tracebacks)} tracebacks" if tracebacks else None)


def _fuzz_bodies(s: ServerProcess, rng: np.random.Generator, n: int = 60) -> Iterator[Case]:
    """Random JSON values in random fields: 200 or 400 with a JSON error, never 500 or a dropped connection."""
    pool: list[Any] = [*BAD_NUMBERS, "", "x", "\u00e9" * 3, [1, 2], [[]], {"k": []}, 0, 1, 2, 16, 255, 256, 1e-5]
    for i in range(n):
        path = list(FIELDS)[int(rng.integers(len(FIELDS)))]
        body = dict(BASE[path])
        for _ in range(int(rng.integers(1, 4))):
            keys = list(FIELDS[path]) + ["stop", "temperature", "top_k", "unknown"]
            body[keys[int(rng.integers(len(keys)))]] = pool[int(rng.integers(len(pool)))]
        try:
            status, _, reply = s.request("POST", path, body)
        except OSError as exc:
            yield Case(f"fuzz #{i} {path} {str(body)[:60]}", f"connection failed: {exc}")
            continue
        ok = status == 200 or (status == 400 and isinstance(reply, dict) and "error" in reply)
        yield Case(f"fuzz #{i} {path} {str(body)[:60]}", None if ok else f"{status}: {str(reply)[:100]}")


# ---- the queue limit -----------------------------------------------------------------------------

def queue_limit() -> Iterator[Case]:
    """--max-running 1 --max-queue 1: one stream running, one request waiting; then every endpoint is 429."""
    srv = _Served("--max-running", "1", "--max-queue", "1")
    s = srv.server
    try:
        conn = s.connect()
        conn.request("POST", "/v1/completions", body=json.dumps({"prompt": "q", "max_tokens": 250, "stream": True}))
        resp = conn.getresponse()
        resp.readline()  # its first token arrived: it is running
        waiting: list[Any] = []
        t = threading.Thread(target=lambda: waiting.append(s.request(
            "POST", "/v1/generate", {"token_ids": [3], "max_new_tokens": 250}, timeout=300)))
        t.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and s.request("GET", "/health")[2]["queued"] < 1:
            time.sleep(0.02)
        for path, body in BASE.items():
            for k in range(3):
                status, headers, reply = s.request("POST", path, body)
                case = _check_error(f"full: {path} #{k}", None, status, reply, want=429)
                if case.problem is None and headers.get("retry-after") != "1":
                    case = Case(case.name, "no Retry-After header")
                yield case
        conn.close()  # the stream is cancelled; the waiting request then runs

        t.join(300)
        yield Case("the waiting request was served", None if waiting and waiting[0][0] == 200 else f"{waiting}")
        yield from _embedding_burst(s)  # many at once against a free server: never more queued than allowed
        status, _, reply = s.request("POST", "/v1/completions", {"prompt": "z", "max_tokens": 2})
        yield Case("served again after the bursts", None if status == 200 else f"{status}: {reply}")
    finally:
        tracebacks = srv.close()
    yield Case("no traceback in the server log", f"{len(tracebacks)} tracebacks" if tracebacks else None)


def _embedding_burst(s: ServerProcess, n: int = 16) -> Iterator[Case]:
    """n concurrent embeddings of long inputs: /health's queued count never passes --max-queue, each answer
    is 200 or 429, and the server keeps answering /health while they run (how many get 429 depends on
    timing, so it is not asserted; the held-queue cases above are the deterministic 429s)."""
    results: list[int] = []
    seen: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(s.request(
        "POST", "/v1/embeddings", {"input": ["w" * 200] * 16}, timeout=300)[0])) for _ in range(n)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        seen.append(int(s.request("GET", "/health")[2]["queued"]))
        time.sleep(0.01)
    for t in threads:
        t.join()
    yield Case("embedding burst: 200 or 429 only", None if set(results) <= {200, 429} else f"{results}")
    yield Case("embedding burst: queued never above --max-queue",
               None if max(seen, default=0) <= 1 else f"queued reached {max(seen)}")


# ---- body limits ---------------------------------------------------------------------------------

def _raw_exchange(port: int, head: bytes, body_chunks: list[bytes], timeout: float = 20) -> tuple[int, bytes]:
    """Send a hand-written request; return (status, reply bytes). The server may close before the body is sent."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head)
        try:
            for chunk in body_chunks:
                sock.sendall(chunk)
        except OSError:
            pass  # refused early and closed: what we want
        data = b""
        try:
            while b"\r\n\r\n" not in data or len(data) < data.index(b"\r\n\r\n") + 4 + _declared(data):
                more = sock.recv(65536)
                if not more:
                    break
                data += more
        except OSError:
            pass
    if not data.startswith(b"HTTP/1.1 "):
        return 0, data
    return int(data[9:12]), data


def _declared(data: bytes) -> int:
    for line in data.split(b"\r\n\r\n")[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":")[1])
    return 0


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def body_limits() -> Iterator[Case]:
    srv = _Served()
    s = srv.server
    try:
        rss0 = _rss_mib(s.proc.pid)
        for path in BASE:
            head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    f"Content-Length: 2000000000\r\n\r\n").encode()
            status, data = _raw_exchange(s.port, head, [b"{" + b" " * (1 << 16)] * 48)  # 3 MiB sent at most
            ok = status == 413 and b"exceeds the limit" in data
            yield Case(f"Content-Length 2e9 {path}", None if ok else f"status {status}: {data[:120]!r}")
        grown = _rss_mib(s.proc.pid) - rss0
        yield Case("huge Content-Length buffered nothing", None if grown < 20 else f"RSS grew {grown:.0f} MiB")
        for label, length in (("not a number", "12abc"), ("negative", "-5"), ("4301 digits", "9" * 4301)):
            head = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n").encode()
            status, data = _raw_exchange(s.port, head, [])
            yield Case(f"Content-Length {label}", None if status in (400, 413) else f"status {status}: {data[:120]!r}")
        # chunked: the body passes the limit mid-stream
        head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        piece = b"{" + b" " * 65535
        chunks = [b"%x\r\n" % len(piece) + piece + b"\r\n"] * 40 + [b"0\r\n\r\n"]
        status, data = _raw_exchange(s.port, head, chunks)
        yield Case("chunked body over the limit", None if status == 413 else f"status {status}: {data[:120]!r}")
        small = json.dumps({"prompt": "ab", "max_tokens": 2}).encode()
        status, data = _raw_exchange(s.port, head, [b"%x\r\n" % len(small) + small + b"\r\n0\r\n\r\n"])
        yield Case("chunked body under the limit", None if status == 200 else f"status {status}: {data[:120]!r}")
        hostile: list[tuple[str, str, bytes, str | None]] = [
            ("nested 100000 deep", "/v1/completions", b"[" * 100000 + b"]" * 100000, None),
            ("nested 5000 deep in a field", "/v1/completions",
             b'{"prompt": "a", "stop": ' + b"[" * 5000 + b"]" * 5000 + b"}", None),
            ("lone surrogate prompt", "/v1/completions", b'{"prompt": "\\ud800"}', "prompt"),
            ("lone low surrogate prompt", "/v1/completions", b'{"prompt": "ab\\udfff"}', "prompt"),
            ("lone surrogate stop", "/v1/completions", b'{"prompt": "a", "stop": ["\\ud800"]}', "stop"),
            ("lone surrogate input", "/v1/embeddings", b'{"input": ["ok", "\\ud800"]}', "input"),
            ("lone surrogate key", "/v1/generate", b'{"\\ud800": 1, "token_ids": [1]}', "key"),
            ("invalid UTF-8", "/v1/completions", b'{"prompt": "\xff\xfe"}', None),
            ("NaN literal", "/v1/completions", b'{"prompt": "a", "temperature": NaN}', None),
            ("empty body", "/v1/generate", b"", None),
            ("JSON null", "/v1/generate", b"null", None),
            ("a 4301-digit integer", "/v1/generate", b'{"token_ids": [' + b"9" * 4301 + b"]}", None),
        ]
        for label, path, raw, field in hostile:
            status, _, reply = s.request("POST", path, raw=raw)
            yield _check_error(label, field, status, reply)
        status, _, reply = s.request("POST", "/v1/completions", {"prompt": "z", "max_tokens": 2})
        yield Case("served after the hostile bodies", None if status == 200 else f"{status}: {reply}")
    finally:
        tracebacks = srv.close()
    yield Case("no traceback in the server log", f"{len(tracebacks)} tracebacks" if tracebacks else None)


CLASSES: dict[str, Callable[[], Iterator[Case]]] = {
    "33 server: bad fields -> 400 naming the field; good requests alongside exact": hostile_fields,
    "33 server: every endpoint respects --max-queue (429)": queue_limit,
    "33 server: body size (413 from the header, chunked), nesting, surrogates": body_limits,
}
