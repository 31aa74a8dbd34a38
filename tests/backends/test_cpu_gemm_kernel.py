"""RUMUS's own float32 GEMM (csrc/sgemm_kernel.c, csrc/sgemm_avx512.c, csrc/sgemm_avx2.c) and its route in
rumus_gemm_one (RUMUS_GEMM_KERNEL): values against float64 numpy within the error bound of a k-term sum,
every transpose, accumulate on and off, edge sizes, leading dimensions and odd offsets with guard values
around C, NaN/Inf, both ISA parts this CPU has; bits independent of the ISA part, of where C sits and of
the thread count; the public ops under RUMUS_GEMM_KERNEL=own and =blas against torch in float64."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("rumus_cpu._kernels")

from rumus_cpu._lib import ffi, lib  # noqa: E402

SIZES = (1, 2, 7, 15, 16, 17, 31, 32, 33, 63, 65, 127, 200, 513)
LARGE_K = (1, 255, 257, 513, 700)  # one step, and around / past the kernel's K block (256)
U = 2.0 ** -24  # float32's unit roundoff
AVX2, AVX512 = 1, 2
BLAS, OWN = 1, 2


def _isa_params() -> list[Any]:
    best = int(lib.rumus_sgemm_set_isa(-1))
    return [pytest.param(isa, marks=pytest.mark.skipif(best < isa, reason="this CPU lacks that ISA"), id=name)
            for isa, name in ((AVX2, "avx2"), (AVX512, "avx512"))]


@pytest.fixture
def kernel_state() -> Iterator[None]:
    """Tests that force an ISA part or a route put the load-time state back."""
    mode = int(lib.rumus_sgemm_mode())
    yield
    lib.rumus_sgemm_set_isa(-1)
    lib.rumus_sgemm_set_mode(mode)


class Case:
    """op(A) [m x k] and op(B) [k x n] stored with spare leading dimensions, and C [m x n] at an odd offset
    inside a larger buffer whose other elements are guard values."""

    def __init__(self, rng: Any, ta: int, tb: int, m: int, n: int, k: int, accumulate: int) -> None:
        self.ta, self.tb, self.m, self.n, self.k, self.acc = ta, tb, m, n, k, accumulate
        a_rows, a_cols = (k, m) if ta else (m, k)
        b_rows, b_cols = (n, k) if tb else (k, n)
        self.lda, self.ldb, self.ldc = a_cols + 3, b_cols + 5, n + 7
        self.A = rng.standard_normal((max(a_rows, 1), self.lda)).astype(np.float32)
        self.B = rng.standard_normal((max(b_rows, 1), self.ldb)).astype(np.float32)
        self.off = self.ldc + 3  # one row and three elements in: an odd element offset
        self.buf = rng.standard_normal(self.off + m * self.ldc + 11).astype(np.float32)  # guards
        if not accumulate:
            self.window()[...] = np.nan  # must not leak: with accumulate = 0, C is only written
        self.before = self.buf.copy()
        self.opA = (self.A[:k, :m].T if ta else self.A[:m, :k]).astype(np.float64)
        self.opB = (self.B[:n, :k].T if tb else self.B[:k, :n]).astype(np.float64)

    def window(self) -> Any:
        return self.buf[self.off:self.off + self.m * self.ldc].reshape(self.m, self.ldc)[:, :self.n]

    def call(self, fn: Any) -> Any:
        """fn(ta, tb, m, n, k, A, lda, B, ldb, accumulate, C, ldc) on this case's buffers."""
        c = ffi.from_buffer("float[]", self.buf) + self.off
        return fn(self.ta, self.tb, self.m, self.n, self.k, ffi.from_buffer("float[]", self.A), self.lda,
                  ffi.from_buffer("float[]", self.B), self.ldb, self.acc, c, self.ldc)

    def check(self) -> None:
        """C within the bound of a k-term sum of float32 products (any order: |error| <= (k+1) u sum|a b|,
        plus the start value's share), and every element outside C's window unchanged, bit for bit."""
        c0 = self.before[self.off:self.off + self.m * self.ldc].reshape(self.m, self.ldc)[:, :self.n]
        c0 = c0.astype(np.float64) if self.acc else np.zeros((self.m, self.n))
        want = c0 + self.opA @ self.opB
        bound = (self.k + 2) * U * (np.abs(c0) + np.abs(self.opA) @ np.abs(self.opB)) + 1e-37
        got = self.window().astype(np.float64)
        err = np.abs(got - want)
        shape = (self.ta, self.tb, self.m, self.n, self.k, self.acc)
        assert np.all(err <= bound), f"{shape}: worst error {err.max()} over its bound"
        outside = self.buf.view(np.uint32).copy()
        before = self.before.view(np.uint32).copy()
        rows = np.arange(self.m)[:, None] * self.ldc + np.arange(self.n)[None, :] + self.off
        outside[rows.ravel()] = before[rows.ravel()] = 0
        assert np.array_equal(outside, before), f"{shape}: an element outside C changed"


