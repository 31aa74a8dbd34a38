"""Only here for what pyproject.toml cannot say.

- `cffi_modules` compiles the C kernels in csrc/ at install time, once: the library is cached under
  build/rumus-kernels-cache/ by a hash of everything that goes into it (every source, header and flag,
  the compiler, the platform), so a second install (another extra, the test command's) copies it.
- Packages: every `rumus*` package under the source roots, plus the top-level `shaders/` folder
  installed as the package `rumus_wgpu.shaders`. The WGSL stays where DESIGN.md puts it, the wheel
  carries it inside rumus_wgpu, and an editable install maps the same name onto the source folder, so
  `importlib.resources.files("rumus_wgpu.shaders")` finds the shaders either way.
"""

import glob
import hashlib
import os
import shutil
import sys
import sysconfig
import time

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
KERNELS = "rumus_cpu._kernels"
CACHE = os.path.join(ROOT, "build", "rumus-kernels-cache")

SOURCE_ROOTS = (".", "contracts", "backends", "plugins", "conformance")

package_dir = {
    name: name.replace(".", "/") if root == "." else f"{root}/{name.replace('.', '/')}"
    for root in SOURCE_ROOTS
    for name in find_packages(root, include=["rumus*"])
}
package_dir["rumus_wgpu.shaders"] = "shaders"



def _say(text: str) -> None:
    # stderr, unbuffered: pip shows it with -v (and whenever the build fails)
    print(f"rumus: {text}", file=sys.stderr, flush=True)


def kernels_key(ext: Extension, filename: str) -> str:
    """sha256 of what the C kernels are built from: the sources (the cffi-generated one included), every
    header under csrc/, the flags, the compiler, the platform and the file name (which names the ABI)."""
    digest = hashlib.sha256()
    headers = glob.glob(os.path.join(ROOT, "csrc", "*.h")) + glob.glob(os.path.join(ROOT, "csrc", "internal", "*.h"))
    for path in [*ext.sources, *sorted(headers)]:
        digest.update(os.path.basename(path).encode() + b"\0")
        with open(path, "rb") as f:
            digest.update(f.read() + b"\0")
    config = [*ext.extra_compile_args, *ext.libraries, os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc",
              sysconfig.get_platform(), filename]
    digest.update("\0".join(map(str, config)).encode())
    return digest.hexdigest()


class CachedBuildExt(build_ext):
    """build_ext that compiles the C kernels only when their key (kernels_key) has no cached library yet."""

    def build_extension(self, ext: Extension) -> None:
        if ext.name != KERNELS:
            super().build_extension(ext)
            return
        target = self.get_ext_fullpath(ext.name)
        filename = os.path.basename(target)
        key = kernels_key(ext, filename)
        cached = os.path.join(CACHE, key[:32], filename)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.exists(cached):
            _say(f"C kernels unchanged (key {key[:12]}): reusing {os.path.relpath(cached, ROOT)}")
            shutil.copy2(cached, target)
            return
        _say(f"compiling the CPU backend's C kernels: {len(ext.sources)} files with "
             f"{self.compiler.compiler_so[0] if hasattr(self.compiler, 'compiler_so') else 'the C compiler'} "
             f"(2 to 4 minutes on 2 cores; needs a C compiler and Python's headers)")
        start = time.perf_counter()
        super().build_extension(ext)
        os.makedirs(os.path.dirname(cached), exist_ok=True)
        shutil.copy2(target, cached + ".tmp")
        os.replace(cached + ".tmp", cached)  # complete or absent: a killed build leaves no half file
        _say(f"compiled in {time.perf_counter() - start:.0f} s; cached as {os.path.relpath(cached, ROOT)}")


setup(
    cmdclass={"build_ext": CachedBuildExt},
    cffi_modules=["csrc/build_cpu_kernels.py:ffibuilder"],
    packages=sorted(package_dir),
    package_dir=package_dir,
)
