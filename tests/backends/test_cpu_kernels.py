"""The CPU kernels, called directly (no core): every non-composite op x claimed dtype x sample, on
contiguous and non-contiguous inputs, against the op schemas' float64 references.

Run from a source checkout after `python csrc/build_cpu_kernels.py` with PYTHONPATH=contracts:backends.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import warnings
from typing import Any

import numpy as np
import pytest

from rumus_contracts import (
    Backend, Device, DType, KernelRegistry, OpRegistry, OpSchema, Sample, TensorArg, bfloat16, bool_,
    contiguous_strides, float16, float32, float64, from_numpy_dtype, int8, int16, int32, int64, parse_dtype,
    uint8,
)
from rumus_contracts.ops import register_core_ops
from rumus_conformance.harness import spelled_out

from rumus_cpu import plugin  # noqa: E402
from rumus_cpu.backend import DTYPES as CPU_DTYPES
from rumus_cpu.backend import CpuBackend

OPS = OpRegistry()
register_core_ops(OPS)
KERNELS = KernelRegistry()
plugin.rumus_register_kernels(KERNELS)

DEFAULT_TOL = {"float32": (1.3e-6, 1e-5), "float64": (1e-7, 1e-7)}
LAYOUTS = ("contiguous", "strided", "transposed")
SENTINEL = 77  # fills every buffer element no tensor covers, so stray reads and writes show


def claimed(op: str) -> set[DType]:
    out: set[DType] = set()
    for entry in KERNELS.entries(op, "cpu"):
        out |= set(entry.dtypes or ())
    return out


def _dispatch_dtype(schema: OpSchema, sample: Sample) -> DType | None:
    """The explicit dtype a sample pins for the dispatch input (packed/fixed ops), else None."""
    if sample.dtypes and schema.inputs and sample.dtypes[schema.dispatch_on] is not None:
        return sample.dtypes[schema.dispatch_on]
    return None


def _cases() -> list[Any]:
    cases = []
    for schema in OPS:
        if schema.composite:
            continue
        samples = list(schema.samples(np.random.default_rng(sum(map(ord, schema.name)))))
        for dt in schema.dtypes:
            if dt not in claimed(schema.name) or dt in (float16, bfloat16):
                continue  # 16-bit floats: swept through the core by tests/backends/test_cpu_half_ops.py
            for i, given in enumerate(samples):
                flat, sample = spelled_out(schema, given)  # a multi-tensor op's list as plain inputs
                if any(d in (float16, bfloat16) for d in sample.dtypes or ()):
                    continue  # pinned 16-bit floats (a multi-tensor op's gradients): swept through the core too
                pinned = _dispatch_dtype(flat, sample)
                if pinned is not None and pinned != dt:
                    continue  # a sample with explicit dtypes runs under its own dtype only
                cases.append(pytest.param(flat, dt, sample, id=f"{schema.name}-{dt.name}-{i}:{sample.name}"))
    return cases


# ---- building arguments ------------------------------------------------------------------------

def layout_of(shape: tuple[int, ...], layout: str) -> tuple[tuple[int, ...], int]:
    """(strides, offset) in elements: row-major, every-other-element with an offset, or column-major."""
    if layout == "contiguous":
        return contiguous_strides(shape), 0
    if layout == "strided":
        return tuple(2 * s for s in contiguous_strides(shape)), 3
    strides, acc = [], 1
    for n in shape:  # column-major: the transpose of a row-major copy, viewed back
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(strides), 1


def view(arg: TensorArg) -> np.ndarray:
    isz = arg.buffer.itemsize
    return np.ndarray(arg.shape, arg.buffer.dtype, arg.buffer, arg.offset * isz, tuple(s * isz for s in arg.strides))


def make_arg(values: np.ndarray | None, shape: tuple[int, ...], dt: DType, layout: str) -> TensorArg:
    """A TensorArg over a fresh buffer (sentinel-filled), holding `values` if given."""
    strides, offset = layout_of(shape, layout)
    extent = offset + 1 + sum((n - 1) * s for n, s in zip(shape, strides) if n > 0)
    buf = np.full(extent + 2, SENTINEL, dtype=np.int64).astype(dt.numpy)
    arg = TensorArg(buf, tuple(shape), strides, offset, dt)
    if values is not None:
        view(arg)[...] = values
    return arg


def expand(arg: TensorArg, shape: tuple[int, ...]) -> TensorArg:
    """What the dispatcher does for broadcast ops: stride 0 on broadcast and prepended dims."""
    pad = len(shape) - len(arg.shape)
    strides = [0] * pad + [0 if n == 1 and m != 1 else s for n, s, m in zip(arg.shape, arg.strides, shape[pad:])]
    return TensorArg(arg.buffer, tuple(shape), tuple(strides), arg.offset, arg.dtype)


def cast_input(x: Any, dt: DType) -> np.ndarray:
    """float64 sample arrays take the dtype under test; bool and integer arrays keep theirs."""
    x = np.asarray(x)
    if x.dtype != np.float64:
        return x
    with warnings.catch_warnings(), np.errstate(invalid="ignore", over="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return x.astype(dt.numpy)


def expect_equal(actual: np.ndarray, expected: Any, out_dt: DType, tol_dt: DType, schema: OpSchema, what: str) -> None:
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != reference {expected.shape}"
    if out_dt.is_floating:
        rtol, atol = schema.tolerance.get(tol_dt.name, DEFAULT_TOL.get(tol_dt.name, DEFAULT_TOL[out_dt.name]))
        np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol,
                                   err_msg=what)
    elif out_dt.is_bool:
        np.testing.assert_array_equal(actual, expected.astype(bool), err_msg=what)
    else:  # integers: exact, with C's wrap-around (reference truncated toward zero, then wrapped)
        exp = expected if expected.dtype.kind in "iub" else np.trunc(expected).astype(np.int64)
        np.testing.assert_array_equal(actual, exp.astype(np.int64).astype(out_dt.numpy), err_msg=what)


# ---- the op x dtype x sample x layout sweep ----------------------------------------------------

def run_sample(schema: OpSchema, dt: DType, sample: Sample, layout: str) -> None:
    attrs = schema.bind_attrs(sample.attrs)
    if not schema.inputs and "dtype" in attrs:
        attrs["dtype"] = dt.name  # fill: the dtype under test is the output's
    pinned = list(sample.dtypes) if sample.dtypes else [None] * len(sample.inputs)
    arrays = [np.asarray(x, dtype=p.numpy) if p is not None else cast_input(x, dt)
              for x, p in zip(sample.inputs, pinned)]
    in_dts = [p if p is not None else from_numpy_dtype(a.dtype) for a, p in zip(arrays, pinned)]
    out_shapes = schema.shape([a.shape for a in arrays], attrs)
    out_dts = schema.dtype(in_dts, attrs)
    kernel_dt = in_dts[schema.dispatch_on] if arrays else out_dts[0]
    kernel = KERNELS.find(schema.name, "cpu", kernel_dt)
    assert kernel is not None, f"no cpu kernel for {schema.name} on {kernel_dt}"

    # inputs the schema wants contiguous are copied to contiguous by the dispatcher before the call
    inputs = [make_arg(a, a.shape, d, "contiguous" if i in schema.contiguous_idx else layout)
              for i, (a, d) in enumerate(zip(arrays, in_dts))]
    if schema.broadcast:
        inputs = [expand(arg, out_shapes[0]) for arg in inputs]
    # copy and fill may write into strided views; every other op gets fresh contiguous outputs
    out_layout = layout if schema.name in ("copy", "fill") else "contiguous"
    outputs = [make_arg(None, s, d, out_layout) for s, d in zip(out_shapes, out_dts)]
    before = [arg.buffer.copy() for arg in inputs]

    kernel(outputs, inputs, attrs)

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        # raw storage values for explicitly typed (packed/fixed) inputs, float64 for the rest
        expected = schema.reference(*[a if p is not None else a.astype(np.float64) for a, p in zip(arrays, pinned)],
                                    **attrs)
    what = f"{schema.name}[{dt}] sample {sample.name!r} attrs {dict(sample.attrs)} layout {layout}"
    if schema.inplace:
        for i, name in enumerate(schema.inputs):
            if name != "grad":  # the reference returns the effective grad too; the kernel leaves grad alone
                expect_equal(view(inputs[i]), expected[i], in_dts[i], dt, schema, f"{what} ({name})")
        return
    expected = [expected] if schema.num_outputs == 1 else list(expected)
    for arg, exp, out_dt in zip(outputs, expected, out_dts):
        expect_equal(view(arg), exp, out_dt, dt, schema, what)
        untouched = np.ones(arg.buffer.size, bool)
        untouched[np.asarray(view(TensorArg(np.arange(arg.buffer.size), arg.shape, arg.strides, arg.offset, arg.dtype)),
                             dtype=np.int64).reshape(-1)] = False
        assert (arg.buffer[untouched] == np.array(SENTINEL).astype(arg.buffer.dtype)).all(), f"{what}: stray write"
    for arg, old in zip(inputs, before):
        np.testing.assert_array_equal(arg.buffer, old, err_msg=f"{what}: an input was modified")


@pytest.mark.parametrize(("schema", "dt", "sample"), _cases())
def test_kernel_matches_reference(schema: OpSchema, dt: DType, sample: Sample) -> None:
    for layout in LAYOUTS:
        run_sample(schema, dt, sample, layout)


# ---- coverage ------------------------------------------------------------------------------------

# The op modules whose CPU kernels this backend's core modules provide; ops of later modules (nn,
# conv, norms, ...) get kernels from modules added to plugin.KERNEL_MODULES by their authors.
CORE_OP_MODULES = ("elementwise", "reduction", "linalg", "memory", "optim")


def _ops_of(*modules: str) -> set[str]:
    reg = OpRegistry()
    for module in modules:
        importlib.import_module(f"rumus_contracts.ops.{module}").register(reg)
    return set(reg.names())


def test_every_op_has_a_cpu_kernel_for_every_supported_dtype() -> None:
    required = _ops_of(*CORE_OP_MODULES)
    if "kernels_fixed" in plugin.KERNEL_MODULES:
        required |= _ops_of("fixed")
    missing, elsewhere = [], []
    for schema in OPS:
        if schema.composite:
            continue
        have = claimed(schema.name)
        want = {d for d in schema.dtypes if d in CPU_DTYPES or d.is_fixed}
        if not KERNELS.entries(schema.name, "cpu") or want - have:
            (missing if schema.name in required else elsewhere).append(
                (schema.name, sorted(d.name for d in want - have)))
    assert not missing, f"ops without CPU kernels: {missing}"
    if elsewhere:
        warnings.warn(f"ops outside the core CPU kernel modules still without CPU kernels: {elsewhere}",
                      UserWarning, stacklevel=1)


def test_where_dispatches_on_either_input() -> None:
    """The where schema dispatches on cond (bool); the kernel picks its loop from a's dtype."""
    assert KERNELS.find("where", "cpu", bool_) is KERNELS.find("where", "cpu", float32) is not None