def _own(*args: Any) -> int:
    return int(lib.rumus_sgemm(*args))


def _shapes() -> Iterator[tuple[int, int, int]]:
    """Every (m, n) of SIZES with a k cycling through SIZES (up to 2^24 multiply-adds), plus LARGE_K."""
    for i, m in enumerate(SIZES):
        for j, n in enumerate(SIZES):
            k = SIZES[(5 * i + 3 * j) % len(SIZES)]
            if m * n * k <= 1 << 24:
                yield m, n, k
    for m, n in ((1, 1), (7, 33), (33, 65), (65, 17), (12, 32), (200, 127)):
        for k in LARGE_K:
            yield m, n, k


@pytest.mark.parametrize("isa", _isa_params())
@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("accumulate", [0, 1])
def test_own_kernel_against_float64(kernel_state: None, isa: int, ta: int, tb: int, accumulate: int) -> None:
    assert lib.rumus_sgemm_set_isa(isa) == isa
    rng = np.random.default_rng(100 * isa + 10 * ta + 2 * tb + accumulate)
    count = 0
    for m, n, k in _shapes():
        case = Case(rng, ta, tb, m, n, k, accumulate)
        assert case.call(_own) == 1
        case.check()
        count += 1
    assert count > 200


def test_the_bound_catches_one_missing_term(kernel_state: None) -> None:
    """The check above can fail: a product lacking one of its k terms is far outside the bound."""
    rng = np.random.default_rng(5)
    case = Case(rng, 0, 0, 17, 33, 257, 0)
    assert case.call(_own) == 1
    case.check()
    case.opA = case.opA.copy()
    case.opA[:, 100] = 0.0  # the reference now lacks term 100
    with pytest.raises(AssertionError, match="over its bound"):
        case.check()


@pytest.mark.parametrize("mode", [BLAS, OWN], ids=["blas", "own"])
def test_rumus_gemm_one_on_either_route(kernel_state: None, mode: int) -> None:
    if not lib.rumus_gemm_attached():
        pytest.skip("numpy's BLAS is not attached")
    lib.rumus_sgemm_set_mode(mode)
    assert bool(lib.rumus_sgemm_routes(64, 64, 64)) == (mode == OWN and lib.rumus_sgemm_isa() > 0)

    def one(ta: int, tb: int, m: int, n: int, k: int, *rest: Any) -> int:
        return int(lib.rumus_gemm_one(0, ta, tb, m, n, k, *rest))

    rng = np.random.default_rng(mode)
    for ta in (0, 1):
        for tb in (0, 1):
            for acc in (0, 1):
                for m, n, k in ((1, 1, 1), (7, 33, 513), (65, 17, 2), (32, 196, 144), (16, 1, 300)):
                    case = Case(rng, ta, tb, m, n, k, acc)
                    assert case.call(one) == 1
                    case.check()


def test_empty_sum_writes_zeros_or_keeps_c(kernel_state: None) -> None:
    rng = np.random.default_rng(3)
    for acc in (0, 1):
        case = Case(rng, 0, 0, 5, 9, 0, acc)
        assert case.call(_own) == 1
        case.check()  # k = 0: C = 0 (from NaN) or C unchanged


def _at(transposed: int, i: int, j: int) -> tuple[int, int]:
    """Where element (i, j) of op(X) sits in X as stored."""
    return (j, i) if transposed else (i, j)


