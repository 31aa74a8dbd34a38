"""The CPU kernels' own thread pool (csrc/pool.c): a loop wakes only the workers its work needs, correct
results with more threads than cores, from two Python threads at once, and for numpy's own BLAS calls; the
libgomp spin set for torch, and how to decline it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

pytest.importorskip("rumus_cpu._kernels")

linux_only = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs sched_setaffinity")


def _run(script: str, threads: int, **env: str) -> dict[str, Any]:
    full = {**os.environ, "RUMUS_NUM_THREADS": str(threads), "RUMUS_BACKEND": "cpu", **env}
    proc = subprocess.run([sys.executable, "-c", script], env=full, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


WAKES = r"""
import json, time
import numpy as np
import rumus as rm
from rumus_cpu._lib import lib
rng = np.random.default_rng(0)
two_way = rm.tensor(rng.standard_normal(70_000).astype(np.float32))    # 2 threads by its size
whole = rm.tensor(rng.standard_normal(1 << 22).astype(np.float32))     # the whole budget
whole + 1.0                                                             # workers started
got = {}
for name, t in (("two_way", two_way), ("whole", whole)):
    wakes = []
    for _ in range(5):
        time.sleep(0.02)  # longer than the workers poll: they are asleep
        w0 = lib.rumus_pool_wakes()
        t * 2.0
        wakes.append(lib.rumus_pool_wakes() - w0)
    got[name] = max(wakes)
print(json.dumps({**got, "workers": lib.rumus_pool_workers()}))
"""


@pytest.mark.timing
def test_a_loop_wakes_only_the_workers_its_size_needs() -> None:
    got = _run(WAKES, 8)
    assert got["workers"] == 7, got
    assert got["two_way"] == 1, got  # OpenMP's team woke all 7
    assert got["whole"] == 7, got  # the control: a loop of the whole budget wakes every sleeping worker


OVERSUBSCRIBED = r"""
import json, os
os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})   # one CPU for 8 threads
import numpy as np
import rumus as rm
from rumus.nn import functional as F
rng = np.random.default_rng(1)
a = rng.standard_normal((700, 900)).astype(np.float32)
b = rng.standard_normal((900, 500)).astype(np.float32)
x = rng.standard_normal(3_000_001).astype(np.float32)
s = rng.standard_normal((512, 1000)).astype(np.float32)
err = {}
for _ in range(20):
    err["gemm"] = float(np.abs((rm.tensor(a) @ rm.tensor(b)).numpy() - a.astype(np.float64) @ b).max())
    err["add"] = float(np.abs((rm.tensor(x) + 1.5).numpy() - (x + np.float32(1.5))).max())
    ref = np.exp(s - s.max(-1, keepdims=True)); ref /= ref.sum(-1, keepdims=True)
    err["softmax"] = float(np.abs(F.softmax(rm.tensor(s), dim=-1).numpy() - ref).max())
    err["np_blas"] = float(np.abs(a @ b - a.astype(np.float64) @ b).max())   # OpenBLAS's jobs on the pool
print(json.dumps(err))
"""


@pytest.mark.timing
@linux_only
def test_more_threads_than_cores_gives_right_answers_and_ends() -> None:
    err = _run(OVERSUBSCRIBED, 8)
    assert err["add"] == 0.0, err
    assert err["gemm"] < 2e-3 and err["np_blas"] < 2e-3 and err["softmax"] < 1e-6, err


TWO_CALLERS = r"""
import json, threading
import numpy as np
import rumus as rm
rng = np.random.default_rng(2)
a = rng.standard_normal((600, 800)).astype(np.float32)
b = rng.standard_normal((800, 700)).astype(np.float32)
x = rng.standard_normal(2_000_003).astype(np.float32)
alone = ((rm.tensor(a) @ rm.tensor(b)).numpy(), (rm.tensor(x) * 3.0).exp().numpy(), a @ b)
bad = []
def work():
    for _ in range(15):
        got = ((rm.tensor(a) @ rm.tensor(b)).numpy(), (rm.tensor(x) * 3.0).exp().numpy(), a @ b)
        bad.extend(i for i in range(3) if not np.array_equal(got[i], alone[i]))
ts = [threading.Thread(target=work) for _ in range(3)]
for t in ts: t.start()
for t in ts: t.join()
print(json.dumps({"bad": bad}))
"""


@pytest.mark.timing
def test_python_threads_calling_at_once_get_the_same_bits() -> None:
    # a second caller while the pool is busy runs its loop on its own thread; numpy's BLAS calls from
    # several threads take turns (OpenBLAS's job buffers are shared)
    # RUMUS's float32 GEMMs on its own kernel leave OpenBLAS's process-wide thread count alone, so numpy's
    # a @ b keeps its split and bits (on OpenBLAS, see the next test, only RUMUS's own bits are promised)
    from rumus_cpu._lib import lib
    if lib.rumus_sgemm_isa() == 0:
        pytest.skip("no AVX2/AVX-512: RUMUS's float32 GEMMs run on OpenBLAS here")
    assert _run(TWO_CALLERS, 4, RUMUS_GEMM_KERNEL="own")["bad"] == []


@pytest.mark.timing
def test_python_threads_on_openblas_get_the_same_bits_from_rumus() -> None:
    # with RUMUS's float32 GEMMs on OpenBLAS, each holds OpenBLAS at one thread while its blocks run; the
    # regions are counted, so one caller finishing cannot give OpenBLAS its threads back under the other's
    # blocks (which it would split: other bits). (numpy's own a @ b, item 2, may still change bits here:
    # during a region it runs on one thread, and OpenBLAS has no per-thread setting.)
    bad = _run(TWO_CALLERS, 4, RUMUS_GEMM_KERNEL="blas")["bad"]
    assert 0 not in bad and 1 not in bad, bad


OPENMP_ORDER = r"""
import json, os, sys
if sys.argv[1] == "torch_first":
    import torch
