"""A pool setting off and on, paired A/B in one process (issue 11): RUMUS's MLP, CNN and transformer steps
alone and with K other processes spinning pinned on the last K CPUs, with the setting off and on, the two
alternating block by block for --rounds rounds.

    RUMUS_BACKEND=cpu RUMUS_NUM_THREADS=16 python benchmarks/cpu_pool_ab.py --setting step_out --spinners 3
    RUMUS_BACKEND=cpu RUMUS_NUM_THREADS=2 python benchmarks/cpu_pool_ab.py --setting keep_apart --rounds 5

Settings (csrc/pool.c):
- step_out: off is RUMUS_STEP_OUT=0's setting, on is loops of >= 4 threads. Without it a worker that a spinner
  preempts while it holds a chunk holds the loop for the spinner's time slice; with it, a worker preempted twice
  within 20 ms sleeps instead (worker_step_out). Counted: step-outs.
- keep_apart: off is RUMUS_KEEP_APART=0's setting. With it a worker that starts a loop on the caller's CPU moves
  to another (keep_off_callers_cpu). Counted: moves.
Printed per round and setting: each step's median alone and busy and their ratio, and the count in the busy
block; last, per setting, the median ratio over rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from typing import Any
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpu_scaling  # noqa: E402


def _settings(lib: Any) -> dict[str, tuple[Callable[[bool], object], Callable[[], int], str]]:
    """Per setting: how to turn it off/on, its counter, what the counter counts."""
    return {"step_out": (lambda on: lib.rumus_pool_set_step_out(4 if on else 0, 0), lib.rumus_pool_step_outs,
                         "step-outs"),
            "keep_apart": (lambda on: lib.rumus_pool_set_keep_apart(int(on)), lib.rumus_pool_moves, "moves")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--setting", choices=["step_out", "keep_apart"], default="step_out")
    p.add_argument("--spinners", type=int, default=1, help="busy processes, pinned on the last CPUs")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    import rumus as rm
    rm.zeros(1)
    from rumus_cpu._lib import lib
    turn, counter, counted = _settings(lib)[args.setting]
    cases = {k: v for k, v in cpu_scaling._rumus_cases().items() if k in cpu_scaling.STEPS}
    cpus = sorted(os.sched_getaffinity(0))[-args.spinners:]

    def block() -> dict[str, float]:
        # cpu_scaling's timing: median of batched samples, ~0.3 s per step (the transformer: 5 calls at least)
        return {k: cpu_scaling._time(v, 0.3, 5)[0] for k, v in cases.items()}

    ratios: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for r in range(args.rounds):
        for on in ((False, True) if r % 2 == 0 else (True, False)):
            turn(on)
            alone = block()
            spin = "import os\nos.sched_setaffinity(0, {%d})\nwhile True: pass"
            hogs = [subprocess.Popen([sys.executable, "-c", spin % c]) for c in cpus]
            time.sleep(0.2)
            count = counter()
            busy = block()
            count = counter() - count
            for h in hogs:
                h.kill()
                h.wait()
            ratios[on].append({k: busy[k] / alone[k] for k in cases})
            print(f"round {r + 1}, {args.setting} {'on' if on else 'off'}: " + "  ".join(
                f"{k} {alone[k] * 1e3:.3g} -> {busy[k] * 1e3:.3g} ms ({busy[k] / alone[k]:.2f}×)" for k in cases)
                + f"; {count} {counted}", flush=True)
    turn(True)
    for on in (False, True):
        print(f"{args.setting} {'on' if on else 'off'}, median busy / alone: " + "  ".join(
            f"{k} {statistics.median(x[k] for x in ratios[on]):.2f}×" for k in cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
