"""ONNX export and import (needs the optional `onnx` package).

    rm.onnx.export(model, (x,), "m.onnx", input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    module = rm.onnx.load("m.onnx")      # an nn.Module; float initializers are Parameters

Export runs the model once (in eval mode, without autograd) with hooks in the dispatcher and in the views:
each dispatched op is turned into ONNX nodes by its schema's lowering (`OpSchema.onnx`, see
`rumus_contracts.onnx_lowering`; an op without one fails naming it), each view by `_views_lowering`, and each
tensor the trace did not make becomes an initializer named by its state-dict key (or a constant). Composite ops
are traced as their constituent ops unless they declare a lowering of their own (mean, var, std do: their
divisor must follow dynamic axes). The graph passes onnx's full checker and strict shape inference before it
is written (atomically; weights over 2 GB go to a data file beside it).

What tracing cannot see, it cannot export: control flow on tensor values, Python numbers computed from
shapes (`x.sum() / x.shape[0]` freezes the divisor), kernel-level in-place writes (refused with an error).
Dynamic axes are recognized by size: shapes the trace meets with a dim equal to a dynamic axis's example
size follow that axis; export refuses example sizes that equal each other or a weight's dim, but a size
that equals some other constant of the model (a head dim, say) is not detected - pick distinctive example
sizes (e.g. primes) and check the file at a second size, as the tests do.

Import interprets the graph with rumus ops on any backend (`load(path, device=...)`), covering what this
exporter emits and what torch.onnx.export emits for the same layers; an unsupported node fails with its op
type and node name; a malformed or truncated file raises FormatError.
"""

from __future__ import annotations

from rumus_contracts.onnx_lowering import OnnxExportError

from .export import default_opset, export
from .load import OnnxModule, load

__all__ = ["OnnxExportError", "OnnxModule", "default_opset", "export", "load"]
