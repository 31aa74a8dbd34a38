"""rumus_wgpu: the WebGPU backend of RUMUS (WGSL kernels through the `wgpu` package).

Everything that touches wgpu is imported lazily, on first use of the backend.
"""
