"""The CPU backend's thread budget (backends/rumus_cpu/threads.py, csrc/runtime.c, csrc/gemm_blocked.c):
results bit-identical at every thread count, BLAS on the kernels' threads, no spinning BLAS threads,
fork safety, RUMUS_NUM_THREADS, and the policy `rumus info` prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

pytest.importorskip("rumus_cpu._kernels")

from thread_count_runs import run_at_each_thread_count  # noqa: E402

from rumus_contracts import config  # noqa: E402
from rumus_cpu import threads  # noqa: E402
from rumus_cpu._lib import ffi, lib  # noqa: E402

# Every thread count computes the same things in a fresh process (the budget applies from the start).
SCRIPT = r"""
import json, sys
import numpy as np
import rumus as rm
from rumus import nn
from rumus.nn import functional as F
from rumus_cpu import threads
rng = np.random.default_rng(0)
res = {}
def t(a):
    return rm.tensor(np.asarray(a, np.float32))
A, B = rng.standard_normal((1000, 700)), rng.standard_normal((700, 900))
res["mm"] = (t(A) @ t(B)).numpy()
res["mm_ta"] = (t(A.T.copy()).transpose(0, 1) @ t(B)).numpy()
res["mm_tb"] = (t(A) @ t(B.T.copy()).transpose(0, 1)).numpy()
res["mm_f64"] = (rm.tensor(A) @ rm.tensor(B)).numpy()
res["bmm"] = (t(rng.standard_normal((8, 130, 64))) @ t(rng.standard_normal((8, 64, 190)))).numpy()
res["bmm_bcast"] = (t(rng.standard_normal((2, 1, 300, 200))) @ t(rng.standard_normal((3, 200, 250)))).numpy()
# numpy's own GEMM (not RUMUS's): OpenBLAS's jobs through the callback; its bits follow OpenBLAS's split
res["np_gemm"] = np.asarray(A, np.float32) @ np.asarray(B, np.float32)
x = t(rng.standard_normal((8, 16, 20, 20))).requires_grad_()
w = t(rng.standard_normal((32, 16, 3, 3)) * 0.1).requires_grad_()
y = F.conv2d(x, w, padding=1)
(y * y).sum().backward()
res["conv"], res["conv_gx"], res["conv_gw"] = y.numpy(), x.grad.numpy(), w.grad.numpy()
big = t(rng.standard_normal((1500, 1100)))
res["exp"] = big.exp().numpy()
res["add_t"] = (big.transpose(0, 1) + 1.0).numpy()
res["softmax"] = F.softmax(big, dim=-1).numpy()
res["sum0"] = big.sum(0).numpy()
# weight/bias gradients of the norms sum over rows: above the 2M-element parallel bound they once used one
# accumulator per thread, so their bits followed the thread count
nx = t(rng.standard_normal((2200, 1024))).requires_grad_()
ln = nn.LayerNorm(1024)
(ln(nx) * t(rng.standard_normal((2200, 1024)))).sum().backward()
res["ln_gx"], res["ln_gw"], res["ln_gb"] = nx.grad.numpy(), ln.weight.grad.numpy(), ln.bias.grad.numpy()
gx = t(rng.standard_normal((64, 32, 1100))).requires_grad_()
gn = nn.GroupNorm(8, 32)
(gn(gx) * t(rng.standard_normal((64, 32, 1100)))).sum().backward()
res["gn_gw"], res["gn_gb"] = gn.weight.grad.numpy(), gn.bias.grad.numpy()
# sizes around each kernel class's grain (csrc/runtime.c): split 1..4 ways by their work, the same bits
res["mm_mlp"] = (t(rng.standard_normal((128, 784))) @ t(rng.standard_normal((784, 256)))).numpy()
res["bmm_small"] = (t(rng.standard_normal((32, 64, 64))) @ t(rng.standard_normal((32, 64, 64)))).numpy()
mid = t(rng.standard_normal((40, 1000)))
res["softmax_mid"], res["log_softmax_mid"] = F.softmax(mid, dim=-1).numpy(), F.log_softmax(mid, dim=-1).numpy()
cl = t(rng.standard_normal((300, 100))).requires_grad_()
F.cross_entropy(cl, rm.tensor(rng.integers(0, 100, 300))).backward()
res["ce_grad"] = cl.grad.numpy()
aq, ak, av = (t(rng.standard_normal((2, 4, 70, 32))).requires_grad_() for _ in range(3))
att = F.scaled_dot_product_attention(aq, ak, av, is_causal=True)
(att * att).sum().backward()
res["sdpa"], res["sdpa_gq"], res["sdpa_gk"], res["sdpa_gv"] = (x.numpy() for x in (att, aq.grad, ak.grad, av.grad))
rm.manual_seed(0)
mlp = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
opt = rm.optim.Adam(mlp.parameters(), lr=1e-3)
mx, my = t(rng.standard_normal((128, 784))), t(rng.standard_normal((128, 10)))
for _ in range(3):
    opt.zero_grad()
    F.mse_loss(mlp(mx), my).backward()
    opt.step()
