"""Busy neighbour: the MLP, CNN and transformer training steps alone, and while another process
spins on one core (pinned there), alone and busy side by side in one process per library, for --rounds rounds.

    python benchmarks/cpu_busy_neighbour.py                  # RUMUS at its default thread budget
    python benchmarks/cpu_busy_neighbour.py --threads 1 2    # chosen budgets (set at run time, one process)
    python benchmarks/cpu_busy_neighbour.py --torch          # PyTorch CPU beside it, same thread counts
    python benchmarks/cpu_busy_neighbour.py --threads 16 --rounds 5 --torch --quick --json busy.json

Expected on a quiet machine: a step loses at most the share of the core it lost. The scheduler splits the
busy core between the spinner and one of the step's threads, so a step on threads >= C cores keeps C - 1/2
cores: at most C / (C - 1/2) times the time alone (1.33x on 2 cores, 1.03x on 16); a step on fewer threads
than cores keeps them all (1x: the scheduler moves it off the busy core). More than that means threads wait
for a core held elsewhere (a barrier, a spinning thread).
Why paired: two processes of the same step on a VM host read up to 25% apart, more than the effect measured.
So each library runs in one process (cpu_scaling.py's worker: RUMUS started with RUMUS_NUM_THREADS = the
largest budget); every round, at every budget, the steps are timed alone and busy back to back (busy first on
odd rounds; the spinner started before the busy block and killed after it), and the table gives per step the
median over rounds of the ratio busy / alone within a round, and the range of those ratios. The cases and
their timing are cpu_scaling.py's. Other processes change the expectation: read the load average printed.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpu_scaling  # noqa: E402

STEPS = cpu_scaling.STEPS
BUDGET, QUICK_BUDGET = 0.6, 0.4  # seconds of samples per step and block (the transformer step: twice that)


def _bound(threads: int, cpus: int) -> float:
    """Time busy / time alone if the step loses only the spinner's fair share of its core (quiet machine)."""
    return cpus / (cpus - 0.5) if threads >= cpus and cpus > 1 else 1.0


def rows(raw: dict[str, Any]) -> list[str]:
    """The table's rows from the raw per-round numbers: per budget, library and step the medians alone and
    busy, the median of the rounds' ratios busy / alone and their range, the bound and the verdict."""
    out = []
    for n in raw["counts"]:
        for lib, rounds in raw["libs"].items():
            pairs = cpu_scaling._paired(rounds, "alone", "busy", n)
            for s in [s for s in STEPS if s in pairs]:
                a, b, ratios = pairs[s]
                ratio, bound = statistics.median(ratios), _bound(n, raw["cpus"])
                verdict = "within" if ratio <= bound * 1.1 else "**over**"
                out.append(f"| {s} | {lib} | {n} | {a * 1e3:.3g} | {b * 1e3:.3g} | {ratio:.2f}× | "
                           f"{min(ratios):.2f}–{max(ratios):.2f}× | ≤ {bound:.2f}× | {verdict} |")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, nargs="*", default=None, help="budgets (default: RUMUS's default)")
    p.add_argument("--rounds", type=int, default=5, help="alone/busy pairs per budget")
    p.add_argument("--budget", type=float, default=None,
                   help=f"seconds of timing per step and block (default {BUDGET}; {QUICK_BUDGET} with --quick)")
    p.add_argument("--quick", action="store_true", help="less timing per step (the 16-core sweep)")
    p.add_argument("--torch", action="store_true", help="time PyTorch CPU the same way, in its own process")
    p.add_argument("--json", metavar="PATH", help="write every round's raw numbers here")
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # kills the library's process on a timeout
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if args.threads:
        counts = sorted(set(args.threads))
    else:
        from rumus_cpu.threads import default_num_threads
        counts = [default_num_threads()]
    budget = args.budget or (QUICK_BUDGET if args.quick else BUDGET)
    rounds = max(args.rounds, 1)
    since = time.time()
    raw: dict[str, Any] = {
        "host": platform.node(), "machine": cpu_scaling._machine(), "date": time.strftime("%Y-%m-%d %H:%M"),
        "counts": counts, "rounds": rounds, "budget_s": budget, "quick": args.quick, "cpus": cpus,
        "hog_cpu": cpu_scaling._hog_cpu(), "load_before": cpu_scaling._load(), "libs": {}}
    for lib in ["rumus"] + (["torch"] if args.torch else []):
        raw["libs"][lib] = cpu_scaling._run_worker(lib, counts, rounds, budget, args.quick, counts, STEPS, since)
        cpu_scaling._write_json(args.json, raw)
        print(f"# {lib} done ({time.time() - since:.0f} s)", file=sys.stderr, flush=True)
    raw["load_after"], raw["wall_s"] = cpu_scaling._load(), round(time.time() - since, 1)
    cpu_scaling._write_json(args.json, raw)
    print(f"\n{raw['machine']}; {raw['date']}; {rounds} alone/busy rounds in one process per library; load average "
          f"{raw['load_before']} before, {raw['load_after']} after ({raw['wall_s']:.0f} s)\n")
    print("| step | library | threads | alone ms | busy ms | busy / alone (median of rounds) | range of ratios | "
          "expected on a quiet machine | |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows(raw)))
    for key, what in (("pool_loops", "loops on more than one thread"), ("pool_wakes", "sleeping workers woken")):
        got = {k: [b.get(key, 0) for rd in raw["libs"]["rumus"] for b in rd if b["kind"] == k]
               for k in ("alone", "busy")}
        print(f"\nRUMUS pool, {what} (csrc/pool.c): {sum(got['busy'])} in {len(got['busy'])} busy blocks, "
              f"{sum(got['alone'])} in {len(got['alone'])} blocks alone")
    print(f"\nbusy: another process spinning on CPU {raw['hog_cpu']} of {cpus}; ms: medians over rounds; ratios "
          "taken within each round; 'within' allows 10% over the expected ratio for noise")
    return 0


if __name__ == "__main__":
    sys.exit(main())
