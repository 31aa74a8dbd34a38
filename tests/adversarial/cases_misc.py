"""Hostile arguments outside the server: collectives whose ranks disagree, DataLoader workers that exit, die
or return what cannot be pickled, integer division by zero and empty reductions against torch, sizes no
machine can allocate, and quantized models moving between devices.

Everything runs on RUMUS_BACKEND's device where a device is involved (`RUMUS_BACKEND=wgpu python
tests/adversarial/report.py` for the WebGPU run); the quantized move always goes cpu <-> wgpu.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import rumus as rm
import rumus.nn.functional as F
from adversarial_cases import Case, _refuses
from rumus_contracts import OutOfMemory

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- distributed ---------------------------------------------------------------------------------

def _disagreeing() -> dict[str, Callable[[int], Any]]:
    import rumus.distributed as dist
    wide = rm.int32 if os.environ.get("RUMUS_BACKEND", "cpu").startswith("wgpu") else rm.float64  # wgpu: no f64
    big = 5_000_000  # more than one 4 MiB chunk: a size mismatch would also be a chunk-count mismatch
    return {
        "all_reduce dtype float32/int64": lambda r: dist.all_reduce(rm.ones(4, dtype=rm.int64 if r else rm.float32)),
        "all_reduce dtype float32/float64": lambda r: dist.all_reduce(rm.ones(4, dtype=wide if r else rm.float32)),
        "all_reduce dtype float16/bfloat16":
            lambda r: dist.all_reduce(rm.ones(4, dtype=rm.bfloat16 if r else rm.float16)),
        "all_reduce size 4/7": lambda r: dist.all_reduce(rm.ones(4 + 3 * r)),
        "all_reduce size 5/5M": lambda r: dist.all_reduce(rm.ones(5 if r == 0 else big)),
        "all_reduce same numel other shape": lambda r: dist.all_reduce(rm.ones(2, 3) if r == 0 else rm.ones(3, 2)),
        "all_reduce empty/one": lambda r: dist.all_reduce(rm.ones(r)),
        "all_reduce 0-d/1-d": lambda r: dist.all_reduce(rm.ones(()) if r == 0 else rm.ones(1)),
        "all_reduce op": lambda r: dist.all_reduce(rm.ones(4), op=dist.ReduceOp.SUM if r else dist.ReduceOp.MAX),
        "broadcast dtype": lambda r: dist.broadcast(rm.ones(3) if r == 0 else rm.ones(3, dtype=rm.int32)),
        "broadcast size 5/5M": lambda r: dist.broadcast(rm.ones(5 if r == 0 else big)),
        "broadcast src 0/1": lambda r: dist.broadcast(rm.ones(3), src=r),
        "all_gather dtype": lambda r: dist.all_gather(rm.ones(3) if r == 0 else rm.ones(3, dtype=wide)),
        "all_gather shape": lambda r: dist.all_gather(rm.ones(2 + r)),
        "reduce_scatter size": lambda r: dist.reduce_scatter(rm.ones(4 + 2 * r)),
        "reduce_scatter dtype": lambda r: dist.reduce_scatter(rm.ones(4, dtype=rm.int64 if r else rm.float32)),
        "all_reduce vs broadcast": lambda r: dist.all_reduce(rm.ones(4)) if r == 0 else dist.broadcast(rm.ones(4)),
        "all_gather vs all_reduce": lambda r: dist.all_gather(rm.ones(4)) if r == 0 else dist.all_reduce(rm.ones(4)),
    }


def distributed_in_process() -> Iterator[Case]:
    """Two in-process ranks: every rank must raise CommunicatorError naming both ranks' arguments."""
    import rumus.distributed as dist
    for name, call in _disagreeing().items():
        def rank(comm: Any, call: Callable[[int], Any] = call) -> str:
            try:
                call(comm.rank)
            except dist.CommunicatorError as exc:
                return str(exc)
            return "accepted"
        try:
            messages = dist.spawn(rank, 2, timeout_s=60)
        except BaseException as exc:  # noqa: BLE001
            yield Case(name, f"spawn raised {type(exc).__name__}: {str(exc)[:100]}")
            continue
        bad = [m for m in messages if "the ranks disagree" not in m or "rank 1:" not in m]
        yield Case(name, None if not bad else f"a rank said: {bad[0][:120]}")
    def p2p(comm: Any) -> str:
        if comm.rank == 0:
            dist.send(rm.ones(3), dst=1, tag=2)
            return "sent"
        try:
            dist.recv(rm.zeros(2, 2), src=0, tag=2)
        except dist.CommunicatorError as exc:
            return str(exc)
        return "accepted"
    said = dist.spawn(p2p, 2, timeout_s=60)[1]
    yield Case("recv of (2, 2) from a send of (3,)", None if "rank 0 sent float32 (3,)" in said else said[:120])
    ok = dist.spawn(lambda c: dist.all_reduce(rm.full((3,), float(c.rank + 1))).wait() or None, 2)  # type: ignore[func-returns-value]
    yield Case("agreeing all_reduce still works", None if ok == [None, None] else f"{ok}")


