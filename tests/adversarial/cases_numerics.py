"""Issue 33's classes of silently wrong numbers and the WebGPU pool crash, each against PyTorch (or the
documented rule), on the default backend (RUMUS_BACKEND=wgpu for the WebGPU column).

Scans on a float32-accumulating backend (wgpu, like PyTorch's CUDA) are compared to the float32
sequential scan: what PyTorch on the CPU adds in float64 cannot be asked of float32 arithmetic, but the
order (a sequential sum, IEEE products through zeros and infinities) can.
"""

from __future__ import annotations

import gc
import math
import os
import tempfile
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import rumus as rm
from adversarial_cases import Case
from numerics_fuzz import fuzz

INF, NAN = math.inf, math.nan


def _backend() -> str:
    return rm.tensor([0.0]).device.backend


def _close(got: np.ndarray, want: np.ndarray, rtol: float = 2e-6, zero_sign: bool = True) -> bool:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return False
    same_class = (np.isnan(got) == np.isnan(want)).all() and (np.isposinf(got) == np.isposinf(want)).all() \
        and (np.isneginf(got) == np.isneginf(want)).all()
    fin = np.isfinite(want) & np.isfinite(got)
    near = (np.abs(got[fin] - want[fin]) <= rtol * np.abs(want[fin]) + 1e-44).all()
    zeros = (got == 0) & (want == 0)
    signs = not zero_sign or (np.signbit(got[zeros]) == np.signbit(want[zeros])).all()
    return bool(same_class and near and signs)


def _case(name: str, got: Any, want: Any, **kw: Any) -> Case:
    g, w = np.asarray(got), np.asarray(want)
    return Case(name, None if _close(g, w, **kw) else f"got {g.tolist()}, want {w.tolist()}")


# ---- scans ----------------------------------------------------------------------------------------

def _sequential(name: str, x: np.ndarray, dim: int) -> np.ndarray:
    """The float32 sequential scan along dim (PyTorch's CUDA accumulates float32 scans in float32)."""
    x = np.moveaxis(x.astype(np.float32), dim, 0)
    out = np.empty_like(x)
    acc = np.full(x.shape[1:], 0.0 if name == "cumsum" else 1.0, np.float32)
    with np.errstate(all="ignore"):
        for k in range(x.shape[0]):
            acc = acc + x[k] if name == "cumsum" else acc * x[k]
            out[k] = acc
    return np.moveaxis(out, 0, dim)


def scans() -> Iterator[Case]:
    import torch
    wide = _backend() == "cpu"  # this backend accumulates float32 in float64, as PyTorch's CPU
    rows = {"cumsum": [[1, 1e8, -1e8, 1, 1], [1e-8, 1, -1, 1e-8], [3e38, 3e38, -3e38], [1, NAN, 2], [INF, -INF, 1],
                       [0.1] * 40, [1e4, 1e-4, -1e4, 1e-4]],
            "cumprod": [[0, 1e30, 1e30, 2], [1e30, 1e30, 1e-30, 2], [INF, 0, 2], [-0.0, -1, 5], [1e-30, 1e-30, 1e30],
                        [NAN, 0, 1], [2, 0.5] * 10]}
    for name, cases in rows.items():
        for row in cases:
            x = np.array(row, np.float32)
            got = getattr(rm, name)(rm.tensor(x), 0).numpy()
            want = getattr(torch, name)(torch.tensor(x), 0).numpy() if wide else _sequential(name, x, 0)
            yield _case(f"{name}{row[:5]}", got, want)
    rng = np.random.default_rng(33)
    x = (rng.standard_normal((4, 6, 5)) * 10.0 ** rng.integers(-6, 7, (4, 6, 5))).astype(np.float32)
    for name in rows:
        for dim in (0, 1, 2, -1):
            got = getattr(rm, name)(rm.tensor(x), dim).numpy()
            want = getattr(torch, name)(torch.tensor(x), dim).numpy() if wide else _sequential(name, x, dim)
            yield _case(f"{name} of a [4, 6, 5] tensor along dim {dim}", got, want, rtol=1e-5)
        view = rm.tensor(x).transpose(0, 2)
        want_v = getattr(torch, name)(torch.tensor(x).transpose(0, 2), 1).numpy() if wide else \
            _sequential(name, np.ascontiguousarray(x.transpose(2, 1, 0)), 1)
        yield _case(f"{name} of a transposed view", getattr(rm, name)(view, 1).numpy(), want_v, rtol=1e-5)
    # gradients against PyTorch in float64 (zeros in cumprod's rows: the first, later ones, a whole row)
    g = rng.standard_normal((3, 6)).astype(np.float32)
    xs = (rng.uniform(0.5, 1.5, (3, 6)) * rng.choice([-1, 1], (3, 6))).astype(np.float32)
    xs[0, 2] = 0
    xs[1, 1] = xs[1, 4] = 0
    xs[2] = 0
    for name in rows:
        for dim in (0, 1):
            a = rm.tensor(xs, requires_grad=True)
            (getattr(rm, name)(a, dim) * rm.tensor(g)).sum().backward()
            t = torch.tensor(xs.astype(np.float64), requires_grad=True)
            (getattr(torch, name)(t, dim) * torch.tensor(g.astype(np.float64))).sum().backward()
            assert a.grad is not None and t.grad is not None
            yield _case(f"{name} gradient along dim {dim}, zeros included", a.grad.numpy(), t.grad.numpy(),
                        rtol=1e-5, zero_sign=False)


