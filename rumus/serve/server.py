"""`rumus serve CHECKPOINT [--device cpu|wgpu] [--host 127.0.0.1] [--port 8000]`: load a GPT-2-format
checkpoint directory (config.json + model.safetensors, e.g. from `rumus demo lm`) and serve it under
uvicorn. SIGTERM or Ctrl-C stops accepting connections, lets in-flight requests finish, then exits."""

from __future__ import annotations

import argparse
import os
import sys

from rumus_contracts import RumusError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rumus serve", description="serve a GPT-2-format checkpoint over HTTP")
    p.add_argument("checkpoint", help="directory with config.json and model.safetensors")
    p.add_argument("--device", default=None, help="cpu (default) or wgpu")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-running", type=int, default=64, help="sequences decoded together (1 = one at a time)")
    p.add_argument("--max-queue", type=int, default=256, help="requests waiting beyond that get 429")
    p.add_argument("--token-budget", type=int, default=None, help="tokens per engine step (also the prompt limit)")
    p.add_argument("--block-size", type=int, default=16, help="tokens per KV cache block")
    p.add_argument("--embedder", default=None,
                   help="encoder directory for /v1/embeddings (default: CHECKPOINT/encoder when it exists)")
    p.add_argument("--drain-timeout", type=float, default=60.0, help="seconds SIGTERM waits for in-flight requests")
    return p


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