def distributed_mpi() -> Iterator[Case]:
    """Two real MPI ranks (`rumus launch -n 2`): every case refused on both ranks, no MPI_ERR_* leaking."""
    from rumus.distributed.launch import find_mpirun
    if find_mpirun() is None:
        yield Case("mpirun not installed: skipped", None)
        return
    script = os.path.join(HERE, "..", "distributed", "mpi_mismatch_main.py")
    done = subprocess.run([sys.executable, "-m", "rumus", "launch", "-n", "2", "--timeout", "150", script],
                          capture_output=True, text=True, timeout=180)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("rank ")]
    for r in (0, 1):
        verdicts = [ln for ln in lines if ln.startswith(f"rank {r} ") and " after: " not in ln]
        for ln in verdicts:
            yield Case(ln.rsplit(":", 1)[0], None if ln.endswith("REFUSED") else ln)
        if not verdicts:
            yield Case(f"rank {r}", f"no output (exit {done.returncode}): {done.stderr[-200:]}")
        after = f"rank {r} after: [3.0, 3.0, 3.0, 3.0]" in lines
        yield Case(f"rank {r} agreeing all_reduce afterwards", None if after else "missing or wrong")
    leaked = "MPI_ERR" in done.stdout + done.stderr
    yield Case("no MPI_ERR_* in the output", "MPI error text leaked" if leaked else None)
    yield Case("launch exit status 0", None if done.returncode == 0 else f"exit {done.returncode}")


# ---- DataLoader workers --------------------------------------------------------------------------

class _Hostile(rm.data.Dataset):
    def __init__(self, how: str, bad: int = 9) -> None:
        self.how, self.bad = how, bad

    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int) -> Any:
        if i == self.bad:
            if self.how == "exit0":
                sys.exit(0)
            if self.how == "exit3":
                sys.exit(3)
            if self.how == "interrupt":
                raise KeyboardInterrupt
            if self.how == "os_exit":
                os._exit(0)
            if self.how == "kill":
                import signal
                os.kill(os.getpid(), signal.SIGKILL)
            if self.how == "lock":
                return {"x": np.zeros(2, np.float32), "lock": threading.Lock()}
            if self.how == "lambda":
                return lambda: None
            if self.how == "generator":
                return (k for k in range(3))
        if self.how in ("lock",):
            return {"x": np.zeros(2, np.float32), "lock": 0}
        return np.full(2, i, np.float32)


def _keep(samples: list[Any]) -> list[Any]:
    return samples


