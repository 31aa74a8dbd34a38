"""Helpers for the server tests: start a REAL `rumus serve` (uvicorn) subprocess on a loopback port and
talk to it with the standard library's http.client."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from typing import Any

import rumus as rm
from rumus.serve.gpt2 import GPT2Config, GPT2LMHeadModel, save_checkpoint


def tiny_checkpoint(path: str, n_positions: int = 256) -> GPT2LMHeadModel:
    rm.manual_seed(3)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=256, n_positions=n_positions, n_embd=32, n_layer=2, n_head=4))
    with rm.no_grad():
        for p in model.parameters():
            if p.ndim == 2:
                p.copy_(rm.randn(*p.shape) * 0.3)
    model.eval()
    save_checkpoint(model, path)
    return model


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    def __init__(self, checkpoint: str, *args: str, log: str) -> None:
        self.port = free_port()
        self.log = open(log, "w")
        env = {**os.environ, "RUMUS_BACKEND": os.environ.get("RUMUS_BACKEND", "cpu")}
        self.proc = subprocess.Popen([sys.executable, "-m", "rumus", "serve", checkpoint, "--port", str(self.port),
                                      *args], stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {open(log).read()}")
            try:
                if self.request("GET", "/health")[0] == 200:
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("server did not come up in 120 s")

    def connect(self, timeout: float = 60) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method: str, path: str, body: Any = None, raw: bytes | None = None,
                timeout: float = 60) -> tuple[int, dict[str, str], Any]:
        conn = self.connect(timeout)
        try:
            data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            payload = resp.read()
            headers = {k.lower(): v for k, v in resp.getheaders()}
            try:
                parsed: Any = json.loads(payload)
            except ValueError:
                parsed = payload.decode()
            return resp.status, headers, parsed
        finally:
            conn.close()

    def metric(self, name: str) -> float:
        _, _, text = self.request("GET", "/metrics")
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise KeyError(name)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def sse_events(resp: http.client.HTTPResponse) -> list[Any]:
    """Read server-sent events to the end: the JSON payloads, then the string "[DONE]"."""
    events: list[Any] = []
    while True:
        line = resp.readline()
        if not line:
            return events
        line = line.strip()
        if line.startswith(b"data: "):
            data = line[6:].decode()
            events.append(data if data == "[DONE]" else json.loads(data))
