"""wgpu cross-entropy rendered from the row-op table (row_wgsl.index_shader into shaders/cross_entropy.wgsl):
the pieces it renders from the table's entries, the generated WGSL's barriers in uniform control flow and
no inf/NaN constants (Tint rejects both), an entry it cannot hold refused; the fused ops against the
float64 reference for float32 and float16, int64 and int32 targets, weights, label_smoothing and
ignore_index (one that does not fit in 32 bits too), a row holding +inf (the table's lse = +inf), and
targets out of range, a 64-bit one included, raising IndexOutOfRange."""

import dataclasses
import re

import numpy as np
import pytest

import rumus as rm
from rumus import IndexOutOfRange
from rumus.ops import get as op
from rumus_contracts.ops.cross_entropy import cross_entropy_bwd_reference, cross_entropy_fwd_reference
from rumus_contracts.ops.expr_lang import Unsupported
from rumus_contracts.ops.row_ops import ROW_OPS, Pass
from rumus_contracts.ops.row_wgsl import _affine, index_shader
from rumus_wgpu.cross_entropy import source
from wgpu_required import wgpu_or_skip

BACKEND, DEVICE = wgpu_or_skip()
RNG = np.random.default_rng(41)


def test_the_table_entries_render():
    fwd, bwd = index_shader("cross_entropy_fwd"), index_shader("cross_entropy_bwd")
    # the smoothing sum of w (lse - x) folds into the online walk, split at x0: sum w (x0 - x) and sum w
    assert [w.kind for w in fwd.walks] == ["online"]
    assert fwd.walks[0].split == ("(C0_ * (x0 - X_))", "C0_")
    assert fwd.walks[0].split_when == "(label_smoothing != 0.0)"
    assert fwd.per_row and fwd.row_outputs == ("lse",) and fwd.index_params == ("ignore_index",)
    assert "at_c0(t)" in fwd.lets and "at_x(row, t)" in fwd.lets
    assert not bwd.walks and bwd.zero == "(t == ignore_index)" and not bwd.per_row
    assert bwd.row_inputs == (("g", "T"), ("t", "int64"), ("lse", "T"))
    assert "(i32(j + 3u) == t)" in bwd.element(bwd.out, 3)  # the element index against the class index


@pytest.mark.parametrize("entry", ["cross_entropy_fwd", "cross_entropy_bwd"])
@pytest.mark.parametrize("vec", [True, False])
@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("index", ["int64", "int32"])
def test_barriers_sit_in_uniform_control_flow(entry, vec, weighted, index):
    main = source(entry, "f32", vec, weighted, index)
    main = main[main.index("fn main("):]
    lines = main.splitlines()
    for k, line in enumerate(lines):
        if "workgroupBarrier" in line or "reduce_group(" in line:
            # at main's top level, or inside an `if` over the uniform params only
            depth = (len(line) - len(line.lstrip())) // 4
            assert depth == 1 or any(re.fullmatch(r" {4}if \(+(WEIGHTED && )?label_smoothing != 0\.0\)+ \{", up)
                                     for up in lines[:k]), line
    assert not re.search(r"\binf\b|\bnan\b|/ 0\.0\b", main, re.IGNORECASE)


@pytest.mark.parametrize(("src", "want"), [
    ("w * (lse - x)", ("lse", "w")), ("x - lse / n", ("lse", "-(1.0 / n)")), ("(lse - x) * 2", ("lse", "2")),
    ("lse * lse", None), ("exp(lse - x)", None), ("x / lse", None), ("w * x", None), ("lse - m", None)])
def test_the_affine_split(src, want):
    # (L, dE/dL) where E is affine in exactly one late value: sum E(L) = sum E(x0) + (L - x0) sum dE/dL
    assert _affine(src, {"lse", "m"}) == want
    if want is not None:
        def value(lse):
            return eval(src, {"exp": np.exp}, {"lse": lse, "w": 0.7, "x": 1.3, "n": 5.0})
        coef = eval(want[1], {}, {"w": 0.7, "x": 1.3, "n": 5.0})
        assert value(2.5) == pytest.approx(value(-1.0) + 3.5 * coef)


def test_a_sum_not_affine_in_the_late_value_gets_its_own_walk():
    base = ROW_OPS["cross_entropy_fwd"]
    squared = dataclasses.replace(base, passes=(*base.passes[:2], Pass("sm", "sum", "w * (lse - x) * (lse - x)",
                                                                       when="label_smoothing != 0")))
    sh = index_shader(squared)
    assert [w.kind for w in sh.walks] == ["online", "sum"] and not sh.walks[0].split
    assert sh.walks[1].when == "(label_smoothing != 0.0)" and sh.walks[1].uniform
    for vec in (True, False):
        src = source(squared, "f32", vec, True, "int64")
        assert src.count("acc = reduce_group(") == 2
        BACKEND.device(0).programs.get(("test two walks", vec), lambda src=src: src)  # compiles


def test_an_entry_the_kernel_cannot_hold_is_refused():
    base = ROW_OPS["cross_entropy_fwd"]
    unshifted = dataclasses.replace(base, passes=(Pass("m", "max", "x"), Pass("s", "sum", "exp(x - m)"),
                                                  *base.passes[2:]))
    with pytest.raises(Unsupported, match="shifted pair"):
        index_shader(unshifted)
    with pytest.raises(Unsupported, match="one input"):
        index_shader(dataclasses.replace(base, inputs=("x", "y")))


