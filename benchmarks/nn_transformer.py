"""A transformer training step, rumus vs PyTorch CPU, in one run (same architecture, same weights, same data).

Model: token Embedding(vocab, d) + positional Embedding(seq, d) -> 2 pre-norm TransformerEncoderLayers
(d 256, 4 heads, FFN 1024 with GELU, dropout 0.1, causal mask) -> Linear(d, vocab); cross-entropy over
every position; AdamW. One step = forward + backward + optimizer step.

    python benchmarks/nn_transformer.py                 # rumus on the default device vs torch CPU
    python benchmarks/nn_transformer.py --device wgpu   # another rumus device (torch stays on CPU)

`transformer_step_benchmark(device)` is the reusable entry point (the GPU machine runs it too).

Threads: both frameworks use their defaults, except that torch's intra-op thread count is restored after
rumus's CPU backend starts (rumus sets the OpenMP thread count, which torch shares when both load the
same libgomp).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import table  # noqa: E402
from results_table import add_record_option, ratio_text, record_all  # noqa: E402

import rumus as rm  # noqa: E402
from rumus import nn  # noqa: E402
from rumus.nn import functional as F  # noqa: E402

CONFIG = {"d_model": 256, "heads": 4, "d_ff": 1024, "layers": 2, "seq": 128, "batch": 16, "vocab": 1000,
          "dropout": 0.1, "lr": 3e-4}


class RumusLM(nn.Module):
    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        self.tok = nn.Embedding(c["vocab"], c["d_model"])
        self.pos = nn.Embedding(c["seq"], c["d_model"])
        layer = nn.TransformerEncoderLayer(c["d_model"], c["heads"], c["d_ff"], dropout=c["dropout"],
                                           activation="gelu", batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, c["layers"])
        self.head = nn.Linear(c["d_model"], c["vocab"])

    def forward(self, idx: rm.Tensor, positions: rm.Tensor) -> rm.Tensor:
        x = self.tok(idx) + self.pos(positions)
        h = self.encoder(x, is_causal=True)
        return self.head(h.reshape(-1, h.shape[-1]))


def _torch_lm(c: dict[str, Any]) -> Any:
    import torch

    class TorchLM(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok = torch.nn.Embedding(c["vocab"], c["d_model"])
            self.pos = torch.nn.Embedding(c["seq"], c["d_model"])
            layer = torch.nn.TransformerEncoderLayer(c["d_model"], c["heads"], c["d_ff"], dropout=c["dropout"],
                                                     activation="gelu", batch_first=True, norm_first=True)
            self.encoder = torch.nn.TransformerEncoder(layer, c["layers"], enable_nested_tensor=False)
            self.head = torch.nn.Linear(c["d_model"], c["vocab"])
            self.register_buffer("mask", torch.nn.Transformer.generate_square_subsequent_mask(c["seq"]))

        def forward(self, idx: Any, positions: Any) -> Any:
            x = self.tok(idx) + self.pos(positions)
            return self.head(self.encoder(x, mask=self.mask, is_causal=True))

    return TorchLM()


def _backward_and_step(loss: Any, opt: Any, scaler: Any) -> float:
    """loss.backward() and opt.step(), through the GradScaler when there is one: the same calls for rumus's
    objects and torch's. Returns the loss."""
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    else:
        loss.backward()
        opt.step()
        opt.zero_grad()
    return float(loss.item())


def _time_steps(steps_by_name: dict[str, Callable[[], float]], warmup: int,
               steps: int) -> dict[str, tuple[float, float, float]]:
    """{name: (median and best seconds per step, last loss)}; the frameworks' steps alternate, so load from
    other processes on the machine hits them alike (the best step is the least disturbed one)."""
    losses = {name: 0.0 for name in steps_by_name}
    times: dict[str, list[float]] = {name: [] for name in steps_by_name}
    for i in range(warmup + steps):
        for name, step in steps_by_name.items():
            t0 = time.perf_counter()
            losses[name] = step()
            if i >= warmup:
                times[name].append(time.perf_counter() - t0)
    return {name: (statistics.median(times[name]), min(times[name]), losses[name]) for name in steps_by_name}


