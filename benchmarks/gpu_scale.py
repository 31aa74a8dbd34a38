"""A real model size on the GPU: rumus wgpu vs PyTorch CUDA fp32 (TF32 off), in one run.

1. The LM training step of issue 10: token + positional Embedding -> 6 pre-norm TransformerEncoderLayers
   (d 1024, 16 heads, FFN 4096, GELU, causal, dropout 0) -> Linear(d, vocab 32000); cross-entropy over
   every position of batch 4 x seq 1024; AdamW (benchmarks/nn_transformer.py's models, same weights).
2. Forward + backward of each component at that size, torch's figure beside it, and for the row kernels
   the effective bandwidth: the bytes the op must move at least (inputs read, outputs written, forward
   and backward; see MIN_BYTES) over the time, the same count for both frameworks.

    python benchmarks/gpu_scale.py                      # the full sizes (H200: rumus wgpu vs torch cuda)
    python benchmarks/gpu_scale.py --small --no-torch   # a smoke run on lavapipe (tiny sizes)

On the lent GPU machine the project is not installed: `source .gpu/setup.sh` puts the source roots on
PYTHONPATH (see /work/shared/gpu/README.md). Components: per-step time from batches of steps between two
syncs after a warm-up batch (median of `--reps` batches), leaf gradients cleared each step; the LM step:
medians of synchronized steps after a warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _launch_batch import LaunchBatches  # noqa: E402
from _timing import table  # noqa: E402

FULL = {"d_model": 1024, "heads": 16, "d_ff": 4096, "layers": 6, "seq": 1024, "batch": 4, "vocab": 32000,
        "dropout": 0.0, "lr": 3e-4}
SMALL = {"d_model": 64, "heads": 4, "d_ff": 256, "layers": 2, "seq": 64, "batch": 2, "vocab": 512,
         "dropout": 0.0, "lr": 3e-4}
ROW_KERNELS = ("cross_entropy", "softmax", "layer_norm")


def _shapes(c: dict[str, Any]) -> dict[str, Any]:
    b, t, d, h, v = c["batch"], c["seq"], c["d_model"], c["heads"], c["vocab"]
    return {
        "cross_entropy": ((b * t, v), f"[{b * t}, {v}]"),
        "softmax": ((b, h, t, t), f"[{b}, {h}, {t}, {t}]"),
        "sdpa_causal": ((b, h, t, d // h), f"[{b}, {h}, {t}, {d // h}]"),
        "embedding": ((v, d, b, t), f"{v}x{d}, [{b}, {t}]"),
        "linear_d_to_V": ((b * t, d, v), f"{d}->{v} on {b * t} rows"),
        "layer_norm": ((b, t, d), f"LayerNorm({d}) on [{b}, {t}, {d}]"),
        "gelu": ((b, t, c["d_ff"]), f"[{b}, {t}, {c['d_ff']}]"),
    }


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


# float32 bytes a row op must move at least, forward + backward: cross-entropy reads the logits
# (forward) and reads them again and writes their gradient (backward); softmax writes y, then reads
# y and dy and writes dx; layer norm likewise reads x, writes y, then reads x and dy and writes dx.
MIN_BYTES = {"cross_entropy": lambda s: 3 * 4 * _numel(s), "softmax": lambda s: 5 * 4 * _numel(s),
             "layer_norm": lambda s: 5 * 4 * _numel(s)}


def _clearing(step: Callable[[], None], *leaves: Any) -> Callable[[], None]:
    """`step` with the gradients of its leaves cleared first, as a training step zeroes them: no accumulate
    kernels join the timed work, and every repetition does the same work."""
    def run() -> None:
        for t in leaves:
            t.grad = None
        step()
    return run


def _cases(shapes: dict[str, Any], tensor: Callable[..., Any], classes: Callable[[int, tuple[int, ...]], Any],
           F: Any, nn: Any, device: str) -> dict[str, Callable[[], None]]:
    """The component steps (forward + backward) on one framework: `tensor(shape, grad=True)` makes float32
    inputs, `classes(high, shape)` integer targets, F and nn are the framework's functional and nn modules
    (rumus and torch share these names, so both sides run the same code)."""
    cases: dict[str, Callable[[], None]] = {}
    s = shapes["cross_entropy"][0]
    logits, target = tensor(s), classes(s[1], (s[0],))
    cases["cross_entropy"] = _clearing(lambda: F.cross_entropy(logits, target).backward(), logits)
    s = shapes["softmax"][0]
    x_sm, g_sm = tensor(s), tensor(s, False)
    cases["softmax"] = _clearing(lambda: F.softmax(x_sm, dim=-1).backward(g_sm), x_sm)
    s = shapes["sdpa_causal"][0]
    q, k, v, g_at = tensor(s), tensor(s), tensor(s), tensor(s, False)
    cases["sdpa_causal"] = _clearing(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g_at),
                                     q, k, v)
    vocab, d, b, t = shapes["embedding"][0]
    emb = nn.Embedding(vocab, d).to(device)
    idx, g_emb = classes(vocab, (b, t)), tensor((b, t, d), False)
    cases["embedding"] = _clearing(lambda: emb(idx).backward(g_emb), *emb.parameters())
    rows, d, vocab = shapes["linear_d_to_V"][0]
    lin, x_lin, g_lin = nn.Linear(d, vocab).to(device), tensor((rows, d)), tensor((rows, vocab), False)
    cases["linear_d_to_V"] = _clearing(lambda: lin(x_lin).backward(g_lin), x_lin, *lin.parameters())
    s = shapes["layer_norm"][0]
    ln, x_ln, g_ln = nn.LayerNorm(s[-1]).to(device), tensor(s), tensor(s, False)
    cases["layer_norm"] = _clearing(lambda: ln(x_ln).backward(g_ln), x_ln, *ln.parameters())
    s = shapes["gelu"][0]
    x_g, g_g = tensor(s), tensor(s, False)
    cases["gelu"] = _clearing(lambda: F.gelu(x_g).backward(g_g), x_g)
    return cases


def _time_cases(label: str, cases: dict[str, Callable[[], None]], sync: Callable[[], object], reps: int,
                counters: Callable[[], tuple[int, int]] | None = None,
                submit: Callable[[], object] | None = None) -> dict[str, float]:
    """Per-step seconds of each case from batches of >= 10 steps between two syncs after an untimed warm-up
    batch (benchmarks/_launch_batch.py): one step per sync put every first-run cost (pipeline creation, pool
    growth, a first gradient accumulation) and a sync into the few timed repetitions. `submit` (rumus) hands
    each step's work to the GPU without waiting, as a training step's recorder does at its batch bounds."""
    batches = LaunchBatches(sync, counters, target_s=20e-3, reps=reps)
    out = {}
    for name, step in cases.items():
        def run(step: Callable[[], None] = step) -> None:
            step()
            if submit is not None:
                submit()
        t = batches.time(run)
        out[name] = t.seconds
        counted = f" ({t.kernels:g} kernels, {t.new_buffers} new buffers per batch)" if t.kernels is not None else ""
        print(f"{label} {name}: {out[name] * 1e3:.2f} ms{counted}", flush=True)
    return out


def rumus_components(c: dict[str, Any], device: str, reps: int) -> dict[str, float]:
    import rumus as rm
    from rumus import nn
    from rumus.nn import functional as F

    dev = rm.Device.parse(device)
    rng = np.random.default_rng(0)

    def tensor(shape: tuple[int, ...], grad: bool = True) -> Any:
        return rm.tensor(rng.standard_normal(shape), dtype="float32", device=device, requires_grad=grad)

    def classes(high: int, shape: tuple[int, ...]) -> Any:
        return rm.tensor(rng.integers(0, high, shape), device=device)

    cases = _cases(_shapes(c), tensor, classes, F, nn, device)
    backend = rm._runtime.backend(device.split(":")[0])

    def counters() -> tuple[int, int]:
        return backend.stats(dev)["dispatches"], backend.pool_stats(dev)["misses"]
    if device == "cpu":
        return _time_cases("rumus", cases, lambda: rm.synchronize(dev), reps)
    return _time_cases("rumus", cases, lambda: rm.synchronize(dev), reps, counters, lambda: backend.flush(dev))


def torch_components(c: dict[str, Any], device: str, reps: int) -> dict[str, float]:
    import torch
    import torch.nn.functional as tf

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    gen = torch.Generator(device="cpu").manual_seed(0)

    def tensor(shape: tuple[int, ...], grad: bool = True) -> Any:
        return torch.randn(shape, generator=gen).to(device).requires_grad_(grad)

    def classes(high: int, shape: tuple[int, ...]) -> Any:
        return torch.randint(0, high, shape, generator=gen).to(device)

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    return _time_cases("torch", _cases(_shapes(c), tensor, classes, tf, torch.nn, device), sync, reps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", action="store_true", help="tiny sizes: a smoke test (lavapipe)")
    ap.add_argument("--device", default="wgpu:0", help="rumus device")
    ap.add_argument("--torch-device", default="cuda")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-step", action="store_true", help="only the component table")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--autocast", default=None, choices=["float16", "bfloat16"],
                    help="the LM step under autocast (+ GradScaler for float16) on both sides")
    args = ap.parse_args()
    os.environ.setdefault("RUMUS_BACKEND", args.device.split(":")[0])
    c = SMALL if args.small else FULL
    with_torch = not args.no_torch
    if with_torch and args.torch_device == "cuda":
        try:
            import torch
            if not torch.cuda.is_available():
                print("# torch has no CUDA here: its figures are torch CPU", flush=True)
                args.torch_device = "cpu"
        except ImportError:
            print("# torch is not installed: rumus figures only", flush=True)
            with_torch = False
    results: dict[str, Any] = {"config": c, "args": vars(args)}

    comp_r = rumus_components(c, args.device, args.reps)
    comp_t = torch_components(c, args.torch_device, args.reps) if with_torch else {}
    results["components"] = {"rumus": comp_r, "torch": comp_t}

    step: dict[str, Any] = {}
    if not args.no_step:
        from nn_transformer import transformer_step_benchmark
        step = transformer_step_benchmark(args.device, with_torch=with_torch, steps=args.steps, config=c,
                                          torch_device=args.torch_device, autocast=args.autocast)
        results["step"] = step

    shapes = _shapes(c)
    rows = []
    for name, r in comp_r.items():
        t = comp_t.get(name)
        gbs_r = gbs_t = "-"
        if name in MIN_BYTES:
            nbytes = MIN_BYTES[name](shapes[name][0])
            gbs_r = f"{nbytes / r / 1e9:.3g}"
            gbs_t = f"{nbytes / t / 1e9:.3g}" if t else "-"
        rows.append((name, shapes[name][1], f"{r * 1e3:.2f}", f"{t * 1e3:.2f}" if t else "-",
                     f"{r / t:.2f}x" if t else "-", gbs_r, gbs_t))
    print(f"\nforward+backward per component, float32, rumus {args.device} vs torch "
          f"{args.torch_device if with_torch else '(not run)'} (TF32 off)")
    print(table(rows, ("component", "size", "rumus ms", "torch ms", "ratio", "rumus GB/s", "torch GB/s")))
    if step:
        under = f" under autocast {args.autocast}" if args.autocast else ""
        print(f"\nLM step{under}: {c['layers']} layers, d {c['d_model']}, {c['heads']} heads, FFN {c['d_ff']}, "
              f"seq {c['seq']}, batch {c['batch']}, vocab {c['vocab']}, AdamW")
        srows = [("rumus " + args.device, f"{step['rumus_s'] * 1e3:.1f}", f"{step['rumus_best_s'] * 1e3:.1f}",
                  f"{step['rumus_loss']:.4f}", f"{step['ratio']:.2f}x" if "ratio" in step else "-")]
        if "torch_s" in step:
            srows.append(("torch " + args.torch_device, f"{step['torch_s'] * 1e3:.1f}",
                          f"{step['torch_best_s'] * 1e3:.1f}", f"{step['torch_loss']:.4f}", "1.00x"))
        print(table(srows, ("framework", "median step ms", "best step ms", "loss", "vs torch")))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2, default=str)


if __name__ == "__main__":
    main()
