"""The HTTP API (an ASGI app on Starlette): SPEC F's /v1/generate, OpenAI-style /v1/completions (SSE when
stream is true) and /v1/embeddings, /health and /metrics.

Errors are JSON `{"error": message}`: 400 for a bad or too-large request (the message names the limit),
429 with Retry-After when the queue is full, 503 when the engine is not available (stopped or draining).
A client that goes away mid-request is cancelled: its sequence leaves the batch and its KV blocks are
freed at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

import rumus as rm
from rumus_contracts import RumusError

from .encoder import BertEncoder
from .engine import Engine
from .metrics import gauge
from .requests import (
    MAX_BODY_BYTES, BadRequest, BodyTooLarge, completion_request, embedding_request, generate_request, parse_json,
    too_large,
)
from .sampling import SamplingParams
from .tokenizer import StreamDecoder, encode
from .worker import Handle, Worker


class QueueFull(RumusError):
    pass


class Server:
    def __init__(self, engine: Engine, model_name: str = "rumus-gpt2", max_queue: int = 256,
                 retry_after_s: int = 1, encoder: BertEncoder | None = None) -> None:
        self.worker = Worker(engine)
        self.encoder = encoder  # /v1/embeddings: the encoder, else the LM's mean-pooled final states
        self.engine, self.model_name = engine, model_name
        self.max_queue, self.retry_after_s = max_queue, retry_after_s
        self.live: set[Handle] = set()  # requests accepted and not yet ended
        self.embedding_calls = 0  # /v1/embeddings requests accepted and not yet answered (they queue too)
        self.draining = False
        self.requests: dict[str, int] = {}
        self.app = Starlette(routes=[
            Route("/v1/generate", self.generate, methods=["POST"]),
            Route("/v1/completions", self.completions, methods=["POST"]),
            Route("/v1/embeddings", self.embeddings, methods=["POST"]),
            Route("/health", self.health, methods=["GET"]),
            Route("/metrics", self.metrics, methods=["GET"]),
            Route("/openapi.json", self.openapi, methods=["GET"]),
        ], lifespan=self._lifespan)

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        self.worker.start()
        yield
        # uvicorn has stopped accepting connections and waited for in-flight responses: stop the engine
        self.draining = True
        await asyncio.get_running_loop().run_in_executor(None, self.worker.stop)

    # ---- plumbing ---------------------------------------------------------------------------------------
    def _count(self, status: int) -> None:
        self.requests[str(status)] = self.requests.get(str(status), 0) + 1

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
        self._count(status)
        return JSONResponse({"error": message}, status_code=status, headers=headers)

    @property
    def in_flight(self) -> int:
        return len(self.live) + self.embedding_calls

    @property
    def queue_depth(self) -> int:
        """Accepted and not being worked on: sequences not yet in the batch + embeddings waiting their turn."""
        return max(0, len(self.live) - self.worker.running) + max(0, self.embedding_calls - self.worker.calling)

    async def _admit(self, request: Request, parse: Any) -> Any:
        """Body -> parsed request, or raise the error response to send."""
        if self.draining or not self.worker.alive:
            raise _Reply(self._error(503, "the engine is not available (the server is stopping or its worker "
                                          "stopped); retry on another replica"))
        try:
            return parse(parse_json(await _read_body(request)))
        except BodyTooLarge as exc:
            raise _Reply(self._error(413, str(exc))) from None
        except BadRequest as exc:
            raise _Reply(self._error(400, str(exc))) from None

    def _check_capacity(self, embedding: bool) -> None:
        """At most --max-queue requests wait, whatever the endpoint: generation waits beyond the running batch
        (max_running sequences), embeddings beyond the one being computed. An embedding that could start at
        once is still refused while the queue is full, because it takes its turn on the engine thread that
        the waiting requests need. Counted here, not from the engine thread's view (which lags by up to one
        step), so the limit holds exactly however fast requests arrive."""
        waiting = max(0, len(self.live) - self.engine.scheduler.max_running) + max(0, self.embedding_calls - 1)
        if embedding:
            admit = waiting < self.max_queue or (waiting == 0 and self.embedding_calls == 0)
        else:
            admit = len(self.live) < self.engine.scheduler.max_running or waiting < self.max_queue
        if not admit:
            raise _Reply(self._error(429, f"the queue is full ({self.max_queue} requests waiting); retry later",
                                     {"Retry-After": str(self.retry_after_s)}))

    def _start(self, prompt: list[int], params: SamplingParams, length_field: str = "max_tokens") -> Handle:
        try:
            self.engine.check(prompt, params, length_field)  # reads only constants of the engine: safe from this thread
        except RumusError as exc:
            raise _Reply(self._error(400, str(exc))) from None
        self._check_capacity(embedding=False)
        h = Handle(prompt, params, asyncio.get_running_loop(), on_done=self.live.discard)
        self.live.add(h)
        self.worker.submit(h)
        return h

    def _end(self, h: Handle, finished: bool) -> None:
        """The response is over. The engine also ends a handle it finishes (on_done), so a stream whose
        generator never started (its client left at once) still leaves the count."""
        self.live.discard(h)
        if not finished:
            self.worker.cancel(h)

    async def _collect(self, request: Request, h: Handle) -> tuple[list[int], str]:
        """Wait for a whole (non-streamed) output; cancel it if the client disconnects meanwhile."""
        tokens: list[int] = []
        finished = False
        try:
            while True:
                try:
                    kind, value = await asyncio.wait_for(h.out.get(), timeout=0.25)
                except TimeoutError:
                    if await request.is_disconnected():
                        raise _Reply(Response(status_code=499)) from None
                    continue
                if kind == "token":
                    tokens.append(value)
                elif kind == "done":
                    finished = True
                    return tokens, str(value)
                else:
                    finished = True
                    raise _Reply(self._error(500, f"the engine failed: {value}"))
        finally:
            self._end(h, finished)

    # ---- endpoints --------------------------------------------------------------------------------------
    async def generate(self, request: Request) -> Response:
        try:
            t0 = time.perf_counter()
            prompt, params = await self._admit(request, generate_request)
            tokens, _ = await self._collect(request, self._start(prompt, params, "max_new_tokens"))
        except _Reply as r:
            return r.response
        self._count(200)
        return JSONResponse({"generated_ids": prompt + tokens, "latency_ms": (time.perf_counter() - t0) * 1e3})

    async def completions(self, request: Request) -> Response:
        try:
            prompt, params, stream = await self._admit(request, completion_request)
            h = self._start(prompt, params)
            cid, created = f"cmpl-{uuid.uuid4().hex[:24]}", int(time.time())
            if stream:
                self._count(200)
                return StreamingResponse(self._sse(h, cid, created), media_type="text/event-stream",
                                         headers={"Cache-Control": "no-cache"})
            tokens, reason = await self._collect(request, h)
        except _Reply as r:
            return r.response
        self._count(200)
        dec = StreamDecoder()
        text = "".join(dec.feed(t) for t in tokens) + dec.flush()
        return JSONResponse({
            "id": cid, "object": "text_completion", "created": created, "model": self.model_name,
            "choices": [{"index": 0, "text": text, "finish_reason": reason, "logprobs": None}],
            "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(tokens),
                      "total_tokens": len(prompt) + len(tokens)}})

    async def _sse(self, h: Handle, cid: str, created: int) -> AsyncIterator[str]:
        """Server-sent events: one chunk per token (text may be empty while a UTF-8 character is incomplete),
        a last chunk with finish_reason, then [DONE]. If the client leaves, Starlette cancels this generator
        and the finally clause frees the sequence."""
        dec, finished = StreamDecoder(), False

        def chunk(text: str, reason: str | None) -> str:
            return "data: " + json.dumps({"id": cid, "object": "text_completion", "created": created,
                                          "model": self.model_name,
                                          "choices": [{"index": 0, "text": text, "finish_reason": reason,
                                                       "logprobs": None}]}) + "\n\n"
        try:
            while True:
                kind, value = await h.out.get()
                if kind == "token":
                    yield chunk(dec.feed(value), None)
                elif kind == "done":
                    finished = True
                    yield chunk(dec.flush(), str(value))
                    yield "data: [DONE]\n\n"
                    return
                else:
                    finished = True
                    yield "data: " + json.dumps({"error": f"the engine failed: {value}"}) + "\n\n"
                    return
        finally:
            self._end(h, finished)

    async def embeddings(self, request: Request) -> Response:
        try:
            texts = await self._admit(request, embedding_request)
        except _Reply as r:
            return r.response
        enc = self.encoder
        limit = enc.config.max_position_embeddings if enc is not None else self.engine.model.config.n_positions
        ids = [encode(t) for t in texts]
        for i, t in enumerate(ids):
            if len(t) > limit:
                return self._error(400, f"input {i} is {len(t)} tokens; the limit is {limit} tokens (the model's "
                                        f"context length)")
        try:
            self._check_capacity(embedding=True)
        except _Reply as r:
            return r.response
        self.embedding_calls += 1
        try:
            if enc is not None:
                vectors = await self.worker.call(lambda: enc.embed(ids).astype(float).tolist(),
                                                 asyncio.get_running_loop())
            else:
                vectors = await self.worker.call(lambda: [self._embed(t) for t in ids], asyncio.get_running_loop())
        except RumusError as exc:
            return self._error(500, f"the embedder failed: {type(exc).__name__}: {exc}")
        finally:
            self.embedding_calls -= 1
        self._count(200)
        return JSONResponse({"object": "list", "model": self.model_name,
                             "data": [{"object": "embedding", "index": i, "embedding": v}
                                      for i, v in enumerate(vectors)],
                             "usage": {"prompt_tokens": sum(map(len, ids)), "total_tokens": sum(map(len, ids))}})

    def _embed(self, ids: list[int]) -> list[float]:
        """Mean of the model's final hidden states (after ln_f) over the text's tokens, L2-normalised."""
        from ..nn._functional_attention import causal_bias
        m = self.engine.model
        with rm.no_grad():
            h = m.hidden(rm.tensor(np.array([ids]), device=self.engine.device), np.arange(len(ids)),
                         causal_bias(len(ids), len(ids), 0, self.engine.dtype, self.engine.device), None)
        v = h.numpy()[0].astype(np.float64).mean(axis=0)
        return [float(x) for x in v / max(float(np.linalg.norm(v)), 1e-12)]

    async def health(self, request: Request) -> Response:
        ok = self.worker.alive and not self.draining
        body = {"status": "ok" if ok else "unavailable", "model": self.model_name, "running": self.worker.running,
                "queued": self.queue_depth, "embedder": "bert-encoder" if self.encoder is not None else "lm-mean-pool"}
        if self.worker.error:
            body["last_engine_error"] = self.worker.error
        return JSONResponse(body, status_code=200 if ok else 503)

    async def openapi(self, request: Request) -> Response:
        """The OpenAPI 3.1 document of these endpoints (rumus/serve/openapi.py)."""
        from .openapi import openapi_schema
        return JSONResponse(openapi_schema(rm.__version__))

    async def metrics(self, request: Request) -> Response:
        alloc = self.engine.allocator
        parts = [
            gauge("rumus_queue_depth", "Requests accepted and not yet running", self.queue_depth),
            gauge("rumus_running_sequences", "Sequences in the running batch", self.worker.running),
            gauge("rumus_tokens_per_second", "Tokens generated per second over the last 10 s", self.worker.rate.rate()),
            gauge("rumus_generated_tokens_total", "Tokens generated since start", self.worker.tokens_total, "counter"),
            gauge("rumus_kv_cache_free_blocks", f"Free KV cache blocks of {alloc.num_blocks}", alloc.free),
            "# HELP rumus_requests_total Responses by HTTP status\n# TYPE rumus_requests_total counter\n" + "\n".join(
                f'rumus_requests_total{{status="{k}"}} {v}' for k, v in sorted(self.requests.items())),
            self.worker.ttft.render(), self.worker.itl.render()]
        return PlainTextResponse("\n".join(parts) + "\n", media_type="text/plain; version=0.0.4")


async def _read_body(request: Request) -> bytes:
    """The body, refused from its Content-Length header before a byte is read when that is over the limit,
    and cut off as soon as a chunked (or lying) body passes the limit: never buffered whole first."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise BadRequest(f"Content-Length must be a non-negative integer, got {declared[:40]!r}")
        digits = declared.strip().lstrip("0") or "0"
        if len(digits) > 15 or int(digits) > MAX_BODY_BYTES:  # 15 digits: int() never meets a bomb
            raise too_large(digits if len(digits) <= 40 else f"{len(digits)}-digit")
    parts: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise too_large(f"over {MAX_BODY_BYTES}")
        parts.append(chunk)
    return b"".join(parts)


class _Reply(Exception):
    """An early response (an error) travelling up from the helpers to the endpoint."""

    def __init__(self, response: Response) -> None:
        super().__init__()
        self.response = response