for i, p in enumerate(mlp.parameters()):
    res[f"mlp{i}"] = p.numpy()
np.savez(sys.argv[1], **res)
print(json.dumps({"threads": threads.get_num_threads(), "policy": threads.policy()}))
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: Any) -> list[tuple[dict[str, Any], Any]]:
    return run_at_each_thread_count(SCRIPT, tmp_path_factory.mktemp("threads"))


def test_every_result_is_bit_identical_at_1_2_3_4_threads(runs: list[tuple[dict[str, Any], Any]]) -> None:
    infos = [info for info, _ in runs]
    assert [i["threads"] for i in infos] == [1, 2, 3, 4]
    base = runs[0][1]
    assert len(base.files) >= 20
    for _, res in runs[1:]:
        for key in base.files:
            if key == "np_gemm":  # numpy's, split by OpenBLAS by the thread count (as with its own threads)
                continue
            np.testing.assert_array_equal(base[key], res[key], err_msg=key)


def test_the_products_are_right(runs: list[tuple[dict[str, Any], Any]]) -> None:
    """The same values as float64 numpy (the blocked GEMM covers every block, edges included)."""
    res = runs[-1][1]
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((1000, 700)), rng.standard_normal((700, 900))
    a32, b32 = a.astype(np.float32).astype(np.float64), b.astype(np.float32).astype(np.float64)
    for key in ("mm", "mm_ta", "mm_tb", "np_gemm"):
        np.testing.assert_allclose(res[key], a32 @ b32, rtol=1e-4, atol=1e-3, err_msg=key)
    np.testing.assert_allclose(res["mm_f64"], a @ b, rtol=1e-12, atol=1e-10)
    p, q = rng.standard_normal((8, 130, 64)), rng.standard_normal((8, 64, 190))
    p32, q32 = (v.astype(np.float32).astype(np.float64) for v in (p, q))
    np.testing.assert_allclose(res["bmm"], p32 @ q32, rtol=1e-4, atol=1e-3)
    u, v = rng.standard_normal((2, 1, 300, 200)), rng.standard_normal((3, 200, 250))
    u32, v32 = (w.astype(np.float32).astype(np.float64) for w in (u, v))
    got = res["bmm_bcast"]
    assert got.shape == (2, 3, 300, 250)
    np.testing.assert_allclose(got, u32 @ v32, rtol=1e-4, atol=1e-3)


def test_blas_jobs_run_on_the_kernel_threads() -> None:
    """A GEMM numpy splits into jobs hands them to csrc/runtime.c's callback (one team, one budget)."""
    if not lib.rumus_blas_attached():
        pytest.skip("numpy's BLAS has no threads callback (not OpenBLAS >= 0.3.27)")
    before = threads.get_num_threads()
    try:
        threads.set_num_threads(3)
        calls, jobs = lib.rumus_blas_calls(), lib.rumus_blas_jobs()
        a = np.random.default_rng(1).standard_normal((600, 600)).astype(np.float32)
        got = a @ a
        assert lib.rumus_blas_calls() == calls + 1 and lib.rumus_blas_jobs() == jobs + 3
        np.testing.assert_allclose(got, a.astype(np.float64) @ a, rtol=1e-4, atol=1e-3)
    finally:
        threads.set_num_threads(before)


SPIN_SCRIPT = r"""
import resource, time
import numpy as np
import rumus as rm
from rumus_cpu import threads
rm.zeros(1)  # the cpu backend starts: numpy's BLAS jobs move onto the kernels' threads then
threads.set_num_threads(2)
a = np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32)
for _ in range(5):
    a @ a
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
c0 = cpu()
time.sleep(0.5)
print(cpu() - c0)
"""


