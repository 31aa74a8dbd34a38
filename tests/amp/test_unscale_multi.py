"""amp_unscale_check_multi_: one kernel call over all of a step's gradients (variadic op inputs).

GradScaler.unscale_ launches it once on the CPU and once per group of bindable buffers on the GPU; views
of one buffer with odd element offsets (16-bit words shared by neighbours) are unscaled without touching
the elements around them; the dispatcher refuses a call without the list; rm.compile captures and replays
the op like any other."""

from __future__ import annotations

import math

import numpy as np
import pytest

import rumus as rm
from rumus import DTypeError, RumusError, nn

from backends_under_test import devices

DEVICES = devices()
UNSCALE = rm.ops.get("amp_unscale_check_multi_")


def _flag(device: str) -> rm.Tensor:
    return rm.zeros((), dtype=rm.float32, device=device)


def _inv(device: str, value: float = 0.25) -> rm.Tensor:
    return rm.full((), value, dtype=rm.float32, device=device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [rm.float16, rm.bfloat16, rm.float32])
@pytest.mark.parametrize("bad", [None, math.inf, math.nan])
def test_views_of_one_buffer_at_odd_offsets(device: str, dtype: rm.DType, bad: float | None) -> None:
    vals = np.arange(1, 24, dtype=np.float64) * 0.75
    if bad is not None:
        vals[6] = bad
    big = rm.tensor(vals, dtype=dtype, device=device)
    held = big.numpy().astype(np.float64)
    parts = [(1, 4), (4, 9), (9, 10), (13, 20)]  # odd and even starts and ends; 0, 10..12 and 20.. untouched
    flag = _flag(device)
    UNSCALE([big[a:b] for a, b in parts], flag, _inv(device))
    want = held.copy()
    for a, b in parts:
        want[a:b] = held[a:b] * 0.25
    got = big.numpy().astype(np.float64)
    np.testing.assert_array_equal(got, want)  # products by 1/4 are exact in every dtype here (NaN == NaN)
    assert float(flag.item()) == (0.0 if bad is None else 1.0)


@pytest.mark.parametrize("device", DEVICES)
def test_a_flag_raised_by_an_earlier_group_stays_raised(device: str) -> None:
    """40 gradients: two GPU dispatches on a 32-buffer device; the inf is in the first group only."""
    grads = [rm.full((3,), float(k + 1), dtype=rm.float32, device=device) for k in range(40)]
    with rm.no_grad():
        grads[0][1] = math.inf
    flag = _flag(device)
    UNSCALE(grads, flag, _inv(device, 0.5))
    assert float(flag.item()) == 1.0
    assert float(grads[39][2].item()) == 20.0
    assert float(grads[0][0].item()) == 0.5 and math.isinf(float(grads[0][1].item()))


@pytest.mark.parametrize("device", DEVICES)
def test_unscale_is_one_kernel_call_per_step(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    model = nn.Sequential(*[nn.Linear(3, 3) for _ in range(20)]).to(device)  # 40 parameters
    opt = rm.optim.SGD(model.parameters(), lr=0.1)
    scaler = rm.amp.GradScaler(init_scale=4.0)
    scaler.scale(model(rm.ones((2, 3), device=device)).sum()).backward()
    calls: list[int] = []
    find = rm._runtime.kernel

    def counted(name: str, backend: object, dtype: rm.DType) -> object:
        kernel = find(name, backend, dtype)
        if name != UNSCALE.name:
            return kernel
        return lambda outs, ins, attrs: (calls.append(len(ins)), kernel(outs, ins, attrs))

    UNSCALE._kernels.clear()
    monkeypatch.setattr(rm._runtime, "kernel", counted)
    if device.startswith("wgpu"):
        backend = rm._runtime.backend("wgpu")
        backend.flush(0)
        before = backend.stats(0)["dispatches"]
    scaler.unscale_(opt)
    assert calls == [40 + 2]  # one call: 40 gradients, found_inf, inv_scale
    if device.startswith("wgpu"):
        limit = backend.capabilities(rm.Device("wgpu", 0)).limits.get("max-storage-buffers-per-shader-stage", 8)
        group = min(32, limit - 2)
        # + the reciprocal of the scale and the flag's fill
        assert backend.stats(0)["dispatches"] - before <= math.ceil(40 / group) + 2
    UNSCALE._kernels.clear()


def test_the_dispatcher_wants_the_list_and_float_gradients() -> None:
    g = rm.ones(3, device="cpu")  # the refusals are the dispatcher's: the same on every default device
    with pytest.raises(RumusError, match="'grads\\*' a list of tensors"):
        UNSCALE(g, _flag("cpu"), _inv("cpu"))
    with pytest.raises(DTypeError, match="grads\\[1\\] is float64"):
        UNSCALE([g, rm.ones(2, dtype=rm.float64, device="cpu")], _flag("cpu"), _inv("cpu"))
    with pytest.raises(DTypeError, match="found_inf and inv_scale must be float32"):
        UNSCALE([g], rm.zeros((), dtype=rm.float16, device="cpu"), _inv("cpu"))


@pytest.mark.parametrize("device", DEVICES)
def test_compiled_function_with_the_variadic_op_replays(device: str) -> None:
    def unscaled(a: rm.Tensor, b: rm.Tensor) -> tuple[rm.Tensor, ...]:
        g1, g2 = a * 4.0, b + 0.0
        flag = rm.zeros((), dtype=rm.float32, device=a.device)
        UNSCALE([g1, g2], flag, rm.full((), 0.5, dtype=rm.float32, device=a.device))
        return g1, g2, flag

    compiled = rm.compile(unscaled)
    rng = np.random.default_rng(0)
    for k in range(4):
        a, b = rng.standard_normal(5), rng.standard_normal((2, 3))
        if k == 2:
            b[1, 1] = math.inf
        ta, tb = rm.tensor(a, dtype=rm.float32, device=device), rm.tensor(b, dtype=rm.float32, device=device)
        g1, g2, flag = compiled(ta, tb)
        np.testing.assert_allclose(g1.numpy(), np.float32(a) * 2.0, rtol=1e-6)
        np.testing.assert_allclose(g2.numpy(), np.float32(b) * 0.5, rtol=1e-6)
        assert float(flag.item()) == (1.0 if k == 2 else 0.0)
