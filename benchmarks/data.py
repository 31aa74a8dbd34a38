"""Data engine timings, side by side in one run: .rrec reads against a numpy memmap of the same bytes,
DataLoader overhead against PyTorch's DataLoader over the same arrays, threads against processes.

    PYTHONPATH=.:contracts:backends python benchmarks/data.py [--quick]

Ratios are speed ratios: > 1 means RUMUS is faster. Every timing is the best of several repeats.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np

import rumus as rm
from rumus.data import DataLoader, Dataset, RecordDataset, RecordFile, RecordWriter, TensorDataset, numpy_collate


def best(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(r[k])) for r in [header, *rows]) for k in range(len(header))]
    print(f"\n{title}")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))


# ---- 1. random access: RecordFile / RecordDataset vs numpy memmap over the same file ------------------
def random_access(workdir: str, shape: tuple[int, ...], n: int, f16: bool, repeats: int) -> list[list[str]]:
    path = os.path.join(workdir, f"ra-{'x'.join(map(str, shape))}-{int(f16)}.rrec")
    xs = np.random.default_rng(0).standard_normal((n, *shape)).astype(np.float16 if f16 else np.float32)
    with RecordWriter(path) as w:
        for i in range(n):
            w.append(xs[i], np.array([i % 10], np.float32))
    with RecordFile(path) as f:
        lay = f.layout(0)
    # the same bytes as one structured numpy memmap: header words, data, padding, target block
    xdt = "<f2" if f16 else "<f4"
    pad = lay.input.end - lay.input.data - lay.input.nbytes
    fields = [("hx", "<u4", (2 + len(shape),)), ("x", xdt, shape), ("px", "u1", (pad,)), ("hy", "<u4", (3,)),
              ("y", "<f4", (1,))]
    rec = np.dtype(fields)
    assert rec.itemsize == lay.length
    mm = np.memmap(path, dtype=rec, mode="r", offset=64, shape=(n,))
    mx, my = mm["x"], mm["y"]                    # np.memmap views (what people write)
    vx, vy = np.asarray(mx), np.asarray(my)      # plain ndarray views of the same mapping (the floor)
    order = np.random.default_rng(1).permutation(n).tolist()
    out = np.empty((64, *shape), np.float32)
    widen = f16

    def per_record(get: Callable[[int], tuple[np.ndarray, np.ndarray]]) -> Callable[[], None]:
        def run() -> None:
            for j, i in enumerate(order):
                x, _ = get(i)
                out[j & 63] = x  # consume: copy into a batch buffer (converts float16)
        return run

    def memmap_get(i: int) -> tuple[np.ndarray, np.ndarray]:
        return mx[i], my[i]

    def view_get(i: int) -> tuple[np.ndarray, np.ndarray]:
        return vx[i], vy[i]

    t_mm = best(per_record(memmap_get), repeats)
    t_view = best(per_record(view_get), repeats)
    first = []
    for _ in range(repeats):  # a fresh file each time: every record is validated on this pass
        with RecordFile(path) as f:
            first.append(best(per_record(f.arrays), 1))
    t_first = min(first)
    ds = RecordDataset(path)
    t_steady = best(per_record(ds.get_numpy), repeats)

    def tensors() -> None:
        for i in order:
            ds[i]
    try:
        t_tensor = best(tensors, max(1, repeats // 2))
    except rm.BackendUnavailable:  # the CPU kernels are not built here: skip the tensor row
        t_tensor = float("nan")
    batches = [order[k:k + 64] for k in range(0, n, 64)]

    def gather_memmap() -> None:
        for b in batches:
            x = vx[b]
            if widen:
                x.astype(np.float32)
            vy[b]

    def gather_rrec() -> None:
        for b in batches:
            ds.get_numpy_batch(b)
    t_gmm = best(gather_memmap, repeats)
    t_grr = best(gather_rrec, repeats)
    ds.close()
    mb = n * lay.length / 1e6
    name = f"{list(shape)} {'f16' if f16 else 'f32'}"

    def row(what: str, t: float, ref: float | None = None) -> list[str]:
        ratio = f"{t_mm / t:.2f}" if ref is None else f"{ref / t:.2f}"
        return [name, what, f"{t / n * 1e6:.2f}", f"{n / t / 1e3:.0f}", f"{mb / t:.0f}", ratio,
                f"{t_view / t:.2f}" if ref is None else "-"]

    return [row("np.memmap  mm['x'][i]", t_mm), row("ndarray view of the map [i]", t_view),
            row("RecordFile.arrays(i), 1st pass", t_first), row("RecordDataset.get_numpy(i)", t_steady),
            row("RecordDataset[i] -> Tensors", t_tensor),
            row("memmap gather view[idx64]", t_gmm, t_gmm), row("RecordDataset.get_numpy_batch(64)", t_grr, t_gmm)]


# ---- 2. DataLoader overhead per batch vs torch ------------------------------------------------------------
def epoch_time(loader: object, repeats: int) -> float:
    def run() -> None:
        for _ in loader:  # type: ignore[attr-defined]
            pass
    return statistics.median([best(run, 1) for _ in range(repeats)])


def epoch_split(loader: object, repeats: int) -> tuple[float, float]:
    """Median (time to the first batch, time per later batch) over `repeats` epochs."""
    firsts, steadies = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        it = iter(loader)  # type: ignore[call-overload]
        next(it)
        t1 = time.perf_counter()
        k = sum(1 for _ in it)
        t2 = time.perf_counter()
        firsts.append(t1 - t0)
        steadies.append((t2 - t1) / max(k, 1))
    return statistics.median(firsts), statistics.median(steadies)


def loader_overhead(workdir: str, n: int, dim: int, bs: int, repeats: int) -> list[list[str]]:
    import torch
    import torch.utils.data as tud
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    y = rng.integers(0, 10, n)
    path = os.path.join(workdir, "loader.rrec")
    with RecordWriter(path) as w:
        for i in range(n):
            w.append(x[i], np.array(float(y[i]), np.float32))
    rds = RecordDataset(path)
    tds = TensorDataset(rm.tensor(x), rm.tensor(y))
    torch_ds = tud.TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    rows = []
    for workers in (0, 2):
        f_torch, s_torch = epoch_split(tud.DataLoader(torch_ds, batch_size=bs, shuffle=True, num_workers=workers),
                                       repeats)
        rows.append(["torch TensorDataset", f"{workers} (process)" if workers else "0", f"{f_torch * 1e3:.1f}",
                     f"{s_torch * 1e6:.0f}", "1.00"])
        modes = ["thread", "process"] if workers else ["thread"]
        for ds_name, ds in (("rumus TensorDataset", tds), ("rumus RecordDataset", rds)):
            for mode in modes:
                loader = DataLoader(ds, batch_size=bs, shuffle=True, seed=0, num_workers=workers, worker_mode=mode)
                f, st = epoch_split(loader, repeats)
                label = f"{workers} ({mode})" if workers else "0"
                rows.append([ds_name, label, f"{f * 1e3:.1f}", f"{st * 1e6:.0f}", f"{s_torch / st:.2f}"])
    rds.close()
    return rows


# ---- 3. threads vs processes for a Python-heavy dataset ----------------------------------------------------
class PythonHeavy(Dataset):
    """~100 us of pure-Python work per sample (a stand-in for decoding / augmentation in Python)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> np.ndarray:
        acc = 0
        for k in range(1500):
            acc += (i * k) % 7
        return np.full(16, acc, np.float32)


