"""Serving language models: a GPT-2-architecture model, a paged-KV-cache engine with continuous batching,
and an ASGI server (`rumus serve`, needs the `serve` extra: starlette + uvicorn)."""
