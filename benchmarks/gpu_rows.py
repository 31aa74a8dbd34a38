"""Row kernels on the GPU: softmax / log_softmax (and the row ops built on them) in ms and GB/s against
torch, every launch path, and probes that bisect one kernel's cost, in one run.

Every figure is time per launch from a batch of R launches between two syncs, on both sides
(benchmarks/_launch_batch.py): the header prints the cost of one lone sync, which a training step pays
once and a one-launch-per-sync timing would add to every row. rumus's recorder submits at the sync (or
after its first 64 dispatches), so its batch time ("batch ms") is host recording and GPU in series: the
"rumus GPU ms" column (GB/s and the speed ratio use it) records launches first and times only the sync
that runs them. Torch launches as it records (its host overlaps its GPU). `R` is the batch size, `kern` the
rumus dispatches per launch (0 would mean skipped), `new buf` pool misses in the timed batches, `host ms`
the host's time to record one launch (a row whose ms is about its host ms is bound by the host, not the GPU).

    python benchmarks/gpu_rows.py                       # H200: rumus wgpu vs torch CUDA (fp32)
    python benchmarks/gpu_rows.py --small --no-torch    # a smoke run on lavapipe
    python benchmarks/gpu_rows.py --only ops plans --shapes 64x32000 64x32001    # some shapes, A/B splits

Tables:
1. ops: forward (no_grad) softmax / log_softmax over [rows, C] for C from 1k to 1M, ms and GB/s (the
   bytes an op must move: read x, write y), torch's figure beside, and forward+backward of
   cross-entropy, softmax and layer norm at the LM's sizes.
2. plans: softmax / log_softmax under the row plan of backends/rumus_wgpu/row_plan.py with its split
   target at the default, 0 (never split) and twice the default (RUMUS_WGPU_ROW_SPLIT_WORKGROUPS), in one
   run, each cell ms / GB/s (splits, unroll), the no-split / default time ratio last (> 1: splitting pays).
3. paths: the same kernel with subgroup merges (default where the adapter has them), with the
   workgroup-memory merge (RUMUS_WGPU_NO_SUBGROUPS=1) and with scalar loads (RUMUS_WGPU_NOVEC=1).
4. norms: layer_norm / rms_norm forward and forward + backward over [rows, C] (GB/s: the bytes an op must
   move), torch's beside.
5. kernels: the other bandwidth-bound kernels of the LM step: column sums (bias gradients, sum over
   dim 0 of [4096, N]), the head-split strided copy (.contiguous() of [4, 1024, 16, 64] transposed),
   and cross-entropy forward+backward with class weights and label smoothing (GB/s: the bytes moved).
6. probes (to find where time goes if a size is slow): `copy` (a vec4 copy: the bandwidth ceiling),
   `stats` (read the rows once, merge, one pair per row), `full` (the softmax kernel), and the same two
   with last session's per-element online fold (`*_online`: the select/exp chain of each element
   feeding the next). Their ms per size shows which part grows faster than the bytes.
On the lent GPU machine put the source roots on PYTHONPATH first (`source .gpu/setup.sh`).
"""

# ruff: noqa: B023  (every closure below is timed at once, inside the loop iteration that made it)
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _launch_batch import LaunchBatches, Timing  # noqa: E402
from _timing import table  # noqa: E402

FULL_SHAPES = [(64, 2048), (64, 8192), (64, 32000), (64, 32001), (128, 32000), (512, 32000), (4096, 8192),
               (4096, 32000), (65536, 1024), (98304, 512), (8, 262144), (1, 1 << 20), (16384, 40)]
