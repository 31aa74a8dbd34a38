"""`rumus demo`: a small CNN learns scikit-learn's handwritten digits (8x8 images, bundled with
scikit-learn, no download) on the default device, with a progress bar, then saves the model
(safetensors) and a PNG of its loss and accuracy curves.

    rumus demo                       # cpu, or RUMUS_BACKEND=wgpu rumus demo
    rumus demo --epochs 5 --out runs/quick

The model is tiny (8x8 inputs, batch 64): on the CPU, thread hand-offs cost more than they save at this
size, so the demo runs the rumus kernels and BLAS on one thread unless RUMUS_NUM_THREADS says otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm import tqdm

import rumus as rm
from rumus_contracts import config
from rumus import nn
from rumus.nn import functional as F
from rumus.utils.cli_args import nonnegative_int, positive_float, positive_int

TARGET_ACCURACY = 0.97


class DigitsCNN(nn.Module):
    """conv(1->16) BN ReLU, conv(16->32) BN ReLU, maxpool 2, conv(32->64) ReLU, global average, linear."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classifier = nn.Linear(64, 10)

    def forward(self, x: rm.Tensor) -> rm.Tensor:
        out: rm.Tensor = self.classifier(self.features(x))
        return out


@dataclass
class Result:
    accuracy: float
    seconds: float
    history: dict[str, list[float]] = field(default_factory=dict)
    model_path: str = ""
    plot_path: str = ""


