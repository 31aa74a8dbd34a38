"""The nn ops' decompositions (rumus/decompositions/nn_*.py) against the float64 references and the cpu
kernels, on each op's conformance samples, with the conformance suite's tolerances; the forward ops'
gradients through the decompositions against finite differences of the reference (float64) and against
the op's own backward; and the edge cases the samples avoid (NaN / -inf / tied maxima, fully masked
attention rows)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import rumus as rm
import rumus.decompositions  # noqa: F401  (registers every family)
from rumus._dispatch import DECOMPOSITIONS
from rumus._runtime import plugins
from rumus.backend_api import trace_dispatch
from rumus_conformance import cases
from rumus_conformance.harness import compare, make_input
from rumus_conformance.tolerances import forward_tolerance, gradient_tolerance
from rumus_contracts import OpRegistry, OpSchema, Sample, parse_dtype
from rumus_contracts.ops import activation, attention, nn, nn_conv, nn_linear, nn_norm, nn_pool

OPS = (
    "layer_norm", "layer_norm_backward", "rms_norm", "rms_norm_backward", "group_norm", "group_norm_backward",
    "batch_norm_stats", "batch_norm", "batch_norm_backward",
    "conv2d", "conv2d_backward_input", "conv2d_backward_weight",
    "avg_pool2d", "avg_pool2d_backward", "max_pool2d", "max_pool2d_backward",
    "flash_attention", "flash_attention_backward",
)
# kernel ops of the nn schema modules decomposed by another family (rumus/decompositions/indexing.py)
ELSEWHERE = {"dropout"}
# ops with differentiable inputs: gradients through the decomposition are checked
GRAD_OPS = (
    "layer_norm", "rms_norm", "group_norm", "batch_norm", "conv2d", "conv2d_backward_input", "conv2d_backward_weight",
    "avg_pool2d", "avg_pool2d_backward", "max_pool2d", "flash_attention",
)
# every op the decompositions (and the gradients through them) dispatch: primitives all
# (the expression table's elementwise ops, sum/amax, matmul, copy/fill, where, gather/scatter_add)
PRIMITIVES_CALLED = frozenset({
    "add", "sub", "mul", "div", "neg", "exp", "log", "rsqrt", "eq", "gt", "minimum", "isnan", "isfinite",
    "logical_and", "logical_not", "sum", "amax", "matmul", "copy", "fill", "where", "gather", "scatter_add",
})
MAX_GRAD_ELEMENTS = 400  # finite differences cost two reference calls per element: keep the file fast


def _schema(name: str) -> OpSchema:
    return plugins().ops.get(name)


def _tensors(arrays: list[np.ndarray], dtype: str, grad: tuple[int, ...] = ()) -> list[rm.Tensor]:
    return [rm.tensor(np.asarray(a), dtype=parse_dtype(dtype), requires_grad=i in grad) for i, a in enumerate(arrays)]


def _f64(t: rm.Tensor) -> np.ndarray:
    return np.asarray(t.detach().to(rm.float64).numpy())


def _outputs(res: Any) -> list[rm.Tensor]:
    return list(res) if isinstance(res, tuple) else [res]


def test_every_kernel_op_of_the_nn_modules_is_covered() -> None:
    """Every op of the nn schema modules that is neither elementwise (the expression table: primitives)
    nor a composite has a decomposition here (a new nn kernel op must bring one)."""
    registry = OpRegistry()
    for module in (nn, nn_conv, nn_linear, nn_norm, nn_pool, attention, activation):
        module.register(registry)  # type: ignore[attr-defined]
    kernel_ops = {n for n in registry.names() if not registry.get(n).composite and not registry.get(n).broadcast}
    assert kernel_ops == set(OPS) | ELSEWHERE
    assert set(OPS) <= set(DECOMPOSITIONS)


@pytest.mark.parametrize("name", OPS)
def test_decompositions_call_only_primitives(name: str) -> None:
    """Forward (float64 and float16, which is widened to float32) and backward through the decomposition."""
    import rumus_contracts
    allowed = set(PRIMITIVES_CALLED) & set(getattr(rumus_contracts, "PRIMITIVES", PRIMITIVES_CALLED))
    schema = _schema(name)
    diff = schema.differentiable_idx
    called: set[str] = set()
    for dtype in ("float64", "float16"):
        for sample in cases.samples(schema)[:3]:
            tensors = _tensors(sample.inputs, dtype, diff if dtype == "float64" else ())
            with trace_dispatch() as log:
                out = _outputs(DECOMPOSITIONS[name](*tensors, **schema.bind_attrs(dict(sample.attrs))))[0]
                if out.requires_grad:
                    out.backward(rm.ones_like(out))
            called |= {op for op, _, _ in log}
    assert called and called <= allowed, sorted(called - allowed)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", OPS)
def test_matches_reference_and_cpu_kernel(name: str, dtype: str) -> None:
    schema = _schema(name)
    rtol, atol = forward_tolerance(schema, parse_dtype(dtype))
    failures = []
    for sample in cases.samples(schema):
        tensors = _tensors(sample.inputs, dtype)
        attrs = schema.bind_attrs(dict(sample.attrs))
        got = _outputs(DECOMPOSITIONS[name](*tensors, **attrs))
        kernel = rm.ops.call(name, *tensors, **attrs)
        want = schema.reference(*[_f64(t) for t in tensors], **attrs)  # type: ignore[misc]
        want = list(want) if isinstance(want, tuple) else [want]
        assert len(got) == len(want) == len(kernel), sample.name
        for k, (g, w, kk) in enumerate(zip(got, want, kernel)):
            assert g.dtype == kk.dtype and g.shape == kk.shape, (sample.name, k)
            for what, other in (("reference", np.asarray(w)), ("cpu kernel", _f64(kk))):
                msg = compare(f"{sample.name} output {k} vs {what}", _f64(g), other, g.dtype, rtol, atol)
                if msg:
                    failures.append(msg)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("name", OPS)
def test_strided_inputs_give_the_same_result(name: str) -> None:
    """Inputs as strided, offset views (every other element of a wider buffer) give the contiguous result:
    a decomposition may be handed what the dispatcher would have copied for a kernel."""
    schema = _schema(name)
    dtype = parse_dtype("float64")
    seen = 0
    for sample in cases.samples(schema)[:3]:
        attrs = schema.bind_attrs(dict(sample.attrs))
        plain = _outputs(DECOMPOSITIONS[name](*[make_input(a, dtype, None, "cpu", False) for a in sample.inputs],
                                              **attrs))
        strided = [make_input(a, dtype, None, "cpu", True) for a in sample.inputs]
        seen += any(not t.is_contiguous() for t in strided)
        for a, b in zip(plain, _outputs(DECOMPOSITIONS[name](*strided, **attrs))):
            np.testing.assert_allclose(_f64(b), _f64(a), rtol=1e-13, atol=1e-13, err_msg=sample.name)
    assert seen


# ---- gradients --------------------------------------------------------------------------------------

def _grad_samples(schema: OpSchema) -> list[Sample]:
    out = []
    for s in cases.samples(schema):
        inputs = [np.asarray(a) for a in s.inputs]
        if schema.name == "flash_attention":  # a head dim of 3 keeps the finite differences few
            inputs[:3] = [a[..., :3] for a in inputs[:3]]
        elif not s.grad:
            continue
        size = sum(inputs[i].size for i in schema.differentiable_idx)
        if 0 < size <= MAX_GRAD_ELEMENTS:
            out.append(Sample(inputs, s.attrs, name=s.name))
    return out


def _finite_difference(fn: Callable[[list[np.ndarray]], float], inputs: list[np.ndarray], i: int,
                       eps: float = 1e-6) -> np.ndarray:
    grad = np.zeros_like(inputs[i])
    for j in range(inputs[i].size):
        plus, minus = [a.copy() for a in inputs], [a.copy() for a in inputs]
        plus[i].reshape(-1)[j] += eps
        minus[i].reshape(-1)[j] -= eps
        grad.reshape(-1)[j] = (fn(plus) - fn(minus)) / (2 * eps)
    return grad


def _grads(fn: Callable[..., Any], tensors: list[rm.Tensor], diff: tuple[int, ...], cot: np.ndarray,
           attrs: dict[str, Any]) -> list[np.ndarray]:
    out = _outputs(fn(*tensors, **attrs))[0]
    out.backward(rm.tensor(cot, dtype=out.dtype))
    return [_f64(tensors[i].grad) for i in diff]


@pytest.mark.parametrize("name", GRAD_OPS)
def test_gradients_through_the_decomposition(name: str) -> None:
    """float64: finite differences of the reference, and the op's own backward (its kernels' formula)."""
    schema = _schema(name)
    diff = schema.differentiable_idx
    rtol, atol = gradient_tolerance(schema, parse_dtype("float64"))
    samples = _grad_samples(schema)
    assert samples, f"{name}: no sample small enough for finite differences"
    failures = []
    for sample in samples:
        attrs = schema.bind_attrs(dict(sample.attrs))
        want_shape = _outputs(schema.reference(*sample.inputs, **attrs))[0]  # type: ignore[misc]
        cot = np.random.default_rng(7).uniform(-1, 1, np.shape(want_shape))

        def loss(ins: list[np.ndarray], attrs: dict[str, Any] = attrs, cot: np.ndarray = cot) -> float:
            res = schema.reference(*ins, **attrs)  # type: ignore[misc]
            return float(np.sum(np.asarray(res[0] if isinstance(res, tuple) else res) * cot))

        got = _grads(DECOMPOSITIONS[name], _tensors(sample.inputs, "float64", diff), diff, cot, attrs)
        own = _grads(rm.ops.get(name).multi, _tensors(sample.inputs, "float64", diff), diff, cot, attrs)
        for i, g, o in zip(diff, got, own):
            fd = _finite_difference(loss, [np.asarray(a, dtype=np.float64) for a in sample.inputs], i)
            for what, other in (("finite differences", fd), ("the op's backward", o)):
                msg = compare(f"{sample.name} d/d{schema.inputs[i]} vs {what}", g, other, parse_dtype("float64"),
                              rtol, atol)
                if msg:
                    failures.append(msg)
    assert not failures, "\n".join(failures)


def test_conv2d_second_derivative_through_the_decomposition() -> None:
    """d/dx of <d conv2d / d w, c> (a double backward through the decomposition) matches the kernels'."""
    rng = np.random.default_rng(3)
    attrs = {"stride": (2, 1), "padding": (1, 1), "dilation": (1, 2), "groups": 2}
    x0, w0, c0 = rng.uniform(-1, 1, (2, 4, 6, 7)), rng.uniform(-1, 1, (6, 2, 3, 2)), None
    results = []
    for fn in (DECOMPOSITIONS["conv2d"], rm.ops.get("conv2d")):
        x = rm.tensor(x0, dtype=rm.float64, requires_grad=True)
        w = rm.tensor(w0, dtype=rm.float64, requires_grad=True)
        y = fn(x, w, **attrs)
        c0 = rng.uniform(-1, 1, y.shape) if c0 is None else c0
        (gw,) = rm.autograd.grad(rm.sum(y * rm.tensor(c0, dtype=rm.float64)), [w], create_graph=True)
        (gx,) = rm.autograd.grad(rm.sum(gw * gw), [x])
        results.append(_f64(gx))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-10, atol=1e-12)


