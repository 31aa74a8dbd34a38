"""The CPU kernels' own thread pool (csrc/pool.c): a loop wakes only the workers its work needs, correct
results with more threads than cores, from two Python threads at once, and for numpy's own BLAS calls."""

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
    # RUMUS_STEP_OUT=0: 8 threads on a 2-core CI machine preempt each other, and a worker that stepped out is
    # not woken (test_a_worker_whose_core_is_shared_steps_out_and_comes_back); here every wake is counted
    got = _run(WAKES, 8, RUMUS_SPIN_US="50", RUMUS_STEP_OUT="0")
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
    # with RUMUS's float32 GEMMs on OpenBLAS, each holds OpenBLAS at one thread while its blocks run; up to
    # session 8 the first caller to finish restored the budget under the other's blocks, which OpenBLAS then
    # split (other bits). The regions are counted now. (numpy's own a @ b, item 2, may still change bits here:
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
    assert "OMP_WAIT_POLICY=passive" in run("rumus_first", OMP_WAIT_POLICY="passive")["state"]


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


OWNERS = r"""
import json, time
import numpy as np
import rumus as rm
from rumus_cpu._lib import ffi, lib
rm.zeros(1)
owner = np.zeros(8, np.int32)
ptr = ffi.cast("int32_t *", owner.ctypes.data)
lib.rumus_pool_probe(2, 8, 200_000, ptr)          # workers started and awake
maps = []
for _ in range(40):
    owner[:] = -1
    lib.rumus_pool_probe(2, 8, 50_000, ptr)       # 8 chunks of 50 us: 4 per thread
    maps.append(owner.tolist())
print(json.dumps({"maps": maps}))
"""


@pytest.mark.timing
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two CPUs")
def test_each_thread_gets_the_same_chunks_loop_after_loop() -> None:
    # thread s owns chunks [4s, 4s+4): the caller runs 0-3 first, worker 1 runs 4-7 first; a thread done
    # with its own takes others' from their ends, so chunk 4 (worker 1's first) goes to the caller only when
    # the worker is over three chunks late. Taken first-come (before), the worker got whichever chunk was
    # next when it arrived (1 or 2), and the same data met a different core from one loop to the next.
    maps = _run(OWNERS, 2, RUMUS_SPIN_US="2000")["maps"]
    assert all(set(m) <= {0, 1} for m in maps), maps
    # in every loop, however late a thread came: each run's front went to its owner, its back to the other
    # thread (taken from the end); first-come claims interleave, 0 1 0 1 ...
    def owner_then_other(run: list[int], owner: int) -> bool:
        k = next((i for i, t in enumerate(run) if t != owner), len(run))
        return all(t != owner for t in run[k:])
    assert all(owner_then_other(m[:4], 0) and owner_then_other(m[4:], 1) for m in maps), maps
    # each thread exactly its own run, in at least half the loops; the rest are loops where one thread lost its
    # CPU for a while. Only where the worker got a CPU in most loops (on a loaded machine it often gets none
    # while the caller runs all 8 chunks, which says nothing about ownership)
    if sum(1 in m for m in maps) >= 0.75 * len(maps):
        own = sum(m == [0, 0, 0, 0, 1, 1, 1, 1] for m in maps)
        assert own >= 0.5 * len(maps), maps


