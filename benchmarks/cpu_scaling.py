"""CPU backend scaling: RUMUS and PyTorch CPU at 1/2/4/8/16 threads, every count timed in one process per library.

    python benchmarks/cpu_scaling.py                        # every count up to the cores this process may use
    python benchmarks/cpu_scaling.py --threads 1 2 4 8 16 --quick --rounds 3   # the 16-core sweep (~3 min)
    python benchmarks/cpu_scaling.py --threads 1 2          # chosen counts
    python benchmarks/cpu_scaling.py --fresh-processes      # every (library, count) in its own process
    python benchmarks/cpu_scaling.py --json scaling.json    # also every round's raw numbers

Rows: a 4M-element add, softmax over [4096, 1024], GEMM 1024^2, conv forward+backward, and training
steps: MLP 784-256-256-10 (batch 128, Adam), the CNN of benchmarks/nn_cnn.py and the transformer of
benchmarks/nn_transformer.py. The last rows time pieces of the MLP and CNN steps (a 128x256 add, the MLP's
first GEMM, the CNN's second conv layer), so a step that gets slower with more threads can be traced to its ops.

Why one process: on a VM host the same single-threaded op reads up to 35% apart in two processes (where the
process's memory and threads landed), which hides the 10% the table is judged by. So each library runs in
one process (RUMUS never shares it with torch, except in the "with torch" run), RUMUS started with
RUMUS_NUM_THREADS = the largest count so its pool is sized once. For every round, for every count (the order
reversed every other round, so a slow drift of the host cancels), the budget is set at run time
(rumus_cpu.threads.set_num_threads / torch.set_num_threads, checked afterwards) and every case is timed.
Per (count, case): the median over the rounds' medians; spread: the larger of the range between the rounds'
medians and the samples' interquartile range, over the median. --fresh-processes is the older mode (every
(library, count, round) in a fresh process, thread settings from the environment), kept for comparison.

Two more columns at the largest count, each a ratio paired within one process, the median over rounds:
- "busy neighbour": in every round, beside the block timed at the largest count, the same cases again while
  another process spins pinned on one CPU (started before that block, killed after it; busy first on odd
  rounds). The slowdown should be about that core's share (1/cores), not more (no thread of ours spinning
  for a core held elsewhere, no barrier waiting on it).
- "with torch": a third process holding both libraries: RUMUS's steps with torch idle, then with torch's own
  step run (untimed) before each of RUMUS's, alternately every round. Two controls beside it: a second RUMUS
  model's step (same sizes, its own memory, no torch thread) before RUMUS's, and a PAUSE_S pause (threads
  asleep, caches kept). And the other side: torch's step after RUMUS's same step, after a second torch model's
  and after a pause, each over torch's steps back to back.
Printed: a markdown table, times in ms (lower is better) with the rumus/torch ratio at every count; per
library the worst increase from one count to the next (goal: never more than 10%), flagged SLOWER when
RUMUS's exceeds 10% and its spread, "noise?" when it exceeds 10% but not the spread; the spread itself (the
largest over the counts). Every sample times a batch of calls lasting >= SAMPLE_S (a 3 us add is timed ~300
calls at a time), so small ops are not timer and scheduler noise. The header names the CPU, its physical
cores and hyperthreads, and the load average before and after. Progress goes to stderr, with elapsed seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = ["add 4M", "softmax 4096x1024", "GEMM 1024²", "conv fwd+bwd", "MLP step", "CNN step", "transformer step",
         "add 128x256", "GEMM 128x784x256", "CNN conv2 fwd+bwd"]
# the last three: pieces of the MLP and CNN steps, to see which op gets slower as threads grow
STEPS = ["MLP step", "CNN step", "transformer step"]
PAUSE_S = 0.002

SAMPLE_S = 1e-3  # a sample times calls for at least this long
LEAST_SAMPLES = 5  # per case and block; the transformer step (80-500 ms a call) gets TRANSFORMER_SAMPLES
TRANSFORMER_SAMPLES = 3
# seconds of samples per case and block: (one process, fresh processes) x (normal, --quick)
BUDGETS = {(False, False): 0.4, (False, True): 0.15, (True, False): 1.0, (True, True): 0.3}
# a block: {"threads": n, "kind": "alone" | "busy" | "torch idle" | "torch between", "cases": {case: [median
# seconds per call, interquartile range / median, samples]}}; a round: the list of its blocks in time order
Block = dict[str, Any]
Round = list[Block]


def _per_call(fn: Callable[[], object], batch: int) -> float:
    """Seconds per call of `batch` calls; for an `_after`, only the timed part of each call."""
    if isinstance(fn, _after):
        before = fn.elapsed
        for _ in range(batch):
            fn()
        return (fn.elapsed - before) / batch
    t0 = time.perf_counter()
    for _ in range(batch):
        fn()
    return (time.perf_counter() - t0) / batch


def _time(fn: Callable[[], object], budget: float, least: int = LEAST_SAMPLES) -> tuple[float, float, int]:
    """(median seconds per call, interquartile range / median, samples) over about `budget` seconds of
    samples, after one warm-up call (the first call after a change of thread count may start threads); each
    sample is a batch of calls lasting >= SAMPLE_S."""
    fn()
    first = _per_call(fn, 1)
    batch = 1 if first >= SAMPLE_S else max(1, int(SAMPLE_S / max(first, 1e-7)))
    times = [first] if batch == 1 else []  # a long call is its own first sample (the transformer's 0.5 s)
    start = time.perf_counter()
    while len(times) < least or (time.perf_counter() - start < budget and len(times) < 1000):
        times.append(_per_call(fn, batch))
    med, spread = _median_spread(times)
    return med, spread, len(times)


def _median_spread(times: list[float]) -> tuple[float, float]:
    med = statistics.median(times)
    if len(times) < 4:
        return med, (max(times) - min(times)) / med
    q = statistics.quantiles(times, n=4)
    return med, (q[2] - q[0]) / med


def _rumus_cases() -> dict[str, Callable[[], object]]:
    import numpy as np

    import rumus as rm
    from rumus.nn import functional as F
    sys.path.insert(0, HERE)
    import nn_transformer

    rng = np.random.default_rng(0)
    a, b = (rm.tensor(rng.standard_normal(1 << 22).astype(np.float32)) for _ in range(2))
    s = rm.tensor(rng.standard_normal((4096, 1024)).astype(np.float32))
    g1, g2 = (rm.tensor(rng.standard_normal((1024, 1024)).astype(np.float32)) for _ in range(2))
    cx = rm.tensor(rng.standard_normal((16, 32, 32, 32)).astype(np.float32), requires_grad=True)
    cw = rm.tensor(rng.standard_normal((64, 32, 3, 3)).astype(np.float32) * 0.05, requires_grad=True)
    sa, sb = (rm.tensor(rng.standard_normal((128, 256)).astype(np.float32)) for _ in range(2))
    la, lb = rm.tensor(rng.standard_normal((128, 784)).astype(np.float32)), rm.tensor(
        rng.standard_normal((784, 256)).astype(np.float32))
    c2x = rm.tensor(rng.standard_normal((64, 16, 14, 14)).astype(np.float32), requires_grad=True)
    c2w = rm.tensor(rng.standard_normal((32, 16, 3, 3)).astype(np.float32) * 0.05, requires_grad=True)

    def conv() -> None:
        F.conv2d(cx, cw, padding=1).sum().backward()

    def conv2() -> None:
        F.conv2d(c2x, c2w, padding=1).sum().backward()

    import _rumus_small_models
    mlp_step = _rumus_small_models.rumus_mlp_step()
    cnn_step = _cnn_rumus()
    tf = _transformer_rumus(nn_transformer)
    cases: dict[str, Callable[[], object]] = {
        "add 4M": lambda: a + b, "softmax 4096x1024": lambda: F.softmax(s, dim=-1), "GEMM 1024²": lambda: g1 @ g2,
        "conv fwd+bwd": conv, "MLP step": mlp_step, "CNN step": cnn_step, "transformer step": tf,
        "add 128x256": lambda: sa + sb, "GEMM 128x784x256": lambda: la @ lb, "CNN conv2 fwd+bwd": conv2}
    return cases


class _after:
    """Runs `other` untimed before each call of `fn`: the call then starts right after torch's threads ran."""

    def __init__(self, other: Callable[[], object], fn: Callable[[], object]) -> None:
        self.other, self.fn = other, fn
        self.elapsed = 0.0

    def __call__(self) -> None:
        self.other()
        t0 = time.perf_counter()
        self.fn()
        self.elapsed += time.perf_counter() - t0


