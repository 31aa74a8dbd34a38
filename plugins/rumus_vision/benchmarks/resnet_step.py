"""ResNet-18 training step (forward, cross-entropy, backward, SGD step) with the direct convolution of
rumus-vision vs the core's im2col + GEMM: step time and peak memory, per backend, as one table.

    python plugins/rumus_vision/benchmarks/resnet_step.py                     # cpu and wgpu, both modes
    python plugins/rumus_vision/benchmarks/resnet_step.py --backends wgpu --batch 32 --size 224 --steps 10

Each (backend, mode) runs in a fresh process, so one mode's caches and scratch buffers never count for the
other. Peak memory is the backend's own account where it has one: on wgpu the buffer pool's allocated
bytes (the pool keeps every buffer it ever made, so after a step that is the step's peak, im2col column
buffers included); on cpu, whose buffers are numpy arrays, tracemalloc's peak over the first step (numpy
reports its allocations to it, the core's im2col scratch included) plus the process's max RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc


def child(backend: str, mode: str, batch: int, size: int, steps: int) -> dict[str, float | str]:
    import numpy as np

    import rumus as rm
    from rumus import backend_api as api
    from rumus_vision import set_conv_mode
    from rumus_vision.models import resnet18

    set_conv_mode(mode)
    dev = str(api.backend(backend).devices()[0])
    rm.manual_seed(0)
    model = resnet18(num_classes=10).to(dev).train()
    opt = rm.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    x = rm.tensor(rng.standard_normal((batch, 3, size, size)).astype(np.float32), device=dev)
    y = rm.tensor(rng.integers(0, 10, batch), device=dev)

    def step() -> float:
        loss = rm.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.item()  # the one host sync per step

    if backend == "cpu":
        tracemalloc.start()
    step()  # warm-up: compiles shaders / grows scratch and pools
    peak = float(tracemalloc.get_traced_memory()[1]) if backend == "cpu" else 0.0
    tracemalloc.stop()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    if backend != "cpu":
        be = api.backend(backend)
        stats = getattr(be, "pool_stats", lambda d: {})(api.backend(backend).devices()[0])
        peak = float(stats.get("allocated_bytes", float("nan")))
    return {"backend": backend, "mode": mode, "step_ms": 1e3 * float(np.median(times)), "peak_mib": peak / 2**20,
            "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backends", default="cpu,wgpu")
    ap.add_argument("--modes", default="im2col,direct")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--size", type=int, default=112, help="image height and width")
    ap.add_argument("--steps", type=int, default=3, help="timed steps after one warm-up step (median reported)")
    ap.add_argument("--child", nargs=2, metavar=("BACKEND", "MODE"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child[0], a.child[1], a.batch, a.size, a.steps)))
        return
    print(f"ResNet-18 training step, batch {a.batch}, {a.size}x{a.size}, float32, median of {a.steps} steps")
    print(f"{'backend':8} {'conv':7} {'step ms':>10} {'peak MiB':>10} {'max RSS MiB':>12}  peak = {{cpu: tracemalloc, "
          f"wgpu: pool bytes}}")
    rows: dict[tuple[str, str], dict[str, float | str]] = {}
    for backend in a.backends.split(","):
        for mode in a.modes.split(","):
            cmd = [sys.executable, __file__, "--child", backend, mode, "--batch", str(a.batch), "--size", str(a.size),
                   "--steps", str(a.steps)]
            done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "RUMUS_BACKEND": backend})
            if done.returncode != 0:
                print(f"{backend:8} {mode:7} failed: {done.stderr.strip().splitlines()[-1:]}")
                continue
            r = rows[(backend, mode)] = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{backend:8} {mode:7} {r['step_ms']:10.1f} {r['peak_mib']:10.1f} {r['maxrss_mib']:12.1f}",
                  flush=True)
    for backend in a.backends.split(","):
        d, i = rows.get((backend, "direct")), rows.get((backend, "im2col"))
        if d and i:
            print(f"{backend}: direct/im2col step time x{float(d['step_ms']) / float(i['step_ms']):.2f}, "
                  f"peak memory x{float(d['peak_mib']) / max(float(i['peak_mib']), 1e-9):.2f}")


if __name__ == "__main__":
    main()