# ---- targeted cases: big sizes, each reduction strategy, odd layouts ---------------------------

def arg_of(a: np.ndarray) -> TensorArg:
    """A TensorArg viewing numpy array `a` (any strides) without copying."""
    base = a.base if a.base is not None else a
    while base.base is not None:
        base = base.base
    flat = np.ndarray(base.size, a.dtype, base) if base.dtype == a.dtype else None
    if flat is None or not a.size:
        flat = np.ascontiguousarray(a).reshape(-1)
        return TensorArg(flat, a.shape, contiguous_strides(a.shape), 0, from_numpy_dtype(a.dtype))
    isz = a.itemsize
    offset = (a.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // isz
    return TensorArg(flat, a.shape, tuple(s // isz for s in a.strides), offset, from_numpy_dtype(a.dtype))


def out_arg(shape: tuple[int, ...], dt: DType) -> TensorArg:
    return TensorArg(np.empty(int(np.prod(shape)), dt.numpy), shape, contiguous_strides(shape), 0, dt)


def call(op: str, inputs: list[np.ndarray], out_shape: tuple[int, ...], out_dt: DType, **attrs: Any) -> np.ndarray:
    ins = [arg_of(a) for a in inputs]
    out = out_arg(out_shape, out_dt)
    kernel = KERNELS.find(op, "cpu", ins[0].dtype if ins else out_dt)
    assert kernel is not None
    kernel([out], ins, attrs)
    return view(out)


@pytest.mark.parametrize(("shape", "dims"), [
    ((3000, 700), (0,)),             # columns strategy (kept innermost contiguous)
    ((700, 3000), (1,)),             # rows: one output at a time
    ((2_100_000,), (0,)),            # split into fixed chunks
    ((4, 300, 5, 200), (0, 2)),      # non-adjacent reduced dims
    ((60, 70, 80), (0, 1, 2)),
])
def test_large_reductions(shape: tuple[int, ...], dims: tuple[int, ...]) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(np.float32)
    out_shape = tuple(1 if i in dims else n for i, n in enumerate(shape))
    for op, ref in (("sum", np.sum), ("amax", np.max), ("amin", np.min)):
        got = call(op, [x], out_shape, float32, dims=dims)
        want = ref(x.astype(np.float64), axis=dims, keepdims=True)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-4, err_msg=op)
    xt = x.T  # the same reductions on a transposed view
    tdims = tuple(sorted(len(shape) - 1 - d for d in dims))
    got = call("sum", [xt], tuple(1 if i in tdims else n for i, n in enumerate(xt.shape)), float32, dims=tdims)
    np.testing.assert_allclose(got, np.sum(xt.astype(np.float64), axis=tdims, keepdims=True), rtol=2e-6, atol=1e-4)


def test_integer_sums_widen_and_bool_sums() -> None:
    x = np.full((1000, 300), 100, np.int8)
    np.testing.assert_array_equal(call("sum", [x], (1, 1), int64, dims=(0, 1)), [[30_000_000]])
    m = np.arange(70_000) % 3 == 0
    assert call("sum", [m], (1,), int64, dims=(0,))[0] == m.sum()
    assert call("prod", [m[:1]], (1,), int64, dims=(0,))[0] == 1


def test_nan_handling() -> None:
    x = np.array([[1.0, np.nan, 3.0], [np.nan, 5.0, -1.0]], np.float32)
    assert np.isnan(call("amax", [x], (2, 1), float32, dims=(1,))).all()
    np.testing.assert_array_equal(call("argmax", [x], (2, 1), int64, dim=1), [[1], [0]])
    np.testing.assert_array_equal(call("argmin", [x], (2, 1), int64, dim=1), [[1], [0]])
    got = call("maximum", [x, np.zeros_like(x)], x.shape, float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(x))


def test_copy_converts_between_all_storage_dtypes() -> None:
    src = np.array([-3.7, -1.0, -0.5, 0.0, 0.5, 1.0, 2.9, 100.0])
    copy = KERNELS.find("copy", "cpu", float64)
    numpy_dtypes = [d for d in CPU_DTYPES if d != bfloat16]  # bfloat16: tests/backends/test_cpu_half_convert.py
    for a in numpy_dtypes:
        for b in numpy_dtypes:
            x = src.astype(a.numpy) if not a.is_bool else src != 0
            if a.kind == "u":
                x = np.abs(src).astype(a.numpy)
            xa = TensorArg(x.copy(), x.shape, (1,), 0, a)
            out = out_arg(x.shape, b)
            copy([out], [xa], {"dtype": b.name})
            if b.is_bool:
                want = x != 0
            elif b.is_integer and a.is_floating:  # truncate and saturate (issue 20; ARCHITECTURE "Casts")
                from rumus_contracts.ops.memory import saturating_int
                want = saturating_int(x, np.dtype(b.numpy))
            else:
                want = x.astype(b.numpy)
            np.testing.assert_array_equal(view(out), want, err_msg=f"{a} -> {b}")
    assert int16 in claimed("copy")


def test_copy_between_overlapping_views_of_one_buffer() -> None:
    buf = np.arange(10, dtype=np.float32)
    dst = TensorArg(buf, (8,), (1,), 2, float32)
    src = TensorArg(buf, (8,), (1,), 0, float32)
    KERNELS.lookup("copy", "cpu", float32)([dst], [src], {"dtype": None})
    np.testing.assert_array_equal(buf, [0, 1, 0, 1, 2, 3, 4, 5, 6, 7])


def test_fill_strided_view_and_integer_values() -> None:
    buf = np.zeros(12, np.int32)
    out = TensorArg(buf, (2, 3), (6, 2), 1, int32)
    KERNELS.lookup("fill", "cpu", int32)([out], [], {"value": -2.7, "shape": (2, 3), "dtype": "int32"})
    np.testing.assert_array_equal(buf, [0, -2, 0, -2, 0, -2, 0, -2, 0, -2, 0, -2])


def test_clamp_integers_with_float_bounds() -> None:
    x = np.array([-5, -1, 0, 1, 5, 120], np.int8)
    got = call("clamp", [x], x.shape, int8, min=-1.5, max=300.0)
    np.testing.assert_array_equal(got, [-1, -1, 0, 1, 5, 120])
    got = call("clamp", [x.astype(np.uint8)], x.shape, uint8, min=-10.0, max=0.5)
    np.testing.assert_array_equal(got, [0, 0, 0, 0, 0, 0])


def test_matmul_batch_broadcast_and_transposed_views() -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((2, 1, 40, 30))
    b = rng.standard_normal((3, 50, 30)).transpose(0, 2, 1)  # a transposed view, strides kept
    got = call("matmul", [a, b], (2, 3, 40, 50), float64)
    np.testing.assert_allclose(got, a @ b, rtol=1e-12, atol=1e-12)


# ---- the backend object -------------------------------------------------------------------------

def test_backend_protocol_and_buffers() -> None:
    be = CpuBackend()
    assert isinstance(be, Backend)
    dev = be.devices()[0]
    assert dev == Device("cpu", 0)
    caps = be.capabilities(dev)
    assert set(caps.dtypes) == {float32, float64, float16, bfloat16, int64, int32, int16, int8, uint8, bool_}
    buf = be.allocate(dev, 6, float32)
    assert buf.shape == (6,) and buf.dtype == np.float32
    src = np.arange(12, dtype=np.float64).reshape(3, 4)
    buf = be.from_numpy(dev, src, float32)
    assert buf.shape == (12,) and buf.dtype == np.float32 and buf.flags.c_contiguous
    t = be.to_numpy(TensorArg(buf, (4, 2), (1, 4), 1, float32))  # a transposed, offset view
    np.testing.assert_array_equal(t, np.array([[1, 5], [2, 6], [3, 7], [4, 8]], np.float32))
    assert t.flags.c_contiguous and t.dtype == np.float32
    dst = be.allocate(dev, 8, int64)
    be.copy_(TensorArg(dst, (4, 2), (2, 1), 0, int64), TensorArg(buf, (4, 2), (1, 4), 1, float32))
    np.testing.assert_array_equal(dst, [1, 5, 2, 6, 3, 7, 4, 8])
    assert be.to_numpy(TensorArg(buf, (0, 3), (3, 1), 0, float32)).shape == (0, 3)
    assert be.to_numpy(TensorArg(buf, (), (), 5, float32)).shape == ()
    be.synchronize(dev)
    assert set(be.kernels) >= {s.name for s in OPS if not s.composite and s.name in _ops_of(*CORE_OP_MODULES)}


def test_plugin_loads_through_pluggy(monkeypatch: pytest.MonkeyPatch) -> None:
    from rumus_contracts import load_plugins
    monkeypatch.setenv("RUMUS_PLUGINS", "cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # other in-tree plugins may be half-written right now
        loaded = load_plugins()
    assert "cpu" in loaded.backends.names()
    assert loaded.kernels.find("add", "cpu", float32) is not None
    assert loaded.backends.get("cpu").name == "cpu"


# ---- threads: results independent of RUMUS_NUM_THREADS ------------------------------------------

THREAD_SCRIPT = r"""
import json, sys
import numpy as np
from rumus_contracts import KernelRegistry, TensorArg, contiguous_strides, float32, float64, int64, bool_
from rumus_cpu import plugin, threads
reg = KernelRegistry(); plugin.rumus_register_kernels(reg)
rng = np.random.default_rng(0)
a = rng.standard_normal((1200, 1000)).astype(np.float32)
b = rng.standard_normal((1000,)).astype(np.float32)
def arg(x, shape=None, strides=None):
    return TensorArg(x.reshape(-1), shape or x.shape, strides or contiguous_strides(x.shape), 0,
                     {np.float32: float32, np.float64: float64}[x.dtype.type])
def out(shape, dt=float32):
    return TensorArg(np.empty(int(np.prod(shape)), dt.numpy), shape, contiguous_strides(shape), 0, dt)
res = {}
o = out(a.shape); reg.lookup("add", "cpu", float32)([o], [arg(a), arg(b, a.shape, (0, 1))], {}); res["add"] = o.buffer
o = out(a.shape); reg.lookup("exp", "cpu", float32)([o], [arg(a)], {}); res["exp"] = o.buffer
o = out(a.shape, bool_); reg.lookup("gt", "cpu", float32)([o], [arg(a), arg(b, a.shape, (0, 1))], {})
res["gt"] = o.buffer
o = out((1000, 1200)); reg.lookup("copy", "cpu", float32)([o], [arg(a, (1000, 1200), (1, 1000))], {"dtype": None})
res["copy_t"] = o.buffer
o = out(a.shape); reg.lookup("softmax", "cpu", float32)([o], [arg(a)], {"dim": 1}); res["softmax"] = o.buffer
o = out((1, 1000)); reg.lookup("sum", "cpu", float32)([o], [arg(a)], {"dims": (0,)}); res["sum0"] = o.buffer
o = out((1, 1)); reg.lookup("sum", "cpu", float32)([o], [arg(a)], {"dims": (0, 1)}); res["sum_all"] = o.buffer
o = out((1200, 1), int64); reg.lookup("argmax", "cpu", float32)([o], [arg(a)], {"dim": 1}); res["argmax"] = o.buffer
p, g, m, v = (a.astype(np.float64) for _ in range(4))
m = m * 0; v = v * 0 + 0.01
reg.lookup("adam_step", "cpu", float64)([], [arg(p), arg(g), arg(m), arg(v)], {"lr": 0.01, "beta1": 0.9,
    "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01, "decoupled": True, "step": 3}); res["adam"] = p.reshape(-1)
np.savez(sys.argv[1], **res)
print(json.dumps({"threads": threads.get_num_threads()}))
"""


def test_results_do_not_depend_on_thread_count(tmp_path: Any) -> None:
    results, infos = [], []
    for n in (1, 2):
        path = tmp_path / f"t{n}.npz"
        env = {**os.environ, "RUMUS_NUM_THREADS": str(n)}
        proc = subprocess.run([sys.executable, "-c", THREAD_SCRIPT, str(path)], env=env, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        infos.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        results.append(np.load(path))
    assert [i["threads"] for i in infos] == [1, 2]
    for key in results[0].files:
        assert results[0][key].size >= 1 and (key in ("sum0", "sum_all", "argmax") or results[0][key].size > 1_000_000)
        np.testing.assert_array_equal(results[0][key], results[1][key], err_msg=key)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1200, 1000)).astype(np.float32)
    b = rng.standard_normal((1000,)).astype(np.float32)
    np.testing.assert_array_equal(results[1]["add"], (a + b).reshape(-1))
    np.testing.assert_array_equal(results[1]["copy_t"], a.T.reshape(-1))
    np.testing.assert_allclose(results[1]["sum_all"], [a.astype(np.float64).sum()], rtol=1e-6)


def test_zero_size_and_zero_dim_calls_do_nothing_harmful() -> None:
    empty = np.zeros((0, 5), np.float32)
    for op in ("add", "mul", "maximum"):
        call(op, [empty, empty], (0, 5), float32)
    call("exp", [empty], (0, 5), float32)
    assert call("sum", [empty], (1, 5), float32, dims=(0,)).tolist() == [[0.0] * 5]
    assert call("prod", [empty], (1, 5), float32, dims=(0,)).tolist() == [[1.0] * 5]
    s = call("add", [np.array(2.0, np.float32), np.array(3.0, np.float32)], (), float32)
    assert s.shape == () and float(s) == 5.0
    assert parse_dtype("int32") == int32


def test_adam_on_strided_state() -> None:
    """adam_step's schema asks for contiguous inputs, but the kernel also honours strides."""
    rng = np.random.default_rng(3)
    p, g, m = (rng.uniform(-1, 1, (6, 5)) for _ in range(3))
    v = rng.uniform(0, 0.01, (6, 5))
    attrs = {"lr": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.1, "decoupled": False,
             "step": 4}
    want = OPS.get("adam_step").reference(p, g, m, v, **attrs)
    args = [make_arg(a, a.shape, float64, layout) for a, layout in zip((p, g, m, v), LAYOUTS + ("strided",))]
    KERNELS.lookup("adam_step", "cpu", float64)([], args, attrs)
    for i in (0, 2, 3):
        np.testing.assert_allclose(view(args[i]), want[i], rtol=1e-12, atol=1e-12)


def test_copy_of_fixed_point_tensors_is_a_raw_copy() -> None:
    from rumus_contracts import DTypeError, fixed_i16
    fx = fixed_i16(8)
    buf = np.array([[1, -2, 300], [4, 5, -32768]], np.int16)
    src = TensorArg(buf.reshape(-1), (3, 2), (1, 3), 0, fx)  # a transposed view
    out = out_arg((3, 2), fx)
    KERNELS.lookup("copy", "cpu", fx)([out], [src], {"dtype": None})
    np.testing.assert_array_equal(view(out), buf.T)
    with pytest.raises(DTypeError, match="fixed"):
        KERNELS.lookup("copy", "cpu", fx)([out_arg((3, 2), float32)], [src], {"dtype": "float32"})


@pytest.mark.parametrize("shape", [(70, 130), (3, 70, 130), (2, 65, 3, 97)])
def test_transposed_operands_take_the_tiled_path(shape: tuple[int, ...]) -> None:
    """Operands laid out across the iteration order (transposed views) are walked in tiles."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal(shape).astype(np.float32)
    bt = rng.standard_normal(shape[:-2] + shape[:-3:-1]).astype(np.float32)
    b = np.swapaxes(bt, -1, -2)  # a view: the innermost dim steps across rows
    np.testing.assert_array_equal(call("add", [a, b], shape, float32), a + b)
    row = rng.standard_normal(shape[-1:]).astype(np.float32)
    got = call("mul", [b, np.broadcast_to(row, shape)], shape, float32)
    np.testing.assert_array_equal(got, b * row)
    # a strided (transposed) output: copy writes across rows
    buf = np.full(a.size + 5, SENTINEL, np.float64)
    strides_t = list(contiguous_strides(shape[:-2] + shape[:-3:-1]))
    strides_t[-1], strides_t[-2] = strides_t[-2], strides_t[-1]
    dst = TensorArg(buf, shape, tuple(strides_t), 5, float64)
    KERNELS.lookup("copy", "cpu", float32)([dst], [arg_of(a)], {"dtype": "float64"})
    np.testing.assert_array_equal(view(dst), a.astype(np.float64))
    assert (buf[:5] == SENTINEL).all()


FORK_SCRIPT = r"""
import os, sys
import numpy as np
from rumus_contracts import TensorArg, float32
from rumus_cpu import plugin, threads
from rumus_contracts import KernelRegistry
import rumus as rm
rm.zeros(1)  # the cpu backend starts: its fork hook (children run kernels on one thread) is registered then
reg = KernelRegistry(); plugin.rumus_register_kernels(reg)
threads.set_num_threads(2)
n = 2_000_000
a = np.random.default_rng(0).random(n, dtype=np.float32); o = np.empty_like(a)
run = lambda: reg.lookup("exp", "cpu", float32)([TensorArg(o, (n,), (1,), 0, float32)],
                                                [TensorArg(a, (n,), (1,), 0, float32)], {})
run()  # the parent's thread pool now exists
pid = os.fork()
if pid == 0:
    run()
    os._exit(0 if threads.get_num_threads() == 1 and np.allclose(o, np.exp(a), rtol=2e-6) else 3)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_forked_children_do_not_hang() -> None:
    """The kernels' pool does not survive fork(); children (DataLoader workers) run kernels on one thread."""
    proc = subprocess.run([sys.executable, "-c", FORK_SCRIPT], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