def _pause() -> None:
    """The third control: no step at all before the timed one, only PAUSE_S idle, longer than either library's
    threads poll (RUMUS 50 us, torch's libgomp well under a millisecond): what waking them costs."""
    time.sleep(PAUSE_S)


def _transformer_rumus(nt: Any) -> Callable[[], object]:
    import numpy as np

    import rumus as rm
    from rumus.nn import functional as F
    c = nt.CONFIG
    rng = np.random.default_rng(0)
    rm.manual_seed(0)
    model = nt.RumusLM(c).train()
    opt = rm.optim.AdamW(model.parameters(), lr=c["lr"])
    idx = rm.tensor(rng.integers(0, c["vocab"], (c["batch"], c["seq"])))
    tgt = rm.tensor(rng.integers(0, c["vocab"], c["batch"] * c["seq"]))
    pos = rm.tensor(np.arange(c["seq"]))

    def step() -> None:
        opt.zero_grad()
        F.cross_entropy(model(idx, pos).reshape(-1, c["vocab"]), tgt).backward()
        opt.step()
    return step


def _torch_cases() -> dict[str, Callable[[], object]]:
    import numpy as np
    import torch
    F = torch.nn.functional
    sys.path.insert(0, HERE)
    import _torch_small_models
    import nn_transformer

    rng = np.random.default_rng(0)
    a, b = (torch.from_numpy(rng.standard_normal(1 << 22).astype(np.float32)) for _ in range(2))
    s = torch.from_numpy(rng.standard_normal((4096, 1024)).astype(np.float32))
    g1, g2 = (torch.from_numpy(rng.standard_normal((1024, 1024)).astype(np.float32)) for _ in range(2))
    cx = torch.from_numpy(rng.standard_normal((16, 32, 32, 32)).astype(np.float32)).requires_grad_()
    cw = (torch.from_numpy(rng.standard_normal((64, 32, 3, 3)).astype(np.float32)) * 0.05).requires_grad_()
    sa, sb = (torch.from_numpy(rng.standard_normal((128, 256)).astype(np.float32)) for _ in range(2))
    la, lb = torch.from_numpy(rng.standard_normal((128, 784)).astype(np.float32)), torch.from_numpy(
        rng.standard_normal((784, 256)).astype(np.float32))
    c2x = torch.from_numpy(rng.standard_normal((64, 16, 14, 14)).astype(np.float32)).requires_grad_()
    c2w = (torch.from_numpy(rng.standard_normal((32, 16, 3, 3)).astype(np.float32)) * 0.05).requires_grad_()

    def conv() -> None:
        cx.grad = cw.grad = None
        F.conv2d(cx, cw, padding=1).sum().backward()

    def conv2() -> None:
        c2x.grad = c2w.grad = None
        F.conv2d(c2x, c2w, padding=1).sum().backward()

    mlp_step = _torch_small_models.torch_mlp_step()
    xs = torch.from_numpy(rng.standard_normal((64, 1, 28, 28)).astype(np.float32))
    cnn_step = _torch_small_models.torch_cnn_step(xs, torch.from_numpy(rng.integers(0, 10, 64)))

    c = nn_transformer.CONFIG
    lm = nn_transformer._torch_lm(c).train()
    topt = torch.optim.AdamW(lm.parameters(), lr=c["lr"])
    idx = torch.from_numpy(rng.integers(0, int(c["vocab"]), (int(c["batch"]), int(c["seq"]))))
    tgt = torch.from_numpy(rng.integers(0, int(c["vocab"]), int(c["batch"] * c["seq"])))
    pos = torch.arange(c["seq"])

    def tf_step() -> None:
        topt.zero_grad(set_to_none=True)
        F.cross_entropy(lm(idx, pos).reshape(-1, c["vocab"]), tgt).backward()
        topt.step()

    return {"add 4M": lambda: a + b, "softmax 4096x1024": lambda: torch.softmax(s, dim=-1),
            "GEMM 1024²": lambda: g1 @ g2, "conv fwd+bwd": conv, "MLP step": mlp_step, "CNN step": cnn_step,
            "transformer step": tf_step, "add 128x256": lambda: sa + sb, "GEMM 128x784x256": lambda: la @ lb,
            "CNN conv2 fwd+bwd": conv2}


