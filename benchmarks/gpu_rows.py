"""Row kernels on the GPU: softmax / log_softmax (and the row ops built on them) in ms and GB/s against
torch, every launch path, and probes that bisect one kernel's cost, in one run.

    python benchmarks/gpu_rows.py                       # H200: rumus wgpu vs torch CUDA (fp32)
    python benchmarks/gpu_rows.py --small --no-torch    # a smoke run on lavapipe

Tables:
1. ops: forward (no_grad) softmax / log_softmax over [rows, C] for C from 1k to 1M, ms and GB/s (the
   bytes an op must move: read x, write y), torch's figure beside, and forward+backward of
   cross-entropy, softmax and layer norm at the LM's sizes.
2. paths: the same kernel with subgroup merges (default where the adapter has them), with the
   workgroup-memory merge (RUMUS_WGPU_NO_SUBGROUPS=1) and with scalar loads (RUMUS_WGPU_NOVEC=1).
3. kernels: the other bandwidth-bound kernels of the LM step: column sums (bias gradients, sum over
   dim 0 of [4096, N]), the head-split strided copy (.contiguous() of [4, 1024, 16, 64] transposed),
   and cross-entropy forward+backward with class weights and label smoothing (GB/s: the bytes moved).
4. probes (to find where time goes if a size is slow): `copy` (a vec4 copy: the bandwidth ceiling),
   `stats` (read the rows once, merge, one pair per row), `full` (the softmax kernel), and the same two
   with last session's per-element online fold (`*_online`: the select/exp chain of each element
   feeding the next). Their ms per size shows which part grows faster than the bytes.
On the lent GPU machine put the source roots on PYTHONPATH first (`source .gpu/setup.sh`).
"""

# ruff: noqa: B023  (every closure below is timed at once, inside the loop iteration that made it)
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import median_synced, table  # noqa: E402

FULL_SHAPES = [(64, 2048), (64, 8192), (64, 32000), (64, 32001), (512, 32000), (4096, 8192), (4096, 32000),
               (65536, 1024), (98304, 512), (8, 262144), (1, 1 << 20), (16384, 40)]
SMALL_SHAPES = [(64, 512), (64, 2048), (16, 8192), (4, 32000), (4, 32001), (4096, 40), (1, 100_000)]
OLD_FOLD = """
fn online(acc: vec2<f32>, x: f32, ninf: f32) -> vec2<f32> {
    let grow = x > acc.x;
    let e = exp(-abs(x - acc.x));
    let add = select(select(e, 1.0, grow), 0.0, x == ninf);
    return vec2<f32>(select(acc.x, x, grow), acc.y * select(1.0, e, grow) + add);
}
"""
NEW_FOLD_CALL = "acc = fold4(acc, v, ninf);"
OLD_FOLD_CALL = "acc = online(online(online(online(acc, v.x, ninf), v.y, ninf), v.z, ninf), v.w, ninf);"
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

        gdev = self.backend.device(self.dev)
        sg = S.use_subgroups(gdev)

        def kernel(name: str, mode: str, old: bool) -> Callable[[Any, Any, int, int], None]:
            def build() -> str:
                src = S.softmax_source("softmax", "f32", True, mode, sg)
                return src.replace(NEW_FOLD_CALL, OLD_FOLD_CALL) + OLD_FOLD if old else src
            prog = gdev.programs.get(("probe", name, sg), build)

            def launch(x: Any, out: Any, rows: int, c: int) -> None:
                xa = TensorArg(x._storage.buffer, (rows, c), (c, 1), 0, x.dtype)
                oa = TensorArg(out._storage.buffer, (rows, c), (c, 1), 0, out.dtype)
                r = Rows(xa, oa, (1,))
                r.rsizes, r.rstr, r.out_rstride = [c], [1], 1
                t = S.group_for(r, 4)
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