import rumus as rm
rm.zeros(1)
from rumus_cpu import threads
import torch
maps = {line.split()[-1] for line in open("/proc/self/maps") if "libgomp" in line}
print(json.dumps({"state": threads.policy()["openmp_of_others"], "copies": len(maps),
                  "left": "GOMP_SPINCOUNT" in os.environ, "torch_threads": torch.get_num_threads()}))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc/self/maps")
def test_torch_imported_after_rumus_gets_a_short_openmp_spin() -> None:
    pytest.importorskip("torch")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}

    def run(order: str, **extra: str) -> dict[str, Any]:
        proc = subprocess.run([sys.executable, "-c", OPENMP_ORDER, order], env={**env, "RUMUS_BACKEND": "cpu", **extra},
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return dict(json.loads(proc.stdout.strip().splitlines()[-1]))

    after = run("rumus_first")
    assert after["state"] == "libgomp (for torch) loaded with GOMP_SPINCOUNT=10000", after
    assert after["copies"] == 1 and not after["left"], after  # torch reused that copy; the env is the user's
    assert "torch imported first" in run("torch_first")["state"]
    # declined: the user's own setting is left to libgomp, and `rumus info` says so
    assert "OMP_WAIT_POLICY=passive" in run("rumus_first", OMP_WAIT_POLICY="passive")["state"]
    assert "GOMP_SPINCOUNT=300000" in run("rumus_first", GOMP_SPINCOUNT="300000")["state"]


NUMPY_BLAS = r"""
import json
import numpy as np
import rumus as rm
rm.zeros(1)   # the backend starts: numpy's OpenBLAS hands its jobs to the pool
from rumus_cpu._lib import lib
rng = np.random.default_rng(4)
a = rng.standard_normal((700, 600)), rng.standard_normal((600, 500))
jobs = lib.rumus_blas_jobs()
err = max(float(np.abs(a[0] @ a[1] - np.einsum("ik,kj->ij", *a)).max()) for _ in range(5))
print(json.dumps({"err": err, "jobs": lib.rumus_blas_jobs() - jobs, "attached": lib.rumus_blas_attached()}))
"""


def test_numpy_blas_jobs_run_on_the_pool_and_are_right() -> None:
    # OpenBLAS's level-3 jobs wait on each other: one chunk per thread, all at once (rumus_parallel_together)
    got = _run(NUMPY_BLAS, 4)
    if not got["attached"]:
        pytest.skip("numpy's BLAS has no threads callback here")
    assert got["jobs"] >= 5 * 2 and got["err"] < 1e-9, got


FUSED = r"""
import json, os, sys
import numpy as np
import rumus as rm
from rumus_cpu._lib import lib
rng = np.random.default_rng(3)
x = rm.tensor(rng.standard_normal((512, 700)).astype(np.float32))   # 358K elements: splits by its size
y = rm.tensor(rng.standard_normal((512, 700)).astype(np.float32))
f = rm.compile(lambda a, b: ((a * 1.5 + b).exp() - a * b).tanh())
for _ in range(3):  # trace, capture, replay
    f(x, y)
loops = lib.rumus_pool_loops()
out = f(x, y).numpy()   # one fused kernel over one contiguous run
np.save(sys.argv[1], out)
print(json.dumps({"loops": lib.rumus_pool_loops() - loops, "kernels": f.stats()["kernels"]}))
"""


def test_compiled_chains_run_on_the_pool_with_the_same_bits(tmp_path: Any) -> None:
    got = []
    for n in (1, 4):
        path = tmp_path / f"t{n}.npy"
        full = {**os.environ, "RUMUS_NUM_THREADS": str(n), "RUMUS_BACKEND": "cpu", "RUMUS_CACHE_DIR": str(tmp_path)}
        proc = subprocess.run([sys.executable, "-c", FUSED, str(path)], env=full, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, proc.stderr
        got.append((json.loads(proc.stdout.strip().splitlines()[-1]), np.load(path)))
    (one, a), (four, b) = got
    # the fused kernel's own loop took the pool (before, a contiguous chain never split)
    assert one["kernels"] == four["kernels"] == 1 and one["loops"] == 0 and four["loops"] == 1, (one, four)
    np.testing.assert_array_equal(a, b)
    rng = np.random.default_rng(3)
    x64 = rng.standard_normal((512, 700)).astype(np.float32).astype(np.float64)
    y64 = rng.standard_normal((512, 700)).astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(a, np.tanh(np.exp(x64 * 1.5 + y64) - x64 * y64), rtol=1e-5, atol=1e-6)
