"""Host (Python) time per op on the CPU backend, and the conv bias fused into the convolution's kernel.

    RUMUS_NUM_THREADS=1 python benchmarks/cpu_host_overhead.py          # issue 11's host-side numbers
    RUMUS_NUM_THREADS=16 python benchmarks/cpu_host_overhead.py --windows 200

Each row is the best of many short windows (a shared machine's busy moments inflate long averages; the
quietest window is the closest to the code's own cost). Rows: an add of [128, 256] and of [2, 2] (there the
kernel is nothing and the row is the dispatch path), the MLP and CNN training steps of op_profile.py, and
the CNN's conv layers with a bias as one conv2d_bias kernel vs conv2d + a broadcast add (forward, and
forward + backward). Run it on two trees (before/after a change) for an A/B; the conv rows need a tree that
has rumus.nn.functional_conv._fused_bias.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))


def best(fn: Callable[[], object], per_window: int, windows: int) -> float:
    """Seconds per call in the quietest of `windows` windows of `per_window` calls."""
    sys.path.insert(0, HERE)
    from _timing import per_call_samples
    return min(per_call_samples(fn, per_window, windows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--windows", type=int, default=100, help="windows per row (the best one is reported)")
    args = ap.parse_args()
    os.environ.setdefault("RUMUS_BACKEND", "cpu")
    sys.path.insert(0, HERE)
    import op_profile

    import rumus as rm
    from rumus.nn import functional_conv as FC
    w = args.windows
    print(f"RUMUS_NUM_THREADS={os.environ.get('RUMUS_NUM_THREADS', '(every physical core)')}")
    a, b, s1, s2 = rm.randn(128, 256), rm.randn(128, 256), rm.randn(2, 2), rm.randn(2, 2)
    print(f"add [128,256]: {best(lambda: a + b, 50, 4 * w) * 1e6:.2f} us")
    print(f"add [2,2]: {best(lambda: s1 + s2, 50, 4 * w) * 1e6:.2f} us")
    steps = op_profile._rumus_steps("cpu", ["mlp", "cnn"])
    for name, fn in steps.items():
        for _ in range(5):
            fn()
        print(f"{name.upper()} step: {best(fn, 2, w) * 1e3:.3f} ms")
    fused = getattr(FC, "_fused_bias", None)
    if fused is None:
        print("conv bias rows: this tree has no conv2d_bias path")
        return
    for xs, ws in (((64, 1, 28, 28), (16, 1, 3, 3)), ((64, 16, 14, 14), (32, 16, 3, 3))):
        print(f"conv x{xs} w{ws} bias: " + " | ".join(_conv_rows(xs, ws, fused, w)))
    FC._fused_bias = fused


def _conv_rows(xs: tuple[int, ...], ws: tuple[int, ...], fused: Callable[..., bool], windows: int) -> list[str]:
    """The conv with a bias, unfused then fused: forward, and forward + backward."""
    import rumus as rm
    from rumus.nn import functional as F
    from rumus.nn import functional_conv as FC
    x, wt, bias = rm.randn(*xs), rm.randn(*ws, requires_grad=True), rm.randn(ws[0], requires_grad=True)
    row = []
    for label, choice in (("conv2d + add", lambda *_: False), ("conv2d_bias", fused)):
        FC._fused_bias = choice
        fwd = best(lambda: F.conv2d(x, wt.detach(), bias.detach(), padding=1), 2, windows)
        both = best(lambda: F.conv2d(x, wt, bias, padding=1).sum().backward(), 1, windows)
        row.append(f"{label}: fwd {fwd * 1e3:.3f} ms, fwd+bwd {both * 1e3:.3f} ms")
    return row

if __name__ == "__main__":
    main()