# ---- edge cases the samples avoid -------------------------------------------------------------------

def _pool_edge_input() -> np.ndarray:
    x = np.random.default_rng(5).integers(-2, 3, (2, 3, 7, 6)).astype(np.float64)  # many ties
    x[0, 0, 1, 1] = x[0, 0, 2, 4] = x[1, 2, 5, 0] = np.nan
    x[0, 0, 2, 2] = np.nan  # two NaNs in one window
    x[0, 1, :3, :3] = -np.inf  # windows of -inf only
    x[1, 1, 0, :] = np.inf
    return x


@pytest.mark.parametrize("attrs", [
    {"kernel_size": (2, 2), "stride": (2, 2)},
    {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1), "ceil_mode": True},
    {"kernel_size": (3, 2), "stride": (1, 2), "padding": (1, 1), "dilation": (2, 1)},
])
def test_max_pool_ties_nan_and_inf_match_the_kernel_and_torch(attrs: dict[str, Any]) -> None:
    schema = _schema("max_pool2d")
    a = schema.bind_attrs(attrs)
    x0 = _pool_edge_input()
    x = rm.tensor(x0, dtype=rm.float64)
    y = DECOMPOSITIONS["max_pool2d"](x, **a)
    tx = torch.tensor(x0, requires_grad=True)
    ty = torch.nn.functional.max_pool2d(tx, a["kernel_size"], a["stride"], a["padding"], a["dilation"], a["ceil_mode"])
    g0 = np.random.default_rng(6).uniform(-1, 1, tuple(ty.shape))
    ty.backward(torch.tensor(g0))
    np.testing.assert_array_equal(_f64(y), ty.detach().numpy())
    np.testing.assert_array_equal(_f64(y), _f64(rm.ops.get("max_pool2d")(x, **a)))
    g = rm.tensor(g0, dtype=rm.float64)
    gx = DECOMPOSITIONS["max_pool2d_backward"](g, x, **a)
    np.testing.assert_array_equal(_f64(gx), _f64(rm.ops.get("max_pool2d_backward")(g, x, **a)))
    np.testing.assert_array_equal(_f64(gx), tx.grad.numpy())
    # the gradient through the forward decomposition goes to the chosen element alone (ties not shared)
    xg = rm.tensor(x0, dtype=rm.float64, requires_grad=True)
    DECOMPOSITIONS["max_pool2d"](xg, **a).backward(g)
    np.testing.assert_array_equal(_f64(xg.grad), tx.grad.numpy())