@pytest.mark.parametrize("isa", _isa_params())
def test_nan_and_inf_propagate_as_in_a_plain_sum(kernel_state: None, isa: int) -> None:
    lib.rumus_sgemm_set_isa(isa)
    rng = np.random.default_rng(11)
    m, n, k = 19, 37, 40
    for ta, tb in ((0, 0), (1, 1)):
        case = Case(rng, ta, tb, m, n, k, 0)
        a = case.A[:k, :m] if ta else case.A[:m, :k]
        b = case.B[:n, :k] if tb else case.B[:k, :n]
        a[...] = np.round(a)  # zeros among the values: 0 * inf must give NaN (nothing skipped)
        a[_at(ta, 3, 5)] = np.nan
        b[_at(tb, 7, 30)] = np.inf
        b[_at(tb, 8, 31)] = -np.inf
        b[_at(tb, 9, 31)] = np.inf  # +inf and -inf in one sum: NaN (where a[i, 8] and a[i, 9] share a sign)
        a[_at(ta, 10, 7)] = 0.0  # 0 * inf in row 10, column 30
        opa = (a.T if ta else a).astype(np.float64)
        opb = (b.T if tb else b).astype(np.float64)
        with np.errstate(invalid="ignore"):
            want = (opa[:, :, None] * opb[None, :, :]).sum(axis=1)  # a plain sum of products
        assert case.call(_own) == 1
        got = case.window().astype(np.float64)
        assert np.isnan(want[3]).all() and np.isnan(want[10, 30]) and np.isnan(want[:, 31]).any()
        assert np.isinf(want).any()
        assert np.array_equal(np.isnan(got), np.isnan(want))
        assert np.array_equal(np.isposinf(got), np.isposinf(want))
        assert np.array_equal(np.isneginf(got), np.isneginf(want))
        fin = np.isfinite(want)
        bound = (k + 2) * U * (np.abs(np.nan_to_num(opa)) @ np.abs(np.nan_to_num(opb, posinf=0, neginf=0)))
        assert np.all(np.abs(got[fin] - want[fin]) <= bound[fin] + 1e-37)


def test_bits_do_not_depend_on_the_isa_part_or_where_c_sits(kernel_state: None) -> None:
    """Each element is one chain of fused multiply-adds over k in order: the AVX2 and AVX-512 parts, and
    any cut of C into separately computed pieces, give the same bits."""
    rng = np.random.default_rng(21)
    m, n, k = 45, 70, 600
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k)).astype(np.float32)
    fa, fb = ffi.from_buffer("float[]", a), ffi.from_buffer("float[]", b)

    def whole() -> Any:
        c = np.empty((m, n), np.float32)
        assert lib.rumus_sgemm(0, 1, m, n, k, fa, k, fb, k, 0, ffi.from_buffer("float[]", c), n) == 1
        return c

    results = []
    for isa in (AVX2, AVX512):
        if lib.rumus_sgemm_set_isa(isa) == isa:
            results.append(whole())
    if not results:
        pytest.skip("no ISA part on this CPU")
    pieces = np.empty((m, n + 9), np.float32)  # C at another place, cut in uneven pieces
    fc = ffi.from_buffer("float[]", pieces)
    for i0, i1 in ((0, 13), (13, 14), (14, 45)):
        for j0, j1 in ((0, 5), (5, 38), (38, 70)):
            assert lib.rumus_sgemm(0, 1, i1 - i0, j1 - j0, k, fa + i0 * k, k, fb + j0 * k, k, 0,
                                   fc + i0 * (n + 9) + j0, n + 9) == 1
    results.append(pieces[:, :n].copy())
    for other in results[1:]:
        np.testing.assert_array_equal(results[0], other)


