"""CPU backend scaling: RUMUS and PyTorch CPU at 1/2/4/8/16 threads, each count in a fresh process.

    python benchmarks/cpu_scaling.py                 # every count up to the cores this process may use
    python benchmarks/cpu_scaling.py --threads 1 2   # chosen counts
    python benchmarks/cpu_scaling.py --quick         # shorter timing (a smoke run)
    python benchmarks/cpu_scaling.py --rounds 3      # every process 3 times, counts in alternating order

Rows: a 4M-element add, softmax over [4096, 1024], GEMM 1024^2, conv forward+backward, and training
steps: MLP 784-256-256-10 (batch 128, Adam), the CNN of benchmarks/nn_cnn.py and the transformer of
benchmarks/nn_transformer.py. Every (library, thread count) runs in its own subprocess, so thread settings
apply from the start (RUMUS_NUM_THREADS; torch.set_num_threads and OMP_NUM_THREADS), and neither library
shares the process with the other's threads while it is timed. Three more runs at the largest count:
- "busy neighbour": the same rows while another process spins on one core; the slowdown it causes
  should be about that core's share (1/cores), not more (no thread of ours spinning for a core held
  elsewhere, no barrier waiting on it).
- "with torch": RUMUS's steps with torch imported and running its own step between RUMUS's.
Printed: a markdown table, times in ms (lower is better) with the rumus/torch ratio at every count; per
library the worst increase from one count to the next (goal: never more than 10%), flagged SLOWER when
RUMUS's exceeds 10% and its timing spread, "noise?" when it exceeds 10% but not the spread; and the spread
itself (the largest, over the counts, of the interquartile range of the samples and of the range between
rounds, relative to the median). Every sample times a batch of calls lasting >= SAMPLE_S (a 3 us add is
timed ~300 calls at a time), so small ops are not timer and scheduler noise. The header names the CPU, its
physical cores and hyperthreads, and the load average before and after. The last rows time pieces of the
MLP and CNN steps (a 128x256 add, the MLP's first GEMM, the CNN's second conv layer), so a step that gets
slower with more threads can be traced to its ops.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = ["add 4M", "softmax 4096x1024", "GEMM 1024²", "conv fwd+bwd", "MLP step", "CNN step", "transformer step",
         "add 128x256", "GEMM 128x784x256", "CNN conv2 fwd+bwd"]
# the last three: pieces of the MLP and CNN steps, to see which op gets slower as threads grow


SAMPLE_S = 1e-3  # a sample times calls for at least this long


def _time(fn: Callable[[], object], budget: float, least: int = 3) -> tuple[float, float]:
    """(median seconds per call, interquartile range / median) over about `budget` seconds of samples,
    after one warm-up call; each sample is a batch of calls lasting >= SAMPLE_S."""
    fn()
    t0 = time.perf_counter()
    fn()
    batch = max(1, int(SAMPLE_S / max(time.perf_counter() - t0, 1e-7)))
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < least or (time.perf_counter() - start < budget and len(times) < 1000):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        times.append((time.perf_counter() - t0) / batch)
    return _median_spread(times)


def _median_spread(times: list[float]) -> tuple[float, float]:
    med = statistics.median(times)
    if len(times) < 4:
        return med, (max(times) - min(times)) / med
    q = statistics.quantiles(times, n=4)
    return med, (q[2] - q[0]) / med


def _rumus_cases(interleave_torch: bool) -> dict[str, Callable[[], object]]:
    import numpy as np

    import rumus as rm
    from rumus import nn
    from rumus.nn import functional as F
    sys.path.insert(0, HERE)
    import nn_cnn
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

    rm.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = rm.optim.Adam(mlp.parameters(), lr=1e-3)
    mx, my = rm.randn(128, 784), rm.randn(128, 10)

    def mlp_step() -> None:
        opt.zero_grad()
        F.mse_loss(mlp(mx), my).backward()
        opt.step()

    cnn_step, torch_cnn = nn_cnn._models(64, rm.device("cpu"), "cpu")
    tf = _transformer_rumus(nn_transformer)
    cases: dict[str, Callable[[], object]] = {
        "add 4M": lambda: a + b, "softmax 4096x1024": lambda: F.softmax(s, dim=-1), "GEMM 1024²": lambda: g1 @ g2,
        "conv fwd+bwd": conv, "MLP step": mlp_step, "CNN step": cnn_step, "transformer step": tf,
        "add 128x256": lambda: sa + sb, "GEMM 128x784x256": lambda: la @ lb, "CNN conv2 fwd+bwd": conv2}
    if interleave_torch:  # torch works between RUMUS's steps; only RUMUS's part is timed
        other = _torch_cases()
        for name in ("MLP step", "CNN step", "transformer step"):
            cases[name] = _after(other[name], cases[name])
        cases = {k: v for k, v in cases.items() if k.endswith("step")}
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


def worker(lib: str, threads: int, budget: float, interleave: bool, only: list[str] | None = None) -> None:
    """In the subprocess: time every case (or those in `only`), print {case: [seconds, spread]} as JSON on
    the last line."""
    if lib == "torch":
        import torch  # first: torch's libgomp settings, untouched by RUMUS
        torch.set_num_threads(threads)
        cases = _torch_cases()
    else:
        import rumus as rm
        rm.zeros(1)  # the CPU backend (and its thread policy) starts before torch is imported
        from rumus_cpu import threads as rt
        assert rt.get_num_threads() == threads or not rt.has_openmp(), (rt.get_num_threads(), threads)
        cases = _rumus_cases(interleave)
    out: dict[str, tuple[float, float]] = {}
    for name, fn in cases.items():
        if only and name not in only:
            continue
        if isinstance(fn, _after):
            calls = 0

            def counted(f: _after = fn) -> None:
                nonlocal calls
                calls += 1
                f()
            fn.elapsed = 0.0
            counted()  # warm-up
            fn.elapsed, calls = 0.0, 0
            t0 = time.perf_counter()
            samples = []
            while calls < 3 or (time.perf_counter() - t0 < budget * 2 and calls < 100):
                before = fn.elapsed
                counted()
                samples.append(fn.elapsed - before)
            out[name] = (fn.elapsed / calls, _median_spread(samples)[1])
        else:
            out[name] = _time(fn, budget if "transformer" not in name else budget * 2)
    print(json.dumps(out))


def _run(lib: str, threads: int, budget: float, interleave: bool = False,
         only: list[str] | None = None) -> dict[str, tuple[float, float]]:
    """{case: (seconds per call, spread)} from a fresh process at `threads` threads."""
    env = {**os.environ, "RUMUS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads),
           "RUMUS_BACKEND": "cpu"}
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", lib, "--threads", str(threads),
           "--budget", str(budget)] + (["--interleave"] if interleave else []) + (
           ["--cases", *only] if only else [])
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"{lib} at {threads} threads failed:\n{proc.stderr[-3000:]}")
    return {k: (float(v[0]), float(v[1])) for k, v in json.loads(proc.stdout.strip().splitlines()[-1]).items()}


def _busy() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def _worst_step(times: list[float]) -> tuple[float, int]:
    """The largest t(next count) / t(count) - 1 (0 if the row never got slower) and the step's index."""
    steps = [times[i + 1] / times[i] - 1 for i in range(len(times) - 1)]
    if not steps or max(steps) <= 0:
        return 0.0, -1
    i = max(range(len(steps)), key=steps.__getitem__)
    return steps[i], i