# ---- std / var --------------------------------------------------------------------------------------

def spreads() -> Iterator[Case]:
    """Against PyTorch in float64 rounded to float32: PyTorch's float32 std accumulates in float64 too, except
    where its float32 mean overflows (std([3e38, 3e38]) is inf there; the answer, and ours, is 0)."""
    import torch
    rows = [[1e20, -1e20], [1e20, 1e20, -1e20], [3e38, -3e38], [3e38, 3e38], [1e-30, -1e-30], [1, 2, 3], [5, 5, 5],
            [1e4 + 1e-3, 1e4, 1e4 - 1e-3], [1e6] * 7, [INF, 1], [NAN, 1], [-1e19, 1e19, 3e19, 0]]
    for row in rows:
        x = rm.tensor(row, dtype="float32")
        t = torch.tensor(row, dtype=torch.float32).double()
        for fn in ("std", "var"):
            yield _case(f"{fn}({row[:4]})", getattr(rm, fn)(x).numpy(), getattr(torch, fn)(t).float().numpy(),
                        rtol=3e-6)
        yield _case(f"std({row[:4]}, unbiased=False)", rm.std(x, unbiased=False).numpy(),
                    torch.std(t, unbiased=False).float().numpy(), rtol=3e-6)
    x = (np.random.default_rng(1).standard_normal((3, 4, 5)) * 1e19).astype(np.float32)
    for dim in (0, 1, (0, 2)):
        yield _case(f"std of [3, 4, 5] x 1e19 over {dim}", rm.std(rm.tensor(x), dim).numpy(),
                    torch.std(torch.tensor(x), dim).numpy(), rtol=1e-5)
    xs = (np.random.default_rng(2).standard_normal((4, 5)) * 3 + 1e3).astype(np.float32)
    a = rm.tensor(xs, requires_grad=True)
    rm.std(a, 1).sum().backward()
    t = torch.tensor(xs.astype(np.float64), requires_grad=True)
    torch.std(t, 1).sum().backward()
    assert a.grad is not None and t.grad is not None
    yield _case("std gradient at an offset of 1e3", a.grad.numpy(), t.grad.numpy(), rtol=1e-3, zero_sign=False)


# ---- tensor hooks -----------------------------------------------------------------------------------

