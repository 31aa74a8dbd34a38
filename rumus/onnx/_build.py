"""Node descriptions -> an onnx ModelProto; full check and shape inference; atomic write (external data
for models over 2 GB)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rumus_contracts import DType
from rumus_contracts.onnx_lowering import OnnxExportError, OnnxNode, onnx_dtype

PROTOBUF_LIMIT = 2**31 - 1  # a single protobuf message cannot exceed 2 GB


def _onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise OnnxExportError("ONNX export/import needs the 'onnx' package: pip install 'rumus[onnx]'") from None
    return onnx


def bf16_bits(arr: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns as tensors get them (raw uint16 arrays pass through)."""
    if arr.dtype == np.uint16:
        return arr
    from .._creation import _bfloat16_bits
    return _bfloat16_bits(arr)


def tensor_proto(name: str, arr: np.ndarray, dtype: DType) -> Any:
    onnx = _onnx()
    t = onnx.TensorProto()
    t.name = name
    t.data_type = onnx_dtype(dtype)
    t.dims.extend(arr.shape)
    if dtype.name == "bfloat16":
        t.raw_data = bf16_bits(arr).tobytes()
    else:
        t.raw_data = np.ascontiguousarray(arr, dtype=dtype.numpy).tobytes()
    return t


def _attr_value(name: str, value: Any) -> Any:
    if isinstance(value, np.ndarray):  # tensor attributes (ConstantOfShape's value)
        from rumus_contracts.dtype import from_numpy_dtype
        return tensor_proto(name, value, from_numpy_dtype(value.dtype))
    return value


def make_node(n: OnnxNode, index: int) -> Any:
    onnx = _onnx()
    attrs = {k: _attr_value(k, v) for k, v in n.attrs.items()}
    return onnx.helper.make_node(n.op_type, list(n.inputs), list(n.outputs), name=f"{n.op_type}_{index}",
                                 domain=n.domain or None, **attrs)


def value_info(name: str, dtype: DType, shape: Sequence[int | str]) -> Any:
    return _onnx().helper.make_tensor_value_info(name, onnx_dtype(dtype), list(shape))


def build_model(nodes: Sequence[OnnxNode], inputs: Sequence[Any], outputs: Sequence[Any],
                initializers: Mapping[str, tuple[np.ndarray, DType]], opset: int, graph_name: str) -> Any:
    onnx = _onnx()
    inits = [tensor_proto(k, arr, dt) for k, (arr, dt) in initializers.items()]
    graph = onnx.helper.make_graph([make_node(n, i) for i, n in enumerate(nodes)], graph_name, list(inputs),
                                   list(outputs), initializer=inits)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)],
                                   producer_name="rumus")
    # the oldest IR version that carries this opset: newer onnx writes a newer IR than runtimes may read
    model.ir_version = onnx.helper.find_min_ir_version_for(list(model.opset_import))
    return model


def initializer_bytes(initializers: Mapping[str, tuple[np.ndarray, DType]]) -> int:
    return sum(arr.size * dt.itemsize for arr, dt in initializers.values())


def check_and_save(model: Any, path: str, external_data: bool) -> Any:
    """Full checker + strict shape inference, then an atomic write (see `_atomic_save`)."""
    onnx = _onnx()
    if not external_data:
        try:
            model = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
            onnx.checker.check_model(model, full_check=True)
        except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
            raise OnnxExportError(f"the exported graph failed onnx's checker: {exc}") from None
    from ._atomic_save import save_atomically
    return save_atomically(model, path, external_data)