def load_digits(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(train images, train labels, test images, test labels): a stratified 80/20 split, pixels in [0, 1]."""
    from sklearn.datasets import load_digits as sk_digits
    from sklearn.model_selection import train_test_split
    digits = sk_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None]  # [N, 1, 8, 8]
    x_train, x_test, y_train, y_test = train_test_split(images, digits.target.astype(np.int64), test_size=0.2,
                                                        random_state=seed, stratify=digits.target)
    return x_train, y_train, x_test, y_test


def accuracy(model: nn.Module, x: np.ndarray, y: np.ndarray, device: Any, batch: int = 512) -> float:
    model.eval()
    correct = 0
    with rm.no_grad():
        for i in range(0, len(x), batch):
            pred = model(rm.tensor(x[i:i + batch], device=device)).argmax(1).numpy()
            correct += int((pred == y[i:i + batch]).sum())
    model.train()
    return correct / len(x)


def _blas_limit(threads: int | None) -> contextlib.AbstractContextManager[Any]:
    """At most `threads` BLAS threads (threadpoolctl comes with scikit-learn); None changes nothing."""
    if threads is None:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    limit: contextlib.AbstractContextManager[Any] = threadpool_limits(threads, user_api="blas")
    return limit


def train(out: str, epochs: int = 15, batch_size: int = 64, lr: float = 3e-3, seed: int = 0,
          progress: bool = True, blas_threads: int | None = None, amp: str | None = None) -> Result:
    """Train, evaluate after every epoch, save model + curves + metrics.json under `out`. `amp`: "float16"
    (autocast + GradScaler) or "bfloat16" (autocast) for the forward pass and the loss."""
    device = rm.default_device()
    with _blas_limit(blas_threads if device.backend == "cpu" else None):
        return _train(out, epochs, batch_size, lr, seed, progress, device, amp)


def _train(out: str, epochs: int, batch_size: int, lr: float, seed: int, progress: bool, device: Any,
           amp: str | None = None) -> Result:
    rm.manual_seed(seed)
    x_train, y_train, x_test, y_test = load_digits(seed)
    model = DigitsCNN().to(device)
    opt = rm.optim.Adam(model.parameters(), lr=lr)
    low = getattr(rm, amp) if amp else None
    autocast = rm.autocast(device.backend, dtype=low, enabled=low is not None)
    scaler = rm.amp.GradScaler(enabled=amp == "float16")
    rng = np.random.default_rng(seed)
    steps = (len(x_train) + batch_size - 1) // batch_size
    history: dict[str, list[float]] = {"loss": [], "test_accuracy": []}
    start = time.perf_counter()
    bar = tqdm(total=epochs * steps, desc=f"digits CNN on {device}", unit="step", disable=not progress)
    for epoch in range(epochs):
        for group in opt.param_groups:  # cosine decay: large steps first, fine ones at the end
            group["lr"] = lr * 0.5 * (1 + math.cos(math.pi * epoch / epochs))
        order = rng.permutation(len(x_train))
        total = rm.zeros((), device=device)  # summed on the device: no host sync per step
        t0 = time.perf_counter()
        for i in range(steps):
            idx = order[i * batch_size:(i + 1) * batch_size]
            xb, yb = rm.tensor(x_train[idx], device=device), rm.tensor(y_train[idx], device=device)
            with autocast:
                loss = F.cross_entropy(model(xb), yb)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            total = total + loss.detach() * float(len(idx))
            bar.update(1)
            if i == steps - 1 or i % 10 == 0:
                seen = min((i + 1) * batch_size, len(x_train))
                bar.set_postfix(epoch=epoch + 1, loss=f"{loss.item():.4f}",
                                img_s=f"{seen / max(time.perf_counter() - t0, 1e-9):.0f}")
        history["loss"].append(float(total.item()) / len(x_train))
        history["test_accuracy"].append(accuracy(model, x_test, y_test, device))
        bar.set_postfix(epoch=epoch + 1, loss=f"{history['loss'][-1]:.4f}",
                        test_acc=f"{history['test_accuracy'][-1]:.3f}")
    bar.close()
    seconds = time.perf_counter() - start
    os.makedirs(out, exist_ok=True)
    model_path = os.path.join(out, "digits_cnn.safetensors")
    rm.io.save_file(model.state_dict(), model_path, metadata={"model": "DigitsCNN", "epochs": str(epochs)})
    plot_path = os.path.join(out, "curves.png")
    _plot(history, plot_path, str(device))
    result = Result(history["test_accuracy"][-1], seconds, history, model_path, plot_path)
    rm.io.atomic_write(os.path.join(out, "metrics.json"), json.dumps(
        {"final_test_accuracy": result.accuracy, "amp": amp, "seconds": seconds, "device": str(device),
         "epochs": epochs, **history}, indent=2).encode())
    return result


def _plot(history: dict[str, list[float]], path: str, device: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    epochs = np.arange(1, len(history["loss"]) + 1)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.5))
    ax1.plot(epochs, history["loss"], marker="o", label="training loss")
    ax1.set(title="training loss", xlabel="epoch", ylabel="cross-entropy (log scale)", yscale="log")
    ax1.legend()
    ax2.plot(epochs, [100 * a for a in history["test_accuracy"]], marker="o", color="tab:green",
             label="held-out accuracy")
    ax2.axhline(100 * TARGET_ACCURACY, color="gray", linestyle="--", linewidth=1,
                label=f"target {100 * TARGET_ACCURACY:.0f}%")
    ax2.set(title="held-out accuracy", xlabel="epoch", ylabel="accuracy (%)")
    ax2.legend(loc="lower right")
    fig.suptitle(f"rumus demo: digits CNN on {device}")
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rumus demo", description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--out", default=os.path.join("runs", "demo"), help="output directory (default: ./runs/demo)")
    p.add_argument("--epochs", type=positive_int, default=15, help="passes over the training set (default: 15)")
    p.add_argument("--batch-size", type=positive_int, default=64, help="samples per step (default: 64)")
    p.add_argument("--lr", type=positive_float, default=3e-3, help="Adam's learning rate (default: 0.003)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the data split and weights (default: 0)")
    p.add_argument("--amp", choices=["float16", "bfloat16"], default=None,
                   help="mixed precision: autocast the forward pass (float16 adds a GradScaler)")
    args = p.parse_args(argv)
    single = not config.is_set("RUMUS_NUM_THREADS")  # see the docstring: one thread unless the user chose
    if single:
        os.environ["RUMUS_NUM_THREADS"] = "1"  # read when the CPU backend starts
    r = train(args.out, args.epochs, args.batch_size, args.lr, args.seed, blas_threads=1 if single else None,
              amp=args.amp)
    ok = r.accuracy >= TARGET_ACCURACY
    print(f"held-out accuracy {100 * r.accuracy:.1f}% after {args.epochs} epochs in {r.seconds:.1f} s on "
          f"{rm.default_device()} ({'meets' if ok else 'misses'} the {100 * TARGET_ACCURACY:.0f}% bar)")
    print(f"model saved to {r.model_path}")
    print(f"loss/accuracy curves saved to {r.plot_path}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
