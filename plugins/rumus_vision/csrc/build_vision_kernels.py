"""cffi (API mode) builder for rumus-vision's C kernels: every csrc/*.c is compiled, every csrc/*.h is the
cdef (plain prototypes only; the .inc files are included by vision_kernels.c, once per dtype). OpenMP is
used when the compiler accepts -fopenmp.

    python csrc/build_vision_kernels.py    # builds rumus_vision/_kernels*.so in place
    pip wheel plugins/rumus_vision         # setup.py's cffi_modules builds it the same way
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODULE = "rumus_vision._kernels"
FLAGS = ["-O3", "-std=c11", "-fwrapv", "-fno-math-errno", "-fno-trapping-math", "-D_GNU_SOURCE"]


def _has_openmp() -> bool:
    """Whether the C compiler builds and links a tiny OpenMP program."""
    if os.environ.get("RUMUS_NO_OPENMP"):
        return False
    cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()
    tmp = tempfile.mkdtemp(prefix="rumus_vision_omp_")
    try:
        src = os.path.join(tmp, "t.c")
        with open(src, "w") as f:
            f.write("#include <omp.h>\nint main(void){return omp_get_max_threads() < 1;}\n")
        return subprocess.run([*cc, "-fopenmp", src, "-o", os.path.join(tmp, "t")], capture_output=True,
                              timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _rel(path: str) -> str:
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def make_builder(absolute: bool = False) -> FFI:
    fix = (lambda p: p) if absolute else _rel
    headers = sorted(glob.glob(os.path.join(HERE, "*.h")))
    builder = FFI()
    for h in headers:
        with open(h) as f:
            builder.cdef(f.read())
    openmp = _has_openmp()
    builder.set_source(
        MODULE, "#include <stdint.h>\n" + "".join(f'#include "{os.path.basename(h)}"\n' for h in headers),
        sources=[fix(s) for s in sorted(glob.glob(os.path.join(HERE, "*.c")))],
        include_dirs=[fix(HERE)],
        extra_compile_args=[*FLAGS, *(["-fopenmp"] if openmp else [])],
        extra_link_args=["-fopenmp"] if openmp else [],
        libraries=["m"] if sys.platform != "win32" else [],
    )
    return builder


ffibuilder = make_builder()


if __name__ == "__main__":
    tmpdir = os.path.join(ROOT, "build", "cffi_rumus_vision")
    os.makedirs(tmpdir, exist_ok=True)
    target = os.path.join(ROOT, "rumus_vision", "_kernels" + (".pyd" if sys.platform == "win32" else ".abi3.so"))
    print(make_builder(absolute=True).compile(tmpdir=tmpdir, target=target, verbose=False))
