"""The linear op (x @ weight.T + bias as one graph node, issue 11) behind F.linear with a bias: values and
gradients (first and second order) against float64 PyTorch and finite differences, only the gradients
asked for, the composite on float16, the unfused path where the op does not apply, autocast dtypes and
ONNX export. The CPU backend's fused kernel: tests/backends/test_cpu_linear.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rumus as rm
from rumus import _dispatch
from rumus.nn import functional as F
from rumus.ops import get as op
from rumus_contracts import ShapeError, float64, parse_dtype

torch = pytest.importorskip("torch")

X_SHAPES = [(5,), (7, 5), (2, 3, 5)]  # an unbatched 1-D x, a batch, a batch of sequences


class _Seen:
    """A dispatch tracer recording kernel ops by name and composites as 'composite:<name>'."""

    def __init__(self) -> None:
        self.ops: list[str] = []

    def __call__(self, schema: Any, *_: Any) -> None:
        self.ops.append(schema.name)

    def composite(self, fn: Any, schema: Any, args: Any, attrs: Any) -> Any:
        self.ops.append(f"composite:{schema.name}")
        res = fn(*args, **attrs)
        return res if isinstance(res, tuple) else (res,)


def _traced(fn: Any) -> tuple[Any, list[str]]:
    seen, prev = _Seen(), _dispatch._tracer
    _dispatch._tracer = seen
    try:
        return fn(), seen.ops
    finally:
        _dispatch._tracer = prev


def _arrays(xs: tuple[int, ...], seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(xs), rng.standard_normal((4, xs[-1])), rng.standard_normal(4)


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("xs", X_SHAPES, ids=str)
def test_values_match_float64_torch(xs: tuple[int, ...], dt: str) -> None:
    xa, wa, ba = _arrays(xs)
    npd = np.dtype(dt)
    y = F.linear(*(rm.tensor(a.astype(npd)) for a in (xa, wa, ba)))
    want = torch.nn.functional.linear(*(torch.tensor(a.astype(npd).astype(np.float64)) for a in (xa, wa, ba)))
    assert y.dtype == parse_dtype(dt) and y.shape == tuple(want.shape)
    tol = 1e-6 if dt == "float32" else 1e-13
    np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("xs", X_SHAPES, ids=str)
def test_gradients_match_torch(xs: tuple[int, ...]) -> None:
    xa, wa, ba = _arrays(xs, 1)
    x, w, b = (rm.tensor(a, requires_grad=True) for a in (xa, wa, ba))
    gy = np.random.default_rng(2).standard_normal((*xs[:-1], 4))
    (F.linear(x, w, b) * rm.tensor(gy)).sum().backward()
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (xa, wa, ba))
    (torch.nn.functional.linear(tx, tw, tb) * torch.tensor(gy)).sum().backward()
    for mine, theirs in ((x, tx), (w, tw), (b, tb)):
        assert mine.grad is not None and theirs.grad is not None
        np.testing.assert_allclose(mine.grad.numpy(), theirs.grad.numpy(), rtol=1e-12, atol=1e-12)
    assert w.grad is not None and w.grad.is_contiguous()  # as the parameter is stored: optimizers never copy


def test_gradients_match_finite_differences() -> None:
    from rumus_conformance.harness import check_gradient
    schema = op("linear").schema
    samples = list(schema.samples(np.random.default_rng(3)))  # type: ignore[misc]
    assert len(samples) >= 8
    for sample in samples:
        assert check_gradient(schema, sample, float64, "cpu", False) is None, sample.name
        assert check_gradient(schema, sample, float64, "cpu", True) is None, sample.name  # non-contiguous


@pytest.mark.parametrize("xs", X_SHAPES, ids=str)
def test_double_backward_matches_torch(xs: tuple[int, ...]) -> None:
    xa, wa, ba = _arrays(xs, 4)
    gy = np.random.default_rng(5).standard_normal((*xs[:-1], 4))

    def mine() -> list[np.ndarray]:
        x, w, b = (rm.tensor(a, requires_grad=True) for a in (xa, wa, ba))
        y = F.linear(x, w, b)
        gx, gw, gb = rm.autograd.grad((y * y * rm.tensor(gy)).sum(), [x, w, b], create_graph=True)
        assert gx is not None and gw is not None and gb is not None
        ((gx * gx).sum() + (gw * gw).sum() + (gb * gb * gb).sum()).backward()
        return [t.grad.numpy() for t in (x, w, b) if t.grad is not None]

    def theirs() -> list[np.ndarray]:
        x, w, b = (torch.tensor(a, requires_grad=True) for a in (xa, wa, ba))
        y = torch.nn.functional.linear(x, w, b)
        gx, gw, gb = torch.autograd.grad((y * y * torch.tensor(gy)).sum(), [x, w, b], create_graph=True)
        ((gx * gx).sum() + (gw * gw).sum() + (gb * gb * gb).sum()).backward()
        return [t.grad.numpy() for t in (x, w, b)]

    got, want = mine(), theirs()
    assert len(got) == 3
    for g, t in zip(got, want):
        np.testing.assert_allclose(g, t, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("needs", [(False, True, True), (True, False, False), (False, False, True)],
                         ids=["no-x", "x-only", "bias-only"])
def test_only_the_gradients_asked_for_are_computed(needs: tuple[bool, bool, bool]) -> None:
    xa, wa, ba = _arrays((6, 5), 6)
    x, w, b = (rm.tensor(a, requires_grad=r) for a, r in zip((xa, wa, ba), needs))
    y = F.linear(x, w, b)
    g = rm.tensor(np.random.default_rng(7).standard_normal((6, 4)))
    _, seen = _traced(lambda: y.backward(g))
    # one GEMM per matrix gradient asked for (x's, the weight's), one sum for the bias's
    assert seen.count("matmul") == needs[0] + needs[1]
    assert seen.count("sum") == needs[2]
    for t, r in zip((x, w, b), needs):
        assert (t.grad is not None) == r
    ga = g.numpy()
    if needs[0]:
        np.testing.assert_allclose(x.grad.numpy(), ga @ wa, rtol=1e-12)  # type: ignore[union-attr]
    if needs[2]:
        np.testing.assert_allclose(b.grad.numpy(), ga.sum(0), rtol=1e-12)  # type: ignore[union-attr]


def test_float16_runs_the_composite() -> None:
    xa, wa, ba = _arrays((6, 5), 9)
    x, w, b = (rm.tensor(a.astype(np.float16), requires_grad=True) for a in (xa, wa, ba))
    y, seen = _traced(lambda: F.linear(x, w, b))
    assert seen[0] == "composite:linear" and "matmul" in seen and "add" in seen
    assert y.dtype == rm.float16
    want = xa.astype(np.float16).astype(np.float64) @ wa.astype(np.float16).astype(np.float64).T + \
        ba.astype(np.float16).astype(np.float64)
    np.testing.assert_allclose(y.numpy().astype(np.float64), want, rtol=1e-2, atol=1e-2)
    y.sum().backward()
    assert b.grad is not None and b.grad.dtype == rm.float16
    np.testing.assert_allclose(b.grad.numpy(), np.full(4, 6.0))


def test_the_unfused_path_where_the_op_does_not_apply() -> None:
    x, w = rm.randn(3, 5), rm.randn(4, 5)
    for bias in (None, rm.randn(1), rm.randn(4, dtype=rm.float64)):  # no bias, a broadcast bias, mixed dtypes
        _, seen = _traced(lambda b=bias: F.linear(x, w, b))
        assert "linear" not in seen and "composite:linear" not in seen and "matmul" in seen


def test_errors_name_the_layer() -> None:
    x, w = rm.randn(3, 5), rm.randn(4, 5)
    with pytest.raises(ShapeError, match="expects in_features=5"):
        F.linear(rm.randn(3, 6), w, rm.randn(4))
    with pytest.raises(ShapeError, match="one value per output feature"):
        op("linear")(x, w, rm.randn(3))
    with pytest.raises(ShapeError):
        F.linear(x, w, rm.randn(3))


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
def test_autocast_gives_the_dtypes_of_the_unfused_path(dt: str, monkeypatch: Any) -> None:
    def run() -> list[Any]:
        rm.manual_seed(0)
        layer = rm.nn.Linear(5, 4)
        x = rm.randn(3, 5)
        with rm.autocast("cpu", dtype=getattr(rm, dt)):
            y = layer(x)
        y.float().sum().backward()
        assert layer.weight.grad is not None and layer.bias.grad is not None
        return [y.dtype, layer.weight.grad.dtype, layer.bias.grad.dtype, y.numpy().astype(np.float64),
                layer.weight.grad.numpy()]

    fused = run()
    monkeypatch.setattr(F, "_fused_linear", lambda *_: False)
    unfused = run()
    assert fused[:3] == unfused[:3] == [getattr(rm, dt), rm.float32, rm.float32]
    np.testing.assert_array_equal(fused[3], unfused[3])
    np.testing.assert_array_equal(fused[4], unfused[4])


@pytest.mark.parametrize("xs", [(3, 6), (2, 3, 6), (6,)], ids=str)
def test_onnx_export_lowers_linear(xs: tuple[int, ...], tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    layer = rm.nn.Linear(6, 5)
    layer.eval()
    xa = np.random.default_rng(10).standard_normal(xs).astype(np.float32)
    path = tmp_path / "linear.onnx"
    rm.onnx.export(layer, (rm.tensor(xa),), str(path), input_names=["x"], output_names=["y"])
    kinds = [n.op_type for n in onnx.load(str(path)).graph.node if n.op_type != "Identity"]  # Identity: the name y
    assert kinds == (["Gemm"] if len(xs) == 2 else ["Transpose", "MatMul", "Add"])
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    with rm.no_grad():
        want = layer(rm.tensor(xa)).numpy()
    np.testing.assert_allclose(sess.run(None, {"x": xa})[0], want, rtol=1e-5, atol=1e-5)
