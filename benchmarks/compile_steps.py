"""rm.compile on whole training steps: kernels and time per step, eager vs compiled vs PyTorch, one table.

Steps (forward, backward, optimizer step; same weights and data for rumus and torch):
  MLP          784-256-256-10, batch 128, Adam, MSE              (benchmarks/wgpu_core.py's MLP)
  CNN          two conv+pool blocks on 1x28x28, batch 64, Adam   (benchmarks/nn_cnn.py's model)
  transformer  2 pre-norm layers, d 256, seq 128, batch 16, dropout 0.1, AdamW (benchmarks/nn_transformer.py),
               or --small: d 64, seq 32, batch 8 (where the host cost dominates)

Columns: kernels per step (compiled: captured kernels + the optimizer's, which a replay dispatches
eagerly inside its host region), host ms per step (the time inside the step calls: Python, dispatch,
recording), step ms (N steps then one sync / loss read, divided by N), and the compiled step over the
eager one and over torch's. Steps are timed interleaved (eager, compiled, torch per round), medians.

    python benchmarks/compile_steps.py                                   # rumus cpu vs torch cpu
    RUMUS_BACKEND=wgpu python benchmarks/compile_steps.py --device wgpu:0 --torch-device cuda   # the H200
    RUMUS_COMPILE_TAPE=0 ...   # compiled replays run each kernel's Python wrapper (before launch tapes)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import table  # noqa: E402

import rumus as rm  # noqa: E402
from rumus import _dispatch, nn  # noqa: E402
from rumus.nn import functional as F  # noqa: E402

Step = Callable[[], Any]


class _Counter:
    """Stands in for rm.compile's recorder for one eager step: counts the kernels the core launches."""

    probing = False

    def __init__(self) -> None:
        self.kernels = 0

    def record(self, *args: Any) -> None:
        self.kernels += 1

    def record_direct(self, *args: Any) -> bool:
        self.kernels += 1
        return False

    def host_call(self, fn: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    def host_read(self, what: str) -> None:
        pass


def eager_kernels(step: Step) -> int:
    counter = _Counter()
    _dispatch._capture = counter
    try:
        step()
    finally:
        _dispatch._capture = None
    return counter.kernels


def mlp(dev: str, tdev: str) -> tuple[Any, Any, Any]:
    import torch
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
                             torch.nn.Linear(256, 10))
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((128, 784)).astype(np.float32), rng.standard_normal((128, 10)).astype(np.float32)
    return (tm, model, (x, y), lambda out, t: F.mse_loss(out, t),
            lambda out, t: torch.nn.functional.mse_loss(out, t), torch.optim.Adam, rm.optim.Adam, 1e-3)


def cnn(dev: str, tdev: str) -> tuple[Any, Any, Any]:
    import torch
    torch.manual_seed(0)
    tm = torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 7 * 7, 10))
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((64, 1, 28, 28)).astype(np.float32), rng.integers(0, 10, 64)
    return (tm, model, (x, y), F.cross_entropy, torch.nn.functional.cross_entropy, torch.optim.Adam,
            rm.optim.Adam, 1e-3)


def transformer(dev: str, tdev: str, small: bool) -> tuple[Any, Any, Any]:
    import torch
    from nn_transformer import CONFIG, RumusLM, _torch_lm
    c = {**CONFIG, **({"d_model": 64, "d_ff": 256, "seq": 32, "batch": 8, "vocab": 256} if small else {})}
    torch.manual_seed(0)
    tm = _torch_lm(c).train()
    model = RumusLM(c).train()
    rng = np.random.default_rng(0)
    idx, tgt = rng.integers(0, c["vocab"], (c["batch"], c["seq"])), rng.integers(0, c["vocab"], c["batch"] * c["seq"])
    positions = np.arange(c["seq"])

    class WithPositions:  # both models take (idx, positions); the step functions pass one input
        def __init__(self, m: Any, pos: Any) -> None:
            self.m, self.pos = m, pos

        def __call__(self, x: Any) -> Any:
            return self.m(x, self.pos)
    return (tm, model, (idx, tgt), F.cross_entropy, torch.nn.functional.cross_entropy, torch.optim.AdamW,
            rm.optim.AdamW, c["lr"], WithPositions, positions)