def ops_table(r: Rumus | None, torch_dev: str | None, shapes: list[tuple[int, int]], reps: int) -> str:
    rows = []
    if torch_dev:
        import torch
    for shape in shapes:
        nbytes = 2 * 4 * shape[0] * shape[1]
        for op in ("softmax", "log_softmax"):
            cells: list[str] = [op, f"[{shape[0]}, {shape[1]}]"]
            if r is not None:
                x = r.tensor(shape)
                fn = getattr(r.rm, op)
                with r.rm.no_grad():
                    t = median_synced(lambda: fn(x, 1), r.sync, reps)
                cells += [f"{t * 1e3:.3f}", _gbs(nbytes, t)]
                del x
            else:
                cells += ["-", "-"]
            if torch_dev:
                xt = torch.randn(shape, device=torch_dev)
                tfn = getattr(torch, op)
                sync = torch.cuda.synchronize if torch_dev == "cuda" else (lambda: None)
                with torch.no_grad():
                    tt = median_synced(lambda: tfn(xt, 1), sync, reps)
                cells += [f"{tt * 1e3:.3f}", _gbs(nbytes, tt)]
                if r is not None:
                    cells.append(f"{tt / t:.2f}")
                del xt
            rows.append(tuple(cells))
    header = ("op", "shape", "rumus ms", "rumus GB/s")
    if torch_dev:
        header += ("torch ms", "torch GB/s", "speed vs torch")
    return table(rows, header)


def training_table(r: Rumus | None, torch_dev: str | None, small: bool, reps: int) -> str:
    """forward + backward at the LM's sizes; the bytes as gpu_scale.py's MIN_BYTES count them."""
    n, v = (256, 2048) if small else (4096, 32000)
    sm = (2, 4, 64, 64) if small else (4, 16, 1024, 1024)
    ln = (2, 64, 256) if small else (4, 1024, 1024)
    cases = [("cross_entropy", (n, v), 3), ("softmax", sm, 5), ("log_softmax", sm, 5), ("layer_norm", ln, 5)]
    rows = []
    for name, shape, passes in cases:
        nbytes = passes * 4 * int(np.prod(shape))
        cells = [name, str(list(shape))]
        if r is not None:
            F = r.rm.nn.functional
            x, g = r.tensor(shape, True), r.tensor(shape)
            tgt = r.rm.tensor(np.random.default_rng(1).integers(0, shape[-1], shape[0]), device=r.device)
            step = {"cross_entropy": lambda: F.cross_entropy(x, tgt).backward(),
                    "softmax": lambda: F.softmax(x, dim=-1).backward(g),
                    "log_softmax": lambda: F.log_softmax(x, dim=-1).backward(g),
                    "layer_norm": lambda: F.layer_norm(x, (shape[-1],)).backward(g)}[name]
            t = median_synced(step, r.sync, reps)
            cells += [f"{t * 1e3:.3f}", _gbs(nbytes, t)]
        if torch_dev:
            import torch
            import torch.nn.functional as tf
            xt = torch.randn(shape, device=torch_dev, requires_grad=True)
            gt = torch.randn(shape, device=torch_dev)
            tt_ = torch.randint(0, shape[-1], (shape[0],), device=torch_dev)
            tstep = {"cross_entropy": lambda: tf.cross_entropy(xt, tt_).backward(),
                     "softmax": lambda: tf.softmax(xt, dim=-1).backward(gt),
                     "log_softmax": lambda: tf.log_softmax(xt, dim=-1).backward(gt),
                     "layer_norm": lambda: tf.layer_norm(xt, (shape[-1],)).backward(gt)}[name]
            sync = torch.cuda.synchronize if torch_dev == "cuda" else (lambda: None)
            tt = median_synced(tstep, sync, reps)
            cells += [f"{tt * 1e3:.3f}", _gbs(nbytes, tt)]
            if r is not None:
                cells.append(f"{tt / t:.2f}")
        rows.append(tuple(cells))
    header = ("fwd+bwd", "shape") + (("rumus ms", "rumus GB/s") if r else ())
    if torch_dev:
        header += ("torch ms", "torch GB/s") + (("speed vs torch",) if r else ())
    return table(rows, header)