def dataloader_workers() -> Iterator[Case]:
    """Each hostile sample in thread and process workers: a WorkerError naming the worker and the sample,
    raised within the loader's timeout (never a hang, never SystemExit reaching the caller)."""
    from rumus.data import DataLoader, WorkerError
    plans = [(how, mode) for how in ("exit0", "exit3", "interrupt") for mode in ("thread", "process")]
    plans += [("os_exit", "process"), ("kill", "process"), ("lock", "process"), ("lambda", "process"),
              ("generator", "process")]
    for how, mode in plans:
        name = f"{how} in a {mode} worker"
        loader = DataLoader(_Hostile(how), batch_size=4, num_workers=2, worker_mode=mode, timeout=60,
                            collate_fn=_keep if how in ("lock", "lambda", "generator") else None)
        try:
            for _ in loader:
                pass
        except WorkerError as exc:
            text = str(exc)
            names = ("sample index 9" in text or "[8, 9, 10, 11]" in text) and "worker" in text
            yield Case(name, None if names else f"unclear: {text[:150]}")
            continue
        except BaseException as exc:  # noqa: BLE001 - the finding
            yield Case(name, f"raised {type(exc).__name__}: {str(exc)[:100]}")
            continue
        yield Case(name, "the epoch completed")
    for mode in ("thread", "process"):
        for label, kw in (("sys.exit in worker_init_fn", {"worker_init_fn": _init_exits}),
                          ("sys.exit in collate_fn", {"collate_fn": _collate_exits})):
            try:
                list(DataLoader(_Hostile("none"), batch_size=4, num_workers=2, worker_mode=mode, timeout=60, **kw))
                yield Case(f"{label} ({mode})", "the epoch completed")
            except WorkerError as exc:
                yield Case(f"{label} ({mode})", None if "worker" in str(exc) and "SystemExit" in str(exc)
                           else f"unclear: {str(exc)[:120]}")
            except BaseException as exc:  # noqa: BLE001
                yield Case(f"{label} ({mode})", f"raised {type(exc).__name__}: {str(exc)[:100]}")
    yield from _exit_status_of_a_training_script()


def _init_exits(worker_id: int) -> None:
    sys.exit(0)


def _collate_exits(samples: list[Any]) -> Any:
    sys.exit(0)


def _exit_status_of_a_training_script() -> Iterator[Case]:
    script = textwrap.dedent("""
        import sys
        import numpy as np
        from rumus.data import DataLoader, Dataset
        class D(Dataset):
            def __len__(self): return 16
            def __getitem__(self, i):
                if i == 9: sys.exit(0)
                return np.zeros(2, np.float32)
        for _ in DataLoader(D(), batch_size=4, num_workers=2, worker_mode=sys.argv[1], timeout=60):
            pass
        print("EPOCH COMPLETED")
    """)
    for mode in ("thread", "process"):
        proc = subprocess.run([sys.executable, "-c", script, mode], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "RUMUS_BACKEND": "cpu"})
        ok = proc.returncode != 0 and "EPOCH COMPLETED" not in proc.stdout and "WorkerError" in proc.stderr
        yield Case(f"script with sys.exit(0) in a {mode} worker exits non-zero",
                   None if ok else f"exit {proc.returncode}: {proc.stderr[-150:]}")


# ---- integer division by zero and empty reductions, against torch ----------------------------------

def _torch_outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    try:
        out = fn()
    except RuntimeError as exc:
        return "raise", str(exc)
    return "value", out.numpy()


