"""SpMM (sparse @ dense) speed: rumus-graph vs scipy.sparse (CPU) and torch.sparse (CPU, and CUDA when
present), on random graphs with a fixed average degree. Prints one row per (graph, features) with the
median time and GFLOP/s (2 * nnz * F flops) of each implementation, and checks that all agree.

    python plugins/rumus_graph/benchmarks/spmm.py                    # cpu (+ torch cuda when present)
    python plugins/rumus_graph/benchmarks/spmm.py --rumus-devices cpu,wgpu --sizes 100000 --features 16,128
    RUMUS_NUM_THREADS=16 python plugins/rumus_graph/benchmarks/spmm.py --backward

--backward also times A.T @ G (the gradient of SpMM with respect to the dense input).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import warnings

import numpy as np

import rumus as rm
import rumus_graph as rg
from rumus import backend_api
from rumus_contracts import RumusError


def _median_ms(fn: Callable[[], Any], sync: Callable[[], None], repeat: int) -> float:
    fn()
    sync()  # warm-up: compiles pipelines, faults pages in
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def _graph(n: int, degree: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    nnz = n * degree
    return rng.integers(0, n, nnz), rng.integers(0, n, nnz), rng.uniform(-1, 1, nnz).astype(np.float32)


def run(sizes: list[int], features: list[int], degree: int, devices: list[str], repeat: int,
        backward: bool) -> None:
    import scipy.sparse as sp
    try:
        import torch
    except ImportError:
        torch = None
    cuda = torch is not None and torch.cuda.is_available()
    for d in list(devices):
        try:
            backend_api.backend(d)
        except RumusError as exc:  # e.g. no Vulkan driver for wgpu on this machine: time the rest
            print(f"skipping rumus-{d}: {exc}")
            devices.remove(d)
    cols = [f"rumus-{d}" for d in devices] + ["scipy"]
    cols += (["torch-cpu"] if torch else []) + (["torch-cuda"] if cuda else [])
    what = "A.T @ G" if backward else "A @ X"
    print(f"SpMM {what}, float32, average degree {degree}; median of {repeat} runs: ms (GFLOP/s)")
    print(f"{'nodes':>9} {'nnz':>10} {'F':>5}  " + "  ".join(f"{c:>20}" for c in cols))
    for n in sizes:
        row, col, val = _graph(n, degree)
        csr = sp.csr_matrix((val, (row, col)), shape=(n, n))
        csr.sum_duplicates()
        ref_mat = csr.T.tocsr() if backward else csr
        mats = {d: rg.SparseTensor.from_coo(row, col, val, shape=(n, n), device=d) for d in devices}
        tmat = None
        if torch is not None:
            warnings.filterwarnings("ignore", message="Sparse")  # torch: CSR is beta, invariant checks off
            tmat = torch.sparse_csr_tensor(torch.tensor(ref_mat.indptr, dtype=torch.int64),
                                           torch.tensor(ref_mat.indices, dtype=torch.int64),
                                           torch.tensor(ref_mat.data), size=(n, n))
        for f in features:
            x = np.random.default_rng(1).standard_normal((n, f)).astype(np.float32)
            want = ref_mat @ x
            flops = 2.0 * csr.nnz * f
            cells = []
            for d in devices:
                a, xt = mats[d], rm.tensor(x, device=d)
                be = backend_api.backend(d)
                if backward:
                    def fn(a: rg.SparseTensor = a, xt: rm.Tensor = xt) -> Any:
                        return rm.ops.graph_spmm_t(*a.index, a.values, xt)
                else:
                    def fn(a: rg.SparseTensor = a, xt: rm.Tensor = xt) -> Any:
                        return rg.spmm(a, xt)
                got = fn().numpy()
                np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
                ms = _median_ms(fn, lambda be=be, dev=xt.device: be.synchronize(dev), repeat)
                cells.append(f"{ms:9.2f} ({flops / ms / 1e6:6.1f})")
            ms = _median_ms(lambda m=ref_mat, v=x: m @ v, lambda: None, repeat)
            cells.append(f"{ms:9.2f} ({flops / ms / 1e6:6.1f})")
            if torch is not None and tmat is not None:
                tx = torch.tensor(x)
                np.testing.assert_allclose((tmat @ tx).numpy(), want, rtol=1e-3, atol=1e-3)
                ms = _median_ms(lambda m=tmat, v=tx: m @ v, lambda: None, repeat)
                cells.append(f"{ms:9.2f} ({flops / ms / 1e6:6.1f})")
                if cuda:
                    cmat, cx = tmat.to("cuda"), tx.to("cuda")
                    ms = _median_ms(lambda m=cmat, v=cx: m @ v, torch.cuda.synchronize, repeat)
                    cells.append(f"{ms:9.2f} ({flops / ms / 1e6:6.1f})")
            print(f"{n:>9} {csr.nnz:>10} {f:>5}  " + "  ".join(f"{c:>20}" for c in cells), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="10000,100000,1000000", help="node counts, comma-separated")
    p.add_argument("--features", default="16,64,256", help="dense columns F, comma-separated")
    p.add_argument("--degree", type=int, default=16, help="average stored entries per row")
    p.add_argument("--rumus-devices", default="cpu", help="rumus backends to time, e.g. cpu,wgpu")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--backward", action="store_true", help="time A.T @ G (graph_spmm_t) instead of A @ X")
    args = p.parse_args()
    run([int(s) for s in args.sizes.split(",")], [int(s) for s in args.features.split(",")], args.degree,
        [d for d in args.rumus_devices.split(",") if d], args.repeat, args.backward)


if __name__ == "__main__":
    main()