def kernels_table(r: Rumus, torch_dev: str | None, small: bool, reps: int) -> str:
    """(name, shape, rumus fn, torch fn, bytes) rows: each fn is timed with a sync after it."""
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
        cells = [name, str(list(shape))]
        x = r.tensor(shape, name.startswith("cross"))
        F = r.rm.nn.functional
        tgt = r.rm.tensor(np.random.default_rng(1).integers(0, shape[-1], shape[0]), device=r.device)
        w = r.rm.tensor(np.random.default_rng(2).uniform(0.5, 2, shape[-1]).astype(np.float32), device=r.device)
        fn = {"sum(0)": lambda: x.sum(0), "transpose(1, 2).contiguous()": lambda: x.transpose(1, 2).contiguous(),
              "cross_entropy w+ls": lambda: F.cross_entropy(x, tgt, weight=w, label_smoothing=0.1).backward()}[name]
        t = median_synced(fn, r.sync, reps)
        cells += [f"{t * 1e3:.3f}", _gbs(nbytes, t)]
        if torch_dev:
            import torch
            import torch.nn.functional as tf
            xt = torch.randn(shape, device=torch_dev, requires_grad=name.startswith("cross"))
            tt_ = torch.randint(0, shape[-1], (shape[0],), device=torch_dev)
            wt = torch.rand(shape[-1], device=torch_dev) + 0.5
            tfn = {"sum(0)": lambda: xt.sum(0), "transpose(1, 2).contiguous()": lambda: xt.transpose(1, 2).contiguous(),
                   "cross_entropy w+ls": lambda: tf.cross_entropy(xt, tt_, weight=wt, label_smoothing=0.1).backward()
                   }[name]
            sync = torch.cuda.synchronize if torch_dev == "cuda" else (lambda: None)
            tt = median_synced(tfn, sync, reps)
            cells += [f"{tt * 1e3:.3f}", _gbs(nbytes, tt), f"{tt / t:.2f}"]
        rows.append(tuple(cells))
    header = ("kernel", "shape", "rumus ms", "rumus GB/s")
    if torch_dev:
        header += ("torch ms", "torch GB/s", "speed vs torch")
    return table(rows, header)


def paths_table(r: Rumus, shapes: list[tuple[int, int]], reps: int) -> str:
    paths = {"default": {}, "workgroup merge": {"RUMUS_WGPU_NO_SUBGROUPS": "1"},
             "scalar loads": {"RUMUS_WGPU_NOVEC": "1"}}
    rows = []
    for shape in shapes:
        x = r.tensor(shape)
        cells = [f"[{shape[0]}, {shape[1]}]"]
        for env in paths.values():
            saved = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                with r.rm.no_grad():
                    t = median_synced(lambda: r.rm.softmax(x, 1), r.sync, reps)
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            cells.append(f"{t * 1e3:.3f} ms / {_gbs(8 * shape[0] * shape[1], t)} GB/s")
        rows.append(tuple(cells))
    return table(rows, ("softmax", *paths))


def probes_table(r: Rumus, shapes: list[tuple[int, int]], reps: int) -> str:
    progs = r.probe_programs()
    rows = []
    for rows_, c in shapes:
        if c % 4:
            continue
        x, out = r.tensor((rows_, c)), r.tensor((rows_, c))
        cells = [f"[{rows_}, {c}]"]
        for launch in progs.values():
            t = median_synced(lambda: launch(x, out, rows_, c), r.sync, reps)
            cells.append(f"{t * 1e3:.3f}")
        rows.append(tuple(cells))
    return table(rows, ("probe ms", *progs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", action="store_true", help="small sizes: a smoke run (lavapipe)")
    ap.add_argument("--device", default="wgpu:0")
    ap.add_argument("--torch-device", default="cuda")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--only", nargs="*", default=["ops", "training", "kernels", "paths", "probes"])
    args = ap.parse_args()
    os.environ.setdefault("RUMUS_BACKEND", args.device.split(":")[0])
    torch_dev = None
    if not args.no_torch:
        try:
            import torch
            torch.backends.cuda.matmul.allow_tf32 = False
            torch_dev = args.torch_device if args.torch_device != "cuda" or torch.cuda.is_available() else "cpu"
            if torch_dev != args.torch_device:
                print("# torch has no CUDA here: its figures are torch CPU", flush=True)
        except ImportError:
            print("# torch is not installed: rumus figures only", flush=True)
    shapes = SMALL_SHAPES if args.small else FULL_SHAPES
    r = Rumus(args.device)
    print(f"# {r.backend.device(r.dev).name}; features {r.backend.device(r.dev).features}", flush=True)
    if "ops" in args.only:
        print("\n## forward softmax / log_softmax\n" + ops_table(r, torch_dev, shapes, args.reps), flush=True)
    if "training" in args.only:
        print("\n## forward + backward\n" + training_table(r, torch_dev, args.small, args.reps), flush=True)
    if "kernels" in args.only:
        print("\n## column sums, strided copy, cross-entropy\n" + kernels_table(r, torch_dev, args.small, args.reps),
              flush=True)
    if "paths" in args.only:
        print("\n## launch paths\n" + paths_table(r, shapes, args.reps), flush=True)
    if "probes" in args.only:
        print("\n## probes (ms)\n" + probes_table(r, shapes, args.reps), flush=True)


if __name__ == "__main__":
    main()
