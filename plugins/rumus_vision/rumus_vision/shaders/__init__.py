"""WGSL sources of rumus-vision's GPU kernels (read with importlib.resources)."""
