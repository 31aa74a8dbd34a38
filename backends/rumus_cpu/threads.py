"""One thread budget for the CPU backend: the C kernels and numpy's OpenBLAS share one pool of threads.

- Kernel threads: RUMUS_NUM_THREADS, else every physical core this process may run on. Each kernel's
  thread count comes from its work size, with one grain per kernel class (elementwise elements, row-kernel
  elements, BLAS multiply-adds, the kernels' own multiply-adds; csrc/runtime.c, rumus_threads_for_grain):
  below its grain a kernel stays on the calling thread and wakes no other; above it, it splits one way per
  half grain up to the budget.
- The pool (csrc/pool.c, not OpenMP): a loop is cut into fixed chunks by its size and thread count alone
  (the same bits at every thread count), wakes at most nt - 1 workers, and its threads, the caller
  included, take chunks from one shared counter. Idle workers poll for SPIN_US microseconds (the gap
  between two kernels of one step) and then sleep on a futex; they never exit.
- BLAS: OpenBLAS hands its jobs to csrc/runtime.c's callback, which runs them on the pool, so OpenBLAS's
  own threads never get work. Those threads spin ~2^28 cycles after every call (measured: 126 ms of CPU
  after one GEMM), against the kernels' threads. The backend's own GEMMs do not use OpenBLAS's threading
  (csrc/gemm_blocked.c: independent blocks, one single-threaded call each, the same blocks at every thread
  count); the callback serves numpy code elsewhere in the process.
- PyTorch in the same process keeps its own OpenMP threads; RUMUS's workers sleep after SPIN_US, so they
  do not hold cores while torch runs. libgomp itself is loaded with a short spin when the cpu plugin
  registers its backend (quiet_openmp_for_later_libraries).
- Freed memory (glibc): buffers up to 32 MiB come from the heap and up to RUMUS_MALLOC_KEEP_MB (default
  256; 0 leaves glibc's defaults) of freed memory stays there, so a step's fresh outputs do not page-fault
  on every page again each step (csrc/runtime.c, rumus_malloc_keep). The user's own MALLOC_MMAP_THRESHOLD_
  or MALLOC_TRIM_THRESHOLD_ wins.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

from rumus_contracts import config

SPIN_US = 50  # csrc/pool.c's g_spin_ns, in microseconds
GOMP_SPIN_COUNT = "10000"  # libgomp's polls before sleeping, for an OpenMP library loaded after rumus (torch)
# the kernel classes of csrc/runtime.c's rumus_grain, in its order
GRAIN_CLASSES = ("elementwise elements", "row elements", "BLAS multiply-adds", "loop multiply-adds")

_state: dict[str, Any] = {"blas": None, "malloc": "glibc's defaults", "openmp": "not loaded"}
MALLOC_MMAP_MAX = 32 << 20  # the largest M_MMAP_THRESHOLD glibc accepts on 64-bit hosts
MALLOC_KEEP_MB = 256


def physical_cores() -> int:
    """Distinct physical cores among the CPUs this process may run on (hyperthreads count once)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return max(os.cpu_count() or 1, 1)
    cores = set()
    for cpu in cpus:
        try:
            with open(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list") as f:
                cores.add(f.read().strip())
        except OSError:
            cores.add(str(cpu))
    return max(len(cores), 1)


def default_num_threads() -> int:
    """RUMUS_NUM_THREADS, else every physical core (a value that is not a positive integer raises ConfigError)."""
    n = config.get("RUMUS_NUM_THREADS")
    return physical_cores() if n is None else int(n)


def _openblas_libraries() -> list[str]:
    """Paths of the OpenBLAS libraries loaded in this process, numpy's first."""
    paths: list[str] = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if "openblas" in os.path.basename(path).lower() and ".so" in path and path not in paths:
                    paths.append(path)
    except OSError:
        pass
    if not paths:
        try:
            from threadpoolctl import threadpool_info
            paths = [i["filepath"] for i in threadpool_info() if i.get("internal_api") == "openblas"]
        except Exception:  # threadpoolctl missing or failing: BLAS stays unmanaged
            pass
    return sorted(paths, key=lambda p: "numpy" not in p)


def _symbol(dll: ctypes.CDLL, name: str) -> tuple[int, bool]:
    """Address of OpenBLAS function `name` under the prefixes/suffixes its builds use (scipy-openblas64),
    and whether it is the 64-bit-integer build."""
    for prefix in ("", "scipy_"):
        for suffix in ("", "64_", "_64"):
            try:
                fn = getattr(dll, f"{prefix}{name}{suffix}")
            except AttributeError:
                continue
            return int(ctypes.cast(fn, ctypes.c_void_p).value or 0), "64" in suffix
    return 0, False


def attach_blas(lib: Any) -> bool:
    """Route numpy's OpenBLAS jobs onto the kernels' threads (OpenBLAS >= 0.3.27 has the callback)."""
    import numpy  # noqa: F401  (numpy loads its BLAS)
    for path in _openblas_libraries():
        try:
            dll = ctypes.CDLL(path)
        except OSError:
            continue
        set_cb, _ = _symbol(dll, "openblas_set_threads_callback_function")
        set_threads, _ = _symbol(dll, "openblas_set_num_threads")
        if set_cb and set_threads and lib.rumus_blas_attach(set_cb, set_threads):
            _state["blas"] = path
            sgemm, int64 = _symbol(dll, "cblas_sgemm")
            dgemm, int64_d = _symbol(dll, "cblas_dgemm")
            if sgemm and dgemm and int64 == int64_d and np_blas_is(path):
                lib.rumus_gemm_attach(sgemm, dgemm, int(int64))
            return True
    return False


GEMM_KERNELS = ("auto", "blas", "own")  # RUMUS_GEMM_KERNEL, in csrc/sgemm_kernel.c's mode order


def choose_gemm_kernel(lib: Any) -> None:
    """RUMUS_GEMM_KERNEL (read once, at load): `auto` (default) gives float32 GEMM calls to RUMUS's own
    micro-kernel where it beats OpenBLAS (csrc/sgemm_kernel.c's rule, by shape), `blas` keeps OpenBLAS,
    `own` takes the own kernel for every float32 call (where the CPU has AVX2 or AVX-512); for A/B runs."""
    lib.rumus_sgemm_set_mode(GEMM_KERNELS.index(config.text("RUMUS_GEMM_KERNEL")))


def gemm_kernel_description() -> str:
    """Which kernel float32 GEMM calls get, for `rumus info`."""
    from ._lib import ffi, lib
    isa = ffi.string(lib.rumus_sgemm_isa_name()).decode()
    mode = GEMM_KERNELS[int(lib.rumus_sgemm_mode())]
    if not lib.rumus_gemm_attached():
        return "float32 GEMM: numpy (its BLAS is not attached)"
    if int(lib.rumus_sgemm_isa()) == 0 or mode == "blas":
        why = " (RUMUS_GEMM_KERNEL=blas)" if mode == "blas" else " (no AVX2/AVX-512 on this CPU)"
        return f"float32 GEMM: OpenBLAS{why}"
    if mode == "own":
        return f"float32 GEMM: own {isa} micro-kernel for every call (RUMUS_GEMM_KERNEL=own)"
    min_n, max_macs = int(lib.rumus_sgemm_auto_min_n()), int(lib.rumus_sgemm_auto_max_macs())
    upto = "" if max_macs < 0 else f" and up to {max_macs} multiply-adds"
    return (f"float32 GEMM: own {isa} micro-kernel for calls of >= {min_n} columns{upto}, OpenBLAS otherwise "
            "(RUMUS_GEMM_KERNEL=auto)")


def np_blas_is(path: str) -> bool:
    """Whether `path` is the BLAS numpy itself uses (numpy's wheels bundle theirs in numpy.libs)."""
    import numpy as np
    return os.path.dirname(path).startswith(os.path.dirname(os.path.dirname(np.__file__))) and "numpy" in path


def keep_freed_memory(lib: Any) -> None:
    """glibc keeps freed buffers for the next step instead of unmapping them (see the module doc)."""
    if any(k in os.environ for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")):
        _state["malloc"] = "as set by the user (MALLOC_*_THRESHOLD_)"
        return
    keep_mb = config.integer("RUMUS_MALLOC_KEEP_MB")
    if keep_mb > 0 and lib.rumus_malloc_keep(MALLOC_MMAP_MAX, min(keep_mb, 2047) << 20):
        _state["malloc"] = f"heap up to {MALLOC_MMAP_MAX >> 20} MiB buffers, {min(keep_mb, 2047)} MiB kept free"


def _libgomp_loaded() -> bool:
    try:
        with open("/proc/self/maps") as f:
            return any("libgomp" in line for line in f)
    except OSError:
        return False


def _libgomp_path() -> str | None:
    """The libgomp torch would load (its wheel's own copy), else the system's; None if there is neither."""
    import importlib.util
    try:
        spec = importlib.util.find_spec("torch")  # finds the package without importing it
    except (ImportError, ValueError):
        spec = None
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(root, "lib", "libgomp.so.1")
        if os.path.exists(path):
            return path
    import ctypes.util
    return ctypes.util.find_library("gomp")


def quiet_openmp_for_later_libraries() -> None:
    """Load libgomp now with a short spin, so an OpenMP library imported after rumus (torch) uses it.

    libgomp's idle threads spin GOMP_SPINCOUNT polls before sleeping, and it reads that once, when it is
    loaded; its default (300000 polls, ~16 ms of a core per thread) after every torch region keeps 15 cores
    busy while RUMUS's next kernels want them: measured on the 16-core host, RUMUS's CNN step took 2.2x its
    time when torch's step ran just before it. 10000 polls (well under a millisecond) keep torch's threads
    awake between the regions of one torch step; on the 16-core host (benchmarks/torch_beside_rumus.py and
    cpu_scaling.py's "torch between" column, 3 rounds each) it gave torch's steps 0.93 / 1.19 / 1.03x their
    time alone (MLP / CNN / transformer) and RUMUS's steps right after torch's +15% / +0% / -4%; 1000 polls
    cost torch 1.11-1.33x, 100000 cost RUMUS's CNN +54%. A library loaded later under the same soname (torch's
    libgomp.so.1) reuses this copy. The user's OMP_WAIT_POLICY / GOMP_SPINCOUNT win, and the environment
    is restored, so child processes see the user's. To decline, set OMP_WAIT_POLICY or GOMP_SPINCOUNT
    yourself. Where libgomp is already loaded (torch imported first) nothing can change: `rumus info` says so."""
    if _state.get("openmp_checked"):  # once: the plugins' load, or else the backend's creation
        return
    _state["openmp_checked"] = True
    keys = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
    if any(k in os.environ for k in keys):
        _state["openmp"] = "as set by the user: " + ", ".join(f"{k}={os.environ[k]}" for k in keys if k in os.environ)
        return
    if _libgomp_loaded():
        _state["openmp"] = ("libgomp loaded before rumus (torch imported first?): its threads spin ~300000 polls "
                            "after each region; set OMP_WAIT_POLICY=passive or import rumus first")
        return
    path = _libgomp_path()
    if not path:
        return
    spin = GOMP_SPIN_COUNT
    os.environ["GOMP_SPINCOUNT"] = spin
    try:
        ctypes.CDLL(path)
        _state["openmp"] = f"libgomp (for torch) loaded with GOMP_SPINCOUNT={spin}"
    except OSError:
        pass
    finally:
        del os.environ["GOMP_SPINCOUNT"]


def configure(lib: Any) -> None:
    """At load, RUMUS's own pool only (nothing process-wide): the thread budget. The process-wide settings
    come later: libgomp when the plugins load (plugin.py), the rest when the backend starts
    (configure_process)."""
    lib.rumus_set_num_threads(max(default_num_threads(), 1))


def configure_process(lib: Any) -> None:
    """Once, when the "cpu" backend is first created (never at import): what changes the whole process —
    glibc's malloc thresholds (freed memory kept), numpy's OpenBLAS jobs on the kernels' threads (its
    threads callback) and thread count, one thread in fork()ed children. (libgomp is loaded with a short
    spin earlier, when the plugins load: quiet_openmp_for_later_libraries.) `rumus info` lists them
    (process_changes)."""
    if _state.get("process_configured"):
        return
    keep_freed_memory(lib)
    attach_blas(lib)
    choose_gemm_kernel(lib)
    quiet_openmp_for_later_libraries()  # done already when the plugins loaded (rumus_cpu.plugin)
    set_num_threads(int(lib.rumus_get_num_threads()))  # the budget now reaches numpy's BLAS too
    if hasattr(os, "register_at_fork"):  # the pool's workers do not survive fork: children run on one thread
        os.register_at_fork(after_in_child=lib.rumus_after_fork_child)
    _state["process_configured"] = True  # last: after a bad knob (ConfigError) above, the next start tries again


def process_changes() -> list[str]:
    """What the backend changed process-wide so far: libgomp's spin when the plugins loaded, the rest when
    the backend started ([] right after import)."""
    out = ([f"libgomp: {_state['openmp']} (when the cpu plugin registered; OMP_WAIT_POLICY or GOMP_SPINCOUNT set "
            "by you declines it)"] if _state.get("openmp_checked") else [])
    if not _state.get("process_configured"):
        return out
    blas = (f"jobs on the kernel threads (threads callback of {_state['blas']})" if _state["blas"]
            else "no threads callback; its thread count limited to the budget")
    return [*out, f"malloc: {_state['malloc']}", f"OpenBLAS: {blas}",
            "fork: children run kernels on one thread" if hasattr(os, "register_at_fork") else "fork: untouched"]


def set_num_threads(n: int) -> None:
    """The budget for kernels large enough to split and for numpy's BLAS (when attached)."""
    from ._lib import lib
    n = max(int(n), 1)
    lib.rumus_set_num_threads(n)
    if lib.rumus_blas_attached():
        lib.rumus_blas_set_threads(lib.rumus_get_num_threads())
        return
    try:  # an OpenBLAS without the callback (< 0.3.27) or another BLAS: at least keep it within the budget
        from threadpoolctl import threadpool_limits
        threadpool_limits(limits=n, user_api="blas")
    except Exception:  # threadpoolctl missing: BLAS keeps its own setting (`rumus info` shows it)
        pass


def get_num_threads() -> int:
    from ._lib import lib
    return int(lib.rumus_get_num_threads())


def policy() -> dict[str, Any]:
    """The policy in force, for `rumus info` and the benchmarks."""
    from ._lib import lib
    out: dict[str, Any] = {
        "kernel_threads": int(lib.rumus_get_num_threads()),
        "pool_workers": int(lib.rumus_pool_workers()),
        "grain": int(lib.rumus_get_parallel_threshold()),
        "grains": {name: int(lib.rumus_grain(i)) for i, name in enumerate(GRAIN_CLASSES)},
        "idle": f"poll {int(lib.rumus_pool_get_spin_us())} us, then sleep",
        "openmp_of_others": _state["openmp"],
        "malloc": _state["malloc"],
        "blas_on_kernel_threads": bool(lib.rumus_blas_attached()),
        "matmul_blocked": bool(lib.rumus_gemm_attached()),
        "gemm_kernel": gemm_kernel_description(),
        "blas_threads": int(lib.rumus_get_num_threads()) if lib.rumus_blas_attached() else None,
        "process_changes": process_changes(),
    }
    try:
        from threadpoolctl import threadpool_info
        blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
        blas.sort(key=lambda i: i.get("filepath") != _state["blas"])
        if blas:
            b = blas[0]
            out["blas_library"] = f"{b.get('internal_api')} {b.get('version')}"
            out["blas_kernel"] = b.get("architecture")
            if not out["blas_on_kernel_threads"]:
                out["blas_threads"] = b.get("num_threads")
    except Exception:  # threadpoolctl missing: library and kernel unknown
        out["blas_library"] = "unknown (threadpoolctl not installed)"
    return out


def describe() -> str:
    """One line: the policy in force."""
    p = policy()
    blas = f"{p.get('blas_library', '?')}, kernel {p.get('blas_kernel', '?')}"
    where = (f"jobs on the kernel threads, up to {p['blas_threads']}"
             if p["blas_on_kernel_threads"] else f"its own {p['blas_threads']} threads (not coordinated)")
    n = p["kernel_threads"]
    g = p["grains"]
    mm = "; matmul: independent blocks, one single-threaded GEMM call each" if p["matmul_blocked"] else ""
    return (f"kernel threads {n} (own pool; 1 thread below "
            f"{p['grain']} elements (row kernels {g['row elements']}, BLAS products "
            f"{g['BLAS multiply-adds']} multiply-adds, own-loop products {g['loop multiply-adds']}), then one "
            f"per half of that; idle threads: {p['idle']}); "
            f"BLAS {blas}: {where}{mm}; {p['gemm_kernel']}; "
            f"malloc: {p['malloc']}; other OpenMP: {p['openmp_of_others']}; process-wide changes made when the "
            f"backend started: {'; '.join(p['process_changes']) or 'none yet'}")
