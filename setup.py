"""Only here for what pyproject.toml cannot say.

- `cffi_modules` compiles the C kernels in csrc/ at install time.
- Packages: every `rumus*` package under the source roots, plus the top-level `shaders/` folder
  installed as the package `rumus_wgpu.shaders`. The WGSL stays where DESIGN.md puts it, the wheel
  carries it inside rumus_wgpu, and an editable install maps the same name onto the source folder, so
  `importlib.resources.files("rumus_wgpu.shaders")` finds the shaders either way.
"""

from setuptools import find_packages, setup

SOURCE_ROOTS = (".", "contracts", "backends", "plugins", "conformance")

package_dir = {
    name: name.replace(".", "/") if root == "." else f"{root}/{name.replace('.', '/')}"
    for root in SOURCE_ROOTS
    for name in find_packages(root, include=["rumus*"])
}
package_dir["rumus_wgpu.shaders"] = "shaders"

setup(
    cffi_modules=["csrc/build_cpu_kernels.py:ffibuilder"],
    packages=sorted(package_dir),
    package_dir=package_dir,
)
