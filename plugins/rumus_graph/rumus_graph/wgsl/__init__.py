"""WGSL kernels of rumus-graph (read with importlib.resources)."""
