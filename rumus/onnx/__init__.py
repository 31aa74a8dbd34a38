"""ONNX export and import (needs the optional `onnx` package).

    rm.onnx.export(model, args, "m.onnx", input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    module = rm.onnx.load("m.onnx")      # an nn.Module; initializers are Parameters
"""

from __future__ import annotations

from rumus_contracts.onnx_lowering import OnnxExportError

from .export import default_opset, export
from .load import OnnxModule, load

__all__ = ["OnnxExportError", "OnnxModule", "default_opset", "export", "load"]