@pytest.mark.parametrize("name, inputs, attrs", [
    ("conv2d", [(1, 2, 0, 3), (3, 2, 1, 2)], {"padding": (1, 1)}),
    ("conv2d_backward_weight", [(1, 3, 2, 4), (1, 2, 0, 3)], {"padding": (1, 1), "kernel_size": (1, 2)}),
    ("max_pool2d", [(1, 2, 0, 3)], {"kernel_size": (2, 2), "stride": (1, 1), "padding": (1, 1)}),
    ("avg_pool2d", [(1, 2, 0, 3)], {"kernel_size": (2, 2), "stride": (1, 1), "padding": (1, 1)}),
])
def test_empty_planes_give_what_the_kernel_gives(name: str, inputs: list[tuple[int, ...]],
                                                  attrs: dict[str, Any]) -> None:
    """A zero-height input with padding has outputs made of padding only (PyTorch refuses such inputs;
    the cpu kernels give zeros, -inf for max pooling): the decomposition gives the same, not an index error."""
    schema = _schema(name)
    a = schema.bind_attrs(attrs)
    tensors = _tensors([np.random.default_rng(1).uniform(-1, 1, s) for s in inputs], "float64")
    got, want = _f64(DECOMPOSITIONS[name](*tensors, **a)), _f64(rm.ops.get(name)(*tensors, **a))
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_max_pool_with_more_kernel_offsets_than_half_precision_counts(dtype: str) -> None:
    """An 18x18 window has 324 offsets, past bfloat16's exact integers (256): the pick stays exact, and
    rounding to bfloat16 makes ties, which go to the first maximum as in the kernel."""
    a = _schema("max_pool2d").bind_attrs({"kernel_size": (18, 18), "stride": (1, 1)})
    x0 = np.random.default_rng(4).permutation(800).reshape(2, 1, 20, 20).astype(np.float64)
    x, g = _tensors([x0, np.random.default_rng(5).uniform(-1, 1, (2, 1, 3, 3))], dtype)
    np.testing.assert_array_equal(_f64(DECOMPOSITIONS["max_pool2d"](x, **a)), _f64(rm.ops.max_pool2d(x, **a)))
    np.testing.assert_array_equal(_f64(DECOMPOSITIONS["max_pool2d_backward"](g, x, **a)),
                                  _f64(rm.ops.max_pool2d_backward(g, x, **a)))


