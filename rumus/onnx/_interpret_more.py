"""ONNX ops that torch's exporters emit beyond the basic layers: advanced indexing (GatherND, ScatterND),
detection heads (TopK, NonZero, Resize), CumSum, Tile, Pad, Einsum, the mobile activations and the
norm-style reductions. Anything outside what is implemented (an attribute value, a mode) raises."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rumus_contracts import RumusError, ShapeError

from .. import _composites_torch as C
from .. import _creation
from .. import _math as M
from .. import _views
from ..nn import functional as F
from ..ops import get as op
from ..tensor import Tensor
from ._interpret_host import _ONNX_TO_DTYPE, DEVICE, Fn, H, T, _axes, _ints, _norm, new


def _same(x: Tensor, y: Any) -> Tensor:
    t = T(y)
    return t if t.dtype == x.dtype else t.to(x.dtype)


def _flat_index(x: Tensor, idx: Tensor, batch: int) -> tuple[Tensor, tuple[int, ...], int]:
    """GatherND / ScatterND: the last dim of idx indexes x's dims batch..batch+k; returns the flat row index
    into x viewed as [prod(batch dims) * prod(indexed dims), rest...], the rest shape, and k."""
    k = idx.shape[-1]
    if batch + k > x.ndim:
        raise ShapeError(f"indices address {k} dims after {batch} batch dims of a {x.ndim}-d tensor")
    lead = x.shape[batch:batch + k]
    strides = [int(np.prod(lead[i + 1:])) for i in range(k)]
    if idx.dtype.name != "int64":
        idx = idx.to("int64")
    sizes = new(np.asarray(lead, dtype=np.int64))
    idx = M.where(M.lt(idx, 0), M.add(idx, sizes), idx)  # negative indices count from the end
    flat = M.sum(M.mul(idx, new(np.asarray(strides, dtype=np.int64))), -1)
    nb = int(np.prod(x.shape[:batch]))
    if batch:  # each batch entry addresses its own block of rows
        per = int(np.prod(lead))
        offs = new(np.arange(nb, dtype=np.int64).reshape(x.shape[:batch] + (1,) * (flat.ndim - batch)) * per)
        flat = M.add(flat, offs)
    return flat, x.shape[batch + k:], k


def _gather_nd(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x, idx = T(a[0]), T(a[1])
    batch = int(at.get("batch_dims", 0))
    flat, rest, _ = _flat_index(x, idx, batch)
    rows = x.reshape((-1, *rest))
    out = op("index_select")(rows, flat.reshape(-1), dim=0)
    return out.reshape((*idx.shape[:-1], *rest))


def _scatter_nd(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    if at.get("reduction", "none") not in ("none", "add"):
        raise RumusError(f"ScatterND with reduction={at['reduction']!r} is not supported (none, add)")
    x, idx = T(a[0]), T(a[1])
    upd = _same(x, a[2])
    flat, rest, _ = _flat_index(x, idx, 0)
    lead = len(rest)  # the row counts spelled out: -1 is ambiguous when a slice is empty
    rows = x.reshape((int(np.prod(x.shape[:x.ndim - lead])), *rest))
    upd_rows = upd.reshape((int(np.prod(upd.shape[:upd.ndim - lead])), *rest))
    flat = flat.reshape(-1)
    if at.get("reduction", "none") == "add":
        return F.index_add(rows, 0, flat, upd_rows).reshape(x.shape)
    # "none": rows not addressed keep x; addressed rows take the update (ONNX leaves duplicates undefined)
    hit = _creation.zeros((rows.shape[0],), dtype="float32", device=x.device)
    hit = F.index_add(hit, 0, flat, _creation.ones((flat.shape[0],), dtype="float32", device=x.device))
    base = F.index_add(M.mul(rows, 0), 0, flat, upd_rows)
    mask = M.gt(hit, 0).reshape((-1,) + (1,) * len(rest))
    return M.where(mask, base, rows).reshape(x.shape)


def _cumsum(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x = T(a[0])
    axis = _norm(int(H(a[1]).reshape(-1)[0]), x.ndim)
    rev = bool(at.get("reverse", 0))
    if rev:
        x = C.flip(x, [axis])
    out = C.cumsum(x, axis)
    if out.dtype != x.dtype:  # ONNX keeps the input's type
        out = out.to(x.dtype)
    if at.get("exclusive", 0):
        out = M.sub(out, x)
    return C.flip(out, [axis]) if rev else out


def _tile(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    return C.repeat(T(a[0]), *_ints(a[1]))


def _topk(a: list[Any], at: dict[str, Any], o: int) -> list[Tensor]:
    x = T(a[0])
    k = int(H(a[1]).reshape(-1)[0])
    axis = _norm(int(at.get("axis", -1)), x.ndim)
    res = C.topk(x, k, axis, largest=bool(at.get("largest", 1)), sorted=True)
    return [res.values, res.indices]


def _nonzero(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x = T(a[0])
    idx = np.nonzero(np.asarray(x.numpy()).reshape(x.shape))  # its length depends on the values
    return new(np.stack(idx).astype(np.int64) if idx else np.zeros((0, 0), np.int64))


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}


def _pad(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x = T(a[0])
    mode = str(at.get("mode", "constant"))
    if mode not in _PAD_MODES:
        raise RumusError(f"Pad mode {mode!r} is not supported")
    pads = _ints(a[1]) if len(a) > 1 and a[1] is not None else [int(p) for p in at["pads"]]
    value = 0.0
    if len(a) > 2 and a[2] is not None and H(a[2]).size:
        value = float(H(a[2]).reshape(-1)[0])
    elif "value" in at:
        value = float(at["value"])
    axes = list(range(x.ndim))
    if len(a) > 3 and a[3] is not None:
        axes = [_norm(v, x.ndim) for v in _ints(a[3])]
    n = len(axes)
    if len(pads) != 2 * n:
        raise ShapeError(f"Pad: {len(pads)} pads for {n} axes")
    begin = dict(zip(axes, pads[:n]))
    end = dict(zip(axes, pads[n:]))
    if any(p < 0 for p in pads):  # negative pads crop
        index = tuple(slice(-min(begin.get(d, 0), 0), x.shape[d] + min(end.get(d, 0), 0)) for d in range(x.ndim))
        x = _views.getitem(x, index)
        begin = {d: max(p, 0) for d, p in begin.items()}
        end = {d: max(p, 0) for d, p in end.items()}
    torch_pad: list[int] = []  # torch orders pads from the last dim backwards
    last = max([d for d in range(x.ndim) if begin.get(d, 0) or end.get(d, 0)], default=-1)
    first = min([d for d in range(x.ndim) if begin.get(d, 0) or end.get(d, 0)], default=x.ndim)
    if last < 0:
        return x
    if mode != "constant" and x.ndim - first > 3:
        raise RumusError(f"Pad mode {mode!r} on more than the last 3 dims is not supported")
    for d in range(x.ndim - 1, first - 1, -1):
        torch_pad += [begin.get(d, 0), end.get(d, 0)]
    if mode == "constant":
        out: Tensor = F.pad(x, torch_pad, mode="constant", value=value)
        return out
    out = F.pad(x, torch_pad, mode=_PAD_MODES[mode])
    return out


def _einsum(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    ops_ = [T(v) for v in a]
    ref = ops_[0]
    out = C.einsum(str(at["equation"]), *[_same(ref, v) for v in ops_])
    return out if out.dtype == ref.dtype else out.to(ref.dtype)


def _reduce_via(kind: str) -> Fn:
    def run(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
        x = T(a[0])
        axes = _axes(a, at, x.ndim) if o >= 18 else (sorted({_norm(v, x.ndim) for v in at["axes"]})
                                                      if "axes" in at else None)
        if axes is None or not axes:
            if at.get("noop_with_empty_axes", 0):
                return x
            axes = list(range(x.ndim))
        dims = tuple(axes)
        keep = bool(at.get("keepdims", 1))
        if kind == "l2":
            return M.sqrt(op("sum")(M.mul(x, x), dims=dims) if keep else _views.squeeze(
                op("sum")(M.mul(x, x), dims=dims), dims))
        if kind == "l1":
            s = op("sum")(M.abs(x), dims=dims)
        elif kind == "sumsq":
            s = op("sum")(M.mul(x, x), dims=dims)
        elif kind == "logsumexp":
            return _logsumexp(x, dims, keep)
        else:  # logsum
            s = M.log(op("sum")(x, dims=dims))
        return s if keep else _views.squeeze(s, dims)
    return run


def _logsumexp(x: Tensor, dims: tuple[int, ...], keep: bool) -> Tensor:
    if any(x.shape[d] == 0 for d in dims):  # the sum of no terms is 0: log gives -inf
        s0 = M.log(op("sum")(M.exp(x), dims=dims))
        return s0 if keep else _views.squeeze(s0, dims)
    m = op("amax")(x, dims=dims)
    finite = M.where(op("isfinite")(m), m, M.mul(m, 0))
    s = M.add(M.log(op("sum")(M.exp(M.sub(x, finite)), dims=dims)), finite)
    return s if keep else _views.squeeze(s, dims)


def _hard_sigmoid(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x = T(a[0])
    alpha, beta = float(at.get("alpha", 0.2)), float(at.get("beta", 0.5))
    return M.clamp(M.add(M.mul(x, alpha), beta), 0.0, 1.0)


def _prelu(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x = T(a[0])
    slope = _same(x, a[1])
    return M.where(M.lt(x, 0), M.mul(x, slope), x)


def _size(a: list[Any], at: dict[str, Any], o: int) -> np.ndarray:
    v = a[0]
    return np.asarray(int(np.prod(v.shape)), dtype=np.int64)


def _range(a: list[Any], at: dict[str, Any], o: int) -> Any:
    """Range with device bounds (a graph computing them from a tensor): read them back; the length depends
    on their values."""
    start, limit, delta = (H(v).reshape(()) for v in a[:3])
    out = np.arange(start.item(), limit.item(), delta.item()).astype(start.dtype)
    return new(out) if out.dtype.kind == "f" else out


def _sum_mean(mean: bool) -> Fn:
    def run(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
        out = T(a[0])
        for v in a[1:]:
            out = M.add(out, _same(out, v))
        return M.div(out, float(len(a))) if mean else out
    return run


def _global_max(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x = T(a[0])
    return op("amax")(x, dims=tuple(range(2, x.ndim)))


def _depth_to_space(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x = T(a[0])
    b, c, h, w = x.shape
    s = int(at["blocksize"])
    if at.get("mode", "DCR") == "DCR":
        y = _views.permute(x.reshape((b, s, s, c // (s * s), h, w)), (0, 3, 4, 1, 5, 2))
    else:
        y = _views.permute(x.reshape((b, c // (s * s), s, s, h, w)), (0, 1, 4, 2, 5, 3))
    return y.reshape((b, c // (s * s), h * s, w * s))


def _space_to_depth(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x = T(a[0])
    b, c, h, w = x.shape
    s = int(at["blocksize"])
    perm = (0, 3, 5, 1, 2, 4) if at.get("mode", "DCR") == "DCR" else (0, 1, 3, 5, 2, 4)
    y = _views.permute(x.reshape((b, c, h // s, s, w // s, s)), perm)
    return y.reshape((b, c * s * s, h // s, w // s))


def _one_hot(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    idx = H(a[0]).astype(np.int64)
    depth = int(H(a[1]).reshape(-1)[0])
    values = H(a[2]).reshape(-1)
    axis = int(at.get("axis", -1))
    idx = np.where(idx < 0, idx + depth, idx)
    hot = np.expand_dims(idx, -1) == np.arange(depth)
    out = np.where(hot, values[1], values[0]).astype(values.dtype)
    if axis != -1:
        out = np.moveaxis(out, -1, axis % out.ndim)
    return new(out, dtype=a[2].dtype.name) if isinstance(a[2], Tensor) else new(out)


_NEAREST: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "round_prefer_floor": lambda v: np.ceil(v - 0.5), "round_prefer_ceil": lambda v: np.floor(v + 0.5),
    "floor": np.floor, "ceil": np.ceil}


def _source_coords(mode: str, i: np.ndarray, scale: float, n_in: int, n_out: float, roi: tuple[float, float]
                   ) -> np.ndarray:
    """ONNX Resize's coordinate_transformation_mode: where output index i samples the input axis (n_out is the
    resized length: n_in * scale when scales are given, which need not be a whole number)."""
    if mode == "half_pixel":
        return (i + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (i + 0.5) / scale - 0.5 if n_out > 1 else np.zeros_like(i)
    if mode == "align_corners":
        return i * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros_like(i)
    if mode == "asymmetric":
        return i / scale
    if mode == "tf_half_pixel_for_nn":
        return (i + 0.5) / scale
    if mode == "tf_crop_and_resize":
        lo, hi = roi
        if n_out > 1:
            return lo * (n_in - 1) + i * (hi - lo) * (n_in - 1) / (n_out - 1)
        return np.full_like(i, 0.5 * (lo + hi) * (n_in - 1))
    raise RumusError(f"Resize with coordinate_transformation_mode={mode!r} is not supported")


def _resize(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    """Nearest and linear Resize, one axis at a time (both are separable): the sampled input indices and
    weights are computed on the host with the spec's formulas, then gathered and blended."""
    x = T(a[0])
    mode = str(at.get("mode", "nearest"))
    coord = str(at.get("coordinate_transformation_mode", "half_pixel"))
    nearest = str(at.get("nearest_mode", "round_prefer_floor"))
    if mode not in ("nearest", "linear") or int(at.get("antialias", 0)) or nearest not in _NEAREST or \
            str(at.get("keep_aspect_ratio_policy", "stretch")) != "stretch":
        raise RumusError(f"Resize with mode={mode!r}, antialias={at.get('antialias', 0)}, nearest_mode={nearest!r}, "
                         f"keep_aspect_ratio_policy={at.get('keep_aspect_ratio_policy', 'stretch')!r} is not "
                         f"supported (nearest and non-antialiased linear are)")
    if mode == "linear" and not x.dtype.is_floating:
        raise RumusError(f"linear Resize of {x.dtype} data is not supported")
    axes = [_norm(int(v), x.ndim) for v in at["axes"]] if at.get("axes") is not None else list(range(x.ndim))
    roi_v = H(a[1]).reshape(-1).astype(np.float64) if len(a) > 1 and a[1] is not None and H(a[1]).size else None
    scales = H(a[2]).reshape(-1).astype(np.float64) if len(a) > 2 and a[2] is not None and H(a[2]).size else None
    sizes = _ints(a[3]) if len(a) > 3 and a[3] is not None and H(a[3]).size else None
    if (scales is None) == (sizes is None):
        raise RumusError("Resize needs exactly one of scales and sizes")
    extrapolate = float(at.get("extrapolation_value", 0.0))
    for j, d in enumerate(axes):
        n_in = x.shape[d]
        if sizes is not None:
            n_out, scale = sizes[j], sizes[j] / n_in
        else:
            scale = float(scales[j])  # type: ignore[index]
            n_out = int(np.floor(n_in * scale))
        roi = (0.0, 1.0) if roi_v is None else (float(roi_v[j]), float(roi_v[len(axes) + j]))
        if n_out == n_in and scale == 1.0 and coord != "tf_crop_and_resize":
            continue
        length = n_in * scale if sizes is None else float(n_out)
        src = _source_coords(coord, np.arange(n_out, dtype=np.float64), scale, n_in, length, roi)
        outside = (src < 0) | (src > n_in - 1)
        if mode == "nearest":
            idx = np.clip(_NEAREST[nearest](src), 0, n_in - 1).astype(np.int64)
            x = op("index_select")(x, new(idx), dim=d)
        else:
            c = np.clip(src, 0, n_in - 1)
            i0 = np.floor(c).astype(np.int64)
            i1 = np.minimum(i0 + 1, n_in - 1)
            shape = [1] * x.ndim
            shape[d] = n_out
            w = new((c - i0).reshape(shape), dtype=x.dtype.name)
            lo, hi = op("index_select")(x, new(i0), dim=d), op("index_select")(x, new(i1), dim=d)
            x = M.add(lo, M.mul(M.sub(hi, lo), w))
        if coord == "tf_crop_and_resize" and outside.any():
            shape = [1] * x.ndim
            shape[d] = n_out
            x = M.where(new(outside.reshape(shape)), new(np.asarray(extrapolate), dtype=x.dtype.name), x)
    return x


