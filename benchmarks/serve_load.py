"""Load test of `rumus serve`: N concurrent streaming clients for T seconds on loopback, each sending
/v1/completions (stream: true) requests back to back; p50/p99 time to first token and inter-token latency,
aggregate tokens/s, failures — for continuous batching (--max-running 64) and for one-at-a-time serving
(--max-running 1) at the same load.

    python benchmarks/serve_load.py [--checkpoint DIR] [--clients 64] [--duration 60] [--max-tokens 32]

Without --checkpoint an untrained model of `rumus demo lm`'s default shape is written to a temporary folder
(throughput does not depend on what the weights say). Bounded: clients stop starting requests after
--duration and every request must finish within --request-timeout.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Stats:
    ttft: list[float] = field(default_factory=list)
    itl: list[float] = field(default_factory=list)
    tokens: int = 0
    requests: int = 0
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(checkpoint: str, port: int, max_running: int, device: str | None) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "rumus", "serve", checkpoint, "--port", str(port), "--max-running",
            str(max_running), "--max-queue", "4096"] + (["--device", device] if device else [])
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return proc
        except OSError:
            time.sleep(0.3)
    raise SystemExit("server did not start")


def client(port: int, stop_at: float, max_tokens: int, timeout: float, seed: int, st: Stats) -> None:
    i = 0
    while time.monotonic() < stop_at:
        body = json.dumps({"prompt": f"def f{seed}_{i}(x):\n    return", "max_tokens": max_tokens,
                           "temperature": 0.8, "seed": seed * 100003 + i, "stream": True})
        i += 1
        t0 = time.perf_counter()
        last, n, first = t0, 0, None
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
            c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            if r.status != 200:
                raise RuntimeError(f"HTTP {r.status}: {r.read()[:200]!r}")
            gaps = []
            done = False
            while True:
                line = r.readline()
                if not line:
                    break
                if not line.startswith(b"data: "):
                    continue
                if line.strip() == b"data: [DONE]":
                    done = True
                    break
                chunk = json.loads(line[6:])
                if chunk["choices"][0]["finish_reason"] is not None:
                    continue
                now = time.perf_counter()
                if first is None:
                    first = now - t0
                else:
                    gaps.append(now - last)
                last, n = now, n + 1
            c.close()
            if not done or n != max_tokens:
                raise RuntimeError(f"stream ended early: {n} of {max_tokens} tokens, done={done}")
            with st.lock:
                st.requests += 1
                st.tokens += n
                st.ttft.append(first if first is not None else 0.0)
                st.itl.extend(gaps)
        except Exception as exc:  # counted and reported: the load test's pass condition is zero failures
            with st.lock:
                st.failures.append(f"{type(exc).__name__}: {exc}")


def run_mode(checkpoint: str, max_running: int, a: argparse.Namespace) -> dict[str, float]:
    port = free_port()
    proc = start_server(checkpoint, port, max_running, a.device)
    try:
        st = Stats()
        start = time.monotonic()
        threads = [threading.Thread(target=client, args=(port, start + a.duration, a.max_tokens, a.request_timeout,
                                                         k, st)) for k in range(a.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - start
    finally:
        proc.terminate()
        proc.wait(120)

    def pct(xs: list[float], q: float) -> float:
        return float(np.percentile(xs, q)) * 1e3 if xs else float("nan")
    return {"max_running": max_running, "requests": st.requests, "failures": len(st.failures),
            "tokens_per_s": st.tokens / wall, "ttft_p50_ms": pct(st.ttft, 50), "ttft_p99_ms": pct(st.ttft, 99),
            "itl_p50_ms": pct(st.itl, 50), "itl_p99_ms": pct(st.itl, 99), "wall_s": wall,
            "first_failure": st.failures[0] if st.failures else ""}  # type: ignore[dict-item]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--checkpoint", default=None)
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--duration", type=float, default=60.0)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--request-timeout", type=float, default=600.0)
    p.add_argument("--device", default=None)
    p.add_argument("--modes", default="64,1", help="comma-separated --max-running values to compare")
    a = p.parse_args()
    checkpoint = a.checkpoint
    if checkpoint is None:
        from rumus.serve.gpt2 import GPT2Config, GPT2LMHeadModel, save_checkpoint
        checkpoint = os.path.join(tempfile.mkdtemp(prefix="rumus-serve-load-"), "untrained-demo-shape")
        save_checkpoint(GPT2LMHeadModel(GPT2Config(vocab_size=256, n_positions=128, n_embd=64, n_layer=2,
                                                   n_head=4)), checkpoint)
    rows = [run_mode(checkpoint, int(m), a) for m in a.modes.split(",")]
    print(f"{a.clients} streaming clients, {a.duration:.0f} s, max_tokens {a.max_tokens}, device "
          f"{a.device or 'default'}")
    print("| max_running | requests | failures | tokens/s | TTFT p50 / p99 ms | inter-token p50 / p99 ms | wall s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['max_running']} | {r['requests']} | {r['failures']} | {r['tokens_per_s']:.0f} | "
              f"{r['ttft_p50_ms']:.0f} / {r['ttft_p99_ms']:.0f} | {r['itl_p50_ms']:.1f} / {r['itl_p99_ms']:.1f} | "
              f"{r['wall_s']:.0f} |")
        if r["first_failure"]:
            print(f"first failure (max_running {r['max_running']}): {r['first_failure']}")
    if len(rows) >= 2 and rows[-1]["tokens_per_s"] > 0:
        print(f"continuous batching vs one at a time: {rows[0]['tokens_per_s'] / rows[-1]['tokens_per_s']:.1f}x "
              f"tokens/s")
    return 1 if any(r["failures"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
