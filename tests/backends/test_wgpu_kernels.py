"""Direct kernel tests of the wgpu backend (no core): every non-composite op in the registry, every
dtype the backend claims that the schema allows, every sample, contiguous and non-contiguous inputs,
against the schema's float64 reference. Runs on Mesa's lavapipe in CI; skipped without an adapter."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

from wgpu_direct import BACKEND, CAPS, DEV, OPS  # skips this module without wgpu or an adapter

from rumus_contracts import (
    DType, OpSchema, RumusError, Sample, ShaderKernel, TensorArg, bfloat16, contiguous_strides, float16, float32,
    from_numpy_dtype, int32, parse_dtype,
)
from rumus_contracts.shapes import broadcast_shapes
from rumus_conformance.harness import spelled_out
from rumus_wgpu import gemm
from rumus_wgpu.kernels import CLAIMS

DEFAULT_TOL = {"float32": (1.3e-6, 1e-5), "float16": (1e-3, 1e-5)}
# GPU transcendental functions are not correctly rounded: widened here, and reported upstream
WIDEN: dict[str, dict[str, tuple[float, float]]] = {}
# bfloat16 is left to the conformance suite (through the registry: most ops run widened, not as
# BACKEND.kernels[op]) and tests/wgpu/test_bf16_storage.py, as the CPU's direct test leaves its 16-bit floats
CASES = [(s.name, d) for s in OPS if not s.composite and s.name in CLAIMS
         for d in CLAIMS[s.name] if (d in s.dtypes or s.name in ("where", "fill")) and d.name != "bfloat16"]


# -- helpers -------------------------------------------------------------------------------------

def upload(x: np.ndarray, dtype: DType, layout: str = "contiguous") -> TensorArg:
    """x as `dtype` on the device: "contiguous"; "offset" (contiguous after 3 elements of padding);
    "strided": a transposed-copy view for >= 2 dims, else every other element after an offset of 1."""
    x = np.asarray(x).astype(dtype.numpy)
    shape = x.shape
    flat = x.reshape(-1)
    if layout == "contiguous" or x.size == 0:
        return TensorArg(BACKEND.from_numpy(DEV, x, dtype), shape, contiguous_strides(shape), 0, dtype)
    if layout == "offset":
        padded = np.concatenate([np.zeros(3, dtype.numpy), flat])
        return TensorArg(BACKEND.from_numpy(DEV, padded, dtype), shape, contiguous_strides(shape), 3, dtype)
    if x.ndim < 2:
        spread = np.zeros(2 * x.size + 1, dtype.numpy)
        spread[1::2] = flat
        strides = tuple(2 * s for s in contiguous_strides(shape))
        return TensorArg(BACKEND.from_numpy(DEV, spread, dtype), shape, strides, 1, dtype)
    perm = tuple(reversed(range(x.ndim)))
    stored = np.ascontiguousarray(x.transpose(perm))
    st = contiguous_strides(stored.shape)
    strides = tuple(st[perm.index(d)] for d in range(x.ndim))
    return TensorArg(BACKEND.from_numpy(DEV, stored, dtype), shape, strides, 0, dtype)


def expand(t: TensorArg, shape: tuple[int, ...]) -> TensorArg:
    pad = len(shape) - len(t.shape)
    strides = tuple(0 if i < pad or t.shape[i - pad] == 1 and shape[i] != 1 else t.strides[i - pad]
                    for i in range(len(shape)))
    return TensorArg(t.buffer, shape, strides, t.offset, t.dtype)


def empty(shape: tuple[int, ...], dtype: DType, layout: str = "contiguous") -> TensorArg:
    if layout == "contiguous" or len(shape) < 2:
        n = int(np.prod(shape))
        return TensorArg(BACKEND.allocate(DEV, n, dtype), shape, contiguous_strides(shape), 0, dtype)
    return upload(np.zeros(shape), dtype, layout)


def tolerance(schema: OpSchema, dtype: DType) -> tuple[float, float]:
    tol = schema.tolerance.get(dtype.name) or WIDEN.get(schema.name, {}).get(dtype.name)
    return tol or DEFAULT_TOL.get(dtype.name, (0.0, 0.0))


def check(got: np.ndarray, want: Any, dtype: DType, tol: tuple[float, float], what: str) -> None:
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == dtype.numpy, f"{what}: dtype {got.dtype} != {dtype.numpy}"
    if dtype.is_floating:
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol[0], atol=tol[1], err_msg=what)
    else:
        np.testing.assert_array_equal(got, want.astype(dtype.numpy), err_msg=what)


def input_dtype(sample: Sample, dtype: DType, k: int) -> DType:
    """The suite's rule: explicit sample dtypes first; float64 arrays take the dtype under test; bool and
    integer arrays keep theirs (where's condition, indices)."""
    if sample.dtypes is not None and sample.dtypes[k] is not None:
        return sample.dtypes[k]
    arr = np.asarray(sample.inputs[k])
    return dtype if arr.dtype == np.float64 else from_numpy_dtype(arr.dtype)


# -- every op x dtype x sample ---------------------------------------------------------------------

@pytest.mark.parametrize(("op", "dtype"), CASES, ids=[f"{o}-{d.name}" for o, d in CASES])
def test_op(op: str, dtype: DType) -> None:
    if dtype not in CAPS.dtypes:
        pytest.skip(f"{dtype} is not available on {CAPS.description}")
    schema = OPS.get(op)
    kernel = BACKEND.kernels[op]
    rng = np.random.default_rng(1234)
    checked = 0
    for given in OPS.get(op).samples(rng):
        schema, sample = spelled_out(OPS.get(op), given)  # a multi-tensor op's list as plain inputs
        if dtype not in (float16, bfloat16) and any(d in (float16, bfloat16) for d in sample.dtypes or ()):
            continue  # its pinned 16-bit gradients are raw words here: tested through the core (conformance)
        attrs = schema.bind_attrs(sample.attrs)
        if op == "fill":
            attrs["dtype"] = dtype.name
        if op == "copy" and attrs["dtype"] is not None and parse_dtype(attrs["dtype"]) not in CAPS.dtypes:
            continue  # e.g. float64: no storage kernels on this backend
        in_dtypes = [input_dtype(sample, dtype, k) for k in range(len(sample.inputs))]
        host = [np.asarray(x).astype(d.numpy) for x, d in zip(sample.inputs, in_dtypes)]
        ref_in = [h.astype(np.float64) for h in host]
        ref = schema.reference(*ref_in, **attrs)
        for layout in ("contiguous", "strided"):
            what = f"{op}[{dtype}] {sample.name} {layout}"
            lay = [("offset" if k in schema.contiguous_idx else layout) if layout != "contiguous" else layout
                   for k in range(len(host))]
            args = [upload(h, in_dtypes[k], lay[k]) for k, h in enumerate(host)]
            shapes = [tuple(h.shape) for h in host]
            out_shapes = schema.shape(shapes, attrs)
            if schema.broadcast and len(args) > 1:
                full = broadcast_shapes(op, *shapes)
                args = [expand(a, full) for a in args]
            out_dtypes = schema.dtype([a.dtype for a in args] or [dtype], attrs)
            out_layout = layout if op in ("copy", "fill") else "contiguous"
            outs = [empty(tuple(s), d, out_layout) for s, d in zip(out_shapes, out_dtypes)]
            kernel(outs, args, attrs)
            if schema.inplace:
                for i in schema.mutates_idx:
                    check(BACKEND.to_numpy(args[i]), ref[i], dtype, tolerance(schema, dtype), f"{what} input {i}")
            else:
                refs = ref if isinstance(ref, tuple) else (ref,)
                for o, r in zip(outs, refs):
                    check(BACKEND.to_numpy(o), r, o.dtype, tolerance(schema, o.dtype if o.dtype.is_floating
                                                                     else dtype), what)
            checked += 1
    assert checked, f"no sample of {op} ran for {dtype}"


# -- GEMM: every tile and operand layout, edges, batches, split-K --------------------------------

def _matmul(a: np.ndarray, b: np.ndarray, a_t: bool, b_t: bool, dtype: DType = float32,
            c_shape: tuple[int, ...] | None = None) -> np.ndarray:
    ta = upload(np.swapaxes(a, -1, -2), dtype) if a_t else upload(a, dtype)
    tb = upload(np.swapaxes(b, -1, -2), dtype) if b_t else upload(b, dtype)
    if a_t:
        ta = TensorArg(ta.buffer, a.shape, (*ta.strides[:-2], ta.strides[-1], ta.strides[-2]), 0, dtype)
    if b_t:
        tb = TensorArg(tb.buffer, b.shape, (*tb.strides[:-2], tb.strides[-1], tb.strides[-2]), 0, dtype)
    shape = c_shape or (*broadcast_shapes("matmul", a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1])
    out = empty(shape, dtype)
    BACKEND.kernels["matmul"]([out], [ta, tb], {})
    return BACKEND.to_numpy(out)


GEMM_SHAPES = [((37, 29), (29, 45)), ((64, 40), (40, 68)), ((3, 70, 36), (36, 20)), ((2, 1, 16, 8), (3, 8, 12)),
               ((1, 52), (52, 7)), ((130, 4), (4, 132)), ((5, 1, 8), (8, 6)), ((2, 3, 4, 8), (1, 3, 8, 4))]


@pytest.mark.parametrize("plan", [*gemm.TILES, "128x128:3", "64x64:2"])
def test_gemm_plans(plan: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUMUS_WGPU_GEMM", plan)
    rng = np.random.default_rng(7)
    for sa, sb in GEMM_SHAPES:
        a, b = rng.uniform(-1, 1, sa), rng.uniform(-1, 1, sb)
        want = np.matmul(a.astype(np.float32).astype(np.float64), b.astype(np.float32).astype(np.float64))
        for a_t in (False, True):
            for b_t in (False, True):
                got = _matmul(a, b, a_t, b_t)
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5,
                                           err_msg=f"{plan} {sa}@{sb} a_t={a_t} b_t={b_t}")


def test_gemm_default_plan_larger() -> None:
    rng = np.random.default_rng(3)
    for m, n, k in ((300, 260, 200), (96, 1000, 512)):
        a, b = rng.uniform(-1, 1, (m, k)), rng.uniform(-1, 1, (k, n))
        want = a.astype(np.float32).astype(np.float64) @ b.astype(np.float32).astype(np.float64)
        np.testing.assert_allclose(_matmul(a, b, False, True), want, rtol=1e-4, atol=1e-4)


def test_gemm_plan_choices_are_valid() -> None:
    for m, n, k, batch in ((4096, 4096, 4096, 1), (1024, 1024, 1024, 1), (8, 8, 8, 1), (64, 512, 784, 1),
                           (128, 128, 64, 32), (1, 4096, 4096, 1)):
        name, splits = gemm._plan(m, n, k, batch)
        assert name in gemm.TILES and splits >= 1


# -- execution model, memory, plugin kernels -------------------------------------------------------

def test_recorded_not_submitted_until_read() -> None:
    x = upload(np.arange(1024, dtype=np.float32), float32)
    BACKEND.synchronize(DEV)
    before = BACKEND.stats(DEV)
    out = x
    for _ in range(20):
        nxt = empty((1024,), float32)
        BACKEND.kernels["add"]([nxt], [out, x], {})
        out = nxt
    mid = BACKEND.stats(DEV)
    assert mid["submits"] == before["submits"] and mid["syncs"] == before["syncs"]
    assert mid["pending"] == before["pending"] + 20
    np.testing.assert_array_equal(BACKEND.to_numpy(out), np.arange(1024) * 21.0)
    after = BACKEND.stats(DEV)
    assert after["submits"] == before["submits"] + 1 and after["syncs"] == before["syncs"] + 1


def test_batches_flush_at_bound_without_waiting() -> None:
    x = upload(np.ones(16, np.float32), float32)
    BACKEND.synchronize(DEV)
    before = BACKEND.stats(DEV)
    outs = []
    for _ in range(600):
        o = empty((16,), float32)
        BACKEND.kernels["neg"]([o], [x], {})
        outs.append(o)
    mid = BACKEND.stats(DEV)
    # after the wait the bound ramps 64, 128, 256: batches flush at 64, 192 and 448 dispatches
    assert mid["submits"] - before["submits"] == 3 and mid["syncs"] == before["syncs"]
    assert mid["pending"] == 600 - 448
    for _ in range(3 * 256):  # the bound stays at 256 until the next wait
        BACKEND.kernels["neg"]([outs[0]], [x], {})
    again = BACKEND.stats(DEV)
    assert again["submits"] - mid["submits"] == 3 and again["pending"] == 600 - 448
    np.testing.assert_array_equal(BACKEND.to_numpy(outs[-1]), -np.ones(16))
    for _ in range(100):  # the wait reset the bound: the next batch flushes at 64 again
        BACKEND.kernels["neg"]([outs[0]], [x], {})
    assert BACKEND.stats(DEV)["submits"] - again["submits"] == 2 and BACKEND.stats(DEV)["pending"] == 36


def test_pool_reuses_buffers() -> None:
    BACKEND.synchronize(DEV)
    for _ in range(3):  # warm the bucket
        empty((1000,), float32)
    before = BACKEND.pool_stats(DEV)
    for _ in range(50):
        t = empty((1000,), float32)
        del t
    after = BACKEND.pool_stats(DEV)
    assert after["hits"] - before["hits"] == 50
    assert after["misses"] == before["misses"]


def test_pending_buffers_are_not_reused_before_submit() -> None:
    x = upload(np.full(256, 2.0, np.float32), float32)
    out = empty((256,), float32)
    tmp = empty((256,), float32)
    BACKEND.kernels["exp"]([tmp], [x], {})  # recorded, pending
    BACKEND.kernels["neg"]([out], [tmp], {})
    hits = BACKEND.pool_stats(DEV)["hits"]
    gpu = tmp.buffer.gpu
    del tmp  # its buffer must stay out of the pool until the batch is submitted
    other = empty((256,), float32)
    assert other.buffer.gpu is not gpu or BACKEND.pool_stats(DEV)["hits"] == hits
    BACKEND.kernels["fill"]([other], [], {"value": 5.0, "shape": (256,), "dtype": "float32"})
    np.testing.assert_allclose(BACKEND.to_numpy(out), -np.exp(2.0) * np.ones(256), rtol=1e-6)


def test_too_large_allocation_fails_clearly() -> None:
    limit = CAPS.limits["max-storage-buffer-binding-size"]
    with pytest.raises(RumusError, match=str(limit)):
        BACKEND.allocate(DEV, limit // 4 + 1, float32)


def test_in_place_aliasing() -> None:
    x = upload(np.arange(12, dtype=np.float32).reshape(3, 4), float32)
    y = upload(np.ones((3, 4), np.float32), float32)
    BACKEND.kernels["add"]([x], [x, y], {})  # x += y: the same view, read through the output binding
    np.testing.assert_array_equal(BACKEND.to_numpy(x), np.arange(12).reshape(3, 4) + 1)
    xt = TensorArg(x.buffer, (4, 3), (1, 4), 0, float32)
    BACKEND.kernels["copy"]([TensorArg(x.buffer, (4, 3), (3, 1), 0, float32)], [xt], {"dtype": None})
    np.testing.assert_array_equal(BACKEND.to_numpy(x).reshape(4, 3), (np.arange(12).reshape(3, 4) + 1).T)


def test_bool_and_int64_round_trip() -> None:
    b = np.array([[True, False, True]])
    assert BACKEND.to_numpy(upload(b, parse_dtype("bool"))).dtype == np.bool_
    np.testing.assert_array_equal(BACKEND.to_numpy(upload(b, parse_dtype("bool"))), b)
    big = np.array([-(2 ** 40), 2 ** 40 + 3, -1], np.int64)
    np.testing.assert_array_equal(BACKEND.to_numpy(upload(big, parse_dtype("int64"))), big)


def test_shader_kernel_through_adapt_kernel() -> None:
    source = """
    @group(0) @binding(0) var<storage, read_write> out: array<f32>;
    @group(0) @binding(1) var<storage, read> x: array<f32>;
    struct Params { n: u32, scale: f32 }
    @group(0) @binding(2) var<uniform> params: Params;
    @compute @workgroup_size(64)
    fn scale_by(@builtin(global_invocation_id) gid: vec3<u32>) {
        if (gid.x < params.n) { out[gid.x] = x[gid.x] * params.scale; }
    }
    """
    sk = ShaderKernel("wgsl", source, "scale_by",
                      workgroups=lambda o, i, a: ((o[0].numel + 63) // 64, 1, 1),
                      params=lambda o, i, a: [o[0].numel, float(a["scale"])])
    kernel = BACKEND.adapt_kernel(sk)
    x = upload(np.arange(100, dtype=np.float32), float32)
    out = empty((100,), float32)
    kernel([out], [x], {"scale": 2.5})
    np.testing.assert_allclose(BACKEND.to_numpy(out), np.arange(100) * 2.5)


def test_capabilities_and_devices() -> None:
    assert BACKEND.devices()[0] == DEV
    assert float32 in CAPS.dtypes and int32 in CAPS.dtypes
    assert (float16 in CAPS.dtypes) == ("shader-f16" in CAPS.features)
    assert CAPS.limits["max-storage-buffer-binding-size"] > 0


def test_plugin_import_does_not_import_wgpu() -> None:
    import subprocess
    import sys
    code = "import sys, rumus_wgpu.plugin; print('wgpu' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert res.stdout.strip() == "False"


def test_large_problem_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """2-D grids, split reductions and chunked GEMM batches, reached by shrinking the dispatch limit."""
    dev = BACKEND.device(DEV)
    monkeypatch.setattr(dev, "max_groups", 4)
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, 3000).astype(np.float32)
    y = rng.uniform(-1, 1, 3000).astype(np.float32)
    out = empty((3000,), float32)
    BACKEND.kernels["mul"]([out], [upload(x, float32), upload(y, float32)], {})
    np.testing.assert_allclose(BACKEND.to_numpy(out), x * y, rtol=1e-6)
    monkeypatch.setattr(dev, "max_groups", 65535)
    big = rng.uniform(-1, 1, 50_000)
    for dtype, tol in ((float32, 1e-4), (int32, 0)):
        host = (big * 1000).astype(dtype.numpy)
        s_out = empty((1,), parse_dtype("int64") if dtype == int32 else float32)
        BACKEND.kernels["sum"]([s_out], [upload(host, dtype)], {"dims": (0,)})
        np.testing.assert_allclose(BACKEND.to_numpy(s_out), [host.astype(np.float64).sum()], rtol=tol, atol=tol)
    wide = rng.uniform(-1, 1, (40, 3000)).astype(np.float32)  # an outer-dim reduction with many rows
    col = empty((1, 3000), float32)
    BACKEND.kernels["sum"]([col], [upload(wide, float32)], {"dims": (0,)})
    np.testing.assert_allclose(BACKEND.to_numpy(col), wide.astype(np.float64).sum(0, keepdims=True), rtol=1e-5,
                               atol=1e-5)
    row = rng.uniform(-5, 5, (3, 5000)).astype(np.float32)
    sm = empty((3, 5000), float32)
    BACKEND.kernels["log_softmax"]([sm], [upload(row, float32)], {"dim": 1})
    ref = row - row.max(1, keepdims=True)
    ref = ref - np.log(np.exp(ref.astype(np.float64)).sum(1, keepdims=True))
    np.testing.assert_allclose(BACKEND.to_numpy(sm), ref, rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(dev, "max_groups", 4)
    a, b = rng.uniform(-1, 1, (9, 5, 8)), rng.uniform(-1, 1, (9, 8, 6))
    got = _matmul(a, b, False, False)
    np.testing.assert_allclose(got, np.matmul(a.astype(np.float32), b.astype(np.float32)), rtol=1e-5, atol=1e-5)


def test_vec4_paths() -> None:
    """Contiguous 4-aligned operands take the vec4 kernels (with broadcast scalars, bool results, f16)."""
    rng = np.random.default_rng(5)
    x = rng.uniform(-2, 2, (64, 48)).astype(np.float32)
    s = upload(np.array([0.5], np.float32), float32)
    out = empty((64, 48), float32)
    BACKEND.kernels["mul"]([out], [upload(x, float32), expand(s, (64, 48))], {})
    np.testing.assert_allclose(BACKEND.to_numpy(out), x * 0.5)
    flags = empty((64, 48), parse_dtype("bool"))
    BACKEND.kernels["gt"]([flags], [out, expand(upload(np.zeros(1, np.float32), float32), (64, 48))], {})
    np.testing.assert_array_equal(BACKEND.to_numpy(flags), x > 0)
    picked = empty((64, 48), float32)
    BACKEND.kernels["where"]([picked], [flags, out, expand(s, (64, 48))], {})
    np.testing.assert_allclose(BACKEND.to_numpy(picked), np.where(x > 0, x * 0.5, 0.5))
    for op, ref in (("sum", np.sum), ("amax", np.max)):
        for dims in ((1,), (0, 1)):
            red = empty((1, 1) if dims == (0, 1) else (64, 1), float32)
            BACKEND.kernels[op]([red], [upload(x, float32)], {"dims": dims})
            np.testing.assert_allclose(BACKEND.to_numpy(red), ref(x.astype(np.float64), axis=dims, keepdims=True),
                                       rtol=1e-5, atol=1e-5)
    ints = rng.integers(-9, 9, 40_000).astype(np.int32)  # split + vec4 + int64 accumulation
    total = empty((1,), parse_dtype("int64"))
    BACKEND.kernels["sum"]([total], [upload(ints, int32)], {"dims": (0,)})
    assert BACKEND.to_numpy(total)[0] == ints.astype(np.int64).sum()
    if float16 in CAPS.dtypes:
        half = empty((64, 48), float16)
        BACKEND.kernels["copy"]([half], [out], {"dtype": "float16"})
        np.testing.assert_array_equal(BACKEND.to_numpy(half), (x * 0.5).astype(np.float16))
    keys = [k for k in BACKEND.device(DEV).programs._cache if k[0] in ("map", "reduce")]
    assert any(k[0] == "map" and k[-1] is not None for k in keys) and any(k[0] == "reduce" and k[-1] for k in keys)


def test_float_to_int_conversions() -> None:
    x = np.array([-3.7, -0.5, 0.0, 0.5, 2.9, 1e10, -1e10], np.float32)
    for name in ("int32", "int64", "bool"):
        dt = parse_dtype(name)
        out = empty((7,), dt)
        BACKEND.kernels["copy"]([out], [upload(x, float32)], {"dtype": name})
        keep = slice(0, 5) if name == "int32" else slice(None)  # out-of-range f32 -> i32 saturates (WGSL)
        want = x[keep] != 0 if name == "bool" else np.trunc(x[keep].astype(np.float64))
        np.testing.assert_array_equal(BACKEND.to_numpy(out)[keep], want.astype(dt.numpy), err_msg=name)
    big = np.array([-(2 ** 40) - 5, 2 ** 33, -7], np.int64)
    back = empty((3,), float32)
    BACKEND.kernels["copy"]([back], [upload(big, parse_dtype("int64"))], {"dtype": "float32"})
    np.testing.assert_allclose(BACKEND.to_numpy(back), big.astype(np.float32), rtol=1e-7)
