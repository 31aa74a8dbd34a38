"""`rumus serve CHECKPOINT [--device cpu|wgpu] [--host 127.0.0.1] [--port 8000]`: load a GPT-2-format
checkpoint directory (config.json + model.safetensors, e.g. from `rumus demo lm`) and serve it under
uvicorn. SIGTERM or Ctrl-C stops accepting connections, lets in-flight requests finish, then exits."""

from __future__ import annotations

import argparse
import os
import socket
import sys

from rumus_contracts import RumusError

from ..utils.cli_args import nonnegative_int, port, positive_float, positive_int


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rumus serve", description="serve a GPT-2-format checkpoint over HTTP")
    p.add_argument("checkpoint", help="directory with config.json and model.safetensors")
    p.add_argument("--device", default=None, help="cpu (default) or wgpu")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=port, default=8000, help="TCP port (default: 8000)")
    p.add_argument("--max-running", type=positive_int, default=64,
                   help="sequences decoded together, 1 = one at a time (default: 64)")
    p.add_argument("--max-queue", type=nonnegative_int, default=256,
                   help="requests waiting beyond that get 429 (default: 256)")
    p.add_argument("--token-budget", type=positive_int, default=None,
                   help="tokens per engine step, also the prompt limit (default: the model's context)")
    p.add_argument("--block-size", type=positive_int, default=16, help="tokens per KV cache block (default: 16)")
    p.add_argument("--embedder", default=None,
                   help="encoder directory for /v1/embeddings (default: CHECKPOINT/encoder when it exists)")
    p.add_argument("--drain-timeout", type=positive_float, default=60.0,
                   help="seconds SIGTERM waits for in-flight requests (default: 60)")
    return p


def _refuse_a_busy_port(host: str, port_number: int) -> None:
    try:
        infos = socket.getaddrinfo(host, port_number, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise RumusError(f"--host {host}: not an address this machine can listen on ({exc.strerror})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no conflict
        try:
            s.bind(address)
        except OSError as exc:
            raise RumusError(f"cannot listen on {host}:{port_number} ({exc.strerror}); another program has "
                             f"the port: pick another with --port") from None


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        import uvicorn
    except ImportError:
        raise RumusError("rumus serve needs the 'serve' extra: pip install 'rumus[serve]' (starlette, uvicorn)") \
            from None
    from .api import Server
    from .engine import Engine
    from .gpt2 import load_checkpoint
    if a.max_running < 1 or a.max_queue < 0 or a.block_size < 1:
        raise RumusError("--max-running and --block-size must be >= 1, --max-queue >= 0")
    _refuse_a_busy_port(a.host, a.port)  # before the model loads: a taken port is found in a moment
    model = load_checkpoint(a.checkpoint, device=a.device)
    engine = Engine(model, block_size=a.block_size, max_running=a.max_running, token_budget=a.token_budget)
    from .encoder import ENCODER_DIR, load_encoder
    enc_dir = a.embedder or os.path.join(a.checkpoint, ENCODER_DIR)
    encoder = load_encoder(enc_dir, device=a.device) if a.embedder or os.path.isdir(enc_dir) else None
    server = Server(engine, model_name=os.path.basename(os.path.normpath(a.checkpoint)), max_queue=a.max_queue,
                    encoder=encoder)
    print(f"rumus serve: {a.checkpoint} on {engine.device}, http://{a.host}:{a.port}", flush=True)
    uvicorn.run(server.app, host=a.host, port=a.port, log_level="warning",
                timeout_graceful_shutdown=int(a.drain_timeout))
    return 0