SMALL_SHAPES = [(64, 512), (64, 2048), (16, 8192), (4, 32000), (4, 32001), (4096, 40), (1, 100_000)]
OLD_FOLD = """
fn online(acc: vec2<f32>, x: f32, ninf: f32) -> vec2<f32> {
    let grow = x > acc.x;
    let e = exp(-abs(x - acc.x));
    let add = select(select(e, 1.0, grow), 0.0, x == ninf);
    return vec2<f32>(select(acc.x, x, grow), acc.y * select(1.0, e, grow) + add);
}
"""
NEW_FOLD_CALL = "acc = fold4(acc, v0, ninf);"
OLD_FOLD_CALL = "acc = online(online(online(online(acc, v0.x, ninf), v0.y, ninf), v0.z, ninf), v0.w, ninf);"
COPY = """
@group(0) @binding(0) var<storage, read_write> out0: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> in0: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> n4: vec4<u32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    for (var i = gid.x + gid.y * nw.x * 256u; i < n4.x; i += nw.x * nw.y * 256u) {
        out0[i] = in0[i];
    }
}
"""


def _gbs(nbytes: int, seconds: float) -> str:
    gbs = nbytes / seconds / 1e9 if seconds > 0 else 0.0
    return f"{gbs:.2f}" if gbs < 10 else f"{gbs:.0f}"


def _seconds(t: Timing) -> float:
    """The figure a kernel is judged by: GPU time alone where it was measured (rumus), else the batch's."""
    return t.gpu_seconds if t.gpu_seconds is not None else t.seconds


def _cells(t: Timing, nbytes: int, counted: bool) -> list[str]:
    """ms, GB/s, R (and for rumus: the batch's ms, host ms, kernels per launch, new buffers) of one timing."""
    cells = [f"{_seconds(t) * 1e3:.4f}", _gbs(nbytes, _seconds(t)), str(t.launches)]
    if counted:
        cells += [f"{t.seconds * 1e3:.4f}", f"{t.host_seconds * 1e3:.4f}",
                  f"{t.kernels:g}" if t.kernels is not None else "-", str(t.new_buffers)]
    return cells


RUMUS_COLS = ("rumus GPU ms", "rumus GB/s", "R", "batch ms", "host ms", "kern", "new buf")
TORCH_COLS = ("torch ms", "torch GB/s", "R")