def worker_modes(n: int, repeats: int) -> list[list[str]]:
    ds = PythonHeavy(n)
    nb = -(-n // 32)
    # numpy batches: this measures the workers' parallelism, not tensor creation
    t0 = epoch_time(DataLoader(ds, batch_size=32, collate_fn=numpy_collate), repeats)
    rows = [["python-heavy", "0", f"{t0 / nb * 1e6:.0f}", "1.00"]]
    for mode in ("thread", "process"):
        loader = DataLoader(ds, batch_size=32, num_workers=2, worker_mode=mode, collate_fn=numpy_collate)
        t = epoch_time(loader, repeats)
        rows.append(["python-heavy", f"2 ({mode})", f"{t / nb * 1e6:.0f}", f"{t0 / t:.2f}"])
    return rows


# ---- 4. what a zero-copy tensor path would save ----------------------------------------------------------
def zero_copy(n: int, shape: tuple[int, ...], repeats: int) -> list[list[str]]:
    from rumus._runtime import backend
    from rumus._storage import Storage
    from rumus.tensor import make_tensor
    dev = rm.device("cpu")
    be = backend("cpu")
    batch = np.random.default_rng(0).standard_normal((64, *shape)).astype(np.float32)

    def copy_in() -> None:
        for _ in range(n):
            rm.from_numpy(batch)

    def adopt() -> None:  # prototype of the hook: the CPU backend's buffer *is* a numpy array
        for _ in range(n):
            make_tensor(Storage(batch.reshape(-1), dev, rm.float32, be, batch.size), batch.shape)
    t_copy, t_adopt = best(copy_in, repeats), best(adopt, repeats)
    what = f"batch of 64 x {list(shape)} f32"
    return [[what, "rumus.from_numpy (copy)", f"{t_copy / n * 1e6:.1f}", "1.00"],
            [what, "adopt host array (no copy)", f"{t_adopt / n * 1e6:.1f}", f"{t_copy / t_adopt:.2f}"]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats (CI smoke run)")
    ap.add_argument("--sections", default="1,2,3,4", help="which tables to run, e.g. 1,3")
    args = ap.parse_args()
    sections = {int(x) for x in args.sections.split(",")}
    reps = 2 if args.quick else 5
    scale = 4 if args.quick else 1
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as workdir:
        rows = []
        for shape, n, f16 in (((784,), 20000, False), ((3, 32, 32), 8000, False), ((3, 32, 32), 8000, True)):
            rows += random_access(workdir, shape, n // scale, f16, reps) if 1 in sections else []
        if rows:
            table("1. Random-access reads (shuffled order; each record copied into a batch buffer)",
                  ["record", "reader", "us/rec", "krec/s", "MB/s", "vs np.memmap", "vs ndarray view"], rows)
        if 2 in sections:
            table("2. DataLoader overhead (16384 x 784 f32 + int64 label, batch 64, shuffle): time to the first batch "
                  "of an epoch (incl. worker start) and per later batch",
                  ["dataset", "workers", "1st batch ms", "us/batch", "speed vs torch"],
                  loader_overhead(workdir, 16384 // scale, 784, 64, reps))
    if 3 in sections:
        table("3. Worker mode for a Python-heavy dataset (batch 32, numpy batches, whole epochs)",
              ["dataset", "workers", "us/batch", "speedup"], worker_modes(2048 // scale, max(1, reps // 2)))
    if 4 in sections:
        table("4. Tensor creation from a host batch", ["batch", "path", "us/batch", "speedup"],
              zero_copy(2000 // scale, (784,), reps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