def _hook_programs() -> dict[str, Callable[[Any], list[Any]]]:
    """Programs written once, run with lib = torch and lib = rumus; each returns the gradients it saw."""
    def leaf_replaces(lib: Any) -> list[Any]:
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        x.register_hook(lambda g: g * 3)
        (x * x).sum().backward()
        return [x.grad]

    def nonleaf_replaces(lib: Any) -> list[Any]:
        x = lib.tensor([1.0, -2.0], requires_grad=True)
        y = x * 2
        y.register_hook(lambda g: g + 1)
        (y * y).sum().backward()
        return [x.grad]

    def retain_grad(lib: Any) -> list[Any]:
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x.exp()
        y.retain_grad()
        y.register_hook(lambda g: g * 10)
        (y * 2).sum().backward()
        return [x.grad, y.grad]

    def removed(lib: Any) -> list[Any]:
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        h = x.register_hook(lambda g: g * 100)
        h.remove()
        seen: list[Any] = []
        x.register_hook(lambda g: seen.append(g.clone()))
        (x * 3).sum().backward()
        return [x.grad, seen[0]]

    def order_and_none(lib: Any) -> list[Any]:
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x + 1
        seen: list[Any] = []
        y.register_hook(lambda g: g * 2)
        y.register_hook(lambda g: seen.append(g.clone()))  # returns None: keeps the gradient
        y.register_hook(lambda g: g - 1)
        (y * y * y).sum().backward()
        return [x.grad, seen[0]]

    def used_twice(lib: Any) -> list[Any]:
        x = lib.tensor([0.5, 1.5], requires_grad=True)
        y = x.sin()
        seen: list[Any] = []
        y.register_hook(lambda g: seen.append(g.clone()))
        (y * 2 + y * y).sum().backward()  # the hook sees the total gradient, once
        return [x.grad, seen[0], lib.tensor(float(len(seen)))]

    def autograd_grad(lib: Any) -> list[Any]:
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * x
        y.register_hook(lambda g: g * 5)
        (gx,) = lib.autograd.grad(y.sum(), [x])
        return [gx]

    def accumulates(lib: Any) -> list[Any]:
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 3
        y.retain_grad()
        (y * y).sum().backward(retain_graph=True)
        (y * y).sum().backward()
        return [x.grad, y.grad]

    return {f.__name__: f for f in (leaf_replaces, nonleaf_replaces, retain_grad, removed, order_and_none,
                                    used_twice, autograd_grad, accumulates)}


def hooks() -> Iterator[Case]:
    import torch
    for name, program in _hook_programs().items():
        try:
            got = [g.numpy() for g in program(rm)]
        except Exception as exc:  # noqa: BLE001  (any exception is the finding)
            yield Case(f"hook program {name}", f"raised {type(exc).__name__}: {str(exc)[:80]}")
            continue
        want = [g.detach().numpy() for g in program(torch)]
        yield Case(f"hook program {name}", None if all(_close(g, w) for g, w in zip(got, want)) and
                   len(got) == len(want) else f"got {[g.tolist() for g in got]}, torch {[w.tolist() for w in want]}")
    try:
        rm.tensor([1.0]).register_hook(lambda g: g)
        yield Case("hook on a tensor without requires_grad", "accepted, torch raises RuntimeError")
    except RuntimeError:
        yield Case("hook on a tensor without requires_grad", None)


# ---- gradients at singular points -------------------------------------------------------------------

def singular_gradients() -> Iterator[Case]:
    import torch
    programs: dict[str, tuple[Callable[[Any, list[Any]], Any], list[list[float]]]] = {
        "norm() at 0": (lambda lib, a: a[0].norm(), [[0.0, 0.0, 0.0]]),
        "norm(dim=1) with a zero row": (lambda lib, a: a[0].norm(dim=1).sum(), [[0.0, 0.0, 3.0, 4.0]]),
        "norm(p=3) at 0": (lambda lib, a: a[0].norm(p=3), [[0.0, 0.0]]),
        "x ** 0 at 0": (lambda lib, a: (a[0] ** 0).sum(), [[0.0, 1.0, -2.0]]),
        "pow(x, y) at y = 0": (lambda lib, a: lib.pow(a[0], a[1]).sum(), [[0.0, 1.0, -2.0], [0.0, 0.0, 0.0]]),
        "pow(0, y)": (lambda lib, a: lib.pow(a[0], a[1]).sum(), [[0.0, 0.0, 0.0, 0.0], [2.0, 0.0, -1.0, 0.5]]),
        "abs at +-0": (lambda lib, a: a[0].abs().sum(), [[-0.0, 0.0, -1.0]]),
        "sqrt at 0": (lambda lib, a: a[0].sqrt().sum(), [[0.0, 4.0]]),
    }
    for name, (fn, values) in programs.items():
        if name.startswith("norm(dim=1)"):
            values = [values[0]]
        ours = [rm.tensor(v, requires_grad=True) for v in values]
        theirs = [torch.tensor(v, requires_grad=True) for v in values]
        if name.startswith("norm(dim=1)"):
            ours, theirs = [ours[0].reshape(2, 2)], [theirs[0].reshape(2, 2)]
            ours[0].retain_grad()
            theirs[0].retain_grad()
        fn(rm, ours).backward()
        fn(torch, theirs).backward()
        got = [t.grad.numpy() for t in ours]  # type: ignore[union-attr]
        want = [t.grad.numpy() for t in theirs]  # type: ignore[union-attr]
        yield Case(f"gradient of {name}", None if all(_close(g, w, zero_sign=False) for g, w in zip(got, want))
                   else f"got {[g.tolist() for g in got]}, torch {[w.tolist() for w in want]}")
    got_abs = rm.abs(rm.tensor([-0.0, 0.0])).numpy()
    yield Case("abs(-0.0) is +0.0", None if not np.signbit(got_abs).any() else f"got {got_abs.tolist()}")


