"""Where RUMUS and PyTorch in one process cost each other (issue 11): each library's MLP, CNN and transformer
step right after the other library's step, and after that step plus a short gap, beside controls of the same
library, alternating for --rounds rounds.

    RUMUS_BACKEND=cpu python benchmarks/cpu_torch_gap.py --threads 16 --rounds 4

A step after any idle time wakes its library's sleeping threads, and a step after other work finds that
work's data in the caches. So the base is the step after a pause (PAUSE_S: threads asleep), and the control
for "after the other library's step" is the step after a second model of its own library (same sizes, its
own memory) and then a pause: other data in the caches, threads asleep, no other library. The gap (GAP_S,
longer than RUMUS's workers poll after a loop (50 us, csrc/pool.c) and than libgomp's GOMP_SPINCOUNT polls)
separates the other library's threads still polling on the cores (gone after the gap) from its data in the
caches (still there). The same with RUMUS's polling off (its workers sleep at once after a loop) says what
that polling costs torch. Printed: per library and step, the median over rounds of each variant's time over
the time after a pause.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpu_scaling  # noqa: E402

GAP_S = 0.0002
STEPS = cpu_scaling.STEPS


def _then(*fns: Callable[[], object]) -> Callable[[], None]:
    def run() -> None:
        for f in fns:
            f()
    return run


def _gap() -> None:
    time.sleep(GAP_S)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=None, help="both libraries' threads (default: RUMUS's default)")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--budget", type=float, default=0.4, help="seconds of samples per variant and step")
    args = p.parse_args(argv)
    import rumus as rm
    rm.zeros(1)  # RUMUS first, as cpu_scaling.py's "with torch" worker: torch's libgomp gets RUMUS's spin
    from rumus_cpu import threads as rt
    from rumus_cpu._lib import lib
    import torch
    n = args.threads or rt.get_num_threads()
    rt.set_num_threads(n)
    torch.set_num_threads(n)
    ours, ours2 = cpu_scaling._rumus_cases(), cpu_scaling._rumus_cases()
    theirs, theirs2 = cpu_scaling._torch_cases(), cpu_scaling._torch_cases()
    spin = int(lib.rumus_pool_get_spin_us())

    def polling(us: int) -> Callable[[], None]:
        return lambda: lib.rumus_pool_set_spin_us(us)

    # per library and step: variant -> (setup, the call timed with what runs before it)
    after = cpu_scaling._after
    variants: dict[tuple[str, str], dict[str, tuple[Callable[[], object], Callable[[], object]]]] = {}
    keep = polling(spin)
    for s in STEPS:
        variants[("rumus", s)] = {
            "after a pause": (keep, after(cpu_scaling._pause, ours[s])),
            "after a second RUMUS model and a pause": (keep, after(_then(ours2[s], cpu_scaling._pause), ours[s])),
            "after torch's step": (keep, after(theirs[s], ours[s])),
            "after torch's step and a gap": (keep, after(_then(theirs[s], _gap), ours[s]))}
        variants[("torch", s)] = {
            "after a pause": (keep, after(cpu_scaling._pause, theirs[s])),
            "after a second torch model and a pause": (keep, after(_then(theirs2[s], cpu_scaling._pause), theirs[s])),
            "after RUMUS's step": (keep, after(ours[s], theirs[s])),
            "after RUMUS's step and a gap": (keep, after(_then(ours[s], _gap), theirs[s])),
            "after RUMUS's step, RUMUS not polling": (polling(0), after(ours[s], theirs[s]))}
    ratios: dict[tuple[str, str], dict[str, list[float]]] = {k: {v: [] for v in vs} for k, vs in variants.items()}
    since = time.time()
    for r in range(args.rounds):
        for key, vs in variants.items():
            s = key[1]
            names = list(vs) if r % 2 == 0 else list(vs)[::-1]
            got = {}
            for name in names:
                setup, fn = vs[name]
                setup()
                least = cpu_scaling.TRANSFORMER_SAMPLES if s == "transformer step" else cpu_scaling.LEAST_SAMPLES
                got[name] = cpu_scaling._time(fn, args.budget, least)[0]
            keep()
            for name in vs:
                ratios[key][name].append(got[name] / got["after a pause"])
            print(f"# round {r + 1}, {key[0]} {key[1]}: " + ", ".join(f"{k} {v * 1e3:.3g} ms" for k, v in got.items())
                  + f" ({time.time() - since:.0f} s)", file=sys.stderr, flush=True)
    print(f"\n{cpu_scaling._machine()}; {n} threads each; {args.rounds} rounds; load average {cpu_scaling._load()}; "
          f"RUMUS polls {spin} us; gap {GAP_S * 1e6:.0f} us\n")
    print("| library | step | variant | time / time after a pause (median of rounds) | range |")
    print("|---|---|---|---|---|")
    for (libname, s), vs in ratios.items():
        for name, xs in vs.items():
            print(f"| {libname} | {s} | {name} | {statistics.median(xs):.2f}× | {min(xs):.2f}–{max(xs):.2f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
