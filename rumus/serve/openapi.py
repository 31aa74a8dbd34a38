"""The HTTP API of `rumus serve` as an OpenAPI 3.1 document, served at GET /openapi.json.

Written by hand to match rumus/serve/requests.py (what a request may hold) and rumus/serve/api.py (what each
endpoint answers); tests/serve/test_serve_openapi.py sends every documented example to a real server and
checks each answer against its schema, so the two cannot drift apart unnoticed.
"""

from __future__ import annotations

from typing import Any

__all__ = ["openapi_schema"]

_ERROR = {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict[str, Any]:
    text = {400: "the body is not valid JSON or a field is wrong; `error` names the field",
            413: "the body is over 1 MiB", 429: "the queue is full; retry after the Retry-After header's seconds",
            503: "the engine is not available (the server is stopping or its worker stopped)"}
    return {str(c): _json({"$ref": "#/components/schemas/Error"}, text[c]) for c in codes}


_GENERATE_REQUEST = {
    "type": "object", "required": ["token_ids"],
    "properties": {
        "token_ids": {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1,
                      "description": "the prompt as token ids, each below the model's vocab size (the demo "
                                     "models are byte-level: a UTF-8 byte is a token)"},
        "max_new_tokens": {"type": "integer", "minimum": 1, "default": 50,
                           "description": "tokens to generate after the prompt (greedy decoding)"},
        "max_tokens": {"type": "integer", "minimum": 1,
                       "description": "OpenAI's name for max_new_tokens; give one of the two (both must agree)"},
    },
    "example": {"token_ids": [72, 105, 32], "max_new_tokens": 8},
}

_GENERATE_RESPONSE = {
    "type": "object", "required": ["generated_ids", "latency_ms"],
    "properties": {"generated_ids": {"type": "array", "items": {"type": "integer"},
                                     "description": "the prompt's ids followed by the generated ones"},
                   "latency_ms": {"type": "number"}},
}

_COMPLETION_REQUEST = {
    "type": "object", "required": ["prompt"],
    "properties": {
        "prompt": {"type": "string", "minLength": 1},
        "max_tokens": {"type": "integer", "minimum": 1, "default": 16},
        "temperature": {"type": "number", "minimum": 0, "default": 1.0, "description": "0: greedy"},
        "top_p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1, "default": 1.0},
        "top_k": {"type": "integer", "minimum": 0, "default": 0, "description": "0: no limit"},
        "seed": {"type": "integer", "minimum": 0, "description": "the same seed gives the same sample"},
        "stop": {"oneOf": [{"type": "string", "minLength": 1},
                           {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 4}],
                 "description": "generation ends before any of these strings"},
        "stream": {"type": "boolean", "default": False,
                   "description": "server-sent events: one `data:` chunk per token, then `data: [DONE]`"},
    },
    "example": {"prompt": "Beautiful is ", "max_tokens": 8, "temperature": 0},
}

_CHOICE = {"type": "object", "required": ["index", "text", "finish_reason"],
           "properties": {"index": {"type": "integer"}, "text": {"type": "string"},
                          "finish_reason": {"type": ["string", "null"], "description": "length or stop"},
                          "logprobs": {"type": "null"}}}

_COMPLETION_RESPONSE = {
    "type": "object", "required": ["id", "object", "created", "model", "choices", "usage"],
    "properties": {
        "id": {"type": "string"}, "object": {"type": "string", "const": "text_completion"},
        "created": {"type": "integer"}, "model": {"type": "string"},
        "choices": {"type": "array", "items": _CHOICE},
        "usage": {"type": "object", "required": ["prompt_tokens", "completion_tokens", "total_tokens"],
                  "properties": {k: {"type": "integer"} for k in ("prompt_tokens", "completion_tokens",
                                                                  "total_tokens")}},
    },
}

_EMBEDDING_REQUEST = {
    "type": "object", "required": ["input"],
    "properties": {"input": {"oneOf": [{"type": "string", "minLength": 1},
                                       {"type": "array", "items": {"type": "string", "minLength": 1},
                                        "minItems": 1, "maxItems": 64}]}},
    "example": {"input": ["a cat", "a dog"]},
}

_EMBEDDING_RESPONSE = {
    "type": "object", "required": ["object", "model", "data", "usage"],
    "properties": {
        "object": {"type": "string", "const": "list"}, "model": {"type": "string"},
        "data": {"type": "array", "items": {
            "type": "object", "required": ["object", "index", "embedding"],
            "properties": {"object": {"type": "string"}, "index": {"type": "integer"},
                           "embedding": {"type": "array", "items": {"type": "number"},
                                         "description": "unit length (L2-normalised)"}}}},
        "usage": {"type": "object", "required": ["prompt_tokens", "total_tokens"],
                  "properties": {"prompt_tokens": {"type": "integer"}, "total_tokens": {"type": "integer"}}},
    },
}

_HEALTH_RESPONSE = {
    "type": "object", "required": ["status", "model", "running", "queued", "embedder"],
    "properties": {"status": {"type": "string", "enum": ["ok", "unavailable"]}, "model": {"type": "string"},
                   "running": {"type": "integer"}, "queued": {"type": "integer"},
                   "embedder": {"type": "string", "enum": ["bert-encoder", "lm-mean-pool"]},
                   "last_engine_error": {"type": "string"}},
}


def _post(summary: str, request: dict[str, Any], response: dict[str, Any], *errors: int) -> dict[str, Any]:
    return {"post": {"summary": summary,
                     "requestBody": {"required": True, "content": {"application/json": {"schema": request}}},
                     "responses": {"200": _json(response, "success"), **_errors(*errors)}}}


def openapi_schema(version: str = "0.1.0") -> dict[str, Any]:
    """The OpenAPI 3.1 document of the server's endpoints (a new dict each call)."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "rumus serve", "version": version,
                 "description": "Text generation, OpenAI-style completions and embeddings from a GPT-2-format "
                                "checkpoint, with continuous batching over a paged KV cache."},
        "paths": {
            "/v1/generate": _post("Greedy continuation of a prompt given as token ids", _GENERATE_REQUEST,
                                  _GENERATE_RESPONSE, 400, 413, 429, 503),
            "/v1/completions": _post("OpenAI's /v1/completions subset: sampled text, optionally streamed",
                                     _COMPLETION_REQUEST, _COMPLETION_RESPONSE, 400, 413, 429, 503),
            "/v1/embeddings": _post("One unit vector per input text", _EMBEDDING_REQUEST, _EMBEDDING_RESPONSE,
                                    400, 413, 429, 503),
            "/health": {"get": {"summary": "Whether the engine is serving",
                                "responses": {"200": _json(_HEALTH_RESPONSE, "serving"),
                                              "503": _json(_HEALTH_RESPONSE, "stopping or stopped")}}},
            "/metrics": {"get": {"summary": "Prometheus metrics (queue depth, running sequences, tokens/s, "
                                            "KV cache blocks, responses by status, latency histograms)",
                                 "responses": {"200": {"description": "Prometheus text format 0.0.4",
                                                       "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
            "/openapi.json": {"get": {"summary": "This document",
                                      "responses": {"200": _json({"type": "object"}, "the OpenAPI document")}}},
        },
        "components": {"schemas": {"Error": _ERROR}},
    }