# ---- elementwise edge values (the list) --------------------------------------------------------

def elementwise_edges() -> Iterator[Case]:
    import torch
    f32 = np.float32
    one = [
        ("x != x", lambda lib, x: x != x, [NAN, 1.0, INF]),
        ("x == x", lambda lib, x: x == x, [NAN, 1.0, -0.0]),
        ("x != 1", lambda lib, x: x != 1, [NAN, 1.0]),
        ("x < 1 / x >= 1", lambda lib, x: lib.stack([x < 1, x >= 1]), [NAN, 0.5, 2.0]),
        ("clamp(x, 0, 0.5)", lambda lib, x: lib.clamp(x, 0, 0.5), [NAN, -1.0, 0.25, 1.0, -0.0]),
        ("tanh", lambda lib, x: lib.tanh(x), [1e-10, -1e-10, 1e-7, 0.3, 5.0, 20.0, -0.0, INF, NAN]),
        ("log1p", lambda lib, x: lib.log1p(x), [1e-7, -1e-7, 1e-10, 0.003, INF, -1.0, -2.0, 3e38, -0.0]),
        ("expm1", lambda lib, x: lib.expm1(x), [1e-7, -1e-3, 88.0, -INF, INF, -0.0]),
        ("exp near underflow", lambda lib, x: lib.exp(x), [-88.0, -100.0, -87.0, -103.9, -104.0, 88.7, 89.0]),
        ("log", lambda lib, x: lib.log(x), [1e-40, 1e-38, 1.0 + 2 ** -23, 0.0, -0.0, -1.0, INF]),
        ("sin / cos of large arguments", lambda lib, x: lib.stack([lib.sin(x), lib.cos(x)]), [1e10, -3e38, 1e5, 7.0]),
        ("sigmoid", lambda lib, x: lib.sigmoid(x), [-88.0, 88.0, 1e-10, NAN]),
        ("erf", lambda lib, x: lib.special.erf(x) if lib is torch else lib.ops.erf(x), [1e-10, -0.5, 3.0, -0.0]),
        ("sign", lambda lib, x: lib.sign(x), [0.0, -0.0, NAN, -3.0]),
        ("abs", lambda lib, x: lib.abs(x), [-0.0, -INF, NAN]),
        ("softplus / elu of NaN", lambda lib, x: lib.stack([lib.nn.functional.softplus(x), lib.nn.functional.elu(x)]),
         [NAN, -1.0]),
    ]
    for name, fn, values in one:
        x = np.array(values, f32)
        got = fn(rm, rm.tensor(x)).numpy()
        want = fn(torch, torch.tensor(x)).numpy()
        yield _case(f"{name}{values}", got, want, rtol=3e-6)
    two = [
        ("atan2", lambda lib, a, b: lib.atan2(a, b), [0.0, -0.0, 0.0, -0.0, 1.0, INF, -INF, NAN, 1.0],
         [0.0, -0.0, -0.0, 0.0, 1.0, -INF, INF, 1.0, -0.0]),
        ("pow", lambda lib, a, b: lib.pow(a, b), [-0.0, 0.0, 1.0, NAN, -2.0, -8.0, -INF, 0.5, 2.0, -1.0],
         [-1.0, -1.0, NAN, 0.0, 3.0, 1 / 3, -3.0, INF, 100.0, INF]),
        ("fmod", lambda lib, a, b: lib.fmod(a, b), [1e10, -1e10, 5.0, -1.0, 1.0, INF, 3e38],
         [0.003, 0.003, INF, 1.0, 0.0, 2.0, 7.0]),
        ("remainder", lambda lib, a, b: lib.remainder(a, b), [1e10, -1.0, 1.0, -1.0, 5.0],
         [0.003, 1.0, -1.0, INF, -INF]),
        ("floor_divide", lambda lib, a, b: lib.floor_divide(a, b), [1.0, -1.0, 0.0, -0.0, 7.0],
         [INF, INF, -1.0, 1.0, 0.0]),
        ("maximum / minimum", lambda lib, a, b: lib.stack([lib.maximum(a, b), lib.minimum(a, b)]),
         [NAN, 1.0, -0.0], [1.0, NAN, 0.0]),
    ]
    for name, fn2, a_vals, b_vals in two:
        a, b = np.array(a_vals, f32), np.array(b_vals, f32)
        got = fn2(rm, rm.tensor(a), rm.tensor(b)).numpy()
        want = fn2(torch, torch.tensor(a), torch.tensor(b)).numpy()
        zero_sign = name != "maximum / minimum"  # PyTorch leaves max(-0, 0)'s sign unspecified
        yield _case(f"{name}{list(zip(a_vals, b_vals))[:4]}", got, want, rtol=3e-6, zero_sign=zero_sign)