def _cnn_rumus() -> Callable[[], object]:
    """benchmarks/nn_cnn.py's CNN step (batch 64 of 1x28x28, Adam), built here with RUMUS's own initial
    weights: nn_cnn copies torch's, which would load torch into RUMUS's process."""
    import numpy as np

    import rumus as rm
    from rumus import nn
    from rumus.nn import functional as F
    rm.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
    rng = np.random.default_rng(0)
    x = rm.tensor(rng.standard_normal((64, 1, 28, 28)).astype(np.float32))
    y = rm.tensor(rng.integers(0, 10, 64))
    opt = rm.optim.Adam(model.parameters(), lr=1e-3)

    def step() -> None:  # nn_cnn's rm_step, which leaves the gradients to accumulate
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    return step


def _set_threads(lib: str, setter: Callable[[int], object], getter: Callable[[], int], n: int) -> None:
    """Set the thread budget at run time and check it took: a count that silently did not apply would
    make its column a copy of another."""
    setter(n)
    got = getter()
    if got != n:
        raise SystemExit(f"{lib}: set_num_threads({n}) left get_num_threads() at {got}; its timings would not "
                         f"be at {n} threads. Run with --fresh-processes, or fix the thread setting.")


def _round_order(counts: list[int], r: int) -> list[int]:
    """The counts in round r: reversed every other round, so a drift of the host over the run cancels."""
    return list(counts) if r % 2 == 0 else list(counts)[::-1]