def _cast_like(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    return T(a[0]).to(T(a[1]).dtype)


def _eye_like(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x = T(a[0])
    k = int(at.get("k", 0))
    dt = _ONNX_TO_DTYPE[int(at["dtype"])] if "dtype" in at else x.dtype.name
    return new(np.eye(x.shape[0], x.shape[1], k), dtype=dt)


MORE_OPS: dict[str, Fn] = {
    "GatherND": _gather_nd, "ScatterND": _scatter_nd, "CumSum": _cumsum, "Tile": _tile, "TopK": _topk,
    "NonZero": _nonzero, "Pad": _pad, "Einsum": _einsum, "Resize": _resize, "OneHot": _one_hot,
    "ReduceL2": _reduce_via("l2"), "ReduceL1": _reduce_via("l1"), "ReduceSumSquare": _reduce_via("sumsq"),
    "ReduceLogSumExp": _reduce_via("logsumexp"), "ReduceLogSum": _reduce_via("logsum"),
    "Sign": lambda a, at, o: op("sign")(T(a[0])),
    "HardSwish": lambda a, at, o: F.hardswish(T(a[0])), "HardSigmoid": _hard_sigmoid,
    "Selu": lambda a, at, o: _selu(T(a[0]), at), "Celu": lambda a, at, o: F.celu(T(a[0]), float(at.get("alpha", 1.0))),
    "Mish": lambda a, at, o: F.mish(T(a[0])), "Softsign": lambda a, at, o: F.softsign(T(a[0])),
    "PRelu": _prelu, "Size": _size, "Range": _range, "Sum": _sum_mean(False), "Mean": _sum_mean(True),
    "GlobalMaxPool": _global_max, "DepthToSpace": _depth_to_space, "SpaceToDepth": _space_to_depth,
    "CastLike": _cast_like, "EyeLike": _eye_like,
    "Tan": lambda a, at, o: M.div(M.sin(T(a[0])), M.cos(T(a[0]))),
}


def _selu(x: Tensor, at: dict[str, Any]) -> Tensor:
    alpha, gamma = float(at.get("alpha", 1.67326319217681884765625)), float(at.get("gamma", 1.05070102214813232421875))
    return M.mul(M.where(M.gt(x, 0), x, M.mul(M.sub(M.exp(x), 1.0), alpha)), gamma)


__all__ = ["DEVICE", "MORE_OPS"]
