"""cffi (API mode) builder for the CPU kernels: every csrc/*.c is compiled, every csrc/*.h is the cdef.

The elementwise kernels are rendered from the expression table (rumus_contracts/ops/expressions.py,
through expr_c.py) into build/generated/rumus_expr_kernels.c, never committed. The generated file
embeds two hashes, of the table's C text and of every csrc source; rumus_cpu/_lib.py refuses an
extension whose hashes differ from the sources it runs with (a stale build).

Headers fed to cdef must stay plain prototypes (no macros, no includes); private helpers live in
csrc/internal/*.h, which only the .c files include (a .c file includes <stdint.h> or
internal/rumus.h before its own header). Threads come from the kernels' own pool (csrc/pool.c, POSIX
threads), not OpenMP.

    python csrc/build_cpu_kernels.py      # builds backends/rumus_cpu/_kernels*.so in place
    pip install -e . / pip wheel .        # setup.py's cffi_modules builds it the same way
"""

from __future__ import annotations

import glob
import importlib
import os
import sys
import sysconfig

from types import ModuleType

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODULE = "rumus_cpu._kernels"
BASE_FLAGS = ["-O3", "-std=c11", "-fwrapv", "-fno-math-errno", "-fno-trapping-math", "-D_GNU_SOURCE"]


def _expr_c() -> ModuleType:
    """contracts/rumus_contracts/ops/expr_c.py, imported without the rumus_contracts package (whose
    __init__ needs numpy, which pip's isolated build environment lacks): the ops folder becomes a
    stand-alone package, and expr_c, expr_lang and expressions use only the stdlib."""
    name = "_rumus_expr_build"
    if name not in sys.modules:
        package = ModuleType(name)
        package.__path__ = [os.path.join(ROOT, "contracts", "rumus_contracts", "ops")]
        sys.modules[name] = package
    return importlib.import_module(f"{name}.expr_c")


def _generate() -> str:
    """Write the rendered table into build/generated/ (only when it changed); returns its path."""
    out_dir = os.path.join(ROOT, "build", "generated")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "rumus_expr_kernels.c")
    text = _expr_c().c_source(_expr_c().sources_hash(HERE))
    old = None
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
    if old != text:
        with open(path, "w") as f:
            f.write(text)
    return path


def _rel(path: str) -> str:
    """Paths relative to the working directory when possible: setuptools prefers relative sources."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return path
    return path if rel.startswith("..") else rel


def _compiler() -> list[str]:
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return cc.split()


def _make_builder(absolute: bool = False) -> FFI:
    """`absolute`: ffi.compile() changes into its tmpdir, so in-place builds need absolute paths."""
    fix = (lambda p: p) if absolute else _rel
    headers = sorted(glob.glob(os.path.join(HERE, "*.h")))
    sources = sorted(glob.glob(os.path.join(HERE, "*.c")))
    sources.append(_generate())
    builder = FFI()
    for h in headers:
        with open(h) as f:
            builder.cdef(f.read())
    builder.cdef(_expr_c().PROTOTYPES)
    builder.set_source(
        MODULE,
        "#include <stdint.h>\n" + "".join(f'#include "{os.path.basename(h)}"\n' for h in headers)
        + _expr_c().PROTOTYPES,
        sources=[fix(s) for s in sources],
        include_dirs=[fix(HERE)],
        extra_compile_args=list(BASE_FLAGS),
        libraries=["m", "pthread"] if sys.platform != "win32" else [],
    )
    return builder


ffibuilder = _make_builder()


def build_in_place() -> str:
    """Compile into backends/rumus_cpu/ for a source checkout; returns the path of the library.

    The file gets the name `pip install -e .` gives it (cffi builds with the limited API: .abi3.so),
    and other builds of the module there are removed, so a stale one can never shadow the new one.
    """
    tmpdir = os.path.join(ROOT, "build", "cffi_rumus_cpu")
    os.makedirs(tmpdir, exist_ok=True)
    package = os.path.join(ROOT, "backends", "rumus_cpu")
    target = os.path.join(package, "_kernels" + (".pyd" if sys.platform == "win32" else ".abi3.so"))
    built = str(_make_builder(absolute=True).compile(tmpdir=tmpdir, target=target, verbose=False))
    for stale in glob.glob(os.path.join(package, "_kernels.*")):
        if os.path.abspath(stale) != os.path.abspath(built) and stale.endswith((".so", ".pyd")):
            os.remove(stale)
    return built


if __name__ == "__main__":
    print(build_in_place())