STEP_OUT = r"""
import json, os, time
import numpy as np
import rumus as rm
from rumus_cpu._lib import ffi, lib
rm.zeros(1)
nt, first_us = int(os.environ["RUMUS_NUM_THREADS"]), int(os.environ["TEST_FIRST_US"])
lib.rumus_pool_count_injected_only(1)   # the machine's own preemptions would make others step out too
lib.rumus_pool_set_step_out(4, first_us)
n = 4 * nt  # one unit per chunk, 1 ms each: every thread gets a core within a loop, even 4 threads on 2 cores
owner = np.zeros(n, np.int32)
ptr = ffi.cast("int32_t *", owner.ctypes.data)
def loop():
    owner[:] = -1
    lib.rumus_pool_probe(nt, n, 1_000_000, ptr)
    return sorted(set(owner.tolist()))
for _ in range(5):                      # workers started; each looked at its count (now injected only)
    loop(); time.sleep(0.001)
seen_before = sorted(set().union(*[loop() for _ in range(10)]))
rng = np.random.default_rng(5)
x, y = rng.standard_normal((300, 500)).astype(np.float32), rng.standard_normal((500, 400)).astype(np.float32)
def kernels():
    return [(rm.tensor(x) @ rm.tensor(y)).numpy(), rm.tensor(x).softmax(-1).numpy(), (rm.tensor(x) * 1.7).exp().numpy()]
with_all = kernels()
lib.rumus_pool_inject_preemptions(nt - 1, 2)   # the last worker: two preemptions since its last look
t0 = time.monotonic()
out_loops = []
while time.monotonic() - t0 < first_us * 0.5e-6:
    out_loops.append(loop()); time.sleep(0.0005)
out_now = lib.rumus_pool_out()
same_bits = all(np.array_equal(u, v) for u, v in zip(kernels(), with_all))  # its chunks ran on the others
# numpy's BLAS call: OpenBLAS's jobs wait on each other, so every thread runs one (the stepped-out one too)
a = rng.standard_normal((768, 768)).astype(np.float32)
t1 = time.monotonic()
prod = a @ a
blas_s = time.monotonic() - t1
parts = np.full(nt, -1, np.int32)
t1 = time.monotonic()
gave_up = lib.rumus_pool_probe_together(nt, ffi.cast("int32_t *", parts.ctypes.data))
together_s = time.monotonic() - t1
err = float(np.abs(prod - a.astype(np.float64) @ a).max())
time.sleep(first_us * 1e-6)
back = sorted(set().union(*[loop() for _ in range(10)]))
print(json.dumps({"before": seen_before, "out_loops": out_loops, "out_now": out_now, "blas_s": blas_s, "err": err,
                  "back": back, "gave_up": gave_up, "together_s": together_s, "parts": sorted(parts.tolist()),
                  "same_bits": same_bits, "step_outs": lib.rumus_pool_step_outs(),
                  "attached": lib.rumus_blas_attached()}))
"""


@pytest.mark.timing
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="stepping out needs Linux's futex and rusage")
def test_a_worker_whose_core_is_shared_steps_out_and_comes_back() -> None:
    # a worker preempted twice within 20 ms shares its core with another process: it sleeps (its chunks go to
    # the others, the results do not change) and comes back when its time out ends
    got = _run(STEP_OUT, 4, TEST_FIRST_US="1000000", RUMUS_SPIN_US="2000")
    assert got["before"] == [0, 1, 2, 3], got  # over 10 loops (on 2 cores not every thread gets a chunk of each)
    assert got["step_outs"] == 1 and got["out_now"] == 1, got
    # the look happens after the worker's next loop: from the second loop on it runs no chunk
    assert len(got["out_loops"]) >= 5, got
    assert all(3 not in m and set(m) <= {0, 1, 2} for m in got["out_loops"][1:]), got["out_loops"]
    assert got["err"] < 2e-3 and got["same_bits"], got
    # a loop whose parts must all run at once (OpenBLAS's jobs) wakes it: every part starts, no wait for the
    # rest of its 1 s out (half of it is left at this point)
    assert got["gave_up"] == 0 and got["parts"] == [0, 1, 2, 3] and got["together_s"] < 0.3, got
    if got["attached"]:
        assert got["blas_s"] < 0.3, got
    assert got["back"] == [0, 1, 2, 3], got["back"]


@pytest.mark.timing
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="stepping out needs Linux's futex and rusage")
def test_no_worker_steps_out_of_a_loop_of_few_threads() -> None:
    # on 2 or 3 threads one step out costs more than sharing the core (see csrc/pool.c, worker_step_out)
    got = _run(STEP_OUT, 3, TEST_FIRST_US="200000", RUMUS_SPIN_US="2000")
    assert got["step_outs"] == 0 and got["out_now"] == 0, got
    assert any(2 in m for m in got["out_loops"][1:]), got["out_loops"]


def test_rumus_step_out_zero_turns_it_off() -> None:
    got = _run("import json, rumus as rm\nrm.zeros(1)\nfrom rumus_cpu import threads\nfrom rumus_cpu._lib import lib\n"
               "print(json.dumps({'least': lib.rumus_pool_get_step_out(), 'said': threads.policy()['step_out']}))",
               4, RUMUS_STEP_OUT="0")
    assert got == {"least": 0, "said": "never (RUMUS_STEP_OUT=0)"}, got


