"""Every registered decomposition against its op's float64 reference and the cpu kernel, on the op's
conformance samples; gradients of the fallback against finite differences; the dispatcher's fallback
(route "decomposition") on a backend without the kernel; a whole training step from primitives alone."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rumus as rm
from rumus import backend_api as api
from rumus._dispatch import DECOMPOSITIONS
from rumus_conformance import harness
from rumus_conformance.cases import error_samples, samples
from rumus_conformance.tolerances import forward_tolerance
from rumus_contracts.primitives import PACKED_DTYPE_OPS
from rumus_contracts import PRIMITIVES, DType, KernelNotFound, OpSchema, Sample, bfloat16, float16, float32, float64

sys.path.insert(0, str(Path(__file__).parent))
from primitives_only import hidden_kernels, only_primitives  # noqa: E402

DTYPES = (float64, float32, float16, bfloat16)


def _cases() -> list[Any]:
    out = []
    for name in sorted(DECOMPOSITIONS):
        schema = api.op_schema(name)
        for k in range(len(samples(schema))):
            for dt in DTYPES:
                if dt in schema.dtypes:
                    out.append(pytest.param(name, k, dt, id=f"{name}-{k}-{dt.name}"))
    return out


def _run_direct(schema: OpSchema, sample: Sample, dtype: DType) -> tuple[list[np.ndarray], list[np.ndarray],
                                                                          list[DType]]:
    """The decomposition called straight (no dispatcher): (results, float64 inputs, result dtypes); an
    in-place op's results are its inputs after the call."""
    flat, s = harness.spelled_out(schema, sample)
    explicit = list(s.dtypes) if s.dtypes else [None] * len(s.inputs)
    tensors = [harness.make_input(a, dtype, e, "cpu", False) for a, e in zip(s.inputs, explicit)]
    ref_in = [harness.as_float64(t) for t in tensors]
    attrs = schema.bind_attrs(harness.prepare_attrs(schema, s, dtype))
    with rm.no_grad():
        res = DECOMPOSITIONS[schema.name](*tensors, **attrs)
    if schema.inplace:
        return [harness.as_float64(t) for t in tensors], ref_in, [t.dtype for t in tensors]
    outs = list(res) if isinstance(res, tuple) else [res]
    return [harness.as_float64(o) for o in outs], ref_in, [o.dtype for o in outs]


def _expected(schema: OpSchema, sample: Sample, dtype: DType, ref_in: list[np.ndarray]) -> list[np.ndarray]:
    """The float64 reference on the inputs as the decomposition got them (an in-place op's: every
    spelled-out input's new value)."""
    flat, s = harness.spelled_out(schema, sample)
    return harness.reference(flat, s, dtype, ref_in)


def _compare(schema: OpSchema, sample: Sample, got: list[np.ndarray], want: list[np.ndarray], dtypes: list[DType],
             dtype: DType, what: str, slack: float = 1.0) -> None:
    flat, _ = harness.spelled_out(schema, sample)
    idx = list(flat.mutates_idx) if schema.inplace else list(range(len(got)))
    assert schema.inplace or len(want) == len(got), (len(want), len(got))
    for i in idx:
        floating = dtypes[i].is_floating
        rtol, atol = forward_tolerance(schema, dtypes[i]) if floating else (0.0, 0.0)
        msg = harness.compare(f"{what}: {flat.inputs[i] if schema.inplace else f'output {i}'}", got[i], want[i],
                              dtypes[i], rtol * slack, atol * slack)
        assert msg is None, msg


@pytest.mark.parametrize("name,k,dtype", _cases())
def test_decomposition_matches_reference_and_cpu_kernel(name: str, k: int, dtype: DType) -> None:
    schema = api.op_schema(name)
    sample = samples(schema)[k]
    got, ref_in, dtypes = _run_direct(schema, sample, dtype)
    want = _expected(schema, sample, dtype, ref_in)
    _compare(schema, sample, got, want, dtypes, dtype, "vs reference")
    if api.plugins().kernels.find(name, "cpu", dtype) is not None:  # the fused kernel, on the same inputs
        flat, s = harness.spelled_out(schema, sample)
        res = harness.run(flat, s, dtype, "cpu", False)
        kernel = res.inputs_after if schema.inplace else res.outputs
        # two roundings apart at most: each is within the reference's tolerance of the exact result
        _compare(schema, sample, got, kernel, dtypes, dtype, "vs cpu kernel", slack=2.0)


def _grad_cases() -> list[Any]:
    out = []
    for name in sorted(DECOMPOSITIONS):
        schema = api.op_schema(name)
        if not schema.differentiable or schema.inplace:
            continue
        for k, s in enumerate(samples(schema)):
            if s.grad and float64 in schema.dtypes:
                out.append(pytest.param(name, k, id=f"{name}-{k}"))
    return out


@pytest.mark.parametrize("name,k", _grad_cases())
def test_gradient_from_primitives_matches_finite_differences(name: str, k: int) -> None:
    """The gradient a primitives-only backend computes (the decomposition, and the decompositions of the
    backward ops it reaches) against central differences of the float64 reference."""
    schema = api.op_schema(name)
    sample = samples(schema)[k]
    with only_primitives(), api.trace_dispatch() as log:
        msg = harness.check_gradient(schema, sample, float64, "cpu", noncontiguous=True)
    assert msg is None, msg
    assert (name, "cpu", "decomposition") in log