def test_flash_attention_fully_masked_row() -> None:
    """A row whose every score is -inf gives out = 0 and lse = -inf, and no gradient, as the kernel does."""
    rng = np.random.default_rng(8)
    q, k, v = rng.uniform(-1, 1, (2, 2, 4, 3)), rng.uniform(-1, 1, (2, 2, 5, 3)), rng.uniform(-1, 1, (2, 2, 5, 3))
    bias = np.zeros((4, 5))
    bias[2] = -np.inf
    key_bias = np.zeros((2, 5))
    attrs = _schema("flash_attention").bind_attrs({"dropout_p": 0.25, "seed": 3})
    ins = _tensors([q, k, v, bias, key_bias], "float64")
    out, lse = DECOMPOSITIONS["flash_attention"](*ins, **attrs)
    kout, klse = rm.ops.get("flash_attention").multi(*ins, **attrs)
    assert np.all(_f64(out)[:, :, 2] == 0) and np.all(_f64(lse)[:, :, 2] == -np.inf)
    np.testing.assert_allclose(_f64(out), _f64(kout), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(np.isinf(_f64(lse)), np.isinf(_f64(klse)))
    dout = rm.tensor(rng.uniform(-1, 1, out.shape), dtype=rm.float64)
    bins = [*ins[:3], out, dout, lse, *ins[3:]]
    got = DECOMPOSITIONS["flash_attention_backward"](*bins, **attrs)
    want = attention.flash_attention_backward_reference(*[_f64(t) for t in bins], **attrs)
    for g, w in zip(got, want):
        assert np.all(np.isfinite(_f64(g)))
        np.testing.assert_allclose(_f64(g), w, rtol=1e-10, atol=1e-12)


# ---- the dispatcher's route: a backend with the primitives alone ---------------------------------

BACKWARD_OPS = ("conv2d_backward_input", "conv2d_backward_weight", "max_pool2d_backward", "avg_pool2d_backward",
                "layer_norm_backward", "rms_norm_backward", "group_norm_backward", "batch_norm_backward",
                "flash_attention_backward")


def _model_step() -> tuple[float, list[np.ndarray]]:
    """Every forward op decomposed here, called through the dispatcher as the functional layer calls
    them, in one float64 model: (loss, gradients of the inputs and parameters)."""
    rng = np.random.default_rng(0)

    def leaf(*shape: int, lo: float = -1.0, hi: float = 1.0) -> rm.Tensor:
        return rm.tensor(rng.uniform(lo, hi, shape), dtype=rm.float64, requires_grad=True)

    x, w1, w2 = leaf(2, 3, 9, 8), leaf(4, 3, 3, 3), leaf(6, 2, 3, 3)
    gamma, beta = leaf(4, lo=0.5, hi=1.5), leaf(4)
    gn_w, gn_b, ln_w, ln_b, rms_w = leaf(6, lo=0.5, hi=1.5), leaf(6), leaf(6, lo=0.5, hi=1.5), leaf(6), leaf(6)
    ops = rm.ops
    h = ops.conv2d(x, w1, padding=(1, 1))
    mean, var = ops.batch_norm_stats.multi(h.detach())
    h = ops.relu(ops.batch_norm(h, gamma, beta, mean, var, training=True))
    h = ops.max_pool2d(h, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
    h = ops.group_norm(ops.conv2d(h, w2, stride=(2, 2), padding=(2, 2), dilation=(2, 2), groups=2), gn_w, gn_b,
                       num_groups=3)
    h = ops.avg_pool2d(h, kernel_size=(2, 2), stride=(2, 2), ceil_mode=True, count_include_pad=False)
    seq = ops.layer_norm(h.flatten(2).transpose(1, 2).contiguous(), ln_w, ln_b).unsqueeze(1)  # [N, 1, T, 6]
    zero = rm.zeros((), dtype=rm.float64)
    att, _ = ops.flash_attention.multi(seq, seq, seq, zero, zero, is_causal=True, dropout_p=0.25, seed=5)
    out = ops.rms_norm(att, rms_w)
    loss = rm.sum(out * out)
    loss.backward()
    leaves = (x, w1, w2, gamma, beta, gn_w, gn_b, ln_w, ln_b, rms_w)
    return float(loss.item()), [_f64(t.grad) for t in leaves]  # type: ignore[arg-type]


@pytest.mark.parametrize("hide", ["everything but the primitives", "the backward ops"])
def test_a_model_through_the_dispatcher_fallback_matches_the_kernels(hide: str) -> None:
    """The model's loss and gradients with kernels hidden from the cpu backend equal the kernels' own:
    hiding every non-primitive runs the forward decompositions (gradients from their ops), hiding the
    backward ops runs the forward kernels and the backward ops' decompositions (their formulas' calls)."""
    sys.path.insert(0, str(Path(__file__).parent))
    helper = pytest.importorskip("primitives_only")  # the primitive tier's test helper (tests/core)
    from rumus_contracts import PRIMITIVES
    want_loss, want_grads = _model_step()
    hidden = helper.only_primitives() if hide.startswith("everything") else helper.hidden_kernels(BACKWARD_OPS)
    with hidden, trace_dispatch() as log:
        loss, grads = _model_step()
    decomposed = {op for op, _, route in log if route == "decomposition"}
    if hide.startswith("everything"):
        assert set(GRAD_OPS) - {"conv2d_backward_input", "conv2d_backward_weight", "avg_pool2d_backward"} \
            | {"batch_norm_stats"} <= decomposed, decomposed
        assert {op for op, _, route in log if route == "kernel"} <= PRIMITIVES
    else:
        assert set(BACKWARD_OPS) <= decomposed, set(BACKWARD_OPS) - decomposed
    np.testing.assert_allclose(loss, want_loss, rtol=1e-12)
    for got, want in zip(grads, want_grads):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_attention_dropout_refuses_a_compile_capture() -> None:
    """The host-computed keep mask would be frozen into rm.compile's replay (which draws new seeds only for
    kernels): a capture is refused instead of replaying one mask on every step."""
    q = rm.tensor(np.ones((1, 1, 2, 3)), dtype=rm.float64)
    zero = rm.zeros((), dtype=rm.float64)
    attrs = _schema("flash_attention").bind_attrs({"dropout_p": 0.5})

    def attend(p: float) -> rm.Tensor:
        out: rm.Tensor = DECOMPOSITIONS["flash_attention"](q, q, q, zero, zero, **{**attrs, "dropout_p": p})[0]
        return out

    dropping, plain = rm.compile(lambda: attend(0.5)), rm.compile(lambda: attend(0.0))
    dropping()  # the first call runs eagerly, the second is captured
    with pytest.raises(rm.RumusError, match="rm.compile"):
        dropping()
    for _ in range(3):  # no mask: captured and replayed
        np.testing.assert_allclose(_f64(plain()), 1.0)
    assert plain.replays == 1
