"""Parsing request bodies: every way a body can be wrong becomes BadRequest with a message that names the
field and what it should be (the server answers 400 with it)."""

from __future__ import annotations

from typing import Any

from rumus_contracts import RumusError

from .sampling import SamplingParams
from .tokenizer import encode

MAX_BODY_BYTES = 1 << 20
MAX_STOP_SEQUENCES = 4
MAX_STOP_BYTES = 256  # one stop sequence, in tokens (bytes)


class BadRequest(RumusError):
    pass


class BodyTooLarge(BadRequest):
    """The body is over MAX_BODY_BYTES (the server answers 413, from the Content-Length header when it can)."""


def too_large(size: int | str) -> BodyTooLarge:
    return BodyTooLarge(f"request body of {size} bytes exceeds the limit of {MAX_BODY_BYTES} bytes")


def _no_constant(name: str) -> Any:
    raise BadRequest(f"malformed JSON: {name} is not a JSON number")


def _check_strings(obj: Any, where: str = "the body") -> None:
    """Every string (keys too) must be encodable as UTF-8: JSON lets "\\ud800" through, tokenizing cannot."""
    stack: list[tuple[Any, str]] = [(obj, where)]
    while stack:
        v, path = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise BadRequest(f"{path} holds a lone UTF-16 surrogate (e.g. \\ud800); send valid Unicode text") \
                    from None
        elif isinstance(v, dict):
            for k, item in v.items():
                stack.append((k, f"a key of {path}"))
                stack.append((item, f"{k!r}" if path == "the body" else f"{path}[{k!r}]"))
        elif isinstance(v, list):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(v))


def parse_json(body: bytes) -> dict[str, Any]:
    import json
    if len(body) > MAX_BODY_BYTES:
        raise too_large(len(body))
    try:
        obj = json.loads(body, parse_constant=_no_constant)
    except RecursionError:  # the C parser counts its depth against the recursion limit and gives up cleanly
        raise BadRequest("malformed JSON: nested too deeply (no request field nests more than 2 levels)") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"malformed JSON: {str(exc)[:200]}") from None
    if not isinstance(obj, dict):
        raise BadRequest("the request body must be a JSON object")
    _check_strings(obj)
    return obj


def _int(obj: dict[str, Any], key: str, default: int | None, lo: int, hi: int | None = None) -> int | None:
    v = obj.get(key, default)
    if v is None and default is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v < lo or (hi is not None and v > hi):
        bound = f"in [{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise BadRequest(f"{key!r} must be an integer {bound}, got {_show(v)}")
    return v


def _num(obj: dict[str, Any], key: str, default: float, lo: float, hi: float, open_lo: bool = False) -> float:
    v = obj.get(key, default)
    bound = f"in {'(' if open_lo else '['}{lo:g}, {hi:g}]"
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise BadRequest(f"{key!r} must be a number {bound}, got {_show(v)}")
    # compare before float(): an integer of 400 digits is out of range, not an OverflowError
    if not (lo < v <= hi if open_lo else lo <= v <= hi):  # NaN fails both: json's 1e999 is inf, also out
        raise BadRequest(f"{key!r} must be a number {bound}, got {_show(v)}")
    return float(v)


def _show(v: object) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


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


def _stops(obj: dict[str, Any]) -> tuple[tuple[int, ...], ...]:
    stop = obj.get("stop")
    stops = [] if stop is None else [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops) \
            or len(stops) > MAX_STOP_SEQUENCES:
        raise BadRequest(f"'stop' must be a non-empty string or a list of at most {MAX_STOP_SEQUENCES} of them")
    encoded = tuple(tuple(encode(s)) for s in stops)
    if any(len(s) > MAX_STOP_BYTES for s in encoded):
        raise BadRequest(f"'stop' sequences must be at most {MAX_STOP_BYTES} bytes of UTF-8 each")
    return encoded


def completion_request(obj: dict[str, Any]) -> tuple[list[int], SamplingParams, bool]:
    """OpenAI's /v1/completions subset: prompt (str), max_tokens, temperature, top_p, top_k, seed, stop, stream."""
    prompt = obj.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        raise BadRequest("'prompt' must be a non-empty string")
    stops = _stops(obj)
    stream = obj.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest(f"'stream' must be true or false, got {stream!r}")
    try:
        params = SamplingParams(max_tokens=_int(obj, "max_tokens", 16, 1) or 16,
                                temperature=_num(obj, "temperature", 1.0, 0.0, 100.0),
                                top_p=_num(obj, "top_p", 1.0, 0.0, 1.0, open_lo=True),
                                top_k=_int(obj, "top_k", 0, 0) or 0, seed=_int(obj, "seed", None, 0, 2**64 - 1),
                                stop=stops)
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
