"""PyTorch's own steps with RUMUS imported first in the process, against torch alone (issue 11).

    python benchmarks/torch_beside_rumus.py --threads 16 --rounds 3

RUMUS's CPU backend loads libgomp with a short spin (rumus_cpu/threads.py, quiet_openmp_for_later_libraries)
so that torch's idle OpenMP threads sleep soon after torch's regions instead of holding every core while
RUMUS computes. libgomp reads that setting once per process, so the two modes run in separate processes,
alternating for --rounds rounds; printed: per step the median over rounds of each mode and their ratio
(torch with RUMUS first / torch alone). The steps are cpu_scaling.py's torch steps (MLP, CNN, transformer).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = ["MLP step", "CNN step", "transformer step"]


def worker(mode: str, threads: int, budget: float) -> None:
    if mode == "rumus first":
        import rumus as rm
        rm.zeros(1)  # the CPU backend starts (and loads libgomp) before torch is imported
    import torch
    torch.set_num_threads(threads)
    sys.path.insert(0, HERE)
    import cpu_scaling
    cases = cpu_scaling._torch_cases()
    out = {}
    for name in STEPS:
        fn = cases[name]
        for _ in range(2):
            fn()
        times = []
        start = time.perf_counter()
        while len(times) < 5 or (time.perf_counter() - start < budget and len(times) < 200):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        out[name] = statistics.median(times)
    print(json.dumps(out))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--budget", type=float, default=1.0, help="seconds of samples per step")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(args.worker, args.threads, args.budget)
        return 0
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(RUMUS_BACKEND="cpu", RUMUS_NUM_THREADS=str(args.threads))
    got: dict[str, list[dict[str, float]]] = {"torch alone": [], "rumus first": []}
    t_start = time.perf_counter()
    for r in range(args.rounds):
        for mode in (list(got) if r % 2 == 0 else list(got)[::-1]):
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", mode, "--threads", str(args.threads),
                   "--budget", str(args.budget)]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                raise SystemExit(f"{mode} failed:\n{proc.stderr[-3000:]}")
            got[mode].append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(f"# round {r + 1}: {mode} done ({time.perf_counter() - t_start:.0f} s)", file=sys.stderr)
    print(f"\ntorch at {args.threads} threads, {args.rounds} rounds of one process per mode; ms, medians over rounds\n")
    print("| step | torch alone | torch, rumus imported first | ratio | per-round ratios |")
    print("|---|---|---|---|---|")
    for name in STEPS:
        a = [g[name] * 1e3 for g in got["torch alone"]]
        b = [g[name] * 1e3 for g in got["rumus first"]]
        ratios = ", ".join(f"{y / x:.2f}" for x, y in zip(a, b))
        print(f"| {name} | {statistics.median(a):.3g} | {statistics.median(b):.3g} | "
              f"{statistics.median(b) / statistics.median(a):.2f}× | {ratios} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