def transformer_step_benchmark(device: str | None = None, with_torch: bool = True, warmup: int = 2, steps: int = 5,
                               config: dict[str, Any] | None = None, torch_device: str = "cpu",
                               autocast: str | None = None) -> dict[str, Any]:
    """Seconds per training step for rumus on `device` (default device if None) and, with_torch, PyTorch CPU.

    Returns {"rumus_s", "rumus_loss", "torch_s", "torch_loss", "ratio", "device", "config"}; both frameworks start
    from the same weights and data. rumus steps end with a host read of the loss (so queued GPU work is counted).
    """
    c = {**CONFIG, **(config or {})}
    torch_threads = None
    if with_torch:
        import torch
        torch_threads = torch.get_num_threads()  # before rumus's CPU backend starts (see the module docstring)
    dev = str(rm.default_device() if device is None else rm.device(device))
    rm.zeros(1, device=dev)  # starts the backend
    if torch_threads is not None:
        torch.set_num_threads(torch_threads)
    rng = np.random.default_rng(0)
    idx = rng.integers(0, c["vocab"], (c["batch"], c["seq"]))
    target = rng.integers(0, c["vocab"], (c["batch"], c["seq"]))
    positions = np.arange(c["seq"])
    result: dict[str, Any] = {"device": dev, "config": c}

    torch_model = None
    if with_torch:
        import torch
        torch.manual_seed(0)
        torch_model = _torch_lm(c).train()
    rm.manual_seed(0)
    model = RumusLM(c).to(dev).train()
    if torch_model is not None:
        state = {k: rm.tensor(v.detach().numpy(), device=dev) for k, v in torch_model.state_dict().items()
                 if k != "mask"}
        model.load_state_dict(state)
    opt = rm.optim.AdamW(model.parameters(), lr=c["lr"])
    r_idx, r_pos = rm.tensor(idx, device=dev), rm.tensor(positions, device=dev)
    r_tgt = rm.tensor(target.reshape(-1), device=dev)

    # autocast ("float16" / "bfloat16"): forward and loss under autocast, a GradScaler for float16, both sides
    scaler = rm.amp.GradScaler() if autocast == "float16" else None

    def rumus_step() -> float:
        if autocast is None:
            logits = model(r_idx, r_pos)
            loss = F.cross_entropy(logits.reshape(-1, c["vocab"]), r_tgt)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return float(loss.item())
        with rm.autocast(dev.split(":")[0], dtype=getattr(rm, autocast)):
            logits = model(r_idx, r_pos)
            loss = F.cross_entropy(logits.reshape(-1, c["vocab"]), r_tgt)
        opt.zero_grad()
        return _backward_and_step(loss, opt, scaler)

    runs: dict[str, Callable[[], float]] = {"rumus": rumus_step}
    if torch_model is not None:
        import torch
        torch_model = torch_model.to(torch_device)
        t_opt = torch.optim.AdamW(torch_model.parameters(), lr=c["lr"])
        t_idx, t_pos, t_tgt = (torch.from_numpy(a).to(torch_device) for a in (idx, positions, target.reshape(-1)))

        t_scaler = torch.amp.GradScaler(torch_device.split(":")[0]) if autocast == "float16" else None

        def torch_step() -> float:
            t_opt.zero_grad(set_to_none=True)
            with torch.autocast(torch_device.split(":")[0], dtype=getattr(torch, autocast or "float32"),
                                enabled=autocast is not None):
                logits = torch_model(t_idx, t_pos)
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, c["vocab"]), t_tgt)
            return _backward_and_step(loss, t_opt, t_scaler)

        runs["torch"] = torch_step
    for name, (seconds, best, loss) in _time_steps(runs, warmup, steps).items():
        result[f"{name}_s"], result[f"{name}_best_s"], result[f"{name}_loss"] = seconds, best, loss
    if "torch_s" in result:
        for name in runs:
            if name != "torch":
                suffix = name[len("rumus"):]
                result[f"ratio{suffix}"] = result[f"{name}_s"] / result["torch_s"]
                result[f"best_ratio{suffix}"] = result[f"{name}_best_s"] / result["torch_best_s"]
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="rumus device (default: RUMUS_BACKEND or cpu)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--torch-device", default="cpu", help="cpu, or cuda on the GPU machine")
    add_record_option(ap)
    args = ap.parse_args()
    res = transformer_step_benchmark(args.device, with_torch=not args.no_torch, steps=args.steps,
                                     torch_device=args.torch_device)
    c = res["config"]
    print(f"# transformer training step: {c['layers']} layers, d {c['d_model']}, {c['heads']} heads, FFN {c['d_ff']}, "
          f"seq {c['seq']}, batch {c['batch']}, vocab {c['vocab']}, dropout {c['dropout']}, AdamW")
    try:
        import torch
        threads = f"torch threads {torch.get_num_threads()}"
    except ImportError:
        threads = "torch not installed"
    kernels = ""
    try:
        from rumus_cpu.threads import get_num_threads
        kernels = f", rumus C-kernel threads {get_num_threads()}"
    except ImportError:
        pass
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, {threads}{kernels}")
    tokens = c["batch"] * c["seq"]
    rows = []
    for name, label in (("rumus", f"rumus ({res['device']})"), ("torch", f"PyTorch ({args.torch_device})")):
        if f"{name}_s" not in res:
            continue
        suffix = name[len("rumus"):] if name != "torch" else None
        ratio = "1.00x" if suffix is None else f"{res[f'ratio{suffix}']:.2f}x" if f"ratio{suffix}" in res else "-"
        best = "1.00x" if suffix is None else \
            f"{res[f'best_ratio{suffix}']:.2f}x" if f"best_ratio{suffix}" in res else "-"
        rows.append((label, f"{res[f'{name}_s'] * 1e3:.1f} ms", f"{res[f'{name}_best_s'] * 1e3:.1f} ms",
                     f"{tokens / res[f'{name}_s']:.0f}", f"{res[f'{name}_loss']:.4f}", ratio, best))
    print(table(rows, ("framework", "median step", "best step", "tokens/s (median)", "loss after steps",
                       "median vs torch", "best vs torch")))
    if "torch_s" in res:
        backend = str(res["device"]).split(":")[0]
        where = "CPU" if backend == "cpu" else f"{res['device']}, torch {args.torch_device}"
        command = "python benchmarks/nn_transformer.py" + (f" --device {args.device}" if args.device else "") + \
            (f" --torch-device {args.torch_device}" if args.torch_device != "cpu" else "") + f" --steps {args.steps}"
        record_all(args.record, command, [(f"{backend}-transformer-step",
                                           f"{c['layers']}-layer transformer training step ({where})",
                                           f"{res['rumus_s'] * 1e3:.1f} ms", f"torch {res['torch_s'] * 1e3:.1f} ms",
                                           ratio_text(res["rumus_s"], res["torch_s"]))])


if __name__ == "__main__":
    main()
