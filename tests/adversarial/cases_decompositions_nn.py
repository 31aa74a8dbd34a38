"""The nn decompositions (rumus/decompositions/nn_*.py) on random geometries the schema samples do not
hold: convolutions with every mix of stride, padding, dilation and groups, pooling windows in ceil mode
over inputs full of ties, NaN and infinities, attention with random masks and whole masked rows.
Each case runs the decomposition and compares it with torch (float64) and the cpu kernel; a case is
wrong if either differs beyond float64 rounding (NaN must match NaN, infinities exactly)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
import torch.nn.functional as TF

import rumus as rm
import rumus.decompositions  # noqa: F401  (registers every family)
from rumus._dispatch import DECOMPOSITIONS

from adversarial_cases import Case
from rumus_contracts.ops.attention import flash_attention_backward_reference, flash_attention_reference


def _f64(t: rm.Tensor) -> np.ndarray:
    return np.asarray(t.detach().to(rm.float64).numpy())


def _t(a: np.ndarray) -> rm.Tensor:
    return rm.tensor(a, dtype=rm.float64)


def _differs(got: np.ndarray, want: np.ndarray, tol: float = 1e-10) -> str | None:
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    same = (np.isnan(got) & np.isnan(want)) | (got == want)
    with np.errstate(invalid="ignore"):
        bad = ~same & ~(np.abs(got - want) <= tol * (1 + np.abs(want)))
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        return f"{int(bad.sum())} elements differ, at {i}: {got[i]!r} vs {want[i]!r}"
    return None


def _check(name: str, got: rm.Tensor, want: dict[str, np.ndarray]) -> Case:
    g = _f64(got)
    for who, w in want.items():
        msg = _differs(g, w)
        if msg:
            return Case(name, f"wrong vs {who}: {msg}")
    return Case(name, None)


def _conv_geometries() -> Iterator[Case]:
    rng = np.random.default_rng(2032)
    for i in range(40):
        groups = int(rng.choice([1, 2, 3]))
        cg, og = int(rng.integers(1, 3)), int(rng.integers(1, 3))
        kh, kw = (int(v) for v in rng.integers(1, 4, 2))
        s, p, d = (tuple(int(v) for v in rng.integers(lo, hi, 2)) for lo, hi in ((1, 4), (0, 3), (1, 3)))
        h = int(rng.integers(max(1, d[0] * (kh - 1) + 1 - 2 * p[0]), 9))
        w = int(rng.integers(max(1, d[1] * (kw - 1) + 1 - 2 * p[1]), 9))
        x0 = rng.uniform(-1, 1, (int(rng.integers(1, 3)), cg * groups, h, w))
        w0 = rng.uniform(-1, 1, (og * groups, cg, kh, kw))
        attrs: dict[str, Any] = {"stride": s, "padding": p, "dilation": d, "groups": groups}
        name = f"conv#{i} x{x0.shape} w{w0.shape} {attrs}"
        tx, tw = torch.tensor(x0, requires_grad=True), torch.tensor(w0, requires_grad=True)
        ty = TF.conv2d(tx, tw, None, s, p, d, groups)
        g0 = rng.uniform(-1, 1, tuple(ty.shape))
        ty.backward(torch.tensor(g0))
        x, wt, g = _t(x0), _t(w0), _t(g0)
        yield _check(name + " forward", DECOMPOSITIONS["conv2d"](x, wt, **attrs),
                     {"torch": ty.detach().numpy(), "cpu kernel": _f64(rm.ops.conv2d(x, wt, **attrs))})
        gx = DECOMPOSITIONS["conv2d_backward_input"](g, wt, input_size=(h, w), **attrs)
        yield _check(name + " d/dx", gx, {"torch": tx.grad.numpy()})  # type: ignore[union-attr]
        gw = DECOMPOSITIONS["conv2d_backward_weight"](g, x, kernel_size=(kh, kw), **attrs)
        yield _check(name + " d/dw", gw, {"torch": tw.grad.numpy()})  # type: ignore[union-attr]


def _hostile_plane(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Small integers (ties everywhere) with NaN, +inf and -inf sprinkled in."""
    x = rng.integers(-2, 3, shape).astype(np.float64)
    for value, share in ((np.nan, 0.05), (np.inf, 0.04), (-np.inf, 0.08)):
        x[rng.random(shape) < share] = value
    return x


