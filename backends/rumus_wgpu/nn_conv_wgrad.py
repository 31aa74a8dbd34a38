"""conv2d_backward_weight for small weight gradients (shaders/nn_conv_wgrad.wgsl): a split sum over
(sample, output position) in two deterministic passes, instead of im2col + GEMM.

Why: the weight gradient is a GEMM [O/g, N*Ho*Wo] @ [N*Ho*Wo, C/g*kh*kw] with a tiny output and a
very long K. With few output elements the GEMM takes its small unsplit tile, so one or a handful of
workgroups walk all N*Ho*Wo positions (8.4 ms on the H200 for the CNN's [16, 9] gradient over
50,176 positions), after writing a whole-batch column buffer. Here every workgroup sums one chunk of
positions for one 16 x 16 tile of the gradient, reading grad and x in place, and a second pass adds
the chunks in a fixed order (no float atomics: the same bits every run).
"""

from __future__ import annotations

from typing import Any

from rumus_contracts import TensorArg

from .layout import env_set, new_buffer
from .conv_config import config_words
from .nn_common import dispatch, pack, source

TILE = 16                 # the workgroup's tile of (output channel, kernel entry): 16 x 16 invocations
MIN_CHUNK = 256           # positions per workgroup: at least 16 barrier steps of work each
TARGET_GROUPS = 1024      # workgroups to aim for: several waves on the largest GPUs
DIRECT_MAX_OUT = 128 * 128
IM2COL_ENV = "RUMUS_WGPU_CONV_IM2COL"   # set: every conv on im2col + GEMM (A/B timing, tests of both paths)


def small_weight(cv: Any) -> bool:
    """Whether the geometry `cv` (nn_conv._Conv) has a small weight, where the im2col + GEMM path loses:
    at most DIRECT_MAX_OUT elements or one side (O/g, C/g*kh*kw) under 48 are the shapes where the GEMM
    runs its 32x32 tile, unsplit (gemm._plan), so few workgroups share a long K or M is mostly padding."""
    if env_set(IM2COL_ENV):
        return False
    return bool(cv.o * cv.k <= DIRECT_MAX_OUT or min(cv.og, cv.k) < 48)


def suits(dev: Any, cv: Any) -> bool:
    """Small weights whose tiles of one group fit one grid dimension."""
    return small_weight(cv) and _ceil(cv.og, TILE) * _ceil(cv.k, TILE) <= int(dev.max_groups)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def plan(rows: int, tiles: int, out_elems: int, dev: Any) -> tuple[int, int]:
    """(splits, positions per split) for `rows` positions over `tiles` workgroup tiles: enough
    workgroups to fill the GPU, chunks of at least MIN_CHUNK, the partial sums within a binding."""
    splits = max(1, min(_ceil(rows, MIN_CHUNK), _ceil(TARGET_GROUPS, tiles), int(dev.max_groups),
                        int(dev.max_binding) // (4 * out_elems)))
    chunk = _ceil(_ceil(rows, splits), TILE) * TILE
    return _ceil(rows, chunk), chunk


def backward_weight(dev: Any, cv: Any, gw: TensorArg, gy: TensorArg, x: TensorArg) -> None:
    """gw = conv2d_backward_weight(gy, x) for the geometry `cv` (nn_conv._Conv)."""
    tiles_k = _ceil(cv.k, TILE)
    per_group = _ceil(cv.og, TILE) * tiles_k
    rows = cv.n * cv.L
    splits, chunk = plan(rows, per_group * cv.g, gw.numel, dev)
    part = new_buffer(dev, splits * gw.numel * 4, "conv2d_backward_weight partial sums")
    dt = x.dtype
    include = ("conv_config",)
    prog = dev.programs.get(("nn", "nn_conv_wgrad", "partials", dt.name, include),
                            lambda: source("nn_conv_wgrad", "partials", dt, include))
    common = {"rows": rows, "chunk": chunk, "splits": splits, "tiles": tiles_k, "a_off": gy.offset,
              "b_off": x.offset, "out_off": gw.offset}
    for g0 in range(0, cv.g, int(dev.max_groups)):
        words = [gw.numel, 0, *config_words(cv, g0=g0, **common)]
        dev.recorder.dispatch(prog, [part, gy.buffer, x.buffer], pack(words),
                              (per_group, min(int(dev.max_groups), cv.g - g0), splits))
    dispatch(dev, "nn_conv_wgrad", "sum", dt, [gw.buffer, part], config_words(cv, **common), gw.numel,
             include=("grid", *include))