def _hog_cpu() -> int:
    """The logical CPU the busy neighbour spins on: the last this process may use."""
    return sorted(os.sched_getaffinity(0))[-1] if hasattr(os, "sched_getaffinity") else 0


@contextlib.contextmanager
def _hogging(cpu: int) -> Iterator[subprocess.Popen[bytes]]:
    """Another process spinning on logical CPU `cpu` for the duration (spinning when this yields). It exits
    by itself if its parent dies, so a run killed by a timeout leaves no spinner behind."""
    code = ("import os, sys\nparent = os.getppid()\n"
            f"if hasattr(os, 'sched_setaffinity'): os.sched_setaffinity(0, {{{cpu}}})\n"
            "sys.stdout.write('x'); sys.stdout.flush()\n"
            "while os.getppid() == parent:\n    for _ in range(1000000): pass\n")
    hog = subprocess.Popen([sys.executable, "-S", "-c", code], stdout=subprocess.PIPE)
    try:
        assert hog.stdout is not None
        if hog.stdout.read(1) != b"x":
            raise SystemExit(f"the busy-neighbour process failed to start (exit status {hog.wait()})")
        yield hog
    finally:
        hog.kill()
        hog.wait()


def _time_block(cases: dict[str, Callable[[], object]], budget: float, quick: bool) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for name, fn in cases.items():
        tf = "transformer" in name  # 80-500 ms a call: fewer samples, more time
        med, spread, n = _time(fn, 0.0 if tf and quick else budget * (2 if tf else 1),
                               TRANSFORMER_SAMPLES if tf else LEAST_SAMPLES)
        out[name] = [med, spread, n]
    return out