def _pool_geometries() -> Iterator[Case]:
    rng = np.random.default_rng(2033)
    for i in range(40):
        kh, kw = (int(v) for v in rng.integers(1, 4, 2))
        s = tuple(int(v) for v in rng.integers(1, 4, 2))
        p = (int(rng.integers(0, kh // 2 + 1)), int(rng.integers(0, kw // 2 + 1)))
        d = tuple(int(v) for v in rng.integers(1, 3, 2))
        ceil = bool(rng.integers(0, 2))
        shape = (int(rng.integers(1, 3)), int(rng.integers(1, 3)), int(rng.integers(kh * d[0], 10)),
                 int(rng.integers(kw * d[1], 10)))
        x0 = _hostile_plane(rng, shape)
        name = f"pool#{i} x{shape} k{(kh, kw)} s{s} p{p} d{d} ceil={ceil}"
        mx: dict[str, Any] = {"kernel_size": (kh, kw), "stride": s, "padding": p, "dilation": d, "ceil_mode": ceil}
        tx = torch.tensor(x0, requires_grad=True)
        ty = TF.max_pool2d(tx, (kh, kw), s, p, d, ceil)
        g0 = rng.uniform(-1, 1, tuple(ty.shape))
        ty.backward(torch.tensor(g0))
        x, g = _t(x0), _t(g0)
        yield _check(name + " max", DECOMPOSITIONS["max_pool2d"](x, **mx),
                     {"torch": ty.detach().numpy(), "cpu kernel": _f64(rm.ops.max_pool2d(x, **mx))})
        yield _check(name + " max backward", DECOMPOSITIONS["max_pool2d_backward"](g, x, **mx),
                     {"torch": tx.grad.numpy(), "cpu kernel": _f64(rm.ops.max_pool2d_backward(g, x, **mx))})  # type: ignore[union-attr]
        include, div = bool(rng.integers(0, 2)), (None if rng.random() < 0.7 else int(rng.integers(1, 5)))
        av: dict[str, Any] = {"kernel_size": (kh, kw), "stride": s, "padding": p, "ceil_mode": ceil,
                              "count_include_pad": include, "divisor_override": div}
        xa = rng.uniform(-2, 2, shape)
        ta = torch.tensor(xa, requires_grad=True)
        tya = TF.avg_pool2d(ta, (kh, kw), s, p, ceil, include, div)
        ga = rng.uniform(-1, 1, tuple(tya.shape))
        tya.backward(torch.tensor(ga))
        label = f"{name} avg include_pad={include} divisor={div}"
        yield _check(label, DECOMPOSITIONS["avg_pool2d"](_t(xa), **av),
                     {"torch": tya.detach().numpy(), "cpu kernel": _f64(rm.ops.avg_pool2d(_t(xa), **av))})
        yield _check(label + " backward", DECOMPOSITIONS["avg_pool2d_backward"](_t(ga), input_size=shape[2:], **av),
                     {"torch": ta.grad.numpy()})  # type: ignore[union-attr]


def _attention_masks() -> Iterator[Case]:
    rng = np.random.default_rng(2034)
    for i in range(25):
        b, h, length, keys, dim = (int(v) for v in rng.integers(1, 6, 5))
        q, k, v = (rng.uniform(-2, 2, (b, h, n, dim)) for n in (length, keys, keys))
        bias = np.where(rng.random((b, 1, length, keys)) < 0.3, -np.inf, rng.uniform(-1, 1, (b, 1, length, keys)))
        if rng.random() < 0.5:
            bias[..., int(rng.integers(0, length)), :] = -np.inf  # a whole row masked
        key_bias = np.where(rng.random((b, keys)) < 0.2, -np.inf, 0.0)
        scale = None if rng.random() < 0.5 else float(rng.uniform(0.1, 2))
        attrs = {"is_causal": bool(rng.integers(0, 2)), "scale": scale,
                 "dropout_p": 0.0 if rng.random() < 0.5 else 0.4, "seed": int(rng.integers(0, 2 ** 32)),
                 "offset": int(rng.integers(0, 2 ** 32))}
        name = f"attention#{i} {(b, h, length, keys, dim)} {attrs}"
        ins = [_t(a) for a in (q, k, v, bias, key_bias)]
        out, lse = DECOMPOSITIONS["flash_attention"](*ins, **attrs)
        kout, klse = rm.ops.flash_attention.multi(*ins, **attrs)
        rout, rlse = flash_attention_reference(q, k, v, bias, key_bias, **attrs)
        yield _check(name + " out", out, {"reference": rout, "cpu kernel": _f64(kout)})
        yield _check(name + " lse", lse, {"reference": rlse, "cpu kernel": _f64(klse)})
        dout = rng.uniform(-1, 1, out.shape)
        bins = [*ins[:3], out, _t(dout), lse, *ins[3:]]
        want = flash_attention_backward_reference(q, k, v, rout, dout, rlse, bias, key_bias, **attrs)
        kernel = rm.ops.flash_attention_backward.multi(*bins, **attrs)
        for j, (got, w, kk) in enumerate(zip(DECOMPOSITIONS["flash_attention_backward"](*bins, **attrs), want, kernel)):
            yield _check(f"{name} grad {'qkv'[j]}", got, {"reference": w, "cpu kernel": _f64(kk)})


CLASSES: dict[str, Callable[[], Iterator[Case]]] = {
    "nn decompositions: random convolution geometries vs torch": _conv_geometries,
    "nn decompositions: random pooling windows over ties, NaN and inf vs torch": _pool_geometries,
    "nn decompositions: attention with random and whole-row masks, dropout": _attention_masks,
}