KEEP_APART = r"""
import json, os, threading
import numpy as np
import rumus as rm
from rumus_cpu._lib import ffi, lib
from rumus_cpu import threads
rm.zeros(1)
main = threading.get_native_id()
everywhere = os.sched_getaffinity(0)
n = 8
owner, cpu = np.zeros(n, np.int32), np.zeros(n, np.int32)
def loop():
    owner[:], cpu[:] = -1, -1
    lib.rumus_pool_probe_where(2, n, 2_000_000, 2_000_000, ffi.cast("int32_t *", owner.ctypes.data),
                               ffi.cast("int32_t *", cpu.ctypes.data))
    return owner.tolist(), cpu.tolist()
loop()                                      # the worker started
caller_cpu = min(everywhere)
os.sched_setaffinity(0, {caller_cpu})       # this (the calling) thread only
worker = [int(t) for t in os.listdir("/proc/self/task") if int(t) != main]
moves0 = lib.rumus_pool_moves()
lib.rumus_pool_fake_on_callers_cpu(1)       # at its next loop worker 1 takes itself to be on the caller's CPU
owners, cpus = loop()
moved = lib.rumus_pool_moves() - moves0
masks = [sorted(os.sched_getaffinity(t)) for t in worker]
os.sched_setaffinity(0, everywhere)
print(json.dumps({"owners": owners, "cpus": cpus, "caller_cpu": caller_cpu, "moved": moved, "masks": masks,
                  "everywhere": sorted(everywhere), "said": threads.policy()["keep_apart"]}))
"""


@pytest.mark.timing
@pytest.mark.skipif(not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
                    reason="moving off the caller's CPU needs Linux and two CPUs")
def test_a_worker_on_the_callers_cpu_moves_off_it_and_keeps_its_mask() -> None:
    # a worker that starts a loop on the caller's CPU moves to another (csrc/pool.c, keep_off_callers_cpu):
    # Linux queues a woken worker behind the caller when the other cores are busy, and the step runs at half
    # speed. The move is a passing affinity change: after it the worker may run anywhere it could before.
    got = _run(KEEP_APART, 2, RUMUS_SPIN_US="2000")
    assert got["moved"] == 1, got
    ran = [c for o, c in zip(got["owners"], got["cpus"]) if o == 1]
    assert ran and got["caller_cpu"] not in ran, got        # 8 units of 2 ms: the worker runs some, elsewhere
    assert all(c == got["caller_cpu"] for o, c in zip(got["owners"], got["cpus"]) if o == 0), got
    assert got["masks"] and all(m == got["everywhere"] for m in got["masks"]), got
    assert got["said"].startswith("a worker that starts a loop on the caller's CPU moves") and "1 moves" in got["said"]


@pytest.mark.timing
@pytest.mark.skipif(not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
                    reason="moving off the caller's CPU needs Linux and two CPUs")
def test_rumus_keep_apart_zero_turns_it_off() -> None:
    got = _run(KEEP_APART, 2, RUMUS_SPIN_US="2000", RUMUS_KEEP_APART="0")
    assert got["moved"] == 0 and got["said"] == "off (RUMUS_KEEP_APART=0)", got
    assert sorted(set(got["owners"])) == [0, 1], got  # the loop itself runs as before


CALLER_WAITS = r"""
import json, time
import numpy as np
import rumus as rm
from rumus_cpu._lib import ffi, lib
rm.zeros(1)
owner = np.zeros(2, np.int32)
ptr = ffi.cast("int32_t *", owner.ctypes.data)
lib.rumus_pool_probe(2, 2, 1_000_000, ptr)  # the worker started (and polls: RUMUS_SPIN_US)
got = []
for _ in range(3):
    owner[:] = -1
    t0, c0 = time.perf_counter(), time.thread_time()
    lib.rumus_pool_probe_where(2, 2, 5_000_000, 300_000_000, ptr, ffi.NULL)  # caller's unit 5 ms, worker's 300 ms
    got.append({"wall": time.perf_counter() - t0, "cpu": time.thread_time() - c0, "owner": owner.tolist()})
print(json.dumps({"runs": got}))
"""


@pytest.mark.timing
@pytest.mark.skipif(not sys.platform.startswith("linux") or (os.cpu_count() or 1) < 2,
                    reason="the caller sleeps on a futex on Linux; needs two CPUs")
def test_a_caller_waiting_for_a_long_chunk_sleeps_instead_of_holding_its_cpu() -> None:
    # the caller polls, yields, and after 1 ms sleeps until the last chunk's thread wakes it: waiting 295 ms for
    # the worker's unit costs it a few ms of CPU (it used to yield in a loop, the whole wait on the CPU)
    runs = _run(CALLER_WAITS, 2, RUMUS_SPIN_US="1000")["runs"]
    waited = [r for r in runs if r["owner"] == [0, 1]]  # the worker took its unit (on a loaded machine it may not)
    assert waited, runs
    for r in waited:
        assert r["wall"] >= 0.29, r              # it did wait for the worker's unit, and returned after it
        assert r["cpu"] < 0.05, r                # 5 ms of its own unit, ~1 ms of polling, then asleep