def test_auto_rule_follows_its_published_limits(kernel_state: None) -> None:
    if lib.rumus_sgemm_isa() == 0:
        pytest.skip("no ISA part on this CPU")
    lib.rumus_sgemm_set_mode(0)
    min_n, max_macs = int(lib.rumus_sgemm_auto_min_n()), int(lib.rumus_sgemm_auto_max_macs())
    assert min_n >= 1
    assert lib.rumus_sgemm_routes(32, min_n, 144) and not lib.rumus_sgemm_routes(32, min_n - 1, 144)
    assert lib.rumus_sgemm_routes(32, 196, 144)  # the CNN's conv2 product
    if max_macs > 0:
        assert not lib.rumus_sgemm_routes(max_macs // 64 + 1, 64, 1)
    lib.rumus_sgemm_set_mode(BLAS)
    assert not lib.rumus_sgemm_routes(32, 196, 144)
    lib.rumus_sgemm_set_mode(OWN)
    assert lib.rumus_sgemm_routes(32, 1, 144)


def test_thread_counts_give_identical_bits_with_the_own_kernel(kernel_state: None) -> None:
    import rumus as rm
    from rumus.nn import functional as F
    from rumus_cpu import threads
    if not lib.rumus_gemm_attached() or lib.rumus_sgemm_isa() == 0:
        pytest.skip("no BLAS attached or no ISA part")
    lib.rumus_sgemm_set_mode(OWN)
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((300, 200)).astype(np.float32), rng.standard_normal((200, 150)).astype(np.float32)
    x = rng.standard_normal((8, 16, 14, 14)).astype(np.float32)
    w = (rng.standard_normal((32, 16, 3, 3)) * 0.1).astype(np.float32)
    before = threads.get_num_threads()
    runs = []
    try:
        for nt in (1, 2, 3):
            threads.set_num_threads(nt)
            xt, wt = rm.tensor(x, requires_grad=True), rm.tensor(w, requires_grad=True)
            y = F.conv2d(xt, wt, padding=1)
            (y * y).sum().backward()
            runs.append([rm.matmul(rm.tensor(a), rm.tensor(b)).numpy(), y.numpy(), xt.grad.numpy(), wt.grad.numpy()])
    finally:
        threads.set_num_threads(before)
    for other in runs[1:]:
        for got, base in zip(other, runs[0], strict=True):
            np.testing.assert_array_equal(got, base)
    np.testing.assert_allclose(runs[0][0], a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


SCRIPT = r"""
import json, sys
import numpy as np
import rumus as rm
from rumus.nn import functional as F
from rumus_cpu import threads
from rumus_cpu._lib import ffi, lib
rng = np.random.default_rng(0)
res = {}
for name, (sa, sb) in {"mm": ((130, 784), (784, 256)), "bmm": ((3, 33, 70), (3, 70, 65)), "vec": ((64, 300), (300, 1)),
                       "tall": ((1, 513), (513, 200))}.items():
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    res[name + "_a"], res[name + "_b"] = a, b
    res[name] = rm.matmul(rm.tensor(a), rm.tensor(b)).numpy()
# the transposed operands of a backward: x^T @ dy and dy @ W, through autograd
x = rng.standard_normal((128, 784)).astype(np.float32)
w = (rng.standard_normal((256, 784)) * 0.05).astype(np.float32)
bias = rng.standard_normal(256).astype(np.float32)
gy = rng.standard_normal((128, 256)).astype(np.float32)
xt, wt, bt = (rm.tensor(v, requires_grad=True) for v in (x, w, bias))
y = F.linear(xt, wt, bt)
(y * rm.tensor(gy)).sum().backward()
res.update(lin_x=x, lin_w=w, lin_b=bias, lin_gy=gy, lin_y=y.numpy(), lin_gx=xt.grad.numpy(), lin_gw=wt.grad.numpy())
for name, xs, ws in (("conv1", (64, 1, 28, 28), (16, 1, 3, 3)), ("conv2", (16, 16, 14, 14), (32, 16, 3, 3))):
    cx = rng.standard_normal(xs).astype(np.float32)
    cw = (rng.standard_normal(ws) * 0.2).astype(np.float32)
    xt, wt = rm.tensor(cx, requires_grad=True), rm.tensor(cw, requires_grad=True)
    y = F.conv2d(xt, wt, padding=1)
    cg = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    (y * rm.tensor(cg)).sum().backward()
    res.update({name + "_x": cx, name + "_w": cw, name + "_gy": cg, name + "_y": y.numpy(),
                name + "_gx": xt.grad.numpy(), name + "_gw": wt.grad.numpy()})
# the own kernel's bits do not depend on the blocking: one call over the whole product gives rm.matmul's bits
a, b = res["mm_a"], res["mm_b"]
whole = np.empty((130, 256), np.float32)
lib.rumus_sgemm(0, 0, 130, 256, 784, ffi.from_buffer("float[]", a), 784, ffi.from_buffer("float[]", b), 256, 0,
                ffi.from_buffer("float[]", whole), 256)
res["mm_whole_own"] = whole
np.savez(sys.argv[1], **res)
print(json.dumps({"mode": int(lib.rumus_sgemm_mode()), "isa": int(lib.rumus_sgemm_isa()),
                  "routes": int(lib.rumus_sgemm_routes(32, 196, 144)), "info": threads.policy()["gemm_kernel"]}))
"""


def _run(tmp: Any, kernel: str) -> tuple[dict[str, Any], Any]:
    path = tmp / f"{kernel}.npz"
    env = {**os.environ, "RUMUS_GEMM_KERNEL": kernel, "RUMUS_BACKEND": "cpu"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(path)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), np.load(path)


@pytest.fixture(scope="module")
def routes(tmp_path_factory: Any) -> dict[str, tuple[dict[str, Any], Any]]:
    tmp = tmp_path_factory.mktemp("gemm_kernel")
    return {kernel: _run(tmp, kernel) for kernel in ("own", "blas")}


def test_the_environment_variable_picks_the_route(routes: dict[str, tuple[dict[str, Any], Any]]) -> None:
    own, blas = routes["own"][0], routes["blas"][0]
    assert blas["mode"] == BLAS and not blas["routes"] and "OpenBLAS" in blas["info"]
    assert own["mode"] == OWN
    if own["isa"] == 0:
        pytest.skip("no ISA part on this CPU: `own` falls back to OpenBLAS")
    assert own["routes"] and "own" in own["info"] and "RUMUS_GEMM_KERNEL=own" in own["info"]
    # the own kernel really computed the public op: its bits equal one call over the whole product (the route
    # counters above tell the two runs apart; their bits may agree, as they do where OpenBLAS picks its
    # SkylakeX kernel, so bits are no evidence of the route)
    np.testing.assert_array_equal(routes["own"][1]["mm"], routes["own"][1]["mm_whole_own"])


def test_an_unknown_kernel_name_warns_and_uses_auto() -> None:
    env = {**os.environ, "RUMUS_GEMM_KERNEL": "fastest", "RUMUS_BACKEND": "cpu"}
    code = ("import warnings; warnings.simplefilter('always'); import rumus as rm; import rumus_cpu._lib as L; "
            "rm.zeros(1); print(L.lib.rumus_sgemm_mode())")  # the kernel is chosen when the backend starts
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "0" and "RUMUS_GEMM_KERNEL='fastest'" in proc.stderr


@pytest.mark.parametrize("kernel", ["own", "blas"])
def test_public_ops_match_torch_in_float64(routes: dict[str, tuple[dict[str, Any], Any]], kernel: str) -> None:
    torch = pytest.importorskip("torch")
    res = routes[kernel][1]

    def t(name: str, grad: bool = False) -> Any:
        return torch.tensor(res[name], dtype=torch.float64, requires_grad=grad)

    def close(got: Any, want: Any, k: int) -> None:
        # float32 sums of k products of unit-sized values: errors grow like sqrt(k) u |terms|
        want = want.detach().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5 * np.sqrt(k), atol=1e-5 * np.sqrt(k) * np.abs(want).max())

    for name, k in (("mm", 784), ("bmm", 70), ("vec", 300), ("tall", 513)):
        close(res[name], torch.matmul(t(name + "_a"), t(name + "_b")), k)
    x, w, b = t("lin_x", True), t("lin_w", True), t("lin_b", True)
    y = torch.nn.functional.linear(x, w, b)
    (y * t("lin_gy")).sum().backward()
    close(res["lin_y"], y, 784)
    close(res["lin_gx"], x.grad, 256)
    close(res["lin_gw"], w.grad, 128)
    for name, k in (("conv1", 9), ("conv2", 144)):
        x, w = t(name + "_x", True), t(name + "_w", True)
        y = torch.nn.functional.conv2d(x, w, padding=1)
        (y * t(name + "_gy")).sum().backward()
        close(res[name + "_y"], y, k)
        close(res[name + "_gx"], x.grad, int(w.shape[0]) * 9)
        close(res[name + "_gw"], w.grad, int(x.shape[0]) * int(y.shape[2]) * int(y.shape[3]))