# ---- the fuzz -------------------------------------------------------------------------------------------

def numerics_fuzz() -> Iterator[Case]:
    for label, bad in fuzz():
        if not bad:
            yield Case(label, None)
            continue
        kinds = sorted({m.kind for m in bad})
        first = bad[0]
        yield Case(label, f"{len(bad)} mismatches ({', '.join(kinds)}), e.g. {first.inputs} -> {first.got}, "
                          f"reference {first.want}")


# ---- the WebGPU pool: buffers of tensors freed in reference cycles ----------------------------------------

def buffers_in_cycles() -> Iterator[Case]:
    class Holder:
        pass

    was = gc.isenabled()
    gc.disable()  # the cycles die in gc.collect(), where finalizers run in no set order
    try:
        for i in range(12):
            # an uploaded tensor no kernel has bound: its GPUBuffer is referenced by nothing but the tensor's
            # handle, so both are garbage together (the GPUBuffer, older, is finalized first)
            n = 1000 + 64 * (i % 3)
            try:
                h = Holder()
                h.t = rm.tensor(np.full(n, float(i), np.float32))  # type: ignore[attr-defined]
                h.self = h  # type: ignore[attr-defined]
                del h
                gc.collect()
                y = rm.tensor(np.ones(n, np.float32)) * 3
                total = float(y.sum().item())
                yield Case(f"tensor after a cycle's collection {i}", None if total == 3 * n else f"sum {total}")
            except Exception as exc:  # noqa: BLE001
                yield Case(f"tensor after a cycle's collection {i}", f"raised {type(exc).__name__}: {str(exc)[:80]}")
    finally:
        if was:
            gc.enable()
    yield from _onnx_lstm_reloads(10 if _backend() == "wgpu" else 3)  # the crash was wgpu's pool


def _onnx_lstm_reloads(runs: int) -> Iterator[Case]:
    """A PyTorch-exported LSTM loaded afresh and run, ten times (the third run crashed on wgpu)."""
    import torch
    torch.manual_seed(0)
    tm = torch.nn.LSTM(6, 5, batch_first=True, num_layers=2).eval()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "lstm.onnx")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(tm, (torch.randn(3, 7, 6),), path, input_names=["x"], output_names=["y", "h"],
                              dynamic_axes={"x": {0: "batch", 1: "seq"}}, dynamo=False)
        device = str(rm.tensor([0.0]).device)
        for i in range(runs):
            # the previous model is still alive while the next loads; its cycles die in a later collection
            try:
                loaded = rm.onnx.load(path, device=device)
                xs = torch.randn(3, 7, 6)
                with torch.no_grad():
                    want = tm(xs)[0].numpy()
                got = loaded(rm.tensor(xs.numpy(), device=device))
                got = got[0] if isinstance(got, tuple) else got
                yield Case(f"ONNX LSTM reload {i}", None if np.allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
                           else "differs from PyTorch")
            except Exception as exc:  # noqa: BLE001
                yield Case(f"ONNX LSTM reload {i}", f"raised {type(exc).__name__}: {str(exc)[:100]}")


CLASSES: dict[str, Callable[[], Iterator[Case]]] = {
    "33 cumsum/cumprod order and precision vs torch": scans,
    "33 std/var at large magnitudes vs torch": spreads,
    "33 Tensor.register_hook vs torch": hooks,
    "33 gradients at singular points vs torch": singular_gradients,
    "33 elementwise edge values vs torch": elementwise_edges,
    "33 numerics fuzz vs float64 (elementwise, clamp, scans)": numerics_fuzz,
    "33 buffers freed in reference cycles (+ ONNX LSTM reloads)": buffers_in_cycles,
}
