"""Hook implementations: RUMUS calls these when it loads the plugin (entry point `graph`, group `rumus`).

Importing this module is cheap: the C extension and the WGSL files are read in the kernels hook. If
the C extension is missing (a source checkout that was never built), the CPU kernels are reported
with `registry.report_failure` (so `rumus info` and `rumus conformance` say so) and the rest loads.
"""

from __future__ import annotations

from rumus_contracts import KernelRegistry, OpRegistry, hookimpl, parse_dtype

from . import schemas_segment, schemas_spmm


@hookimpl
def rumus_register_ops(registry: OpRegistry) -> None:
    for schema in [*schemas_spmm.schemas(), *schemas_segment.schemas()]:
        registry.register(schema)


@hookimpl
def rumus_register_kernels(registry: KernelRegistry) -> None:
    try:
        from .cpu_kernels import KERNELS
    except ImportError as exc:
        registry.report_failure("rumus_graph CPU kernels (the C extension rumus_graph._graph_kernels; rebuild "
                                "with `pip install plugins/rumus_graph`)", exc)
    else:
        for op, kernel in KERNELS.items():
            dtypes = ["float32", "float64"] + (["int32"] if op == "graph_segment_expand" else [])
            registry.register(op, "cpu", kernel, dtypes=[parse_dtype(d) for d in dtypes])
    from .wgpu_kernels import kernels
    for op, variants in kernels().items():
        for kernel, dtype in variants:
            registry.register(op, "wgpu", kernel, dtypes=[parse_dtype(dtype)])