def test_no_thread_spins_after_a_gemm() -> None:
    """OpenBLAS's own threads spun ~0.13 s of CPU after each call (measured); now nothing spins for long."""
    if not lib.rumus_blas_attached():
        pytest.skip("numpy's BLAS has no threads callback")
    proc = subprocess.run([sys.executable, "-c", SPIN_SCRIPT], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert float(proc.stdout.strip()) < 0.05


FORK_SCRIPT = r"""
import os, sys
import numpy as np
import rumus as rm
from rumus_cpu import threads
threads.set_num_threads(2)
a = np.random.default_rng(0).standard_normal((700, 700)).astype(np.float32)
ra = rm.tensor(a)
first = (ra @ ra).numpy(); np_first = a @ a   # the parent's OpenMP pool and BLAS jobs exist now
pid = os.fork()
if pid == 0:
    ok = threads.get_num_threads() == 1
    ok &= bool(((ra @ ra).numpy() == first).all())      # blocked GEMM, one thread
    ok &= bool(((a @ a) == np_first).all())             # numpy's jobs on threads started per call
    ok &= bool(np.allclose(ra.exp().numpy(), np.exp(a), rtol=2e-6))
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_forked_children_run_gemms_without_hanging() -> None:
    env = {**os.environ, "RUMUS_BACKEND": "cpu"}
    proc = subprocess.run([sys.executable, "-c", FORK_SCRIPT], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr


POLICY_SCRIPT = r"""
import json, os
from rumus_cpu import threads
print(json.dumps({"policy": threads.policy(), "phys": threads.physical_cores()}))
"""


def _policy(env: dict[str, str]) -> dict[str, Any]:
    base = {k: v for k, v in os.environ.items() if k != "RUMUS_NUM_THREADS"}
    proc = subprocess.run([sys.executable, "-c", POLICY_SCRIPT], capture_output=True, text=True, timeout=300,
                          env={**base, **env})
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_default_budget_is_every_physical_core_and_the_env_overrides_it() -> None:
    got = _policy({})
    assert got["policy"]["kernel_threads"] == got["phys"] >= 1
    assert got["policy"]["idle"] == f"poll {threads.SPIN_US} us, then sleep"
    assert _policy({"RUMUS_NUM_THREADS": "5"})["policy"]["kernel_threads"] == 5


@pytest.mark.parametrize("value", ["many", "0", "-2"])
def test_a_bad_rumus_num_threads_raises_a_config_error_naming_it(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("RUMUS_NUM_THREADS", value)
    with pytest.raises(config.ConfigError, match=f"RUMUS_NUM_THREADS='{value}' is not an integer >= 1"):
        threads.default_num_threads()


@pytest.mark.parametrize(("name", "value"), [("RUMUS_GEMM_KERNEL", "fastest"), ("RUMUS_MALLOC_KEEP_MB", "lots"),
                                             ("RUMUS_NUM_THREADS", "many")])
def test_a_bad_cpu_knob_stops_the_backend_with_its_name(name: str, value: str) -> None:
    env = {**os.environ, name: value, "RUMUS_BACKEND": "cpu"}
    proc = subprocess.run([sys.executable, "-c", "import rumus as rm; rm.zeros(1)"], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode != 0 and f"ConfigError: {name}='{value}' is not" in proc.stderr, proc.stderr


def test_rumus_info_prints_the_policy() -> None:
    env = {**os.environ, "RUMUS_NUM_THREADS": "3"}
    proc = subprocess.run([sys.executable, "-m", "rumus.cli", "info"], capture_output=True, text=True, timeout=300,
                          env=env)
    # the cpu backend's block: its header line to the blank line after it, wrapped lines joined
    block = proc.stdout.split("backend cpu", 1)[1].split("\n\n", 1)[0]
    line = " ".join(block.split())
    assert "kernel threads 3" in line and "BLAS " in line and "idle threads" in line
    p = threads.policy()
    if p.get("blas_kernel"):
        assert str(p["blas_kernel"]) in line


def test_blocks_depend_on_the_shape_only() -> None:
    """The GEMM's blocks come from (m, n, k, batch); they cover the product and are never tiny."""
    bm, bn = ffi.new("int64_t *"), ffi.new("int64_t *")
    for m, n, k, batch in [(1024, 1024, 1024, 1), (128, 256, 784, 1), (2048, 768, 256, 1), (130, 190, 64, 8),
                           (1, 900, 800, 1), (5, 3, 2, 1)]:
        lib.rumus_gemm_blocks(m, n, k, batch, bm, bn)
        assert 1 <= bm[0] <= max(m, 1) and 1 <= bn[0] <= max(n, 1)
        blocks = batch * -(-m // bm[0]) * -(-n // bn[0])
        least = lib.rumus_grain(2) // 2  # BLOCK_MACS: half the GEMM grain
        assert blocks == batch or bm[0] * bn[0] * k >= least  # split only into blocks worth a call
        assert blocks == batch or min(bm[0], bn[0]) >= 16 or min(m, n) < 16  # never thinner than 16
        assert blocks <= max(64, batch) * 4
    # the MLP step's first product (issue 11): enough blocks for 16 cores, not the 8 of 64x64 it once made
    lib.rumus_gemm_blocks(128, 256, 784, 1, bm, bn)
    assert -(-128 // bm[0]) * -(-256 // bn[0]) >= 16