def build(name: str, dev: str, tdev: str, small: bool, **compile_kw: Any) -> dict[str, Any]:
    """The steps of `name`; compile_kw: rm.compile's options for the compiled one."""
    import torch
    made = transformer(dev, tdev, small) if name == "transformer" else (mlp if name == "MLP" else cnn)(dev, tdev)
    tm, model, (x, y), loss, tloss, topt_cls, opt_cls, lr = made[:8]
    state = {k: rm.tensor(v.detach().numpy()) for k, v in tm.state_dict().items() if k != "mask"}
    model.load_state_dict(state)
    model.to(dev)
    tm = tm.to(tdev)
    opt, topt = opt_cls(model.parameters(), lr=lr), topt_cls(tm.parameters(), lr=lr)
    rx, ry = rm.tensor(x, device=dev), rm.tensor(y, device=dev)
    tx, ty = torch.from_numpy(x).to(tdev), torch.from_numpy(y).to(tdev)
    fwd, tfwd = model, tm
    if len(made) > 8:
        wrap, positions = made[8], made[9]
        fwd, tfwd = wrap(model, rm.tensor(positions, device=dev)), wrap(tm, torch.from_numpy(positions).to(tdev))

    def step(x: rm.Tensor, y: rm.Tensor) -> rm.Tensor:
        opt.zero_grad()
        out = fwd(x)
        lo = loss(out.reshape(-1, out.shape[-1]) if out.ndim > 2 else out, y)
        lo.backward()
        opt.step()
        return lo

    def tstep() -> Any:
        topt.zero_grad(set_to_none=True)
        out = tfwd(tx)
        lo = tloss(out.reshape(-1, out.shape[-1]) if out.ndim > 2 else out, ty)
        lo.backward()
        topt.step()
        return lo
    compiled = rm.compile(step, **compile_kw)
    return {"eager": lambda: step(rx, ry), "compiled": lambda: compiled(rx, ry), "torch": tstep,
            "compiled_fn": compiled, "eager_kernels": lambda: eager_kernels(lambda: step(rx, ry))}


def timed(fn: Step, n: int) -> tuple[float, float]:
    """(host seconds per step, step seconds) over n steps ended by one loss read."""
    host = 0.0
    t0 = time.perf_counter()
    out = None
    for _ in range(n):
        t = time.perf_counter()
        out = fn()
        host += time.perf_counter() - t
    float(out.item())
    return host / n, (time.perf_counter() - t0) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="rumus device (default: RUMUS_BACKEND or cpu)")
    ap.add_argument("--torch-device", default="cpu", help="cpu, or cuda on the GPU machine")
    ap.add_argument("--steps", type=int, default=20, help="steps per timed round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--small", action="store_true", help="a small transformer (d 64, seq 32, batch 8)")
    ap.add_argument("--models", nargs="*", default=["MLP", "CNN", "transformer"])
    args = ap.parse_args()
    import torch
    dev = str(rm.default_device() if args.device is None else rm.device(args.device))
    rows = []
    for name in args.models:
        b = build(name, dev, args.torch_device, args.small)
        for key in ("eager", "compiled", "torch"):
            for _ in range(3):  # warm-up; the compiled step captures on its second call
                b[key]()
        kernels_eager = b["eager_kernels"]()
        samples: dict[str, list[tuple[float, float]]] = {k: [] for k in ("eager", "compiled", "torch")}
        for _ in range(args.rounds):
            for key in samples:
                if key == "torch" and args.torch_device.startswith("cuda"):
                    torch.cuda.synchronize()
                samples[key].append(timed(b[key], args.steps))
        med = {k: (statistics.median(h for h, _ in v), statistics.median(s for _, s in v)) for k, v in samples.items()}
        st = b["compiled_fn"].stats()
        for key, kernels in (("eager", str(kernels_eager)), ("compiled", f"{st['kernels']}+{st['host_kernels']}"),
                             ("torch", "-")):
            host, step_s = med[key]
            ratio = "" if key != "compiled" else (f"{step_s / med['eager'][1]:.2f}x eager, "
                                                    f"{step_s / med['torch'][1]:.2f}x torch")
            label = f"torch {args.torch_device}" if key == "torch" else f"rumus {dev} {key}"
            rows.append((name, label, kernels, f"{host * 1e3:.3f}", f"{step_s * 1e3:.3f}", ratio))
    print(table(rows, ("step", "run", "kernels/step", "host ms", "step ms", "compiled vs")))


if __name__ == "__main__":
    main()