def division_and_empty_reductions() -> Iterator[Case]:
    import torch
    dev = os.environ.get("RUMUS_BACKEND", "cpu")
    # int16 has no CPU arithmetic kernels at all (a dtype-coverage gap, not this class's concern)
    int_dtypes = ["int64", "int32"] + ([] if dev.startswith("wgpu") else ["int8", "uint8"])
    rows: list[tuple[str, Callable[[Any, Any], Any], list[int], list[int] | int]] = []
    for label, op in (("//", lambda a, b: a // b), ("%", lambda a, b: a % b),
                      ("fmod", lambda a, b: a.fmod(b) if hasattr(a, "fmod") else None),
                      ("remainder", lambda a, b: a.remainder(b)), ("floor_divide", lambda a, b: a.floor_divide(b))):
        for a_vals, b_vals in (([1, 2], [0, 1]), ([5], 0), ([], 0), ([], [0]), ([7, 8], [2, 3]), ([3], [0, 1]),
                               ([], [1]), ([4], 2)):
            rows.append((label, op, a_vals, b_vals))
    for dt in int_dtypes:
        for label, op, a_vals, b_vals in rows:
            name = f"{dt} {a_vals} {label} {b_vals}"
            ta = torch.tensor(a_vals, dtype=getattr(torch, dt))
            tb = torch.tensor(b_vals, dtype=getattr(torch, dt)) if isinstance(b_vals, list) else b_vals
            want = _torch_outcome(lambda ta=ta, tb=tb, op=op: op(ta, tb))
            ra = rm.tensor(a_vals, dtype=getattr(rm, dt))
            rb = rm.tensor(b_vals, dtype=getattr(rm, dt)) if isinstance(b_vals, list) else b_vals
            try:
                out = op(ra, rb)
                got: tuple[str, Any] = ("value", out.numpy())
            except RuntimeError as exc:
                got = ("raise", str(exc))
            except BaseException as exc:  # noqa: BLE001
                yield Case(name, f"raised {type(exc).__name__} (torch: {want[0]})")
                continue
            if want[0] != got[0]:
                yield Case(name, f"torch {want[0]}s, rumus {got[0]}s: {str(got[1])[:80]}")
            elif want[0] == "raise":
                yield Case(name, None if "ZeroDivisionError" in got[1] else f"message {got[1][:80]!r}")
            else:
                same = got[1].shape == want[1].shape and np.array_equal(got[1], want[1])
                yield Case(name, None if same else f"got {got[1].tolist()}, torch {want[1].tolist()}")
    for shape, dims in (((0,), 0), ((0, 3), 0), ((3, 0), 1), ((2, 0, 4), (1,)), ((2, 0, 4), (0, 1)), ((0, 0), (0, 1))):
        for keepdim in (False, True):
            want = torch.logsumexp(torch.empty(shape), dims, keepdim=keepdim).numpy()
            try:
                got_t = rm.logsumexp(rm.empty(shape), dims, keepdim=keepdim).numpy()
            except BaseException as exc:  # noqa: BLE001
                yield Case(f"logsumexp{shape} dim={dims}", f"raised {type(exc).__name__}: {str(exc)[:80]}")
                continue
            ok = got_t.shape == want.shape and np.array_equal(got_t, want)
            yield Case(f"logsumexp{shape} dim={dims} keepdim={keepdim}", None if ok else f"got {got_t}, torch {want}")


# ---- allocation bounds ----------------------------------------------------------------------------

def allocation_bounds() -> Iterator[Case]:
    """Sizes from the arguments that no machine holds: OutOfMemory naming the size, before any work (numpy's
    MemoryError, a ValueError from numpy or an OOM kill are all wrong)."""
    def E() -> rm.Tensor:
        return rm.ones(1).expand(2**20, 2**20)
    cases: list[tuple[str, Callable[[], object]]] = [
        ("interpolate scale 1e6", lambda: F.interpolate(rm.ones(1, 1, 4, 4), scale_factor=1e6)),
        ("interpolate nearest 1-d scale 2^40", lambda: F.interpolate(rm.ones(1, 1, 4), scale_factor=2.0**40)),
        ("interpolate linear size 2^40", lambda: F.interpolate(rm.ones(1, 1, 4), size=2**40, mode="linear")),
        ("interpolate size (2^20, 2^20)", lambda: F.interpolate(rm.ones(1, 1, 4, 4), size=(2**20, 2**20))),
        ("repeat_interleave 2^40", lambda: rm.repeat_interleave(rm.ones(3), 2**40)),
        ("repeat_interleave tensor of 2^40", lambda: rm.repeat_interleave(rm.ones(3), rm.tensor([2**40, 1, 1]))),
        ("repeat_interleave dim=1 2^40", lambda: rm.ones(2, 3).repeat_interleave(2**40, dim=1)),
        ("multinomial 2^30 samples x 2^20 rows", lambda: rm.multinomial(rm.ones(2**20, 4), 2**30, replacement=True)),
        ("multinomial 2^40 samples", lambda: rm.multinomial(rm.ones(4), 2**40, replacement=True)),
        ("tril of an expanded 2^20 x 2^20", lambda: rm.tril(E())),
        ("triu of an expanded 2^20 x 2^20", lambda: rm.triu(E(), 1)),
        ("arange(0, 2^50)", lambda: rm.arange(0, 2**50)),
        ("arange(0, 1, 1e-15)", lambda: rm.arange(0, 1, 1e-15)),
        ("linspace 2^50", lambda: rm.linspace(0, 1, 2**50)),
        ("full 2^25 x 2^25", lambda: rm.full((2**25, 2**25), 1.0)),
        ("empty 2^25 x 2^25", lambda: rm.empty(2**25, 2**25)),
        ("eye 2^30", lambda: rm.eye(2**30)),
        ("repeat 2^20 x 2^20", lambda: rm.ones(2, 2).repeat(2**20, 2**20)),
        ("pad constant 2^40", lambda: F.pad(rm.ones(2, 2), (2**40, 0))),
        ("pad replicate 2^40", lambda: F.pad(rm.ones(1, 1, 2), (2**40, 0), mode="replicate")),
        ("pad circular 2^40", lambda: F.pad(rm.ones(1, 1, 2), (2**40, 0), mode="circular")),
        ("clone of an expanded view", lambda: E().clone()),
        ("numpy() of an expanded view", lambda: E().numpy()),
        ("tolist() of an expanded view", lambda: E().tolist()),
        ("x[idx] = v on an expanded view", lambda: E().__setitem__(rm.tensor([0]), 1.0)),
        ("tensor(np.broadcast_to(1, (2^20, 2^20)))",
         lambda: rm.tensor(np.broadcast_to(np.float32(1), (2**20, 2**20)))),
        ("one_hot 2^40 classes", lambda: F.one_hot(rm.tensor([0]), 2**40)),
        ("zeros 2^62", lambda: rm.zeros(2**62)),
        ("onnx Range(0, 2^40)", lambda: _onnx_range(2**40)),
        ("onnx Range(0, 2^62)", lambda: _onnx_range(2**62)),
        ("onnx Range(0, 2^62, 1) in float", lambda: _onnx_range(2**62, float_=True)),
    ]
    for name, fn in cases:
        case = _refuses(fn, OutOfMemory, name)
        if case.problem is None:
            try:
                fn()
            except OutOfMemory as exc:
                if not any(ch.isdigit() for ch in str(exc)) or "bytes" not in str(exc):
                    case = Case(name, f"does not name the size: {str(exc)[:100]}")
        yield case
    for name, fn in (("interpolate scale NaN", lambda: F.interpolate(rm.ones(1, 1, 4), scale_factor=math.nan)),
                     ("interpolate scale inf", lambda: F.interpolate(rm.ones(1, 1, 4), scale_factor=math.inf)),
                     ("interpolate scale -1", lambda: F.interpolate(rm.ones(1, 1, 4), scale_factor=-1.0)),
                     ("repeat_interleave -1", lambda: rm.repeat_interleave(rm.ones(3), -1)),
                     ("multinomial 0 samples", lambda: rm.multinomial(rm.ones(3), 0)),
                     ("onnx Range delta 0", lambda: _onnx_range(5, delta=0))):
        yield _refuses(fn, RuntimeError if "onnx" not in name else rm.RumusError, name)
    small = F.interpolate(rm.ones(1, 1, 4), scale_factor=2.0).shape == (1, 1, 8) and \
        rm.repeat_interleave(rm.arange(3), 2).tolist() == [0, 0, 1, 1, 2, 2] and \
        _onnx_range(5).tolist() == [1, 2, 3, 4, 5]
    yield Case("ordinary sizes still work", None if small else "an ordinary size was refused or wrong")


def _onnx_range(limit: int, float_: bool = False, delta: int = 1) -> rm.Tensor:
    import tempfile

    import onnx
    from onnx import TensorProto, helper, numpy_helper
    dt, tp = (np.float32, TensorProto.FLOAT) if float_ else (np.int64, TensorProto.INT64)
    x = helper.make_tensor_value_info("x", tp, [1])
    y = helper.make_tensor_value_info("y", tp, ["n"])
    inits = [numpy_helper.from_array(np.array(v, dt), k) for k, v in (("s", 0), ("l", limit), ("d", delta))]
    graph = helper.make_graph([helper.make_node("Range", ["s", "l", "d"], ["r"]),
                               helper.make_node("Add", ["r", "x"], ["y"])], "g", [x], [y], inits)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "range.onnx")
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
        out: rm.Tensor = rm.onnx.load(path)(rm.tensor(np.ones(1, dt)))
    return out


