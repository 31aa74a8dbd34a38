"""Hook implementations: RUMUS calls these when it loads the plugin (entry point `vision`, group `rumus`).

The plugin adds no op: its kernels are conditional kernels for the core's conv and pooling ops (priority 1, with a
predicate; see rumus_contracts.KernelRegistry), so the core's kernel still runs every shape the
predicate declines. Importing this module is cheap: the C extension loads inside the kernels hook."""

from __future__ import annotations

from rumus_contracts import KernelRegistry, float32, float64, hookimpl

from . import avg_pool_choice, choice, pool_wgpu

CONV_OPS = ("conv2d", "conv2d_backward_input", "conv2d_backward_weight")
PRIORITY = 1  # in front of the built-in backends' kernels (priority 0), never displacing them


@hookimpl
def rumus_register_kernels(registry: KernelRegistry) -> None:
    try:
        from . import conv_cpu, pool_cpu
    except ImportError as exc:  # no compiled extension: the WGSL kernels still register
        registry.report_failure("rumus_vision._kernels (the C extension; rebuild with pip install)", exc)
    else:
        for op in CONV_OPS:
            registry.register(op, "cpu", getattr(conv_cpu, op), dtypes=[float32, float64], priority=PRIORITY,
                              applies=choice.predicate(op, choice.DIRECT_MAX_GROUP_OUTPUTS), samples=choice.samples(op))
        registry.register("max_pool2d", "cpu", pool_cpu.max_pool2d, dtypes=[float32, float64], priority=PRIORITY,
                          applies=choice.pool_applies, samples=choice.pool_samples)
        registry.register("avg_pool2d", "cpu", pool_cpu.avg_pool2d, dtypes=[float32, float64], priority=PRIORITY,
                          applies=avg_pool_choice.avg_applies, samples=avg_pool_choice.avg_samples)
        registry.register("avg_pool2d_backward", "cpu", pool_cpu.avg_pool2d_backward, dtypes=[float32, float64],
                          priority=PRIORITY, applies=avg_pool_choice.avg_backward_applies,
                          samples=avg_pool_choice.avg_backward_samples)
    from .conv_wgpu import shader_kernels
    for op, kernel in shader_kernels().items():
        registry.register(op, "wgpu", kernel, dtypes=[float32], priority=PRIORITY, applies=choice.predicate(op),
                          samples=choice.samples(op))
    registry.register("max_pool2d_backward", "wgpu", pool_wgpu.shader_kernel(), dtypes=[float32], priority=PRIORITY,
                      applies=pool_wgpu.non_overlapping, samples=pool_wgpu.samples)
    registry.register("avg_pool2d_backward", "wgpu", pool_wgpu.avg_shader_kernel(), dtypes=[float32],
                      priority=PRIORITY, applies=pool_wgpu.avg_non_overlapping, samples=pool_wgpu.avg_samples)
