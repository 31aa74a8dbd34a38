"""rumus.autocast: each op's result dtype follows its schema's class, checked against torch.autocast (CPU
autocast is the oracle where its lists agree with the CUDA lists we follow; for the ops PyTorch runs in
float32 only on CUDA the expected class is written here from torch/amp's documented lists)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import rumus as rm
from rumus import nn
from rumus.nn import functional as F

from ._devices import device_for

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 8))
W = RNG.standard_normal((8, 8)) * 0.3
B = RNG.standard_normal(8)
T = RNG.integers(0, 8, 4)
IMG = RNG.standard_normal((2, 3, 6, 6))
CW = RNG.standard_normal((4, 3, 3, 3)) * 0.3
CB = RNG.standard_normal(4)
Q = RNG.standard_normal((2, 2, 5, 4))


class _NS:
    """One namespace per framework: inputs (float32 `x`, autocast-dtype `xl`) and the functions."""

    def __init__(self, lib: str, dtype: rm.DType, device: str) -> None:
        self.lib = lib
        if lib == "rm":
            def mk(a: np.ndarray, dt: rm.DType = rm.float32) -> rm.Tensor:
                return rm.tensor(a, dtype=rm.float32, device=device).to(dt)
            self.F, self.m, low = F, rm, dtype
            self.t = rm.tensor(T, device=device)
        else:
            tdt = {"float16": torch.float16, "bfloat16": torch.bfloat16}[dtype.name]

            def mk(a: np.ndarray, dt: object = torch.float32) -> torch.Tensor:  # type: ignore[misc]
                return torch.tensor(a, dtype=torch.float32).to(dt)
            self.F, self.m, low = torch.nn.functional, torch, tdt
            self.t = torch.from_numpy(T)
        self.x, self.w, self.b, self.img, self.cw, self.cb, self.q = (
            mk(X), mk(W), mk(B), mk(IMG), mk(CW), mk(CB), mk(Q))
        self.xl, self.imgl, self.xpos_l, self.ql = mk(X, low), mk(IMG, low), mk(np.abs(X) + 0.5, low), mk(Q, low)


# op -> (call, class): "lower" = the autocast dtype, "float32", "promote" (float32 from a mix), "same"
CASES = {
    "matmul": (lambda n: n.x @ n.w, "lower"),
    "linear": (lambda n: n.F.linear(n.x, n.w, n.b), "lower"),
    "bmm": (lambda n: n.m.bmm(n.x.reshape(1, 4, 8), n.w.reshape(1, 8, 8)), "lower"),
    "conv2d": (lambda n: n.F.conv2d(n.img, n.cw, n.cb), "lower"),
    "conv_transpose2d": (lambda n: n.F.conv_transpose2d(n.img, n.cw.transpose(0, 1)), "lower"),
    # q, k, v from lowered projections: the fused flash_attention op in the autocast dtype
    "sdpa": (lambda n: n.F.scaled_dot_product_attention(n.ql, n.ql, n.ql, is_causal=True), "lower"),
    "cross_entropy": (lambda n: n.F.cross_entropy(n.xl, n.t), "float32"),
    "nll_loss": (lambda n: n.F.nll_loss(n.xl, n.t), "float32"),
    "mse_loss": (lambda n: n.F.mse_loss(n.xl, n.x), "float32"),
    "l1_loss": (lambda n: n.F.l1_loss(n.xl, n.x), "float32"),
    "smooth_l1_loss": (lambda n: n.F.smooth_l1_loss(n.xl, n.x), "float32"),
    "bce_with_logits": (lambda n: n.F.binary_cross_entropy_with_logits(n.xl, n.x.sigmoid()), "float32"),
    "cat": (lambda n: n.m.cat([n.xl, n.x]), "promote"),
    "stack": (lambda n: n.m.stack([n.xl, n.x]), "promote"),
    "where": (lambda n: n.m.where(n.x > 0, n.xl, n.x), "promote"),
    "relu": (lambda n: n.F.relu(n.xl), "same"),
    "gelu": (lambda n: n.F.gelu(n.xl), "same"),
    "tanh": (lambda n: n.m.tanh(n.xl), "same"),
    "add": (lambda n: n.xl + n.xl, "same"),
    "max_pool2d": (lambda n: n.F.max_pool2d(n.imgl, 2), "same"),
}
# PyTorch's CUDA float32 list (torch/amp docs, "CUDA Ops that can autocast to float32"); its CPU autocast
# lets these run in the input dtype, so they are checked against the documented class only
CUDA_FLOAT32 = {
    "softmax": lambda n: n.F.softmax(n.xl, 1),
    "log_softmax": lambda n: n.F.log_softmax(n.xl, 1),
    "layer_norm": lambda n: n.F.layer_norm(n.xl, (8,)),
    "group_norm": lambda n: n.F.group_norm(n.imgl, 3),
    "exp": lambda n: n.m.exp(n.xl),
    "log": lambda n: n.m.log(n.xpos_l),
    "pow": lambda n: n.m.pow(n.xpos_l, 2.5),
    "rsqrt": lambda n: n.m.rsqrt(n.xpos_l),
    "reciprocal": lambda n: n.m.reciprocal(n.xpos_l),
    "sum": lambda n: n.xl.sum(),
    "mean": lambda n: n.xl.mean(),
    "prod": lambda n: n.xl.prod(),
    "cumsum": lambda n: n.m.cumsum(n.xl, 0),
    "logsumexp": lambda n: n.m.logsumexp(n.xl, 1),
    "softplus": lambda n: n.F.softplus(n.xl),
}

LOW = [rm.float16, rm.bfloat16]


def _expected(cls: str, low: rm.DType) -> rm.DType:
    return low if cls in ("lower", "same") else rm.float32


@pytest.mark.parametrize("low", LOW, ids=lambda d: d.name)
def test_result_dtypes_match_torch_autocast(low: rm.DType) -> None:
    dev = device_for(low, needs=("conv2d", "max_pool2d", "gelu", "tanh", "softmax"))
    ours, theirs = _NS("rm", low, dev), _NS("torch", low, dev)
    tdt = {"float16": torch.float16, "bfloat16": torch.bfloat16}[low.name]
    with rm.autocast(dev.split(":")[0], dtype=low):
        got = {name: fn(ours) for name, (fn, _) in CASES.items()}
    with torch.autocast("cpu", dtype=tdt):
        want = {name: fn(theirs) for name, (fn, _) in CASES.items()}
    for name, (_, cls) in CASES.items():
        assert got[name].dtype == _expected(cls, low), f"{name}: {got[name].dtype}, class {cls}"
        assert str(want[name].dtype) == f"torch.{got[name].dtype.name}", f"{name}: torch gives {want[name].dtype}"
        # and the values: torch's autocast result within the low dtype's rounding
        tol = 3e-2 if low == rm.bfloat16 else 5e-3
        np.testing.assert_allclose(got[name].float().numpy(), want[name].float().numpy(), rtol=tol, atol=tol,
                                   err_msg=name)


@pytest.mark.parametrize("low", LOW, ids=lambda d: d.name)
def test_cuda_float32_list_runs_in_float32(low: rm.DType) -> None:
    dev = device_for(low, needs=("exp",))
    ours = _NS("rm", low, dev)
    with rm.autocast(dev.split(":")[0], dtype=low):
        for name, fn in CUDA_FLOAT32.items():
            out = fn(ours)
            assert out.dtype == rm.float32, f"{name}: {out.dtype}"
    with rm.autocast(dev.split(":")[0], dtype=low, enabled=False):
        assert CUDA_FLOAT32["exp"](ours).dtype == low  # no autocast: the input's dtype


def test_float64_is_never_lowered_and_other_devices_are_untouched() -> None:
    a = rm.tensor(X, dtype=rm.float64, device="cpu")
    with rm.autocast("cpu", dtype=rm.float16):
        assert (a @ a.T).dtype == rm.float64
        assert a.sum().dtype == rm.float64
    # another device type's autocast leaves cpu tensors alone, and says it cast nothing
    with pytest.warns(UserWarning, match="cast nothing: none of the 1 ops"), rm.autocast("wgpu", dtype=rm.float16):
        x = rm.tensor(X, dtype=rm.float32, device="cpu")
        assert (x @ x.T).dtype == rm.float32


def test_nesting_disabling_decorator_and_threads() -> None:
    dev = device_for(rm.float16)
    kind = dev.split(":")[0]
    x = rm.tensor(X, dtype=rm.float32, device=dev)
    seen: list[object] = []

    @rm.autocast(kind, dtype=rm.float16)
    def lowered() -> rm.Tensor:
        return x @ x.T

    with rm.autocast(kind, dtype=rm.float16):
        assert (x @ x.T).dtype == rm.float16
        with rm.autocast(kind, enabled=False):
            assert (x @ x.T).dtype == rm.float32
            assert lowered().dtype == rm.float16  # the decorator re-enables for its call
            assert (x @ x.T).dtype == rm.float32
        assert (x @ x.T).dtype == rm.float16
        assert rm.amp.is_autocast_enabled() and rm.amp.get_autocast_dtype() == rm.float16
        th = threading.Thread(target=lambda: seen.append((x @ x.T).dtype))
        th.start()
        th.join()
    assert seen == [rm.float32]  # another thread never sees this thread's autocast
    assert (x @ x.T).dtype == rm.float32 and not rm.amp.is_autocast_enabled()
    assert lowered().dtype == rm.float16


def test_casts_are_recorded_and_cached_and_gradients_keep_the_parameter_dtype() -> None:
    dev = device_for(rm.float16)
    kind = dev.split(":")[0]
    lin = nn.Linear(8, 8).to(dev)
    tlin = torch.nn.Linear(8, 8)
    with rm.no_grad():
        lin.weight.copy_(rm.tensor(W, dtype=rm.float32, device=dev))
        lin.bias.copy_(rm.tensor(B, dtype=rm.float32, device=dev))
    with torch.no_grad():
        tlin.weight.copy_(torch.tensor(W, dtype=torch.float32))
        tlin.bias.copy_(torch.tensor(B, dtype=torch.float32))
    x = rm.tensor(X, dtype=rm.float32, device=dev)
    with rm.autocast(kind, dtype=rm.float16):
        h1, h2 = lin(x), lin(x)
        w1 = lin.weight.grad_fn  # a leaf: the cast lives in the cache, not on the parameter
        from rumus._thread_state import autocast_state
        cached = [v[3] for k, v in autocast_state.cache.items() if v[0] is lin.weight]
        assert w1 is None and len(cached) == 1 and cached[0].dtype == rm.float16
        loss = (h1.float() * h2.float()).sum()
    assert not autocast_state.cache  # emptied when the outermost block ends
    loss.backward()
    with torch.autocast("cpu", dtype=torch.float16):
        th = tlin(torch.tensor(X, dtype=torch.float32))
        tloss = (th.float() * th.float()).sum()
    tloss.backward()
    assert lin.weight.grad.dtype == rm.float32 and lin.bias.grad.dtype == rm.float32
    np.testing.assert_allclose(lin.weight.grad.numpy(), tlin.weight.grad.numpy(), rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(lin.bias.grad.numpy(), tlin.bias.grad.numpy(), rtol=2e-2, atol=2e-2)


def test_a_parameter_changed_in_place_is_cast_again() -> None:
    dev = device_for(rm.float16)
    w = rm.tensor(W, dtype=rm.float32, device=dev).requires_grad_(True)
    x = rm.tensor(X, dtype=rm.float32, device=dev)
    with rm.autocast(dev.split(":")[0], dtype=rm.float16):
        first = (x @ w).float().numpy()
        with rm.no_grad():
            w.mul_(2.0)
        second = (x @ w).float().numpy()
    np.testing.assert_allclose(second, 2 * first, rtol=1e-2, atol=1e-2)


def test_schema_refuses_an_unknown_class() -> None:
    from rumus_contracts import OpSchema, PluginError
    with pytest.raises(PluginError, match="autocast='fast'"):
        OpSchema("my_op", ("x",), lambda s, a: [s[0]], autocast="fast")
    with pytest.raises(rm.DTypeError, match="float16 or rumus.bfloat16"):
        rm.autocast("cpu", dtype=rm.float32)
