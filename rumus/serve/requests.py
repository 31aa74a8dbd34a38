"""Parsing request bodies: every way a body can be wrong becomes BadRequest with a message that names the
field and what it should be (the server answers 400 with it)."""

from __future__ import annotations

from typing import Any

from rumus_contracts import RumusError

from .sampling import SamplingParams
from .tokenizer import encode

MAX_BODY_BYTES = 1 << 20
MAX_STOP_SEQUENCES = 4


class BadRequest(RumusError):
    pass


def parse_json(body: bytes) -> dict[str, Any]:
    import json
    if len(body) > MAX_BODY_BYTES:
        raise BadRequest(f"request body of {len(body)} bytes exceeds the limit of {MAX_BODY_BYTES} bytes")
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"malformed JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise BadRequest("the request body must be a JSON object")
    return obj


def _int(obj: dict[str, Any], key: str, default: int | None, lo: int, hi: int | None = None) -> int | None:
    v = obj.get(key, default)
    if v is None and default is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v < lo or (hi is not None and v > hi):
        bound = f"in [{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise BadRequest(f"{key!r} must be an integer {bound}, got {v!r}")
    return v


def _num(obj: dict[str, Any], key: str, default: float) -> float:
    v = obj.get(key, default)
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise BadRequest(f"{key!r} must be a number, got {v!r}")
    return float(v)


def generate_request(obj: dict[str, Any]) -> tuple[list[int], SamplingParams]:
    """SPEC F: {"token_ids": [int, ...] (non-empty), "max_new_tokens": int (default 50)}, greedy; "max_tokens"
    (OpenAI's name) is the same limit."""
    ids = obj.get("token_ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
        raise BadRequest("'token_ids' must be a non-empty list of integers")
    n = _int(obj, "max_new_tokens", 50, 1)
    if "max_tokens" in obj:  # OpenAI's name for the same limit: taken, never silently ignored
        alias = _int(obj, "max_tokens", None, 1)
        if "max_new_tokens" in obj and alias != n:
            raise BadRequest(f"'max_tokens' ({alias}) and 'max_new_tokens' ({n}) disagree; give one of them")
        n = alias
    assert n is not None
    return ids, SamplingParams(max_tokens=n)


def completion_request(obj: dict[str, Any]) -> tuple[list[int], SamplingParams, bool]:
    """OpenAI's /v1/completions subset: prompt (str), max_tokens, temperature, top_p, top_k, seed, stop, stream."""
    prompt = obj.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        raise BadRequest("'prompt' must be a non-empty string")
    stop = obj.get("stop")
    stops = [] if stop is None else [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops) \
            or len(stops) > MAX_STOP_SEQUENCES:
        raise BadRequest(f"'stop' must be a non-empty string or a list of at most {MAX_STOP_SEQUENCES} of them")
    stream = obj.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest(f"'stream' must be true or false, got {stream!r}")
    try:
        params = SamplingParams(max_tokens=_int(obj, "max_tokens", 16, 1) or 16,
                                temperature=_num(obj, "temperature", 1.0), top_p=_num(obj, "top_p", 1.0),
                                top_k=_int(obj, "top_k", 0, 0) or 0, seed=_int(obj, "seed", None, 0),
                                stop=tuple(tuple(encode(s)) for s in stops))
    except BadRequest:
        raise
    except RumusError as exc:
        raise BadRequest(str(exc)) from None
    return encode(prompt), params, stream


def embedding_request(obj: dict[str, Any]) -> list[str]:
    inp = obj.get("input")
    texts = [inp] if isinstance(inp, str) else inp
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) and t for t in texts):
        raise BadRequest("'input' must be a non-empty string or a non-empty list of non-empty strings")
    if len(texts) > 64:
        raise BadRequest(f"'input' holds {len(texts)} texts; the limit is 64 per request")
    return texts
