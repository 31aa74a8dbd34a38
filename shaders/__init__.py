"""WGSL kernels of the WebGPU backend, installed as the package `rumus_wgpu.shaders` (see setup.py).

No Python lives here: the backend reads the *.wgsl files with
`importlib.resources.files("rumus_wgpu.shaders")`, which works from a wheel and from an editable install.
"""
