"""Activation memory of a transformer training step under autocast vs float32 (issue 13).

Model and data: benchmarks/nn_transformer.py's LM (2 pre-norm encoder layers, causal) at its CONFIG, or
--small for a software GPU. For each precision the forward runs once and, with the graph alive, two
numbers are read:
  pool   the wgpu buffer pool's live bytes (allocated - cached) minus those before the forward: every
         activation the backend holds (wgpu devices only);
  saved  bytes of the distinct storages the autograd graph keeps for backward (any backend).
Then backward and the optimizer step run (the step must work). Results go in benchmarks/RESULTS.md.

    python benchmarks/amp_memory.py --device wgpu            # the H200 (float16; bfloat16 has no WGSL)
    python benchmarks/amp_memory.py --device wgpu --small    # lavapipe
    python benchmarks/amp_memory.py --device cpu --small     # saved bytes only (CPU float16/bfloat16
                                                             # kernels: issue 13 part A)
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))
from nn_transformer import CONFIG, RumusLM  # noqa: E402

import rumus as rm  # noqa: E402
from rumus.nn import functional as F  # noqa: E402

SMALL = {**CONFIG, "d_model": 64, "heads": 2, "d_ff": 256, "seq": 32, "batch": 4, "vocab": 128}


def saved_bytes(loss: rm.Tensor) -> int:
    """Bytes of the distinct storages saved by the graph behind `loss`."""
    seen_nodes: set[int] = set()
    storages: dict[int, int] = {}
    stack = [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen_nodes or not hasattr(node, "edges"):
            continue
        seen_nodes.add(id(node))
        for saved in (node.saved_inputs or [], node.saved_outputs or []):
            for t, _ in saved:
                s = t._storage
                storages[id(s)] = s.numel * s.dtype.itemsize
        stack.extend(e[0] for e in node.edges if e is not None)
    return sum(storages.values())


def live_pool_bytes(device: rm.Device) -> int | None:
    if device.backend != "wgpu":
        return None
    backend = rm._runtime.backend("wgpu")
    backend.synchronize(device)
    gc.collect()
    stats = backend.pool_stats(device)
    return int(stats["allocated_bytes"] - stats["cached_bytes"])


def measure(device: rm.Device, c: dict[str, Any], low: rm.DType | None) -> tuple[int | None, int, float]:
    rm.manual_seed(0)
    model = RumusLM(c).to(device)
    opt = rm.optim.AdamW(model.parameters(), lr=c["lr"])
    scaler = rm.amp.GradScaler(enabled=low == rm.float16)
    idx = rm.randint(0, c["vocab"], (c["batch"], c["seq"]), device=device)
    target = rm.randint(0, c["vocab"], (c["batch"] * c["seq"],), device=device)
    pos = rm.arange(c["seq"], dtype=rm.int64, device=device)
    before = live_pool_bytes(device)
    with rm.autocast(device.backend, dtype=low or rm.float16, enabled=low is not None):
        loss = F.cross_entropy(model(idx, pos), target)
    after = live_pool_bytes(device)
    saved = saved_bytes(loss)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    value = float(loss.item())
    pool = None if before is None or after is None else after - before
    return pool, saved, value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default=str(rm.default_device()))
    ap.add_argument("--small", action="store_true", help="a small model for software GPUs")
    args = ap.parse_args()
    device = rm.Device.parse(args.device)
    c = SMALL if args.small else CONFIG
    print(f"transformer LM step on {device}: d {c['d_model']}, heads {c['heads']}, ffn {c['d_ff']}, "
          f"layers {c['layers']}, batch {c['batch']} x seq {c['seq']}, vocab {c['vocab']}")
    rows = []
    for low in (None, rm.float16, rm.bfloat16):
        name = "float32" if low is None else f"autocast {low.name}"
        try:
            rows.append((name, *measure(device, c, low)))
        except rm.RumusError as exc:  # a dtype this backend has no kernels for
            print(f"{name}: not measured ({type(exc).__name__}: {str(exc)[:100]})")
    base_pool, base_saved = rows[0][1], rows[0][2]
    print(f"{'precision':<20} {'pool MiB':>10} {'vs fp32':>8} {'saved MiB':>10} {'vs fp32':>8} {'loss':>8}")
    for name, pool, saved, value in rows:
        p = "-" if pool is None else f"{pool / 2**20:.2f}"
        pr = "-" if pool is None or not base_pool else f"{pool / base_pool:.2f}"
        print(f"{name:<20} {p:>10} {pr:>8} {saved / 2**20:>10.2f} {saved / base_saved:>8.2f} {value:>8.4f}")


if __name__ == "__main__":
    main()