def worker(lib: str, counts: list[int], rounds: int, budget: float, quick: bool, busy_at: list[int],
           only: list[str] | None, since: float, first_round: int = 0) -> list[Round]:
    """In the library's own process: every round, every count (set at run time), every case; beside the block
    at a count in `busy_at`, the same block with the busy neighbour. lib "rumus+torch": RUMUS's steps with
    torch idle ("torch idle"), with torch's step before each ("torch between"), with a second RUMUS model's
    step before each ("rumus between", a control) and after a pause ("pause between", a control), then torch's
    steps with RUMUS idle, with RUMUS's step before each, a second torch model's, a pause; the order reversed
    every other round."""
    if lib == "torch":
        import torch  # first: torch's libgomp settings, untouched by RUMUS
        setters: list[tuple[str, Callable[[int], object], Callable[[], int]]] = [
            ("torch", torch.set_num_threads, torch.get_num_threads)]
        cases = _torch_cases()
    variants: dict[str, dict[str, Callable[[], object]]] = {}
    if lib != "torch":
        import rumus as rm
        rm.zeros(1)  # the CPU backend (and its thread policy) starts before torch is imported
        from rumus_cpu import threads as rt
        setters = [("rumus", rt.set_num_threads, rt.get_num_threads)]
        cases = _rumus_cases()
    if only:
        cases = {k: v for k, v in cases.items() if k in only}
    if lib == "rumus+torch":
        import torch
        setters.append(("torch", torch.set_num_threads, torch.get_num_threads))
        other = _torch_cases()
        cases = {k: v for k, v in cases.items() if k in STEPS}
        # the controls: a second model of each step (same sizes, its own memory) run before the first, in
        # each library; so "torch between" (torch's step before RUMUS's) compares with what any other model's
        # step of that size costs RUMUS's, and "torch: rumus between" with what it costs torch's
        own2, other2 = _rumus_cases(), _torch_cases()
        variants = {"torch idle": cases, "torch between": {k: _after(other[k], v) for k, v in cases.items()},
                    "rumus between": {k: _after(own2[k], v) for k, v in cases.items()},
                    "pause between": {k: _after(_pause, v) for k, v in cases.items()},
                    "torch: rumus idle": {k: other[k] for k in cases},
                    "torch: rumus between": {k: _after(v, other[k]) for k, v in cases.items()},
                    "torch: torch between": {k: _after(other2[k], other[k]) for k in cases},
                    "torch: pause between": {k: _after(_pause, other[k]) for k in cases}}
    hog_cpu = _hog_cpu()
    out: list[Round] = []
    for r in range(first_round, first_round + rounds):
        blocks: Round = []
        for n in _round_order(counts, r):
            for name, setter, getter in setters:
                _set_threads(name, setter, getter, n)
            if lib == "rumus+torch":
                kinds = list(variants)
            else:
                kinds = ["alone", "busy"] if n in busy_at else ["alone"]
            for kind in (kinds if r % 2 == 0 else kinds[::-1]):
                t0, (loops0, wakes0) = time.time(), _pool_counts()
                if kind == "busy":
                    with _hogging(hog_cpu):
                        res = _time_block(cases, budget, quick)
                else:
                    res = _time_block(variants.get(kind, cases), budget, quick)
                loops, wakes = (b - a for a, b in zip((loops0, wakes0), _pool_counts()))
                blocks.append({"threads": n, "kind": kind, "cases": res, "pool_loops": loops, "pool_wakes": wakes})
                print(f"# {lib}: round {r + 1}, {n} threads, {kind}: {len(res)} cases in {time.time() - t0:.1f} s, "
                      f"{loops} pool loops, {wakes} wakes ({time.time() - since:.0f} s)", file=sys.stderr, flush=True)
        out.append(blocks)
    return out