class Rumus:
    def __init__(self, device: str) -> None:
        import rumus as rm

        self.rm = rm
        self.device = device
        self.dev = rm.Device.parse(device)
        self.backend = rm._runtime.backend(device.split(":")[0])

    def sync(self) -> None:
        self.rm.synchronize(self.dev)

    def tensor(self, shape: tuple[int, ...], grad: bool = False) -> Any:
        rng = np.random.default_rng(0)
        return self.rm.tensor(rng.standard_normal(shape, dtype=np.float32) * 4, device=self.device, requires_grad=grad)

    def probe_programs(self, vec: bool = True) -> dict[str, Callable[[Any, Any, int, int], None]]:
        """name -> launch(x_tensor, out_tensor, rows, C) of the raw kernels (one dispatch each)."""
        from rumus_contracts import TensorArg
        from rumus_wgpu import softmax as S
        from rumus_wgpu.layout import grid, new_buffer
        from rumus_wgpu.reduce import Rows
        from rumus_wgpu.row_plan import UNROLL, group_for

        gdev = self.backend.device(self.dev)
        sg = S.use_subgroups(gdev)

        def kernel(name: str, mode: str, old: bool) -> Callable[[Any, Any, int, int], None]:
            def build() -> str:
                src = S.softmax_source("softmax", "f32", True, mode, sg, 1 if old else UNROLL)
                return src.replace(NEW_FOLD_CALL, OLD_FOLD_CALL) + OLD_FOLD if old else src
            prog = gdev.programs.get(("probe", name, sg), build)

            def launch(x: Any, out: Any, rows: int, c: int) -> None:
                xa = TensorArg(x._storage.buffer, (rows, c), (c, 1), 0, x.dtype)
                oa = TensorArg(out._storage.buffer, (rows, c), (c, 1), 0, out.dtype)
                r = Rows(xa, oa, (1,))
                r.rsizes, r.rstr, r.out_rstride = [c], [1], 1
                t = group_for(rows, c, 4, False)
                gx, gy, _ = grid((rows + 256 // t - 1) // (256 // t), gdev.max_groups)
                bufs = [oa.buffer, xa.buffer]
                if mode == "partial":
                    bufs.append(new_buffer(gdev, rows * 8, "probe partials"))
                gdev.recorder.dispatch(prog, bufs, r.pack(t, gx, c, 1 if mode == "partial" else 0), (gx, gy, 1))
            return launch

        copy_prog = gdev.programs.get(("probe", "copy"), lambda: COPY)

        def copy(x: Any, out: Any, rows: int, c: int) -> None:
            n4 = rows * c // 4
            gx, gy, _ = grid(min((n4 + 255) // 256, 8192), gdev.max_groups)
            data = np.array([n4, 0, 0, 0], dtype=np.uint32).tobytes()
            gdev.recorder.dispatch(copy_prog, [out._storage.buffer, x._storage.buffer], data, (gx, gy, 1))
        return {"copy": copy, "stats": kernel("stats", "partial", False),
                "stats_online": kernel("stats_o", "partial", True), "full": kernel("full", "single", False),
                "full_online": kernel("full_o", "single", True)}



class Torch:
    def __init__(self, device: str, reps: int) -> None:
        import torch
        import torch.nn.functional as tf

        self.torch, self.tf, self.device = torch, tf, device
        self.batches = LaunchBatches(self.sync, reps=reps)

    def sync(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def tensor(self, shape: tuple[int, ...], grad: bool = False) -> Any:
        return self.torch.randn(shape, device=self.device, requires_grad=grad)


def _rumus_batches(r: Rumus, reps: int) -> LaunchBatches:
    def counters() -> tuple[int, int]:
        return r.backend.stats(r.dev)["dispatches"], r.backend.pool_stats(r.dev)["misses"]
    first = r.backend.device(r.dev).recorder.first_batch  # submitted at a sync or after this many dispatches
    return LaunchBatches(r.sync, counters, reps=reps, first_batch=first)


def _compare(r: Rumus | None, rb: LaunchBatches | None, t: Torch | None, rstep: Callable[[], object] | None,
             tstep: Callable[[], object] | None, nbytes: int, out_bytes: int) -> list[str]:
    """rumus cells, torch cells and the speed ratio (torch time / rumus time: GB/s against torch's)."""
    cells: list[str] = []
    rt = tt = None
    if r is not None and rb is not None and rstep is not None:
        rt = rb.time(rstep, out_bytes)
        cells += _cells(rt, nbytes, True)
    if t is not None and tstep is not None:
        tt = t.batches.time(tstep, out_bytes)
        cells += _cells(tt, nbytes, False)
        if rt is not None:
            cells.append(f"{tt.seconds / _seconds(rt):.2f}" if _seconds(rt) > 0 else "-")
    return cells


def _header(first: tuple[str, ...], r: Rumus | None, t: Torch | None) -> tuple[str, ...]:
    return first + (RUMUS_COLS if r else ()) + (TORCH_COLS if t else ()) + (("speed vs torch",) if r and t else ())


def _forward_step(lib: Any, op: str, x: Any) -> Callable[[], object]:
    """`op`(x, 1) under no_grad on one framework (rumus and torch share the names)."""
    fn = getattr(lib, op)

    def step() -> object:
        with lib.no_grad():
            return fn(x, 1)
    return step


def ops_table(r: Rumus | None, rb: LaunchBatches | None, t: Torch | None, shapes: list[tuple[int, int]]) -> str:
    rows = []
    for shape in shapes:
        numel = shape[0] * shape[1]
        for op in ("softmax", "log_softmax"):
            rstep = _forward_step(r.rm, op, r.tensor(shape)) if r is not None else None
            tstep = _forward_step(t.torch, op, t.tensor(shape)) if t is not None else None
            rows.append((op, f"[{shape[0]}, {shape[1]}]", *_compare(r, rb, t, rstep, tstep, 8 * numel, 4 * numel)))
    return table(rows, _header(("op", "shape"), r, t))


def _training_step(F: Any, name: str, x: Any, g: Any, tgt: Any, shape: tuple[int, ...]) -> Callable[[], None]:
    """One forward + backward with x's gradient cleared first (so no accumulate kernel joins the batch)."""
    run = {"cross_entropy": lambda: F.cross_entropy(x, tgt).backward(),
           "softmax": lambda: F.softmax(x, dim=-1).backward(g),
           "log_softmax": lambda: F.log_softmax(x, dim=-1).backward(g),
           "layer_norm": lambda: F.layer_norm(x, (shape[-1],)).backward(g)}[name]

    def step() -> None:
        x.grad = None
        run()
    return step


def training_table(r: Rumus | None, rb: LaunchBatches | None, t: Torch | None, small: bool) -> str:
    """forward + backward at the LM's sizes; the bytes as gpu_scale.py's MIN_BYTES count them."""
    n, v = (256, 2048) if small else (4096, 32000)
    sm = (2, 4, 64, 64) if small else (4, 16, 1024, 1024)
    ln = (2, 64, 256) if small else (4, 1024, 1024)
    cases = [("cross_entropy", (n, v), 3), ("softmax", sm, 5), ("log_softmax", sm, 5), ("layer_norm", ln, 5)]
    rows = []
    for name, shape, passes in cases:
        numel = int(np.prod(shape))
        rstep = tstep = None
        if r is not None:
            tgt = r.rm.tensor(np.random.default_rng(1).integers(0, shape[-1], shape[0]), device=r.device)
            rstep = _training_step(r.rm.nn.functional, name, r.tensor(shape, True), r.tensor(shape), tgt, shape)
        if t is not None:
            tgt_t = t.torch.randint(0, shape[-1], (shape[0],), device=t.device)
            tstep = _training_step(t.tf, name, t.tensor(shape, True), t.tensor(shape), tgt_t, shape)
        rows.append((name, str(list(shape)), *_compare(r, rb, t, rstep, tstep, passes * 4 * numel, 3 * 4 * numel)))
    return table(rows, _header(("fwd+bwd", "shape"), r, t))


NORM_SHAPES = [(4096, 1024), (16384, 768), (64, 8192), (4096, 1001), (8, 65536)]
SMALL_NORM_SHAPES = [(256, 256), (64, 1024), (64, 1001), (2, 16384)]


def norms_table(r: Rumus | None, rb: LaunchBatches | None, t: Torch | None, small: bool) -> str:
    """layer_norm / rms_norm forward (no_grad; bytes: read x, write y) and forward + backward (bytes:
    read x, y and g twice, write gx) over [rows, C] with weights (and layer norm's bias)."""
    rows = []
    for shape in SMALL_NORM_SHAPES if small else NORM_SHAPES:
        numel = shape[0] * shape[1]
        for name in ("layer_norm", "rms_norm"):
            for train in (False, True):
                steps = []
                for lib, side in ((r.rm if r else None, r), (t.torch if t else None, t)):
                    if lib is None or side is None:
                        steps.append(None)
                        continue
                    F = lib.nn.functional
                    x, g = side.tensor(shape, train), side.tensor(shape)
                    w, b = side.tensor(shape[1:], train), side.tensor(shape[1:], train)

                    def step(F: Any = F, x: Any = x, g: Any = g, w: Any = w, b: Any = b, lib: Any = lib) -> object:
                        def y() -> Any:
                            return (F.layer_norm(x, shape[1:], w, b) if name == "layer_norm"
                                    else F.rms_norm(x, shape[1:], w, eps=1e-6))
                        if not train:
                            with lib.no_grad():
                                return y()
                        x.grad = w.grad = b.grad = None
                        y().backward(g)
                        return None
                    steps.append(step)
                nbytes = (5 if train else 2) * 4 * numel
                rows.append((name + (" fwd+bwd" if train else ""), f"[{shape[0]}, {shape[1]}]",
                             *_compare(r, rb, t, steps[0], steps[1], nbytes, 4 * numel)))
    return table(rows, _header(("op", "shape"), r, t))


def kernels_table(r: Rumus, rb: LaunchBatches, t: Torch | None, small: bool) -> str:
    """Column sums, the head-split strided copy and weighted, smoothed cross-entropy (GB/s: bytes moved)."""
    n = 256 if small else 4096
    head = (2, 64, 4, 64) if small else (4, 1024, 16, 64)
    vocab = 2048 if small else 32000
    cases: list[tuple[str, tuple[int, ...]]] = [("sum(0)", (n, c)) for c in ((256, 1024) if small else
                                                                            (1024, 3072, 4096))]
    cases += [("transpose(1, 2).contiguous()", head), ("cross_entropy w+ls", (n, vocab))]
    rows = []
    for name, shape in cases:
        numel = int(np.prod(shape))
        nbytes = {"sum(0)": 4 * numel, "cross_entropy w+ls": 3 * 4 * numel}.get(name, 2 * 4 * numel)
        ce = name.startswith("cross")

        def steps(lib: Any, F: Any, x: Any, tgt: Any, w: Any) -> Callable[[], object]:
            def ce_step() -> None:
                x.grad = None
                F.cross_entropy(x, tgt, weight=w, label_smoothing=0.1).backward()
            return {"sum(0)": lambda: x.sum(0), "transpose(1, 2).contiguous()":
                    lambda: x.transpose(1, 2).contiguous(), "cross_entropy w+ls": ce_step}[name]
        rng = np.random.default_rng(1)
        tgt_np, w_np = rng.integers(0, shape[-1], shape[0]), rng.uniform(0.5, 2, shape[-1]).astype(np.float32)
        rstep = steps(r.rm, r.rm.nn.functional, r.tensor(shape, ce), r.rm.tensor(tgt_np, device=r.device),
                      r.rm.tensor(w_np, device=r.device))
        tstep = None
        if t is not None:
            tstep = steps(t.torch, t.tf, t.tensor(shape, ce), t.torch.tensor(tgt_np, device=t.device),
                          t.torch.tensor(w_np, device=t.device))
        out = 4 * (numel if name != "sum(0)" else shape[-1])
        rows.append((name, str(list(shape)), *_compare(r, rb, t, rstep, tstep, nbytes, out)))
    return table(rows, _header(("kernel", "shape"), r, t))


@contextlib.contextmanager
def _env(env: Mapping[str, str | None]) -> Iterator[None]:
    """The process environment with `env` set (None: unset), restored afterwards (the backend reads its
    switches per launch)."""
    saved = {k: os.environ.get(k) for k in env}
    for k, v in env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# the row plan of backends/rumus_wgpu/row_plan.py, A/B in one run: its split target at the default, never
# splitting a row, and aiming its splits at twice the workgroups
PLANS = {"default": {"RUMUS_WGPU_ROW_SPLIT_WORKGROUPS": None}, "no split": {"RUMUS_WGPU_ROW_SPLIT_WORKGROUPS": "0"},
         "split 2048": {"RUMUS_WGPU_ROW_SPLIT_WORKGROUPS": "2048"}}


def plans_table(r: Rumus, rb: LaunchBatches, shapes: list[tuple[int, int]]) -> str:
    """forward softmax / log_softmax under each split target (GPU ms per launch and GB/s), no-split / default
    ratio last."""
    from rumus_wgpu.row_plan import plan_rows

    rows = []
    for shape in shapes:
        x = r.tensor(shape)
        vec = shape[1] % 4 == 0
        for op in ("softmax", "log_softmax"):
            cells = [op, f"[{shape[0]}, {shape[1]}]"]
            ms = []
            for env in PLANS.values():
                with _env(env):
                    t = rb.time(_forward_step(r.rm, op, x), 4 * shape[0] * shape[1])
                    p = plan_rows(shape[0], shape[1], 4 if vec else 1, False, r.backend.device(r.dev).max_groups)
                ms.append(_seconds(t))
                cells.append(f"{ms[-1] * 1e3:.4f} / {_gbs(8 * shape[0] * shape[1], ms[-1])} "
                             f"(z{p.splits} u{p.unroll})")
            cells.append(f"{ms[1] / ms[0]:.2f}" if ms[0] > 0 else "-")
            rows.append(tuple(cells))
    return table(rows, ("op", "shape", *(f"{k}: ms / GB/s (splits, unroll)" for k in PLANS), "no split / default"))


def paths_table(r: Rumus, rb: LaunchBatches, shapes: list[tuple[int, int]], small: bool) -> str:
    """softmax forward, and layer norm forward + backward (scalar loads: its general kernels), per path."""
    paths = {"default": {}, "workgroup merge": {"RUMUS_WGPU_NO_SUBGROUPS": "1"},
             "scalar loads": {"RUMUS_WGPU_NOVEC": "1"}}
    F = r.rm.nn.functional
    rows = []
    cases = [("softmax", s) for s in shapes] + [("layer_norm fwd+bwd", s) for s in
                                                ([(128, 256), (64, 1024)] if small else [(4096, 1024), (16384, 768)])]
    for name, shape in cases:
        x = r.tensor(shape, name != "softmax")
        g = r.tensor(shape)
        cells = [name, f"[{shape[0]}, {shape[1]}]"]
        for env in paths.values():
            def step() -> object:
                if name == "softmax":
                    with r.rm.no_grad():
                        return r.rm.softmax(x, 1)
                x.grad = None
                F.layer_norm(x, (shape[1],)).backward(g)
                return None
            with _env(env):
                t = rb.time(step, 4 * shape[0] * shape[1] * (1 if name == "softmax" else 3))
            nbytes = (2 if name == "softmax" else 5) * 4 * shape[0] * shape[1]
            cells.append(f"{_seconds(t) * 1e3:.4f} ms / {_gbs(nbytes, _seconds(t))} GB/s")
        rows.append(tuple(cells))
    return table(rows, ("op", "shape", *paths))


def probes_table(r: Rumus, rb: LaunchBatches, shapes: list[tuple[int, int]]) -> str:
    progs = r.probe_programs()
    rows = []
    for rows_, c in shapes:
        if c % 4:
            continue
        x, out = r.tensor((rows_, c)), r.tensor((rows_, c))
        cells = [f"[{rows_}, {c}]"]
        for launch in progs.values():
            t = rb.time(lambda: launch(x, out, rows_, c))
            cells.append(f"{_seconds(t) * 1e3:.4f}")
        rows.append(tuple(cells))
    return table(rows, ("probe ms", *progs))


def sdpa_table(r: Rumus, rb: LaunchBatches, small: bool, reps: int) -> str:
    """Why gpu_scale's sdpa_causal row read ~32 ms where benchmarks/attention.py times the same shape at
    5.4-7 ms: the same causal fwd+bwd timed as gpu_scale timed it (gradients of q, k, v accumulating over the
    repetitions, one sync per step), with the gradients cleared first (as attention.py), and per launch
    from a batch; kernels and new pool buffers per step, and the op that ran."""
    from _timing import median_synced

    F = r.rm.nn.functional
    shape = (1, 2, 64, 32) if small else (4, 16, 1024, 64)
    q, k, v = (r.tensor(shape, True) for _ in range(3))
    g = r.tensor(shape)
    ran: list[str] = []

    def accumulate() -> None:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        ran.append(out.grad_fn.name if out.grad_fn is not None else "-")
        out.backward(g)

    def cleared() -> None:
        q.grad = k.grad = v.grad = None
        accumulate()

    def counts(step: Callable[[], None]) -> tuple[float, int]:
        r.sync()
        d0, m0 = r.backend.stats(r.dev)["dispatches"], r.backend.pool_stats(r.dev)["misses"]
        step()
        r.sync()
        return r.backend.stats(r.dev)["dispatches"] - d0, r.backend.pool_stats(r.dev)["misses"] - m0
    rows = []
    for name, step in (("grads accumulate, sync per step (gpu_scale)", accumulate),
                       ("grads cleared, sync per step (attention.py)", cleared)):
        t = median_synced(step, r.sync, reps)
        kern, new = counts(step)
        rows.append((name, str(list(shape)), f"{t * 1e3:.3f}", str(kern), str(new), ran[-1]))
    t = rb.time(cleared, 4 * 4 * int(np.prod(shape)))
    rows.append(("grads cleared, GPU per launch", str(list(shape)), f"{_seconds(t) * 1e3:.3f}",
                 f"{t.kernels:g}", str(t.new_buffers), ran[-1]))
    return table(rows, ("sdpa causal fwd+bwd", "shape", "rumus ms", "kern/step", "new buf/step", "op"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", action="store_true", help="small sizes: a smoke run (lavapipe)")
    ap.add_argument("--device", default="wgpu:0")
    ap.add_argument("--torch-device", default="cuda")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--reps", type=int, default=5, help="timed batches per row (the median is shown)")
    ap.add_argument("--only", nargs="*",
                    default=["ops", "plans", "training", "norms", "kernels", "sdpa", "paths", "probes"])
    ap.add_argument("--shapes", nargs="*", default=None, metavar="ROWSxC",
                    help="only these [rows, C] shapes in the ops / plans / paths / probes tables, e.g. 64x32000")
    args = ap.parse_args()
    os.environ.setdefault("RUMUS_BACKEND", args.device.split(":")[0])
    # a batch's outputs stay alive until its commands are submitted: let the pool keep all of them
    os.environ.setdefault("RUMUS_WGPU_POOL_CACHE_MB", "32768")
    t: Torch | None = None
    if not args.no_torch:
        try:
            import torch
            torch.backends.cuda.matmul.allow_tf32 = False
            torch_dev = args.torch_device if args.torch_device != "cuda" or torch.cuda.is_available() else "cpu"
            if torch_dev != args.torch_device:
                print("# torch has no CUDA here: its figures are torch CPU", flush=True)
            t = Torch(torch_dev, args.reps)
        except ImportError:
            print("# torch is not installed: rumus figures only", flush=True)
    shapes = SMALL_SHAPES if args.small else FULL_SHAPES
    if args.shapes:
        shapes = [(int(a), int(b)) for a, b in (s.lower().split("x") for s in args.shapes)]
    r = Rumus(args.device)
    rb = _rumus_batches(r, args.reps)
    gdev = r.backend.device(r.dev)
    print(f"# {gdev.name}; features {gdev.features}", flush=True)
    print(f"# a lone sync: rumus {rb.idle * 1e3:.3f} ms" + (f", torch {t.batches.idle * 1e3:.3f} ms" if t else "")
          + "; rows are per launch from R launches between two syncs (one sync's cost taken off); rumus GPU ms"
          " records first and times the sync alone",
          flush=True)
    if "ops" in args.only:
        print("\n## forward softmax / log_softmax\n" + ops_table(r, rb, t, shapes), flush=True)
    if "plans" in args.only:
        print("\n## row plans, A/B (forward, GPU ms per launch)\n" + plans_table(r, rb, shapes), flush=True)
    if "training" in args.only:
        print("\n## forward + backward\n" + training_table(r, rb, t, args.small), flush=True)
    if "norms" in args.only:
        print("\n## layer / RMS norm\n" + norms_table(r, rb, t, args.small), flush=True)
    if "kernels" in args.only:
        print("\n## column sums, strided copy, cross-entropy\n" + kernels_table(r, rb, t, args.small), flush=True)
    if "sdpa" in args.only:
        print("\n## sdpa_causal: gpu_scale's timing against attention.py's\n"
              + sdpa_table(r, rb, args.small, args.reps), flush=True)
    if "paths" in args.only:
        print("\n## launch paths\n" + paths_table(r, rb, shapes, args.small), flush=True)
    if "probes" in args.only:
        print("\n## probes (ms)\n" + probes_table(r, rb, shapes), flush=True)


if __name__ == "__main__":
    main()