def _combine(rounds: list[dict[str, tuple[float, float]]]) -> dict[str, tuple[float, float]]:
    """Per case: the median over rounds, and the larger of the rounds' own spreads and their range."""
    out = {}
    for case in rounds[0]:
        ts = [r[case][0] for r in rounds]
        med = statistics.median(ts)
        out[case] = (med, max([r[case][1] for r in rounds] + [(max(ts) - min(ts)) / med]))
    return out


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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, nargs="*", default=None)
    p.add_argument("--quick", action="store_true", help="less timing per row")
    p.add_argument("--no-extra", action="store_true", help="skip the busy-neighbour and with-torch runs")
    p.add_argument("--rounds", type=int, default=1,
                   help="run every (library, count) process this many times, counts in alternating order; the "
                        "median is taken over rounds (drift of the host cancels out)")
    p.add_argument("--cases", nargs="*", default=None, help="only these rows (names as printed)")
    p.add_argument("--worker", choices=["rumus", "torch"], help=argparse.SUPPRESS)
    p.add_argument("--budget", type=float, default=1.0, help=argparse.SUPPRESS)
    p.add_argument("--interleave", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(args.worker, args.threads[0], args.budget, args.interleave, args.cases)
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    counts = args.threads or [n for n in (1, 2, 4, 8, 16) if n <= cores]
    budget = 0.3 if args.quick else 1.0
    t_start = time.perf_counter()
    load_before = _load()
    only = args.cases
    runs: dict[tuple[str, int], list[dict[str, tuple[float, float]]]] = {}
    for r in range(max(args.rounds, 1)):
        for n in (counts if r % 2 == 0 else counts[::-1]):
            for lib in ("rumus", "torch"):
                runs.setdefault((lib, n), []).append(_run(lib, n, budget, only=only))
                print(f"# round {r + 1}: {lib} at {n} threads done ({time.perf_counter() - t_start:.0f} s)",
                      file=sys.stderr)
    res = {key: _combine(v) for key, v in runs.items()}
    top = counts[-1]
    extra: dict[str, dict[str, tuple[float, float]]] = {}
    if not args.no_extra:
        for lib in ("rumus", "torch"):
            hog = _busy()
            try:
                extra[f"{lib} busy"] = _run(lib, top, budget, only=only)
            finally:
                hog.kill()
                hog.wait()
        extra["rumus with torch"] = _run("rumus", top, budget, interleave=True, only=only)
        print(f"# extra runs done ({time.perf_counter() - t_start:.0f} s)", file=sys.stderr)

    print(f"\n{platform.node()}: {_machine()}; python {platform.python_version()}; "
          f"{time.strftime('%Y-%m-%d %H:%M')} ({time.perf_counter() - t_start:.0f} s, {max(args.rounds, 1)} "
          f"round(s)); load average {load_before} before, {_load()} after\n")
    header = ["case"] + [f"{n} thr rumus / torch" for n in counts] + [
        "rumus/torch at " + str(top), "worst step rumus / torch", "spread rumus / torch"]
    if extra:
        header += [f"busy neighbour at {top}: rumus / torch", f"rumus at {top}, torch between steps"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    flagged = []
    for case in [c for c in CASES if c in res[("rumus", counts[0])]]:
        rt = [res[("rumus", n)][case][0] * 1e3 for n in counts]
        tt = [res[("torch", n)][case][0] * 1e3 for n in counts]
        rs = max(res[("rumus", n)][case][1] for n in counts)
        ts = max(res[("torch", n)][case][1] for n in counts)
        (rw, ri), (tw, _) = _worst_step(rt), _worst_step(tt)
        where = f" ({counts[ri]}→{counts[ri + 1]})" if ri >= 0 else ""
        flag = ""
        if rw > 0.10:
            flag = " **SLOWER**" if rw > rs else " (noise?)"
            flagged.append(f"{case}: {rw:+.0%}{where}{flag.replace('*', '')}")
        cells = [case] + [f"{r:.3g} / {t:.3g} ({r / t:.2f}×)" for r, t in zip(rt, tt)]
        cells += [f"{rt[-1] / tt[-1]:.2f}×", f"{rw:+.0%}{where}{flag} / {tw:+.0%}", f"±{rs:.0%} / ±{ts:.0%}"]
        if extra:
            rb, tb = extra["rumus busy"][case][0] * 1e3, extra["torch busy"][case][0] * 1e3
            cells.append(f"{rb:.3g} ({rb / rt[-1] - 1:+.0%}) / {tb:.3g} ({tb / tt[-1] - 1:+.0%})")
            wt = extra["rumus with torch"].get(case)
            cells.append(f"{wt[0] * 1e3:.3g} ({wt[0] * 1e3 / rt[-1] - 1:+.0%})" if wt is not None else "-")
        print("| " + " | ".join(cells) + " |")
    print("\ntimes in ms (median); worst step: the largest increase from one thread count to the next (goal "
          "<= 10%); spread: interquartile range of the samples (and range between rounds) / median, the "
          "largest over the counts")
    if extra:
        print(f"busy neighbour: one other process spinning on one of {cores} cores (its fair share: "
              f"{1 / cores:.0%} of the machine)")
    print("rows more than 10% slower at a higher count: " + ("; ".join(flagged) if flagged else "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