def _pool_counts() -> tuple[int, int]:
    """RUMUS's pool so far: loops run on more than one thread and sleeping workers woken (csrc/pool.c);
    zeros where RUMUS's CPU backend is not loaded."""
    if "rumus_cpu._lib" not in sys.modules:
        return 0, 0
    from rumus_cpu._lib import lib
    return int(lib.rumus_pool_loops()), int(lib.rumus_pool_wakes())


def _run_worker(lib: str, counts: list[int], rounds: int, budget: float, quick: bool, busy_at: list[int],
                only: list[str] | None, since: float, first_round: int = 0) -> list[Round]:
    """`worker` in a fresh process (its progress lines pass through to stderr)."""
    top = str(max(counts))  # RUMUS's pool sized for the largest count from the start
    env = {**os.environ, "RUMUS_NUM_THREADS": top, "OMP_NUM_THREADS": top, "RUMUS_BACKEND": "cpu"}
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", lib, "--threads", *map(str, counts),
           "--rounds", str(rounds), "--budget", str(budget), "--since", str(since),
           "--first-round", str(first_round), "--busy-at", *map(str, busy_at)]
    cmd += (["--quick"] if quick else []) + (["--cases", *only] if only else [])
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"the {lib} process at {counts} threads failed (exit status {proc.returncode}); "
                         "its error is above")
    rounds_out: list[Round] = json.loads(proc.stdout.strip().splitlines()[-1])
    return rounds_out


def _blocks(rounds: list[Round], kind: str, n: int) -> list[dict[str, list[float]]]:
    """Per round, the cases of its block of `kind` at n threads (rounds without one left out)."""
    return [b["cases"] for rnd in rounds for b in rnd if b["kind"] == kind and b["threads"] == n]