@pytest.mark.parametrize("name", sorted(DECOMPOSITIONS))
def test_fallback_refuses_what_the_op_refuses(name: str) -> None:
    """Error samples: the shape and dtype rules run before the decomposition, so the errors are the same."""
    schema = api.op_schema(name)
    with only_primitives():
        for err in error_samples(schema):
            msg = harness.check_error(schema, err, "cpu")
            assert msg is None, f"{err}: {msg}"


@pytest.mark.parametrize("name", sorted(DECOMPOSITIONS))
def test_dispatcher_falls_back_and_logs_the_route(name: str) -> None:
    schema = api.op_schema(name)
    sample = next(s for s in samples(schema) if not any(0 in np.shape(a) for a in s.inputs
                                                         if not isinstance(a, list)))
    flat, s = harness.spelled_out(schema, sample)
    with only_primitives(), api.trace_dispatch() as log:
        msg = harness.check_forward(flat, s, float64 if float64 in schema.dtypes else schema.dtypes[0], "cpu",
                                    noncontiguous=True)
    assert msg is None, msg
    at = log.index((name, "cpu", "decomposition"))  # after the inputs' own copies
    assert (name, "cpu", "kernel") not in log
    below = {op for op, _, route in log[at + 1:] if route == "kernel"}
    assert below <= PRIMITIVES | PACKED_DTYPE_OPS, below - PRIMITIVES


def test_missing_primitive_names_the_primitive() -> None:
    x = rm.tensor(np.arange(6.0).reshape(2, 3))
    with hidden_kernels(["softmax", "amax"]), pytest.raises(KernelNotFound, match="amax"):
        rm.ops.softmax(x, dim=1)
    assert rm.ops.softmax(x, dim=1).shape == (2, 3)  # kernels back: the choice was not cached


def test_kernel_path_is_taken_when_the_kernel_exists() -> None:
    x = rm.tensor(np.arange(6.0).reshape(2, 3))
    with api.trace_dispatch() as log:
        rm.ops.softmax(x, dim=1)
    assert log == [("softmax", "cpu", "kernel")]


def test_inplace_decomposition_bumps_versions_and_refuses_tracked_writes() -> None:
    p, g, buf = (rm.tensor(np.ones(3)) for _ in range(3))
    before = (p._storage.version, buf._storage.version)
    with only_primitives():
        rm.ops.sgd_step(p, g, buf, lr=0.5, momentum=0.9, first=True)
        np.testing.assert_allclose(p.numpy(), 0.5)
        assert p._storage.version > before[0] and buf._storage.version > before[1]
        leaf = rm.tensor(np.ones(3), requires_grad=True)
        with pytest.raises(rm.AutogradError, match="no_grad"):
            rm.ops.sgd_step(leaf, g, buf, lr=0.5)


def _train(opt: str, scaled: bool = False, amsgrad: bool = False) -> np.ndarray:
    rm.manual_seed(0)
    model = rm.nn.Linear(4, 3)
    kw: dict[str, Any] = {"momentum": 0.9} if opt == "SGD" else {"amsgrad": amsgrad}
    optim = getattr(rm.optim, opt)(model.parameters(), lr=0.1, **kw)
    scaler = rm.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=2) if scaled else None
    x = rm.tensor(np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32))
    y = rm.tensor(np.ones((8, 3), np.float32))
    for k in range(5):
        optim.zero_grad()
        loss = rm.nn.functional.mse_loss(model(x), y)
        if scaler is None:
            loss.backward()
            optim.step()
            continue
        scaler.scale(loss * (float("inf") if k == 2 else 1.0)).backward()  # one skipped step
        scaler.step(optim)
        scaler.update()
    return model.weight.detach().numpy()


@pytest.mark.parametrize("opt", ["SGD", "Adam", "AdamW"])
def test_training_from_primitives_matches_the_kernels(opt: str) -> None:
    """nn.Linear + MSE + the optimizer: the same weights with every non-primitive kernel hidden. SGD's
    sgd_step decomposes; Adam, finding no adam_step kernel, updates from core ops."""
    fused = _train(opt)
    with only_primitives(), api.trace_dispatch() as log:
        decomposed = _train(opt)
    np.testing.assert_allclose(decomposed, fused, rtol=1e-5, atol=1e-6)
    assert {op for op, _, route in log if route == "kernel"} <= PRIMITIVES
    if opt == "SGD":
        assert ("sgd_step", "cpu", "decomposition") in log
    else:
        assert not any(op == "adam_step" for op, _, _ in log)


@pytest.mark.parametrize("amsgrad", [False, True])
def test_scaled_adam_from_primitives_matches_the_kernels(amsgrad: bool) -> None:
    """Under a GradScaler (a skipped step included): adam_step_dev_, adam_step_count_ and the scaler's
    unscale/update ops all decompose, and the weights match the fused kernels'."""
    fused = _train("Adam", scaled=True, amsgrad=amsgrad)
    with only_primitives(), api.trace_dispatch() as log:
        decomposed = _train("Adam", scaled=True, amsgrad=amsgrad)
    np.testing.assert_allclose(decomposed, fused, rtol=1e-5, atol=1e-6)
    routes = {op for op, _, route in log if route == "decomposition"}
    assert {"adam_step_dev_", "adam_step_count_", "amp_update_scale_"} <= routes, routes
    assert routes & {"amp_unscale_check_", "amp_unscale_check_multi_"}, routes
    assert {op for op, _, route in log if route == "kernel"} <= PRIMITIVES
