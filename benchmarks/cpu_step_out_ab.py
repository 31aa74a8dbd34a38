"""Stepping out, paired A/B in one process (issue 11): RUMUS's MLP, CNN and transformer steps alone and with K
other processes spinning pinned on the last K CPUs, with stepping out off (RUMUS_STEP_OUT=0's setting) and on
(loops of >= 4 threads), the two alternating block by block for --rounds rounds.

    RUMUS_BACKEND=cpu RUMUS_NUM_THREADS=16 python benchmarks/cpu_step_out_ab.py --spinners 3 --rounds 3

Printed per round and setting: each step's median alone and busy and their ratio, and the step-outs counted in
the busy block; last, per setting, the median ratio over rounds. Without stepping out a worker that a spinner
preempts while it holds a chunk holds the loop for the spinner's time slice; with it, a worker preempted twice
within 20 ms sleeps instead (csrc/pool.c, worker_step_out).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpu_scaling  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spinners", type=int, default=1, help="busy processes, pinned on the last CPUs")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    import rumus as rm
    rm.zeros(1)
    from rumus_cpu._lib import lib
    cases = {k: v for k, v in cpu_scaling._rumus_cases().items() if k in cpu_scaling.STEPS}
    cpus = sorted(os.sched_getaffinity(0))[-args.spinners:]

    def block() -> dict[str, float]:
        # cpu_scaling's timing: median of batched samples, ~0.3 s per step (the transformer: 5 calls at least)
        return {k: cpu_scaling._time(v, 0.3, 5)[0] for k, v in cases.items()}

    ratios: dict[int, list[dict[str, float]]] = {0: [], 4: []}
    for r in range(args.rounds):
        for least in ((0, 4) if r % 2 == 0 else (4, 0)):
            lib.rumus_pool_set_step_out(least, 0)
            alone = block()
            spin = "import os\nos.sched_setaffinity(0, {%d})\nwhile True: pass"
            hogs = [subprocess.Popen([sys.executable, "-c", spin % c]) for c in cpus]
            time.sleep(0.2)
            outs = lib.rumus_pool_step_outs()
            busy = block()
            outs = lib.rumus_pool_step_outs() - outs
            for h in hogs:
                h.kill()
                h.wait()
            ratios[least].append({k: busy[k] / alone[k] for k in cases})
            print(f"round {r + 1}, stepping out {'on' if least else 'off'}: " + "  ".join(
                f"{k} {alone[k] * 1e3:.3g} -> {busy[k] * 1e3:.3g} ms ({busy[k] / alone[k]:.2f}×)" for k in cases)
                + f"; {outs} step-outs", flush=True)
    for least in (0, 4):
        print(f"stepping out {'on' if least else 'off'}, median busy / alone: " + "  ".join(
            f"{k} {statistics.median(x[k] for x in ratios[least]):.2f}×" for k in cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
