"""Choosing the next token from one row of logits: greedy, temperature, top-k, top-p (nucleus), each
request with its own seeded generator so a seeded request gives the same text whatever else is batched
with it. Runs on the host in float64 (the logits row is read back anyway to stream the token)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from rumus_contracts import RumusError


@dataclass(frozen=True)
class SamplingParams:
    max_tokens: int = 16
    temperature: float = 0.0  # 0 -> greedy
    top_k: int = 0  # 0 -> no top-k cut
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[tuple[int, ...], ...] = field(default=())  # token sequences that end the output (excluded)

    def __post_init__(self) -> None:
        if not _is_int(self.max_tokens) or self.max_tokens < 1:
            raise RumusError(f"max_tokens must be an int >= 1, got {_show(self.max_tokens)}")
        if not _is_real(self.temperature) or not 0.0 <= self.temperature <= 100.0:
            raise RumusError(f"temperature must be a number in [0, 100], got {_show(self.temperature)}")
        if not _is_int(self.top_k) or self.top_k < 0:
            raise RumusError(f"top_k must be an int >= 0, got {_show(self.top_k)}")
        if not _is_real(self.top_p) or not 0.0 < self.top_p <= 1.0:
            raise RumusError(f"top_p must be a number in (0, 1], got {_show(self.top_p)}")
        if self.seed is not None and (not _is_int(self.seed) or not 0 <= self.seed < 2**64):
            raise RumusError(f"seed must be an int in [0, 2**64), got {_show(self.seed)}")
        if any(len(s) == 0 for s in self.stop):
            raise RumusError("stop sequences must not be empty")


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_real(v: object) -> bool:
    # NaN fails every range comparison, but say so explicitly: a NaN here must never reach the sampler
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    return isinstance(v, int) or math.isfinite(v)


def _show(v: object) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


class SamplingFailed(RumusError):
    """One sequence's logits could not be sampled (non-finite values): that request fails, no other."""


def make_rng(params: SamplingParams) -> np.random.Generator:
    return np.random.default_rng(params.seed)


def sample(logits: np.ndarray, params: SamplingParams, rng: np.random.Generator) -> int:
    """One token id from logits [vocab]."""
    if np.isnan(logits).any() or np.isposinf(logits).any() or not np.isfinite(logits).any():
        raise SamplingFailed("the model produced NaN or infinite logits for this request")
    if params.temperature == 0.0:
        return int(np.argmax(logits))
    # shift before scaling: the top logit becomes exactly 0 and every other one <= 0, so a tiny temperature
    # gives -inf (probability 0), never inf - inf = NaN
    x = logits.astype(np.float64)
    with np.errstate(over="ignore"):  # a tiny temperature overflows the gaps to -inf, as it should
        z = (x - np.max(x)) / params.temperature
    if 0 < params.top_k < z.size:
        kth = np.partition(z, -params.top_k)[-params.top_k]
        z = np.where(z >= kth, z, -np.inf)
    p = np.exp(z)
    p /= p.sum()
    if params.top_p < 1.0:
        order = np.argsort(-p, kind="stable")
        cum = np.cumsum(p[order])
        keep = order[: int(np.searchsorted(cum, params.top_p) + 1)]  # smallest prefix with mass >= top_p
        q = np.zeros_like(p)
        q[keep] = p[keep]
        p = q / q.sum()
    return int(rng.choice(p.size, p=p))


def stop_match(generated: list[int], stops: tuple[tuple[int, ...], ...]) -> int:
    """Length of the stop sequence the generated tokens end with, 0 if none."""
    for s in stops:
        if len(generated) >= len(s) and tuple(generated[-len(s):]) == s:
            return len(s)
    return 0


def partial_stop(generated: list[int], stops: tuple[tuple[int, ...], ...]) -> int:
    """Length of the longest tail of the output that a stop sequence starts with (those tokens are held back)."""
    best = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(generated)), best, -1):
            if tuple(generated[-k:]) == s[:k]:
                best = k
                break
    return best
