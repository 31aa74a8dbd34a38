"""WGSL kernels for the WebGPU backend, as rumus_contracts.ShaderKernel (the backend compiles them).

Every op lists all its inputs as `contiguous`, so a kernel needs only each tensor's offset (in
elements), passed through the uniform params. The WebGPU backend holds float32 (no float64).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from importlib.resources import files
from typing import Any

from rumus_contracts import ShaderKernel, TensorArg, config

WORKGROUP = 256
Args = Sequence[TensorArg]
Attrs = Mapping[str, Any]
MAX_GROUPS = 65535


def source(name: str) -> str:
    """wgsl/<name>.wgsl after wgsl/launch.wgsl (`flat`, NAN_BITS), which every graph shader uses."""
    folder = files("rumus_graph.wgsl")
    return "\n".join(folder.joinpath(f"{n}.wgsl").read_text(encoding="utf-8") for n in ("launch", name))


def _grid(n: int) -> tuple[int, int, int]:
    groups = -(-n // WORKGROUP)
    return (min(groups, MAX_GROUPS), -(-groups // MAX_GROUPS), 1) if groups else (0, 1, 1)


def _cols(arg: TensorArg) -> int:
    n = 1
    for s in arg.shape[1:]:
        n *= s
    return n


config.declare("RUMUS_GRAPH_SPMM_CHUNK", "choice", None, "features per invocation of the WebGPU spmm (unset: 16 on "
               "a CPU rasterizer, else 1)", owner="rumus-graph", choices=("1", "16"))


@cache
def spmm_chunk() -> int:
    """Features per spmm invocation: 16 when the first WebGPU device is a CPU rasterizer (lavapipe: SIMD lanes
    gain from reading each entry once per 16 features; 2.5x faster there), else 1 (a GPU wants neighbouring
    invocations on neighbouring features, coalesced). RUMUS_GRAPH_SPMM_CHUNK=1|16 overrides (tests use it
    to cover both layouts on any machine)."""
    forced = config.text("RUMUS_GRAPH_SPMM_CHUNK")
    if forced:
        return int(forced)
    from rumus import backend_api  # at call time: the backend is running by then
    be = backend_api.backend("wgpu")
    kind = be.capabilities(be.devices()[0]).description.rstrip(")").rsplit(",", 1)[-1].strip()
    return 16 if kind == "CPU" else 1


def _bundle_params(transpose: int) -> Any:
    def params(outs: Args, ins: Args, attrs: Attrs) -> list[int | float]:
        rowptr, col, cptr, crow, ceid, v, x = ins
        out = outs[0]
        return [out.shape[0], _cols(x), rowptr.shape[0] - 1, cptr.shape[0] - 1, col.shape[0], out.offset,
                rowptr.offset, col.offset, cptr.offset, crow.offset, ceid.offset, v.offset, x.offset, transpose,
                spmm_chunk()]
    return params


def _per_output_element(outs: Args, ins: Args, attrs: Attrs) -> tuple[int, int, int]:
    return _grid(outs[0].numel)


def _per_row_chunk(outs: Args, ins: Args, attrs: Attrs) -> tuple[int, int, int]:
    """spmm's grid: one invocation per (output row, chunk of spmm_chunk() features), 64 to a workgroup."""
    n = outs[0].shape[0] * -(-_cols(outs[0]) // spmm_chunk())
    groups = -(-n // 64)
    return (min(groups, MAX_GROUPS), -(-groups // MAX_GROUPS), 1) if groups else (0, 1, 1)


def _segment_params(mode: int | None) -> Any:
    """segment.wgsl's params end with the reduction mode; segment_index.wgsl's (mode None) do not."""
    def params(outs: Args, ins: Args, attrs: Attrs) -> list[int | float]:
        out, (src, ptr) = outs[0], ins
        return [ptr.shape[0] - 1, _cols(src), src.shape[0], out.offset, src.offset, ptr.offset,
                *([] if mode is None else [mode])]
    return params


def _expand_params(outs: Args, ins: Args, attrs: Attrs) -> list[int | float]:
    out, (src, ptr) = outs[0], ins
    return [ptr.shape[0] - 1, _cols(src), out.shape[0], out.offset, src.offset, ptr.offset]


def _per_segment_feature(outs: Args, ins: Args, attrs: Attrs) -> tuple[int, int, int]:
    src, ptr = ins
    return _grid((ptr.shape[0] - 1) * _cols(src))


def _variant(text: str, t: str, out: str) -> str:
    return text.replace("alias T = f32;", f"alias T = {t};").replace("alias OUT = i32;", f"alias OUT = {out};")


def kernels() -> dict[str, list[tuple[ShaderKernel, str]]]:
    """op -> [(kernel, dtype name)]."""
    spmm, seg, idx = source("spmm"), source("segment"), source("segment_index")
    per_out = _per_output_element
    return {
        "graph_spmm": [(ShaderKernel("wgsl", spmm, "spmm", _per_row_chunk, _bundle_params(0)), "float32")],
        "graph_spmm_t": [(ShaderKernel("wgsl", spmm, "spmm", _per_row_chunk, _bundle_params(1)), "float32")],
        "graph_sddmm": [(ShaderKernel("wgsl", spmm, "sddmm", per_out, _bundle_params(0)), "float32")],
        "graph_segment_sum": [(ShaderKernel("wgsl", seg, "seg_reduce", per_out, _segment_params(0)), "float32")],
        "graph_segment_mean": [(ShaderKernel("wgsl", seg, "seg_reduce", per_out, _segment_params(1)), "float32")],
        "graph_segment_max": [(ShaderKernel("wgsl", seg, "seg_reduce", per_out, _segment_params(2)), "float32")],
        "graph_edge_softmax": [(ShaderKernel("wgsl", seg, "edge_softmax", _per_segment_feature, _segment_params(0)),
                                "float32")],
        "graph_segment_argmax": [(ShaderKernel("wgsl", idx, "seg_argmax", per_out, _segment_params(None)), "float32")],
        "graph_segment_expand": [
            (ShaderKernel("wgsl", _variant(idx, "f32", "f32"), "seg_expand", per_out, _expand_params), "float32"),
            (ShaderKernel("wgsl", _variant(idx, "i32", "i32"), "seg_expand", per_out, _expand_params), "int32")],
    }