def _combine(rounds: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """Per case: the median over rounds, and the larger of the rounds' own spreads and their range."""
    out = {}
    for case in rounds[0]:
        ts = [r[case][0] for r in rounds]
        med = statistics.median(ts)
        out[case] = (med, max([r[case][1] for r in rounds] + [(max(ts) - min(ts)) / med]))
    return out


def _paired(rounds: list[Round], base: str, other: str, n: int) -> dict[str, tuple[float, float, list[float]]]:
    """Per case: (median over rounds of `base`'s medians, of `other`'s, the rounds' ratios other / base), each
    ratio taken within one round, where both blocks ran side by side in one process."""
    pairs = [(a, b) for rnd in rounds
             for a in [x["cases"] for x in rnd if x["kind"] == base and x["threads"] == n]
             for b in [x["cases"] for x in rnd if x["kind"] == other and x["threads"] == n]]
    out = {}
    for case in (pairs[0][0] if pairs else {}):
        ratios = [b[case][0] / a[case][0] for a, b in pairs]
        out[case] = (statistics.median(a[case][0] for a, _ in pairs), statistics.median(b[case][0] for _, b in pairs),
                     ratios)
    return out


def _worst_step(times: list[float]) -> tuple[float, int]:
    """The largest t(next count) / t(count) - 1 (0 if the row never got slower) and the step's index."""
    steps = [times[i + 1] / times[i] - 1 for i in range(len(times) - 1)]
    if not steps or max(steps) <= 0:
        return 0.0, -1
    i = max(range(len(steps)), key=steps.__getitem__)
    return steps[i], i


def _machine() -> str:
    """CPU model, logical CPUs usable, physical cores among them (hyperthreads counted once)."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), model)
    except OSError:
        pass
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    sib = set()
    for c in (sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []):
        try:
            with open(f"/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list") as f:
                sib.add(f.read().strip())
        except OSError:
            sib.add(str(c))
    phys = len(sib) or cpus
    return f"{model}, {cpus} usable logical CPUs = {phys} physical cores x {cpus // max(phys, 1)} threads"


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"


def summary(raw: dict[str, Any]) -> dict[str, dict[int, dict[str, tuple[float, float]]]]:
    """{library: {count: {case: (median over rounds, spread)}}} of the alone blocks."""
    return {lib: {n: _combine(_blocks(raw["libs"][lib], "alone", n)) for n in raw["counts"]}
            for lib in ("rumus", "torch") if lib in raw["libs"]}


def table(raw: dict[str, Any]) -> list[str]:
    """The markdown table and its notes, from the raw per-round numbers."""
    counts: list[int] = raw["counts"]
    top = counts[-1]
    res = summary(raw)
    libs = raw["libs"]
    busy_col = any(_blocks(libs[lib], "busy", top) for lib in ("rumus", "torch"))
    torch_col = "rumus+torch" in libs
    header = ["case"] + [f"{n} thr rumus / torch" for n in counts] + [
        "rumus/torch at " + str(top), "worst step rumus / torch", "spread rumus / torch"]
    header += [f"busy neighbour at {top}: rumus / torch"] if busy_col else []
    header += [f"rumus at {top}: torch's step before / a 2nd rumus model's / a pause",
               f"torch at {top}: rumus's step before / a 2nd torch model's / a pause"] if torch_col else []
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    flagged = []
    busy = {lib: _paired(libs[lib], "alone", "busy", top) for lib in ("rumus", "torch")}
    withs = [[_paired(libs["rumus+torch"], base, b, top) for b in others] for base, others in (
        ("torch idle", ("torch between", "rumus between", "pause between")),
        ("torch: rumus idle", ("torch: rumus between", "torch: torch between", "torch: pause between")))
    ] if torch_col else []
    for case in [c for c in CASES if c in res["rumus"][counts[0]]]:
        rt = [res["rumus"][n][case][0] * 1e3 for n in counts]
        tt = [res["torch"][n][case][0] * 1e3 for n in counts]
        rs = max(res["rumus"][n][case][1] for n in counts)
        ts = max(res["torch"][n][case][1] for n in counts)
        (rw, ri), (tw, _) = _worst_step(rt), _worst_step(tt)
        where = f" ({counts[ri]}→{counts[ri + 1]})" if ri >= 0 else ""
        flag = ""
        if rw > 0.10:
            flag = " **SLOWER**" if rw > rs else " (noise?)"
            flagged.append(f"{case}: {rw:+.0%}{where}{flag.replace('*', '')}")
        cells = [case] + [f"{r:.3g} / {t:.3g} ({r / t:.2f}×)" for r, t in zip(rt, tt)]
        cells += [f"{rt[-1] / tt[-1]:.2f}×", f"{rw:+.0%}{where}{flag} / {tw:+.0%}", f"±{rs:.0%} / ±{ts:.0%}"]
        if busy_col:
            cells.append(" / ".join(
                f"{busy[lib][case][1] * 1e3:.3g} ({statistics.median(busy[lib][case][2]) - 1:+.0%})"
                if case in busy[lib] else "-" for lib in ("rumus", "torch")))
        for pair in withs:
            got = [p.get(case) for p in pair]
            cells.append(" / ".join(f"{bt[1] * 1e3:.3g} ({statistics.median(bt[2]) - 1:+.0%})" for bt in got if bt)
                         if all(got) else "-")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("\ntimes in ms: the median over rounds of each round's median; worst step: the largest increase "
                 "from one thread count to the next (goal <= 10%); spread: the range between rounds' medians or the "
                 "samples' interquartile range, the larger, over the median, the largest over the counts")
    if busy_col:
        lines.append(f"busy neighbour: one other process spinning on CPU {raw['hog_cpu']} of {raw['cpus']} (its fair "
                     f"share: {1 / raw['cpus']:.0%} of the machine): ms, and the median over rounds of busy / alone "
                     "timed side by side in one process")
    if torch_col:
        lines.append("with torch (one process holding both): RUMUS's step with torch's same step run before it, "
                     "and the median over rounds of that over RUMUS's step run back to back; beside it the controls: a "
                     "second RUMUS model's step (same sizes, its own memory) before it, and a pause of "
                     f"{PAUSE_S * 1e3:g} ms (its threads asleep). Then the other side, the same for torch's step")
    lines.append("rows more than 10% slower at a higher count: " + ("; ".join(flagged) if flagged else "none"))
    return lines


def _write_json(path: str | None, raw: dict[str, Any]) -> None:
    """The raw numbers so far: rewritten after every process, so a run cut short keeps what it measured."""
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(raw, f, indent=1, ensure_ascii=False)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, nargs="*", default=None)
    p.add_argument("--quick", action="store_true", help="less timing per case (the 16-core sweep)")
    p.add_argument("--no-extra", action="store_true", help="skip the busy-neighbour and with-torch columns")
    p.add_argument("--rounds", type=int, default=None,
                   help="rounds over every count (default 5; 1 with --fresh-processes); medians over rounds")
    p.add_argument("--fresh-processes", action="store_true",
                   help="every (library, count, round) in its own process (the older mode)")
    p.add_argument("--cases", nargs="*", default=None, help="only these rows (names as printed)")
    p.add_argument("--json", metavar="PATH", help="write every round's raw numbers here")
    p.add_argument("--worker", choices=["rumus", "torch", "rumus+torch"], help=argparse.SUPPRESS)
    p.add_argument("--budget", type=float, default=None, help=argparse.SUPPRESS)
    p.add_argument("--since", type=float, default=None, help=argparse.SUPPRESS)
    p.add_argument("--first-round", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--busy-at", type=int, nargs="*", default=[], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.threads, args.rounds, args.budget, args.quick, args.busy_at,
                                args.cases, args.since or time.time(), args.first_round)))
        return 0
    # a timeout's SIGTERM unwinds through subprocess.run, which then kills the library's process
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    counts = sorted(set(args.threads or [n for n in (1, 2, 4, 8, 16) if n <= cpus]))
    top = counts[-1]
    fresh = args.fresh_processes
    rounds = max(args.rounds or (1 if fresh else 5), 1)
    budget = args.budget or BUDGETS[(fresh, args.quick)]
    since = time.time()
    raw: dict[str, Any] = {
        "mode": "fresh processes" if fresh else "one process per library", "host": platform.node(),
        "machine": _machine(), "date": time.strftime("%Y-%m-%d %H:%M"), "counts": counts, "rounds": rounds,
        "budget_s": budget, "quick": args.quick, "cpus": cpus, "hog_cpu": _hog_cpu(), "load_before": _load(),
        "libs": {}}
    with_torch = not args.no_extra and any(c in STEPS for c in (args.cases or STEPS))
    libs = ["rumus", "torch"] + (["rumus+torch"] if with_torch else [])
    busy_at = [] if args.no_extra else [top]
    for lib in libs:
        lib_counts = [top] if lib == "rumus+torch" else counts
        if fresh:
            got: list[Round] = []
            for r in range(rounds):
                for n in _round_order(lib_counts, r):
                    blocks = _run_worker(lib, [n], 1, budget, args.quick, busy_at, args.cases, since, r)[0]
                    if len(got) <= r:
                        got.append([])
                    got[r] += blocks
        else:
            got = _run_worker(lib, lib_counts, rounds, budget, args.quick, busy_at, args.cases, since)
        raw["libs"][lib] = got
        _write_json(args.json, raw)
        print(f"# {lib} done ({time.time() - since:.0f} s)", file=sys.stderr, flush=True)
    raw["load_after"], raw["wall_s"] = _load(), round(time.time() - since, 1)
    raw["summary"] = {lib: {str(n): {c: list(v) for c, v in per.items()} for n, per in by_n.items()}
                      for lib, by_n in summary(raw).items()}  # {lib: {count: {case: [median s, spread]}}}
    _write_json(args.json, raw)
    print(f"\n{raw['host']}: {raw['machine']}; python {platform.python_version()}; {raw['date']} ({raw['wall_s']:.0f} "
          f"s, {rounds} round(s), {raw['mode']}); load average {raw['load_before']} before, {raw['load_after']} "
          "after\n")
    print("\n".join(table(raw)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
