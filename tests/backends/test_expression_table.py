"""The elementwise expression table: kernels, claims and backward formulas all come from it."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest
import torch

import rumus as rm
import rumus_cpu
from rumus_contracts import BackendUnavailable, parse_dtype
from rumus_contracts.ops import expr_c, expr_wgsl
from rumus_contracts.ops.expr_lang import Unsupported, parse
from rumus_contracts.ops.expressions import EXPRESSIONS, all_kernels, backward_ops


def test_stale_extension_is_refused_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    from rumus_cpu import _lib
    with pytest.raises(_lib.StaleExtension, match=r"pip install -e \."):
        _lib.check_build(table_hash="0" * 64)
    with pytest.raises(_lib.StaleExtension, match="csrc/ changed"):
        _lib.check_build(sources_hash="0" * 64)
    _lib.check_build()  # the extension under test matches its sources


def test_stale_extension_fails_the_backend_not_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    """A table edited after the build: importing the kernels fails, and the backend is unavailable
    (conformance reports that as a failure), instead of ops silently going missing."""
    monkeypatch.setattr(expr_c, "table_hash", lambda: "f" * 64)
    monkeypatch.delitem(sys.modules, "rumus_cpu._lib")
    monkeypatch.delattr(rumus_cpu, "_lib")
    with pytest.raises(ImportError, match="another expression table"):
        importlib.import_module("rumus_cpu._lib")
    monkeypatch.delitem(sys.modules, "rumus_cpu._lib", raising=False)
    from rumus_cpu.backend import CpuBackend
    with pytest.raises(BackendUnavailable, match=r"pip install -e \."):
        CpuBackend()


def test_cpu_claims_are_derived_from_the_table() -> None:
    from rumus_cpu.kernels_elementwise import KERNELS
    claimed = {op: tuple(d.name for d in dts) for op, _, dts in KERNELS}
    for op, e in all_kernels().items():
        want = tuple(expr_c.supported(op, e))
        assert claimed.get(op, ()) == want, op
    # integer floor division is expressible in C, true division is not
    assert "int64" in claimed["floor_divide"] and "int64" not in claimed["div"]
    assert "bool" in claimed["logical_xor"] and "float32" in claimed["gelu_backward"]


def test_wgsl_claims_follow_what_the_renderer_expresses() -> None:
    expr_wgsl.function("floor_divide", EXPRESSIONS["floor_divide"], "l")  # emulated int64 has // ...
    with pytest.raises(Unsupported):
        expr_wgsl.function("div", EXPRESSIONS["div"], "l")  # ... but no true division: no claim, KernelNotFound
    with pytest.raises(Unsupported):
        expr_wgsl.function("exp", EXPRESSIONS["exp"], "i")


def test_every_derivative_has_a_fused_op_with_a_schema() -> None:
    from rumus_contracts import OpRegistry
    from rumus_contracts.ops import register_core_ops
    reg = OpRegistry()
    register_core_ops(reg)
    for name in backward_ops():
        assert reg.get(name).differentiable == ("grad",), name


def test_bad_expressions_are_named() -> None:
    with pytest.raises(ValueError, match="only `name = expr;`"):
        parse("x + 1; x")
    with pytest.raises(ValueError, match="unknown name"):
        expr_c._element("bad", expr_c.Expr("z + 1", "float"), "float32")


def _both(values: list[float], dtype: str) -> tuple[rm.Tensor, torch.Tensor]:
    return rm.tensor(values, dtype=dtype), torch.tensor(values, dtype=getattr(torch, dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "int8"])
def test_floor_divide_and_remainder_follow_python_like_torch(dtype: str) -> None:
    a, ta = _both([7, -7, 7, -7, 0, 5, -6, 3], dtype)
    b, tb = _both([2, 2, -2, -2, 3, -5, 4, 7], dtype)
    np.testing.assert_array_equal((a // b).numpy(), (ta // tb).numpy())
    np.testing.assert_array_equal((a % b).numpy(), (ta % tb).numpy())
    np.testing.assert_array_equal(rm.fmod(a, b).numpy(), torch.fmod(ta, tb).numpy())
    np.testing.assert_array_equal((a // 3).numpy(), (ta // 3).numpy())
    np.testing.assert_array_equal((a % 3).numpy(), (ta % 3).numpy())


def test_integer_division_by_zero_is_refused() -> None:
    a = rm.tensor([1, 2, 3])
    with pytest.raises(ZeroDivisionError, match="floor_divide"):
        a // rm.tensor([1, 0, 1])
    with pytest.raises(ZeroDivisionError, match="remainder"):
        a % 0
    assert np.isinf((rm.tensor([1.0]) // 0.0).numpy()).all()  # floats follow IEEE, like torch


def test_rounding_and_predicates_match_torch() -> None:
    vals = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.4, -3.7, float("nan"), float("inf"), -float("inf")]
    x, tx = _both(vals, "float32")
    for name in ("round", "floor", "ceil", "trunc", "sign", "isnan", "isinf", "isfinite"):
        np.testing.assert_array_equal(getattr(x, name)().numpy(), getattr(tx, name)().numpy(), err_msg=name)
    np.testing.assert_allclose(rm.round(x, decimals=1).numpy(), torch.round(tx, decimals=1).numpy())
    i, ti = _both([1, 0, 3], "int64")
    np.testing.assert_array_equal(i.isnan().numpy(), ti.isnan().numpy())
    np.testing.assert_array_equal(i.floor().numpy(), ti.floor().numpy())


def test_logic_ops_match_torch() -> None:
    a, ta = _both([0, 1, 2, 0], "int32")
    b, tb = _both([0, 0, 3, 5], "int32")
    for name in ("logical_and", "logical_or", "logical_xor"):
        np.testing.assert_array_equal(getattr(rm, name)(a, b).numpy(), getattr(torch, name)(ta, tb).numpy())
    np.testing.assert_array_equal(rm.logical_not(a).numpy(), torch.logical_not(ta).numpy())
    m = rm.tensor([True, False, True])
    np.testing.assert_array_equal((m ^ rm.tensor([True, True, False])).numpy(), [False, True, True])


ACTS = [("mish", {}), ("softsign", {}), ("hardswish", {}), ("hardsigmoid", {}), ("selu", {}), ("celu", {"alpha": 0.75}),
        ("logsigmoid", {}), ("gelu", {}), ("silu", {}), ("elu", {"alpha": 0.5})]


@pytest.mark.parametrize("name,kw", ACTS)
def test_activation_values_gradients_and_second_derivatives_match_torch(name: str, kw: dict[str, float]) -> None:
    vals = np.linspace(-5.1, 5.3, 41)
    x = rm.tensor(vals, dtype="float64", requires_grad=True)
    tx = torch.tensor(vals, dtype=torch.float64, requires_grad=True)
    y = getattr(rm.nn.functional, name)(x, **kw)
    ty = getattr(torch.nn.functional, name)(tx, **kw)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    (g,) = rm.autograd.grad(y.sum(), x, create_graph=True)
    (tg,) = torch.autograd.grad(ty.sum(), tx, create_graph=True)
    # torch's float64 hardsigmoid backward multiplies by 1/6 rounded to float32 (rel. error 3e-8)
    rtol = 1e-7 if name == "hardsigmoid" else 1e-10
    np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=rtol, atol=1e-12)
    if name in ("hardswish", "hardsigmoid"):
        return  # piecewise: torch's second derivative is a graph of masks, not comparable at the kinks
    (gg,) = rm.autograd.grad(g.sum(), x)
    (tgg,) = torch.autograd.grad(tg.sum(), tx)
    np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-8, atol=1e-10)


def test_binary_fused_backward_matches_torch() -> None:
    a = rm.tensor([[0.5, -1.2, 2.0]], dtype="float64", requires_grad=True)
    b = rm.tensor([[1.5], [-0.7]], dtype="float64", requires_grad=True)
    ta = torch.tensor(a.detach().numpy(), requires_grad=True)
    tb = torch.tensor(b.detach().numpy(), requires_grad=True)
    for fn in ("atan2", "remainder", "fmod", "logaddexp"):
        a.grad = b.grad = ta.grad = tb.grad = None
        getattr(rm, fn)(a, b).sum().backward()
        getattr(torch, fn)(ta, tb).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-12, err_msg=fn)
        np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-12, err_msg=fn)


def test_nn_layers_exist_for_the_new_activations() -> None:
    x = rm.tensor([-1.0, 0.5, 4.0])
    for layer, fn in ((rm.nn.Softsign(), torch.nn.Softsign()), (rm.nn.Hardswish(), torch.nn.Hardswish()),
                      (rm.nn.SELU(), torch.nn.SELU()), (rm.nn.CELU(0.5), torch.nn.CELU(0.5)),
                      (rm.nn.LogSigmoid(), torch.nn.LogSigmoid()), (rm.nn.Hardsigmoid(), torch.nn.Hardsigmoid()),
                      (rm.nn.Hardtanh(-0.5, 2.0), torch.nn.Hardtanh(-0.5, 2.0)),
                      (rm.nn.Tanhshrink(), torch.nn.Tanhshrink())):
        np.testing.assert_allclose(layer(x).numpy(), fn(torch.tensor(x.numpy())).numpy(), rtol=1e-6, atol=1e-7)


def test_dtype_claims_need_no_hand_lists() -> None:
    """float16 rides on float32's WGSL kind; the groups come from the table."""
    assert parse_dtype("float16").name in expr_c.GROUPS[EXPRESSIONS["gelu"].dtypes]


def test_conformance_exits_nonzero_on_a_stale_extension() -> None:
    """`rumus conformance` against a stale build fails (exit 1) and says how to rebuild."""
    import subprocess
    code = ("import sys\nfrom rumus_contracts.ops import expr_c\nexpr_c.table_hash = lambda: 'f' * 64\n"
            "from rumus_conformance.runner import main\nsys.exit(main(['--backend', 'cpu', '-k', 'error_inputs']))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert "another expression table" in proc.stdout and "pip install -e ." in proc.stdout
