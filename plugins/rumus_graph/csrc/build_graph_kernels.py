"""cffi (API mode) builder for rumus-graph's C kernels: csrc/graph_kernels.c with its header as the cdef.

setup.py's `cffi_modules` runs it when the wheel (or an editable install) is built; the result is the
extension module `rumus_graph._graph_kernels`. OpenMP is used when the compiler accepts -fopenmp
(RUMUS_NO_OPENMP=1 leaves it out); the kernels then run on the same libgomp team as RUMUS's own.

    python csrc/build_graph_kernels.py     # builds rumus_graph/_graph_kernels*.so in place
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODULE = "rumus_graph._graph_kernels"
FLAGS = ["-O3", "-std=c11", "-fno-math-errno", "-fno-trapping-math", "-D_GNU_SOURCE"]


def _has_openmp() -> bool:
    if os.environ.get("RUMUS_NO_OPENMP"):
        return False
    cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()
    tmp = tempfile.mkdtemp(prefix="rumus_graph_omp_")
    try:
        src = os.path.join(tmp, "t.c")
        with open(src, "w") as f:
            f.write("#include <omp.h>\nint main(void){return omp_get_max_threads() < 1;}\n")
        return subprocess.run([*cc, "-fopenmp", src, "-o", os.path.join(tmp, "t")],
                              capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _rel(path: str) -> str:
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def make_builder(absolute: bool = False) -> FFI:
    fix = (lambda p: p) if absolute else _rel
    with open(os.path.join(HERE, "graph_kernels.h")) as f:
        header = f.read()
    openmp = _has_openmp()
    builder = FFI()
    builder.cdef(header)
    builder.set_source(
        MODULE, '#include <stdint.h>\n#include "graph_kernels.h"\n',
        sources=[fix(os.path.join(HERE, "graph_kernels.c"))], include_dirs=[fix(HERE)],
        extra_compile_args=[*FLAGS, *(["-fopenmp"] if openmp else [])],
        extra_link_args=["-fopenmp"] if openmp else [], libraries=["m"] if sys.platform != "win32" else [])
    return builder


ffibuilder = make_builder()

if __name__ == "__main__":
    tmpdir = os.path.join(ROOT, "build", "cffi_rumus_graph")
    os.makedirs(tmpdir, exist_ok=True)
    target = os.path.join(ROOT, "rumus_graph", "_graph_kernels" + (".pyd" if sys.platform == "win32" else ".abi3.so"))
    print(make_builder(absolute=True).compile(tmpdir=tmpdir, target=target, verbose=False))
