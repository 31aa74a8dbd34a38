"""float16 / bfloat16 ops on the CPU backend: every claimed (op, 16-bit dtype) sample against the float64
reference (the conformance check, run here for the two new columns), against PyTorch's CPU float16 /
bfloat16, and the properties the kernels promise (GEMM tiles, thread-count independence, gradients)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import rumus as rm
import rumus.nn.functional as F
from rumus import backend_api as api
from rumus_conformance.cases import samples
from rumus_conformance.harness import check_forward, check_gradient
from rumus_contracts import DType

HALVES = {"float16": (rm.float16, torch.float16), "bfloat16": (rm.bfloat16, torch.bfloat16)}
# one rounding of the result: half an ulp of float16 / bfloat16 relative to the value, both sides rounding
ULP = {"float16": 2.0**-10, "bfloat16": 2.0**-7}


def _claimed_cases() -> list[Any]:
    reg = api.plugins()
    cases = []
    for schema in reg.ops:
        if schema.composite:
            continue
        for dt_name in HALVES:
            dt: DType = HALVES[dt_name][0]
            if dt not in schema.dtypes or reg.kernels.find(schema.name, "cpu", dt) is None:
                continue
            for i, sample in enumerate(samples(schema)):
                pinned = sample.dtypes[schema.dispatch_on] if sample.dtypes and schema.inputs else None
                if pinned is None or pinned == dt:
                    cases.append(pytest.param(schema, dt, sample, id=f"{schema.name}-{dt_name}-{i}"))
    return cases


CASES = _claimed_cases()


def test_the_16_bit_columns_cover_the_table_norms_reductions_and_matmul() -> None:
    ops = {(c.values[0].name, c.values[1].name) for c in CASES}
    for op in ("add", "exp", "gelu", "sum", "amax", "argmax", "softmax", "layer_norm", "rms_norm_backward",
               "batch_norm", "matmul", "embedding", "index_add", "dropout", "where", "clamp", "copy"):
        for dt in HALVES:
            assert (op, dt) in ops, f"{op} is not claimed for {dt} on cpu"


@pytest.mark.parametrize(("schema", "dt", "sample"), CASES)
def test_forward_matches_the_float64_reference(schema: Any, dt: DType, sample: Any) -> None:
    for noncontiguous in (False, True):
        msg = check_forward(schema, sample, dt, "cpu", noncontiguous)
        assert msg is None, msg


GRAD_OPS = ("mul", "tanh", "sigmoid", "softmax", "layer_norm", "rms_norm", "matmul", "sum", "index_add")


@pytest.mark.parametrize(("schema", "dt", "sample"),
                         [c for c in CASES if c.values[0].name in GRAD_OPS and c.values[0].differentiable
                          and c.values[2].grad])
def test_gradients_match_finite_differences(schema: Any, dt: DType, sample: Any) -> None:
    msg = check_gradient(schema, sample, dt, "cpu", False)
    assert msg is None, msg


# ---- against PyTorch's CPU float16 / bfloat16 --------------------------------------------------------

def _pair(dt: str, shape: tuple[int, ...], seed: int, low: float = -2.0, high: float = 2.0) -> tuple[Any, Any]:
    x = np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)
    r = rm.tensor(x).to(HALVES[dt][0])
    t = torch.from_numpy(r.float().numpy()).to(HALVES[dt][1])  # the same rounded values on both sides
    return r, t


ELEMENTWISE: dict[str, tuple[Callable[..., Any], Callable[..., Any], tuple[float, float]]] = {
    "add": (lambda a, b: a + b, lambda a, b: a + b, (-2, 2)),
    "mul": (lambda a, b: a * b, lambda a, b: a * b, (-2, 2)),
    "div": (lambda a, b: a / b, lambda a, b: a / b, (0.5, 2)),
    "exp": (lambda a, b: rm.exp(a), lambda a, b: torch.exp(a), (-4, 4)),
    "log": (lambda a, b: rm.log(a), lambda a, b: torch.log(a), (0.01, 4)),
    "tanh": (lambda a, b: rm.tanh(a), lambda a, b: torch.tanh(a), (-3, 3)),
    "sigmoid": (lambda a, b: rm.sigmoid(a), lambda a, b: torch.sigmoid(a), (-6, 6)),
    "gelu": (lambda a, b: F.gelu(a), lambda a, b: torch.nn.functional.gelu(a), (-4, 4)),
    "sqrt": (lambda a, b: rm.sqrt(a), lambda a, b: torch.sqrt(a), (0, 9)),
    "sin": (lambda a, b: rm.sin(a), lambda a, b: torch.sin(a), (-30, 30)),
    "maximum": (lambda a, b: rm.maximum(a, b), lambda a, b: torch.maximum(a, b), (-2, 2)),
    "clamp": (lambda a, b: rm.clamp(a, -0.3, 0.7), lambda a, b: torch.clamp(a, -0.3, 0.7), (-2, 2)),
}


@pytest.mark.parametrize("dt", list(HALVES))
@pytest.mark.parametrize("op", list(ELEMENTWISE))
def test_elementwise_within_one_rounding_of_torch(op: str, dt: str) -> None:
    """Both compute in float32 and round once: results differ by at most one 16-bit rounding."""
    ours, theirs, (lo, hi) = ELEMENTWISE[op]
    (a, ta), (b, tb) = _pair(dt, (64, 33), 1, lo, hi), _pair(dt, (64, 33), 2, lo, hi)
    got, want = ours(a, b).float().numpy(), theirs(ta, tb).float().numpy()
    np.testing.assert_allclose(got, want, rtol=ULP[dt], atol=1e-6, err_msg=f"{op} {dt}")


REDUCING: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "sum": (lambda x: x.sum(dim=1), lambda x: x.sum(dim=1)),
    "mean": (lambda x: x.mean(dim=0), lambda x: x.mean(dim=0)),
    "amax": (lambda x: x.amax(dim=1), lambda x: x.amax(dim=1)),
    "softmax": (lambda x: rm.softmax(x, dim=1), lambda x: torch.softmax(x, dim=1)),
    "log_softmax": (lambda x: rm.log_softmax(x, dim=1), lambda x: torch.log_softmax(x, dim=1)),
    "layer_norm": (lambda x: F.layer_norm(x, (300,)), lambda x: torch.nn.functional.layer_norm(x, (300,))),
    "rms_norm": (lambda x: F.rms_norm(x, (300,)), lambda x: torch.nn.functional.rms_norm(x, (300,))),
    "matmul": (lambda x: x @ x.t(), lambda x: x @ x.t()),
}


@pytest.mark.parametrize("dt", list(HALVES))
@pytest.mark.parametrize("op", list(REDUCING))
def test_reductions_norms_and_matmul_agree_with_torch(op: str, dt: str) -> None:
    """Sums may be ordered differently: within the conformance tolerance of each other, both being
    within it of the float64 reference."""
    ours, theirs = REDUCING[op]
    x, tx = _pair(dt, (48, 300), 3)
    got, want = ours(x).float().numpy(), theirs(tx).float().numpy()
    scale = np.abs(want).max()
    np.testing.assert_allclose(got, want, rtol=4 * ULP[dt], atol=4 * ULP[dt] * scale, err_msg=f"{op} {dt}")


@pytest.mark.parametrize("dt", list(HALVES))
def test_indexed_ops_agree_with_torch(dt: str) -> None:
    w, tw = _pair(dt, (10, 6), 4)
    idx = np.array([3, 0, 3, 9, 3])
    np.testing.assert_array_equal(F.embedding(rm.tensor(idx), w).float().numpy(),
                                  torch.nn.functional.embedding(torch.from_numpy(idx), tw).float().numpy())
    src, tsrc = _pair(dt, (5, 6), 5)
    got = rm.index_add(w, 0, rm.tensor(idx), src).float().numpy()
    # repeated index 3 sums three rows: accumulated in float32 and rounded once, like float64 rounded once
    want64 = tw.double().index_add(0, torch.from_numpy(idx), tsrc.double()).to(HALVES[dt][1]).float().numpy()
    np.testing.assert_array_equal(got, want64)
    order = rm.argsort(w, dim=1).numpy()
    np.testing.assert_array_equal(np.take_along_axis(w.float().numpy(), order, 1), np.sort(w.float().numpy(), 1))


# ---- GEMM tiles -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", list(HALVES))
@pytest.mark.parametrize(("m", "k", "n"), [(300, 5000, 7), (3, 40, 1100), (257, 9, 1025), (1, 1, 1)])
def test_matmul_across_tile_edges_matches_float64(dt: str, m: int, k: int, n: int) -> None:
    """Rows past 256, columns past 1024 and K past 4096 (two K blocks summed) all land right."""
    a, _ = _pair(dt, (m, k), 6, -1, 1)
    b, _ = _pair(dt, (n, k), 7, -1, 1)
    got = (a @ b.t()).float().numpy()  # b transposed: a strided operand
    ref = a.float().numpy().astype(np.float64) @ b.float().numpy().astype(np.float64).T
    # float32 sums of k products, then one 16-bit rounding
    tol = ULP[dt] * np.abs(ref) + 1e-6 * k
    assert (np.abs(got - ref) <= tol).all(), float(np.abs(got - ref).max())


@pytest.mark.parametrize("dt", list(HALVES))
def test_results_are_bit_identical_at_every_thread_count(dt: str) -> None:
    a, _ = _pair(dt, (300, 700), 8)
    b, _ = _pair(dt, (700, 500), 9)
    before = rm.get_num_threads()
    outs = []
    try:
        for n in (1, 2, 3):
            rm.set_num_threads(n)
            outs.append([(a @ b).float().numpy(), a.sum(dim=0).float().numpy(), rm.softmax(a, dim=1).float().numpy(),
                         F.layer_norm(a, (700,)).float().numpy()])
    finally:
        rm.set_num_threads(before)
    for other in outs[1:]:
        for x, y in zip(outs[0], other):
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("dt", list(HALVES))
def test_dropout_keeps_the_float32_mask(dt: str) -> None:
    """The mask is a hash of the element counter: the same elements survive in every dtype."""
    x, _ = _pair(dt, (40, 50), 10, 0.5, 1.5)
    rm.manual_seed(7)
    got = F.dropout(x, 0.3, training=True).float().numpy()
    rm.manual_seed(7)
    ref = F.dropout(x.float(), 0.3, training=True).numpy()
    np.testing.assert_array_equal(got == 0, ref == 0)
    np.testing.assert_allclose(got, ref, rtol=ULP[dt])