# ---- quantized models move -------------------------------------------------------------------------

def quantized_move() -> Iterator[Case]:
    """quantize on the host, .to("wgpu"), forward: the same words and the same output as on the host."""
    try:
        rm.zeros(1, device="wgpu").numpy()
    except rm.BackendUnavailable:
        yield Case("wgpu unavailable: skipped", None)
        return
    x = np.random.default_rng(3).standard_normal((5, 64)).astype(np.float32)
    for scheme, g in (("q8", 32), ("q8", 64), ("int4", 32), ("int4", 16)):
        rm.manual_seed(4)
        host_model = rm.nn.Sequential(rm.nn.Linear(64, 48), rm.nn.ReLU(), rm.nn.Linear(48, 6)).to("cpu")
        model = rm.quant.quantize(host_model, scheme, g)
        want = model(rm.tensor(x, device="cpu")).numpy()
        words = np.asarray(model[0].qweight._storage.backend.to_numpy(model[0].qweight._arg)).copy()
        name = f"{scheme}({g}) cpu -> wgpu"
        try:
            moved = model.to("wgpu")
            got = moved(rm.tensor(x, device="wgpu")).numpy()
        except BaseException as exc:  # noqa: BLE001
            yield Case(name, f"raised {type(exc).__name__}: {str(exc)[:100]}")
            continue
        q = moved[0].qweight
        same_words = np.array_equal(np.asarray(q._storage.backend.to_numpy(q._arg)), words)
        yield Case(name + ": words", None if same_words and q.device.backend == "wgpu" else "words changed")
        yield Case(name + ": output", None if np.allclose(got, want, rtol=1e-4, atol=1e-5)
                   else f"max error {float(np.abs(got - want).max()):.3g}")
        back = moved.to("cpu")(rm.tensor(x, device="cpu")).numpy()
        yield Case(f"{scheme}({g}) wgpu -> cpu: output", None if np.array_equal(back, want) else "differs")


CLASSES: dict[str, Callable[[], Iterator[Case]]] = {
    "33 collectives with disagreeing ranks (in-process)": distributed_in_process,
    "33 collectives with disagreeing ranks (mpirun -n 2)": distributed_mpi,
    "33 DataLoader workers: exit, death, unpicklable samples": dataloader_workers,
    "33 integer division by zero, empty logsumexp vs torch": division_and_empty_reductions,
    "33 allocation bounds from arguments (OutOfMemory)": allocation_bounds,
    "33 quantized models move cpu <-> wgpu": quantized_move,
}
