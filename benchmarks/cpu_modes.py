"""Why a training step at the full thread count is sometimes fast and sometimes slow, block after block.

    python benchmarks/cpu_modes.py                          # MLP step, blocks at 8 and 16 threads (the 16-core host)
    python benchmarks/cpu_modes.py --counts 1 2 --blocks 12 # the dev machine
    python benchmarks/cpu_modes.py --step cnn --spin-us 0   # the CNN step, workers that never poll

On the 16-core host (session 8) RUMUS's MLP step at 16 threads timed 1.21-1.22 ms in some blocks of
cpu_scaling.py and 1.73-1.76 ms in others of the same process (the CNN step 2.5-2.6 against 3.2-3.4), each
block steady within itself; the slow blocks came right after blocks at 8 threads. This runs blocks of one
step, the thread count alternating between --counts, and prints per block what could tell the modes apart:
- the step's median and best time over the block;
- the host's steal time (/proc/stat: CPU time the hypervisor gave to other guests) and the machine's busy
  share, over the block;
- involuntary context switches of the calling thread and of the pool's workers (/proc/self/task/*/status):
  a thread that lost its CPU to another runnable thread;
- where the threads ran: a sampler thread reads every thread's CPU (/proc/self/task/*/stat) every 20 ms and
  counts the samples where the calling thread shared its CPU with a worker that was running, and the
  samples where two workers shared one; the calling thread runs the Python between kernels, so it sharing a
  CPU with a worker slows every op of the step;
- the pool's loops and futex wakes per step (csrc/pool.c's counters).
The sampler costs the step a little (a /proc read every 20 ms, holding the GIL); --no-sampler leaves it out.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))


def _steal_and_busy() -> tuple[int, int, int]:
    """(steal, busy, total) jiffies of the whole machine since boot (/proc/stat's first line)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    steal = v[7] if len(v) > 7 else 0
    total = sum(v[:8])
    return steal, total - idle - steal, total


def _switches() -> dict[int, int]:
    """Involuntary context switches per thread id of this process."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/status") as f:
                out[int(tid)] = next(int(line.split()[1]) for line in f
                                     if line.startswith("nonvoluntary_ctxt_switches"))
        except (OSError, StopIteration, ValueError):
            pass
    return out


def _placement() -> dict[int, tuple[str, int]]:
    """(state, CPU) per thread id: R = running or runnable."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[int(tid)] = (fields[0], int(fields[36]))  # state, then field 39 of stat: the CPU last run on
        except (OSError, IndexError, ValueError):
            pass
    return out


class Sampler:
    """Counts, every `period` seconds, samples where the calling thread shared a CPU with a runnable worker
    and where two runnable workers shared one."""

    def __init__(self, main_tid: int, period: float = 0.02) -> None:
        self.main_tid, self.period = main_tid, period
        self.samples = self.main_shared = self.workers_shared = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._me = 0

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        self._me = threading.get_native_id()
        while not self._stop.wait(self.period):
            where = _placement()
            main = where.get(self.main_tid)
            running = [cpu for tid, (state, cpu) in where.items()
                       if state == "R" and tid not in (self.main_tid, self._me)]
            self.samples += 1
            if main is not None and main[1] in running:
                self.main_shared += 1
            if len(set(running)) < len(running):
                self.workers_shared += 1


def _step(name: str) -> Callable[[], None]:
    sys.path.insert(0, HERE)
    if name == "mlp":
        import _rumus_small_models
        return _rumus_small_models.rumus_mlp_step()
    import cpu_scaling
    return cpu_scaling._cnn_rumus()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--counts", type=int, nargs="+", default=[8, 16], help="thread counts, alternating per block")
    ap.add_argument("--blocks", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=0.4, help="per block")
    ap.add_argument("--step", choices=["mlp", "cnn"], default="mlp")
    ap.add_argument("--spin-us", type=int, default=None, help="the pool's polling time in us (default 50, csrc/pool.c)")
    ap.add_argument("--no-sampler", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("RUMUS_BACKEND", "cpu")
    os.environ["RUMUS_NUM_THREADS"] = str(max(args.counts))
    import rumus  # noqa: F401  (loads the backend with the largest budget, so every worker can exist)
    from rumus_cpu import threads
    from rumus_cpu._lib import lib
    if args.spin_us is not None:
        lib.rumus_pool_set_spin_us(args.spin_us)
    step = _step(args.step)
    main_tid = threading.get_native_id()
    print(f"{args.step} step; {os.cpu_count()} CPUs; pool spin {lib.rumus_pool_get_spin_us()} us; "
          f"blocks of {args.seconds} s")
    print("| block | threads | median ms | best ms | steal % | busy % | main: involuntary switches | workers: "
          "involuntary switches | samples: main shares a CPU / workers share one / all | loops, wakes per step |")
    print("|---" * 10 + "|")
    for b in range(args.blocks):
        n = args.counts[b % len(args.counts)]
        threads.set_num_threads(n)
        for _ in range(3):
            step()
        s0, sw0, loops0, wakes0 = _steal_and_busy(), _switches(), lib.rumus_pool_loops(), lib.rumus_pool_wakes()
        times: list[float] = []
        sampler = Sampler(main_tid)
        with sampler if not args.no_sampler else _Null():
            end = time.perf_counter() + args.seconds
            while time.perf_counter() < end or len(times) < 5:
                t = time.perf_counter()
                step()
                times.append(time.perf_counter() - t)
        s1, sw1 = _steal_and_busy(), _switches()
        loops, wakes = lib.rumus_pool_loops() - loops0, lib.rumus_pool_wakes() - wakes0
        total = max(s1[2] - s0[2], 1)
        main_sw = sw1.get(main_tid, 0) - sw0.get(main_tid, 0)
        worker_sw = sum(v - sw0.get(t, 0) for t, v in sw1.items() if t != main_tid)
        print(f"| {b} | {n} | {statistics.median(times) * 1e3:.3f} | {min(times) * 1e3:.3f} | "
              f"{100 * (s1[0] - s0[0]) / total:.1f} | {100 * (s1[1] - s0[1]) / total:.0f} | {main_sw} | {worker_sw} | "
              f"{sampler.main_shared} / {sampler.workers_shared} / {sampler.samples} | "
              f"{loops / len(times):.0f}, {wakes / len(times):.1f} |", flush=True)
    return 0


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


if __name__ == "__main__":
    sys.exit(main())
