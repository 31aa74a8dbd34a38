"""Eager per-op overhead on tiny tensors, RUMUS beside torch in one process (CPU).

    python benchmarks/eager_overhead.py                 # every row
    python benchmarks/eager_overhead.py --clock cpu --record "dev (2 vCPU x86-64, shared)"   # results/eager-*.json
    python benchmarks/eager_overhead.py --clock cpu     # thread CPU time: steadier on a shared machine
    python benchmarks/eager_overhead.py --profile char-RNN   # cProfile one row's RUMUS side instead

Rows: `a + b` on 4 floats under no_grad and with grad on, a few other small ops (mul, 4x4 matmul, relu,
sum, indexing), and a char-RNN training step (an RNNCell over 8 characters, a Linear head, cross-entropy,
SGD; vocabulary 60, hidden 128, batch 1). The step is one function run on both libraries (the module is
passed in, as `import torch as lib` would). Windows of calls alternate between RUMUS and torch; each row
prints the best and the median window in µs per call and the ratios RUMUS / torch. The kernels are
nothing at these sizes: what is timed is the host path of every op (dispatch, allocation, autograd).
Both run single-threaded (torch.set_num_threads(1); RUMUS's pool does not start for tensors this small).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from results_table import add_record_option, ratio_text, record_all  # noqa: E402
VOCAB, HIDDEN, BATCH, SEQ = 60, 128, 1, 8


def small_ops(lib: Any) -> dict[str, tuple[Callable[[], object], bool]]:
    """The one-op rows, made with the library `lib`: name -> (closure over its inputs, runs under no_grad)."""
    a = lib.tensor([1.0, 2.0, 3.0, 4.0])
    b = lib.tensor([0.5, -1.0, 2.5, 3.0])
    ga = lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    m = lib.tensor([[float(i * 4 + j) for j in range(4)] for i in range(4)])
    return {
        "add (no_grad)": (lambda: a + b, True),
        "add (grad on)": (lambda: ga + b, False),
        "mul (no_grad)": (lambda: a * b, True),
        "matmul 4x4 (no_grad)": (lambda: m @ m, True),
        "relu (no_grad)": (lambda: lib.relu(a), True),
        "sum (no_grad)": (lambda: a.sum(), True),
        "index a[1:3] (no_grad)": (lambda: a[1:3], True),
        "mul+sum+backward": (lambda: (ga * b).sum().backward(), False),
    }


def char_rnn_step(lib: Any, nn: Any, F: Any, optim: Any) -> Callable[[], object]:
    """One training step of a character RNN on a fixed 8-character sequence (the same code for both)."""
    lib.manual_seed(0)
    cell = nn.RNNCell(VOCAB, HIDDEN)
    head = nn.Linear(HIDDEN, VOCAB)
    opt = optim.SGD(list(cell.parameters()) + list(head.parameters()), lr=0.01)
    chars = [(7 * i + 3) % VOCAB for i in range(SEQ + 1)]
    xs = [lib.tensor([[1.0 if v == c else 0.0 for v in range(VOCAB)]] * BATCH) for c in chars[:-1]]
    ys = [lib.tensor([c] * BATCH) for c in chars[1:]]
    h0 = lib.zeros(BATCH, HIDDEN)

    def step() -> object:
        opt.zero_grad()
        h = h0
        loss = None
        for x, y in zip(xs, ys):
            h = cell(x, h)
            term = F.cross_entropy(head(h), y)
            loss = term if loss is None else loss + term
        assert loss is not None
        loss.backward()
        opt.step()
        return loss
    return step


def cases(lib: Any, nn: Any, F: Any, optim: Any) -> dict[str, tuple[Callable[[], object], bool]]:
    """Row name -> (callable, runs under no_grad)."""
    out = small_ops(lib)
    out["char-RNN step"] = (char_rnn_step(lib, nn, F, optim), False)
    return out


CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}
clock = time.perf_counter


def window(fn: Callable[[], object], calls: int, no_grad: Any) -> float:
    """Seconds per call over `calls` calls (under `no_grad` when given, entered once for the window)."""
    if no_grad is not None:
        with no_grad():
            t0 = clock()
            for _ in range(calls):
                fn()
            return (clock() - t0) / calls
    t0 = clock()
    for _ in range(calls):
        fn()
    return (clock() - t0) / calls


def calls_for(fn: Callable[[], object], target_s: float) -> int:
    """Calls per window so that one window lasts about `target_s`."""
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - t0 >= target_s or n >= 1 << 20:
            return n
        n *= 2


def libraries() -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    # the CPU backend starts before torch is imported, as in cpu_core.py
    import rumus as rm
    import rumus.nn as rnn
    import rumus.nn.functional as RF
    import rumus.optim as roptim
    rm.zeros(1)

    import torch
    import torch.nn as tnn
    import torch.nn.functional as TF
    import torch.optim as toptim
    torch.set_num_threads(1)
    return (rm, rnn, RF, roptim), (torch, tnn, TF, toptim)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--windows", type=int, default=40, help="windows per library per row")
    ap.add_argument("--window-ms", type=float, default=20.0, help="length of one window")
    ap.add_argument("--only", default="", help="run the rows whose name contains this text")
    ap.add_argument("--profile", default="", help="cProfile the RUMUS side of the first row matching this text")
    add_record_option(ap)
    ap.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                    help="wall: perf_counter; cpu: this thread's CPU time (steadier on a shared machine)")
    args = ap.parse_args(argv)
    global clock
    clock = CLOCKS[args.clock]
    rumus_libs, torch_libs = libraries()
    ours = cases(*rumus_libs)
    theirs = cases(*torch_libs)
    if args.profile:
        return profile(ours, args.profile)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; clock {args.clock}; "
          f"rumus {rumus_libs[0].__file__}")
    print(f"{'row':<24} {'rumus best':>11} {'torch best':>11} {'ratio':>6}   {'rumus med':>10} {'torch med':>10} "
          f"{'ratio':>6}")
    results: dict[str, tuple[float, float, float, float]] = {}
    for name, (fn, ng) in ours.items():
        if args.only and args.only not in name:
            continue
        tfn, _ = theirs[name]
        r_ng = rumus_libs[0].no_grad if ng else None
        t_ng = torch_libs[0].no_grad if ng else None
        for _ in range(3):
            fn()
            tfn()
        calls = calls_for(fn, args.window_ms / 1e3)
        tcalls = calls_for(tfn, args.window_ms / 1e3)
        rs, ts = [], []
        for _ in range(args.windows):  # interleaved: a busy moment of the machine hits both sides alike
            rs.append(window(fn, calls, r_ng))
            ts.append(window(tfn, tcalls, t_ng))
        rb, tb, rm_, tm = min(rs), min(ts), statistics.median(rs), statistics.median(ts)
        results[name] = (rb, tb, rm_, tm)
        print(f"{name:<24} {rb * 1e6:>9.2f}µs {tb * 1e6:>9.2f}µs {rb / tb:>5.2f}×   {rm_ * 1e6:>8.2f}µs "
              f"{tm * 1e6:>8.2f}µs {rm_ / tm:>5.2f}×", flush=True)
    record_all(args.record, f"python benchmarks/eager_overhead.py --clock {args.clock} --record MACHINE",
               _figures(results, args.clock))
    return 0


def profile(ours: dict[str, tuple[Callable[[], object], bool]], which: str) -> int:
    import cProfile
    import pstats

    import rumus as rm
    name = next(n for n in ours if which in n)
    fn, ng = ours[name]
    calls = calls_for(fn, 2.0)
    prof = cProfile.Profile()
    if ng:
        with rm.no_grad():
            prof.runcall(lambda: [fn() for _ in range(calls)])
    else:
        prof.runcall(lambda: [fn() for _ in range(calls)])
    print(f"{name}: {calls} calls")
    pstats.Stats(prof).sort_stats("tottime").print_stats(30)
    return 0


def _figures(results: dict[str, tuple[float, float, float, float]], clock_name: str
             ) -> list[tuple[str, str, str, str, str]]:
    """The headline figures for results_table.record_all: the small add and the char-RNN step, best windows."""
    figures = []
    add = results.get("add (no_grad)")
    if add is not None:
        figures.append(("eager-small-add", f"`a + b` on 4 floats under no_grad (CPU), best window, {clock_name} clock",
                        f"{add[0] * 1e6:.2f} µs", f"torch {add[1] * 1e6:.2f} µs", ratio_text(add[0], add[1])))
    step = results.get("char-RNN step")
    if step is not None:
        figures.append(("eager-char-rnn-step", f"char-RNN training step: RNNCell({VOCAB}, {HIDDEN}) over {SEQ} "
                        f"characters, Linear, cross-entropy, SGD, batch {BATCH} (CPU), best window, {clock_name} clock",
                        f"{step[0] * 1e3:.3f} ms", f"torch {step[1] * 1e3:.3f} ms", ratio_text(step[0], step[1])))
    return figures


if __name__ == "__main__":
    sys.exit(main())
