"""Buffer-pool traffic of the GPT-scale LM step on wgpu: new buffers (misses) and destroyed releases per
step, and the step time, under the pool's cache cap (RUMUS_WGPU_POOL_CACHE_MB).

    RUMUS_BACKEND=wgpu python3 benchmarks/wgpu_pool_steps.py --steps 4
    RUMUS_WGPU_POOL_CACHE_MB=65536 RUMUS_BACKEND=wgpu python3 benchmarks/wgpu_pool_steps.py --steps 4
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--small", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("RUMUS_BACKEND", "wgpu")
    import rumus as rm
    from op_profile import _lm_step
    import gpu_scale
    if args.small:
        gpu_scale.FULL.update(gpu_scale.SMALL)
    step = _lm_step("wgpu:0")
    pool = rm._runtime.backend("wgpu").device(0).pool
    for i in range(args.steps):
        before = pool.stats()
        t0 = time.perf_counter()
        step()
        rm.synchronize("wgpu:0")
        ms = (time.perf_counter() - t0) * 1e3
        after = pool.stats()
        print(f"step {i}: {ms:.1f} ms, new buffers {after['misses'] - before['misses']}, reused "
              f"{after['hits'] - before['hits']}, allocated {after['allocated_bytes'] / 2**30:.2f} GiB, cached "
              f"{after['cached_bytes'] / 2**30:.2f} GiB (cap {pool.max_cached / 2**30:.0f} GiB)", flush=True)


if __name__ == "__main__":
    main()
