"""Busy neighbour (issue 11): the MLP, CNN and transformer training steps alone, and while another process
spins on one core (pinned there), each in a fresh process, alone and busy alternating for --rounds rounds.

    python benchmarks/cpu_busy_neighbour.py                  # RUMUS at its default thread budget
    python benchmarks/cpu_busy_neighbour.py --threads 1 2    # chosen budgets
    python benchmarks/cpu_busy_neighbour.py --torch          # PyTorch CPU beside it, same thread counts

Expected on a quiet machine: a step loses at most the share of the core it lost. The scheduler splits the
busy core between the spinner and one of the step's threads, so a step on threads >= C cores keeps C - 1/2
cores: at most C / (C - 1/2) times the time alone (1.33x on 2 cores, 1.03x on 16); a step on fewer threads
than cores keeps them all (1x: the scheduler moves it off the busy core). More than that means threads wait
for a core held elsewhere (a barrier, a spinning thread). The cases are cpu_scaling.py's, timed the same
way. Other processes change the expectation: read the load average printed with the table.
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

STEPS = ["MLP step", "CNN step", "transformer step"]


def _hog(cpu: int) -> subprocess.Popen[bytes]:
    """A process spinning on logical CPU `cpu` until killed."""
    code = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True:\n    pass\n"
    return subprocess.Popen([sys.executable, "-c", code])


def _bound(threads: int, cpus: int) -> float:
    """Time busy / time alone if the step loses only the spinner's fair share of its core (quiet machine)."""
    return cpus / (cpus - 0.5) if threads >= cpus and cpus > 1 else 1.0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, nargs="*", default=None, help="budgets (default: RUMUS's default)")
    p.add_argument("--rounds", type=int, default=3, help="alone/busy pairs per budget")
    p.add_argument("--budget", type=float, default=0.6, help="seconds of timing per step and process")
    p.add_argument("--torch", action="store_true", help="time PyTorch CPU the same way")
    args = p.parse_args(argv)
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    if args.threads:
        counts = args.threads
    else:
        from rumus_cpu.threads import default_num_threads
        counts = [default_num_threads()]
    libs = ["rumus"] + (["torch"] if args.torch else [])
    t0 = time.perf_counter()
    load0 = cpu_scaling._load()
    rows = []
    for n in counts:
        for lib in libs:
            alone: dict[str, list[float]] = {s: [] for s in STEPS}
            busy: dict[str, list[float]] = {s: [] for s in STEPS}
            for _ in range(max(args.rounds, 1)):
                for s, v in cpu_scaling._run(lib, n, args.budget, only=STEPS).items():
                    alone[s].append(v[0])
                hog = _hog(cpus[-1])
                try:
                    time.sleep(0.2)  # the hog is spinning before the step process starts
                    for s, v in cpu_scaling._run(lib, n, args.budget, only=STEPS).items():
                        busy[s].append(v[0])
                finally:
                    hog.kill()
                    hog.wait()
                print(f"# {lib} at {n} threads: a round done ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
            for s in STEPS:
                a, b = statistics.median(alone[s]), statistics.median(busy[s])
                spread = max((max(x) - min(x)) / statistics.median(x) for x in (alone[s], busy[s]))
                bound = _bound(n, len(cpus))
                verdict = "within" if b / a <= bound * 1.1 else "**over**"
                rows.append(f"| {s} | {lib} | {n} | {a * 1e3:.3g} | {b * 1e3:.3g} | {b / a:.2f}× | "
                            f"±{spread:.0%} | ≤ {bound:.2f}× | {verdict} |")
    print(f"\n{cpu_scaling._machine()}; {time.strftime('%Y-%m-%d %H:%M')}; {max(args.rounds, 1)} alone/busy "
          f"rounds; load average {load0} before, {cpu_scaling._load()} after ({time.perf_counter() - t0:.0f} s)\n")
    print("| step | library | threads | alone ms | busy ms | busy / alone | spread (range over rounds) | "
          "expected on a quiet machine | |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\nbusy: another process spinning on CPU {cpus[-1]} of {len(cpus)}; medians over rounds; "
          "'within' allows 10% over the expected ratio for noise")
    return 0


if __name__ == "__main__":
    sys.exit(main())
