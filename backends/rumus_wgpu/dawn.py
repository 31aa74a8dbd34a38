"""The WebGPU implementation under the backend: wgpu-py on wgpu-native (the default), or Dawn.

`RUMUS_WGPU_IMPL=dawn` runs the whole backend on the `wgpudawn` package (wgpu-py's API over Google's
Dawn), which exposes NVIDIA's and others' matrix units to WGSL (`chromium_experimental_subgroup_matrix`,
matrix_units.py); wgpu-native 0.32 cannot enable its cooperative-matrix feature. Dawn and wgpu-native
are separate native libraries whose buffers cannot be shared without a copy through the host, so the
choice is made once, for the process, before the backend first imports `wgpu`: the name `wgpu` is
then bound to `wgpudawn` (and its submodules to theirs), and every module of the backend uses Dawn.

wgpu-py's private native layer (`wgpu.backends.wgpu_native`) does not exist under Dawn, so native.py finds
nothing and the backend takes wgpu-py's public API, as with RUMUS_WGPU_PUBLIC_API=1.
"""

from __future__ import annotations

import sys

from rumus_contracts import BackendUnavailable, config

IMPL_ENV, UNCHECKED_ENV = "RUMUS_WGPU_IMPL", "RUMUS_WGPU_DAWN_UNCHECKED"
# experimental features (subgroup matrices) need allow_unsafe_apis; Dawn hides shader-f16 on NVIDIA's Vulkan
# driver unless asked (and then offers only int8 subgroup matrices). The other three keep out-of-bounds
# accesses safe but leave them to the hardware's robust buffer access where the driver has it, instead of
# clamping every index in the shader (Dawn's default, which halves the matrix GEMM's speed on the H200);
# set_instance_extras hands each toggle to the instance, every adapter or every device, by its stage
INSTANCE_TOGGLES = ("allow_unsafe_apis", "vulkan_enable_f16_on_nvidia", "vulkan_use_buffer_robust_access_2",
                    "enable_integer_range_analysis_in_robustness", "vulkan_use_cooperative_matrix_robust_access")


def selected() -> str:
    return str(config.text(IMPL_ENV))


def use_selected_impl() -> None:
    """Bind `wgpu` to the selected implementation; a no-op for the default (wgpu-native)."""
    if selected() != "dawn":
        return
    have = sys.modules.get("wgpu")
    if have is not None:
        if getattr(have, "__name__", "") == "wgpudawn":
            return
        raise BackendUnavailable(f"{IMPL_ENV}=dawn, but wgpu-native's 'wgpu' was imported first in this process; "
                                 f"set {IMPL_ENV} before anything imports wgpu")
    try:
        import wgpudawn  # noqa: F401  (bound as `wgpu` below, through sys.modules)
        from wgpudawn.backends.dawn import extras
    except ImportError as exc:
        raise BackendUnavailable(f"{IMPL_ENV}=dawn needs the 'wgpudawn' package ({exc}); "
                                 f"install it with: pip install wgpudawn") from None
    toggles = extras.all_toggles()
    wanted = INSTANCE_TOGGLES + (("disable_robustness",) if config.flag(UNCHECKED_ENV) else ())
    try:
        extras.set_instance_extras(enable_toggles=[t for t in wanted if t in toggles])
    except RuntimeError as exc:  # the program made Dawn's instance itself, with its own toggles
        raise BackendUnavailable(f"{IMPL_ENV}=dawn: {exc}; let RUMUS create Dawn's instance (it sets "
                                 f"the toggles {', '.join(INSTANCE_TOGGLES)})") from None
    for name, module in list(sys.modules.items()):
        if name == "wgpudawn" or name.startswith("wgpudawn."):
            sys.modules["wgpu" + name[len("wgpudawn"):]] = module


def is_dawn(device: object) -> bool:
    """Whether a GPUDevice object comes from Dawn."""
    return type(device).__module__.startswith("wgpudawn")