def _stored(a: np.ndarray, dtype: str) -> tuple[rm.Tensor, np.ndarray]:
    t = rm.tensor(a.astype(np.float32), device=DEVICE).to(getattr(rm, dtype))
    return t, t.to(rm.float32).numpy().astype(np.float64)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("index", ["int64", "int32"])
@pytest.mark.parametrize("c", [5, 64, 1001])
@pytest.mark.parametrize(("weighted", "smoothing", "ignore"), [(False, 0.0, -100), (True, 0.25, 3),
                                                               (True, 0.0, -100), (False, 0.1, 1 << 40)])
def test_matches_float64(dtype, index, c, weighted, smoothing, ignore):
    if index == "int32" and ignore >= 1 << 31:
        pytest.skip("an int32 target cannot equal it")
    m = 13
    t = RNG.integers(0, c, m)
    t[::4] = ignore
    xs, x = _stored(RNG.standard_normal((m, c)) * 3, dtype)
    ws, w = _stored(RNG.uniform(0.2, 2.0, c), dtype) if weighted else (rm.tensor(np.zeros(()), dtype=dtype,
                                                                                 device=DEVICE), np.zeros(()))
    ts = rm.tensor(t.astype(index), device=DEVICE)
    attrs = {"ignore_index": ignore, "label_smoothing": smoothing}
    loss, lse = op("cross_entropy_fwd").multi(xs, ts, ws, **attrs)
    want_loss, want_lse = cross_entropy_fwd_reference(x, t, w, **attrs)
    tol = 2e-3 if dtype == "float16" else 1e-5 * max(1.0, np.log(c))
    got_lse = lse.to(rm.float32).numpy()
    np.testing.assert_allclose(got_lse, want_lse, rtol=tol, atol=tol)
    np.testing.assert_allclose(loss.to(rm.float32).numpy(), want_loss, rtol=tol,
                               atol=tol * max(1.0, np.abs(want_loss).max()))
    assert (loss.to(rm.float32).numpy()[t == ignore] == 0).all()
    gs, g = _stored(RNG.uniform(-1, 1, m), dtype)
    lse_s, lse_v = _stored(want_lse, dtype)
    dx = op("cross_entropy_bwd")(gs, xs, ts, ws, lse_s, **attrs)
    want_dx = cross_entropy_bwd_reference(g, x, t, w, lse_v, **attrs)
    np.testing.assert_allclose(dx.to(rm.float32).numpy(), want_dx, rtol=tol * 10, atol=tol / 10)
    assert (dx.to(rm.float32).numpy()[t == ignore] == 0).all()


def test_a_row_holding_inf_has_an_infinite_logsumexp():
    x = RNG.standard_normal((3, 8))
    x[1, 2] = np.inf
    x[2, :] = -np.inf
    _, lse = op("cross_entropy_fwd").multi(rm.tensor(x, dtype="float32", device=DEVICE),
                                           rm.tensor(np.array([0, 1, -100]), device=DEVICE),
                                           rm.tensor(np.zeros(()), dtype="float32", device=DEVICE),
                                           ignore_index=-100, label_smoothing=0.0)
    got = lse.numpy()
    assert got[1] == np.inf and got[2] == -np.inf
    np.testing.assert_allclose(got[0], np.log(np.exp(x[0].astype(np.float32)).sum()), rtol=1e-5)


@pytest.mark.parametrize("index", ["int64", "int32"])
@pytest.mark.parametrize("bad", [4, -1, -101, 1 << 40, -(1 << 40)])
@pytest.mark.parametrize("entry", ["fwd", "bwd"])
def test_a_target_out_of_range_raises(index, bad, entry):
    if index == "int32" and abs(bad) >= 1 << 31:
        pytest.skip("not an int32")
    x = rm.tensor(RNG.standard_normal((3, 4)), dtype="float32", device=DEVICE)
    t = rm.tensor(np.array([0, bad, -100]).astype(index), device=DEVICE)
    w = rm.tensor(np.zeros(()), dtype="float32", device=DEVICE)
    attrs = {"ignore_index": -100, "label_smoothing": 0.1}
    with pytest.raises(IndexOutOfRange, match="cross_entropy"):
        if entry == "fwd":
            op("cross_entropy_fwd").multi(x, t, w, **attrs)[0].numpy()
        else:
            g = rm.tensor(np.ones(3), dtype="float32", device=DEVICE)
            op("cross_entropy_bwd")(g, x, t, w, rm.tensor(np.zeros(3), dtype="float32", device=DEVICE),
                                    **attrs).numpy()


def test_a_64_bit_ignore_index_is_compared_whole():
    # 2**40 + 1 is not the ignore_index 2**40 (their low words differ) nor is 2**32 + 5 the class 5
    x = rm.tensor(RNG.standard_normal((2, 8)), dtype="float32", device=DEVICE)
    w = rm.tensor(np.zeros(()), dtype="float32", device=DEVICE)
    for t in ([1 << 40, 3], [(1 << 40) + 1, 3], [(1 << 32) + 5, 3]):
        loss, _ = op("cross_entropy_fwd").multi(x, rm.tensor(np.array(t), device=DEVICE), w,
                                                ignore_index=1 << 40, label_smoothing=0.0)
        if t[0] == 1 << 40:
            assert loss.numpy()[0] == 0
        else:
            with pytest.raises(IndexOutOfRange, match="cross_entropy"):
                loss.numpy()
