"""ONNX ops in rumus: what our exporter emits and what PyTorch's exporter emits for the same layers
(the host-side shape arithmetic is in _interpret_host)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rumus_contracts import FormatError, RumusError

from .. import _composites_torch as C
from .. import _creation
from .. import _math as M
from .. import _views
from ..nn import functional as F
from ..ops import get as _get_op
from ..tensor import Tensor
from ._interpret_host import _ONNX_TO_DTYPE, DEVICE, OUTPUTS, Fn, H, T, Value, _axes, _ints, _norm, _target, new
from ._interpret_more import MORE_OPS
from ._interpret_rnn import RNN_OPS

__all__ = ["DEVICE", "OPS", "Value"]


def op(name: str) -> Callable[..., Tensor]:
    """rumus.ops.<name>, looked up on first call: building the table at import must not load the plugins
    (a plugin that imports rumus would wait on itself)."""
    def call(*args: Any, **attrs: Any) -> Tensor:
        return _get_op(name)(*args, **attrs)
    return call


def _same(x: Tensor, y: Value) -> Tensor:
    """y as a tensor of x's dtype (graphs mix host ints and tensors in shape arithmetic)."""
    t = T(y)
    return t if t.dtype == x.dtype else t.to(x.dtype)


def _bin(fn: Callable[[Tensor, Tensor], Tensor]) -> Fn:
    def run(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
        x = T(a[0]) if isinstance(a[0], Tensor) or not isinstance(a[1], Tensor) else _same(a[1], a[0])
        return fn(x, _same(x, a[1]))
    return run


def _unary(fn: Callable[[Tensor], Tensor]) -> Fn:
    return lambda a, at, o: fn(T(a[0]))


def _reshape(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x = T(a[0])
    return x.reshape(_target(x.shape, _ints(a[1]), at))


def _transpose(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x = T(a[0])
    perm = at.get("perm", list(range(x.ndim))[::-1])
    return _views.permute(x, tuple(int(p) for p in perm))


def _expand(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x, shape = T(a[0]), _ints(a[1])
    nd = max(x.ndim, len(shape))
    xs = (1,) * (nd - x.ndim) + x.shape
    ss = [1] * (nd - len(shape)) + shape
    target = tuple(max(i, s) if 1 in (i, s) else i for i, s in zip(xs, ss))
    return _views.expand(x.reshape(xs), target)


def _slice(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x = T(a[0])
    starts, ends = _ints(a[1]), _ints(a[2])
    axes = _ints(a[3]) if len(a) > 3 and a[3] is not None else list(range(len(starts)))
    steps = _ints(a[4]) if len(a) > 4 and a[4] is not None else [1] * len(starts)
    index: list[Any] = [slice(None)] * x.ndim
    backwards: list[tuple[int, int, int, int]] = []
    for s, e, ax, st in zip(starts, ends, axes, steps):
        if st == 0:
            raise FormatError("Slice with step 0")
        if st < 0:
            backwards.append((s, e, _norm(ax, x.ndim), st))
            continue
        index[_norm(ax, x.ndim)] = slice(s, e, st)
    out = _views.getitem(x, tuple(index))
    for s, e, d, st in backwards:  # a negative step (torch's flip): the spec's clamping, then a gather
        n = out.shape[d]
        s = min(max(s + n if s < 0 else s, 0), n - 1)
        e = min(max(e + n if e < 0 else e, -1), n - 1)
        out = op("index_select")(out, new(np.arange(s, e, st, dtype=np.int64)), dim=d)
    return out


def _gather(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x, idx = T(a[0]), a[1]
    axis = _norm(int(at.get("axis", 0)), x.ndim)
    if isinstance(idx, np.ndarray) and idx.ndim == 0:
        return _views.select(x, axis, int(idx))
    it = _wrap_negative(T(idx), x.shape[axis])
    flat = op("index_select")(x, it.reshape(-1), dim=axis)
    return flat.reshape((*x.shape[:axis], *it.shape, *x.shape[axis + 1:]))


def _wrap_negative(idx: Tensor, size: int) -> Tensor:
    """ONNX indices may be negative (from the end): rumus's gathers take 0..size-1."""
    if idx.dtype.name != "int64":
        idx = idx.to("int64")
    return M.where(M.lt(idx, 0), M.add(idx, size), idx)


def _gather_elements(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x = T(a[0])
    axis = _norm(int(at.get("axis", 0)), x.ndim)
    return op("gather")(x, _wrap_negative(T(a[1]), x.shape[axis]), dim=axis)


def _concat(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    ts = [T(v) for v in a]
    return M.cat(ts, _norm(int(at["axis"]), ts[0].ndim))


def _split(a: list[Any], at: dict[str, Any], o: int) -> list[Tensor]:
    x = T(a[0])
    axis = _norm(int(at.get("axis", 0)), x.ndim)
    if len(a) > 1 and a[1] is not None:
        sizes = _ints(a[1])
    elif "split" in at:
        sizes = [int(s) for s in at["split"]]
    else:
        n = int(at.get("num_outputs", 0)) or int(at.get(OUTPUTS, 1))
        size = -(-x.shape[axis] // n)
        sizes = [min(size, x.shape[axis] - i * size) for i in range(n)]
    return list(_views.split(x, sizes, axis))


def _squeeze(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x = T(a[0])
    axes = _axes(a, at, x.ndim)
    return _views.squeeze(x, tuple(axes) if axes is not None else None)


def _unsqueeze(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x = T(a[0])
    axes = _ints(a[1]) if len(a) > 1 and a[1] is not None else list(at["axes"])
    nd = x.ndim + len(axes)
    for ax in sorted(ax % nd for ax in axes):
        x = _views.unsqueeze(x, ax)
    return x


def _flatten(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x = T(a[0])
    axis = int(at.get("axis", 1))
    axis = axis + x.ndim if axis < 0 else axis
    lead = int(np.prod(x.shape[:axis]))
    return x.reshape((lead, int(np.prod(x.shape[axis:]))))


def _empty_extreme(x: Tensor, dims: tuple[int, ...], largest: bool) -> Tensor:
    """ReduceMax / ReduceMin over an empty set: the identity (ONNX: the lowest / highest value of the type)."""
    shape = tuple(1 if d in dims else n for d, n in enumerate(x.shape))
    np_type = x.dtype.numpy
    if x.dtype.is_bool:
        value: Any = not largest
    elif x.dtype.is_floating:
        value = -np.inf if largest else np.inf
    else:
        info = np.iinfo(np.dtype(np_type).name)
        value = int(info.min if largest else info.max)
    return _creation.full(shape, value, dtype=x.dtype, device=x.device)


def _reduce(name: str) -> Fn:
    def run(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
        x = T(a[0])
        use_input = name in ("sum",) and o >= 13 or o >= 18
        axes = _axes(a, at, x.ndim) if use_input else (sorted({_norm(v, x.ndim) for v in at["axes"]})
                                                        if "axes" in at else None)
        if axes is None or not axes:
            if at.get("noop_with_empty_axes", 0):
                return x
            axes = list(range(x.ndim))
        dims = tuple(axes)
        out: Tensor
        if name in ("amax", "amin") and any(x.shape[d] == 0 for d in dims):
            out = _empty_extreme(x, dims, name == "amax")
        elif x.dtype.is_bool and name in ("amax", "amin"):  # any / all (torch's dynamo exporter writes these)
            out = op(name)(x.to("int32"), dims=dims).to("bool")
        else:
            out = op(name)(x, dims=dims) if name != "mean" else M.mean(x, dims, keepdim=True)
        return out if at.get("keepdims", 1) else _views.squeeze(out, dims)
    return run


def _arg(name: str) -> Fn:
    def run(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
        x = T(a[0])
        axis = _norm(int(at.get("axis", 0)), x.ndim)
        fn = M.argmax if name == "argmax" else M.argmin
        keep = bool(at.get("keepdims", 1))
        if at.get("select_last_index", 0):  # the first extreme of the reversed axis is the last one
            first: Tensor = fn(C.flip(x, [axis]), axis, keepdim=keep)
            return M.sub(new(np.asarray(x.shape[axis] - 1, dtype=np.int64)), first)
        out: Tensor = fn(x, axis, keepdim=keep)
        return out
    return run


def _cast(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    to = int(at["to"])
    if to not in _ONNX_TO_DTYPE:
        raise RumusError(f"Cast to ONNX data type {to} is not supported (rumus has no such dtype)")
    return T(a[0]).to(_ONNX_TO_DTYPE[to])


def _clip(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x = T(a[0])
    lo = a[1] if len(a) > 1 else at.get("min")
    hi = a[2] if len(a) > 2 else at.get("max")
    lo_v = None if lo is None else float(H(lo)) if x.dtype.is_floating else int(H(lo))
    hi_v = None if hi is None else float(H(hi)) if x.dtype.is_floating else int(H(hi))
    if lo_v is None and hi_v is None:
        return x
    return M.clamp(x, lo_v, hi_v)


def _gemm(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x, w = T(a[0]), T(a[1])
    if at.get("transA", 0):
        x = x.mT
    if at.get("transB", 0):
        w = w.mT
    out = M.matmul(x, w)
    alpha, beta = float(at.get("alpha", 1.0)), float(at.get("beta", 1.0))
    if alpha != 1.0:
        out = M.mul(out, alpha)
    if len(a) > 2 and a[2] is not None:
        c = _same(out, a[2])
        out = M.add(out, c if beta == 1.0 else M.mul(c, beta))
    return out


def _pads(at: dict[str, Any], k: int = 2) -> tuple[int, int]:
    if at.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise RumusError(f"auto_pad={at['auto_pad']} is not supported; export with explicit pads")
    pads = [int(p) for p in at.get("pads", [0] * 2 * k)]
    if pads[:k] != pads[k:]:
        raise RumusError(f"asymmetric pads {pads} are not supported")
    return (pads[0], pads[1])


def _pair(at: dict[str, Any], key: str, default: int = 1) -> tuple[int, int]:
    v = [int(x) for x in at.get(key, [default, default])]
    return (v[0], v[1])


def _conv(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x, w = T(a[0]), T(a[1])
    if x.ndim != 4:
        raise RumusError(f"Conv on {x.ndim - 2}-d data is not supported (2-d only)")
    out = op("conv2d")(x, w, stride=_pair(at, "strides"), padding=_pads(at), dilation=_pair(at, "dilations"),
                       groups=int(at.get("group", 1)))
    if len(a) > 2 and a[2] is not None:
        out = M.add(out, T(a[2]).reshape((1, -1, 1, 1)))
    return out


def _conv_transpose(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x, w = T(a[0]), T(a[1])
    if x.ndim != 4 or "output_shape" in at:
        raise RumusError("ConvTranspose: only 2-d data with pads/output_padding is supported")
    out = F.conv_transpose2d(x, w, None, stride=_pair(at, "strides"), padding=_pads(at),
                             output_padding=_pair(at, "output_padding", 0), groups=int(at.get("group", 1)),
                             dilation=_pair(at, "dilations"))
    if len(a) > 2 and a[2] is not None:
        out = M.add(out, T(a[2]).reshape((1, -1, 1, 1)))
    return out


def _pool_input(a: list[Any], op_type: str) -> Tensor:
    x = T(a[0])
    if x.ndim != 4:
        raise RumusError(f"{op_type} on {x.ndim - 2}-d data is not supported (2-d only)")
    return x


def _max_pool(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    if int(at.get("storage_order", 0)):
        raise RumusError("MaxPool with storage_order=1 is not supported")
    x = _pool_input(a, "MaxPool")
    k = _pair(at, "kernel_shape")
    return op("max_pool2d")(x, kernel_size=k, stride=_pair(at, "strides"), padding=_pads(at),
                            dilation=_pair(at, "dilations"), ceil_mode=bool(at.get("ceil_mode", 0)))


def _avg_pool(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    if any(int(d) != 1 for d in at.get("dilations", [])):
        raise RumusError("AveragePool with dilations is not supported")
    x = _pool_input(a, "AveragePool")
    k = _pair(at, "kernel_shape")
    return op("avg_pool2d")(x, kernel_size=k, stride=_pair(at, "strides"), padding=_pads(at),
                            ceil_mode=bool(at.get("ceil_mode", 0)),
                            count_include_pad=bool(at.get("count_include_pad", 0)))


def _batch_norm(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    if at.get("training_mode", 0):
        raise RumusError("BatchNormalization in training mode is not supported")
    x = T(a[0])
    return op("batch_norm")(x, *(_same(x, v) for v in a[1:5]), eps=float(at.get("epsilon", 1e-5)), training=False)


def _layer_norm(a: list[Any], at: dict[str, Any], o: int) -> Any:
    x = T(a[0])
    axis = _norm(int(at.get("axis", -1)), x.ndim)
    w = _same(x, a[1])
    b = _same(x, a[2]) if len(a) > 2 and a[2] is not None else M.mul(w, 0.0)
    shape = x.shape[axis:]
    eps = float(at.get("epsilon", 1e-5))
    w = w.reshape(shape) if w.numel() == int(np.prod(shape)) else _views.expand(w, shape).contiguous()
    b = b.reshape(shape) if b.numel() == int(np.prod(shape)) else _views.expand(b, shape).contiguous()
    y = op("layer_norm")(x, w, b, eps=eps)
    if int(at.get(OUTPUTS, 1)) == 1:
        return y
    dims = tuple(range(axis, x.ndim))  # the optional Mean and InvStdDev outputs
    mean = M.mean(x, dims, keepdim=True)
    var = M.mean(M.mul(M.sub(x, mean), M.sub(x, mean)), dims, keepdim=True)
    return [y, mean, M.reciprocal(M.sqrt(M.add(var, eps)))]


def _instance_norm(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x = T(a[0])  # instance norm is group norm with one channel per group
    return op("group_norm")(x, _same(x, a[1]), _same(x, a[2]), num_groups=x.shape[1],
                            eps=float(at.get("epsilon", 1e-5)))


def _softmax(name: str) -> Fn:
    def run(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
        x = T(a[0])
        if o < 13:
            raise RumusError(f"{name} before opset 13 (2-d coercion) is not supported")
        return op(name)(x, dim=_norm(int(at.get("axis", -1)), x.ndim))
    return run


def _constant_of_shape(a: list[Any], at: dict[str, Any], o: int) -> Value:
    value = np.asarray(at.get("value", np.zeros(1, dtype=np.float32))).reshape(-1)
    shape = tuple(_ints(a[0]))
    if value.dtype.kind != "f":
        _creation.check_size("ConstantOfShape", shape, value.dtype.itemsize)
        return np.full(shape, value[0], dtype=value.dtype)
    return _creation.full(shape, float(value[0]), dtype=str(value.dtype), device=DEVICE.get())


def _trilu(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x = T(a[0])
    k = int(H(a[1])) if len(a) > 1 and a[1] is not None else 0
    n, m = x.shape[-2], x.shape[-1]
    _creation.check_size("Trilu", x.shape, x.element_size())  # the result; the host mask is at most as big
    rows, cols = np.arange(n)[:, None], np.arange(m)[None, :]
    keep = (cols - rows >= k) if int(at.get("upper", 1)) else (cols - rows <= k)
    return M.where(new(keep), x, _creation.zeros((), dtype=x.dtype, device=x.device))


def _where(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    c = T(a[0])
    ref = a[1] if isinstance(a[1], Tensor) else a[2]
    x = T(ref)
    return M.where(c if c.dtype.is_bool else c.to("bool"), _same(x, a[1]), _same(x, a[2]))


def _softplus(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    return op("softplus")(T(a[0]), beta=1.0, threshold=float("inf"))


def _pow(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x = T(a[0])
    if x.dtype.is_floating:
        return M.pow(x, _same(x, a[1]))
    # an integer base keeps its type (ONNX): computed in float64, rounded back
    out = M.pow(x.to("float64"), T(a[1]).to("float64"))
    return op("round")(out).to(x.dtype)


def _div(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    """Integer Div truncates toward zero (ONNX, like C); floats divide."""
    x = T(a[0]) if isinstance(a[0], Tensor) or not isinstance(a[1], Tensor) else _same(a[1], a[0])
    y = _same(x, a[1])
    if x.dtype.is_floating:
        return M.div(x, y)
    q: Tensor = op("floor_divide")(x, y)
    inexact = M.ne(M.sub(x, M.mul(q, y)), 0)
    signs_differ = M.ne(M.lt(x, 0), M.lt(y, 0))
    return M.where(M.logical_and(inexact, signs_differ), M.add(q, 1), q)


def _dropout(a: list[Any], at: dict[str, Any], o: int) -> Any:
    x = T(a[0])
    training = len(a) > 2 and a[2] is not None and bool(H(a[2]).reshape(-1)[0])
    ratio = float(H(a[1]).reshape(-1)[0]) if len(a) > 1 and a[1] is not None else float(at.get("ratio", 0.5))
    if training and ratio > 0:
        raise RumusError("Dropout with training_mode=True is not supported (inference only: export in eval mode)")
    return [x, _creation.ones(x.shape, dtype="bool", device=x.device)]


def _global_avg(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x = T(a[0])
    return M.mean(x, tuple(range(2, x.ndim)), keepdim=True)


def _min_max(fn: Callable[[Tensor, Tensor], Tensor]) -> Fn:
    def run(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
        out = T(a[0])
        for v in a[1:]:
            out = fn(out, _same(out, v))
        return out
    return run


def _gelu(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    return F.gelu(T(a[0]), approximate=str(at.get("approximate", "none")))


def _scatter(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    """ScatterElements (torch's scatter / scatter_add / index_put): reduction add, or none (an addressed
    element takes the update; ONNX leaves duplicates undefined). Negative indices count from the end."""
    reduction = at.get("reduction", "none")
    if reduction not in ("none", "add"):
        raise RumusError(f"ScatterElements with reduction={reduction!r} is not supported (none, add)")
    x = T(a[0])
    dim = _norm(int(at.get("axis", 0)), x.ndim)
    idx = T(a[1])
    idx = M.where(M.lt(idx, 0), M.add(idx, x.shape[dim]), idx)
    upd = _same(x, a[2])
    if reduction == "add":
        return op("scatter_add")(x, idx, upd, dim=dim)
    zeros = _creation.zeros(x.shape, dtype="float32", device=x.device)
    hit = op("scatter_add")(zeros, idx, _creation.ones(idx.shape, dtype="float32", device=x.device), dim=dim)
    if x.dtype.is_floating:
        placed = op("scatter_add")(M.mul(x, 0), idx, upd, dim=dim)
    else:  # scatter_add takes floats: integers go through float64, exact up to 2**53
        placed = op("scatter_add")(zeros.to("float64"), idx, upd.to("float64"), dim=dim).to(x.dtype)
    return M.where(M.gt(hit, 0), placed, x)


def _mod(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    # fmod=1: the dividend's sign (C fmod); fmod=0: the divisor's sign (Python's %), as ONNX defines Mod
    out: Tensor = _bin(op("fmod") if int(at.get("fmod", 0)) else op("remainder"))(a, at, o)
    return out


def _isinf(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x = T(a[0])
    pos, neg = int(at.get("detect_positive", 1)), int(at.get("detect_negative", 1))
    inf: Tensor = op("isinf")(x)
    if pos and neg:
        return inf
    if not pos and not neg:
        return M.logical_and(inf, M.lt(x, x))  # all False, in x's shape
    return M.logical_and(inf, M.gt(x, 0) if pos else M.lt(x, 0))


def _atan(a: list[Any], at: dict[str, Any], o: int) -> Tensor:
    x = T(a[0])
    out: Tensor = op("atan2")(x, _creation.ones((), dtype=x.dtype, device=x.device))
    return out


def _one_d(fn: Fn, weighted: bool) -> Fn:
    """A 2-d op run on 1-d data ([N, C, L], torch's Conv1d / MaxPool1d / ConvTranspose1d): [N, C, 1, L] with a
    kernel of height 1 (and no padding or stride along it), the result squeezed back."""
    def run(a: list[Any], at: dict[str, Any], o: int) -> Any:
        x = T(a[0])
        if x.ndim != 3:
            return fn(a, at, o)
        wide = {"kernel_shape": 1, "strides": 1, "dilations": 1, "output_padding": 0}
        at2 = {k: [wide[k], *[int(v) for v in val]] if k in wide else val for k, val in at.items()}
        if "pads" in at:
            begin, end = (int(v) for v in at["pads"])
            at2["pads"] = [0, begin, 0, end]
        args = [_views.unsqueeze(x, 2), *a[1:]]
        if weighted:
            args[1] = _views.unsqueeze(T(a[1]), 2)
        out = fn(args, at2, o)
        return _views.squeeze(out, 2) if isinstance(out, Tensor) else tuple(_views.squeeze(t, 2) for t in out)
    return run


OPS: dict[str, Fn] = {
    "Floor": _unary(op("floor")), "Ceil": _unary(op("ceil")), "Round": _unary(op("round")), "Mod": _mod,
    "Atan": _atan, "IsNaN": _unary(op("isnan")), "IsInf": _isinf,
    "And": _bin(op("logical_and")), "Or": _bin(op("logical_or")), "Xor": _bin(op("logical_xor")),
    "Add": _bin(M.add), "Sub": _bin(M.sub), "Mul": _bin(M.mul), "Div": _div, "Pow": _pow,
    "Max": _min_max(M.maximum), "Min": _min_max(M.minimum),
    "Equal": _bin(M.eq), "Less": _bin(M.lt), "LessOrEqual": _bin(M.le), "Greater": _bin(M.gt),
    "GreaterOrEqual": _bin(M.ge), "Not": _unary(M.logical_not), "Where": _where,
    "Neg": _unary(M.neg), "Abs": _unary(M.abs), "Exp": _unary(M.exp), "Log": _unary(M.log), "Sqrt": _unary(M.sqrt),
    "Reciprocal": _unary(M.reciprocal), "Sin": _unary(M.sin), "Cos": _unary(M.cos), "Tanh": _unary(M.tanh),
    "Sigmoid": _unary(M.sigmoid), "Relu": _unary(M.relu), "Erf": _unary(op("erf")), "Gelu": _gelu,
    "Elu": lambda a, at, o: op("elu")(T(a[0]), alpha=float(at.get("alpha", 1.0))),
    "LeakyRelu": lambda a, at, o: op("leaky_relu")(T(a[0]), negative_slope=float(at.get("alpha", 0.01))),
    "Softplus": _softplus, "Softmax": _softmax("softmax"), "LogSoftmax": _softmax("log_softmax"),
    "Clip": _clip, "Cast": _cast, "Identity": lambda a, at, o: a[0], "Dropout": _dropout,
    "MatMul": _bin(M.matmul), "Gemm": _gemm,
    "ReduceSum": _reduce("sum"), "ReduceMean": _reduce("mean"), "ReduceMax": _reduce("amax"),
    "ReduceMin": _reduce("amin"), "ReduceProd": _reduce("prod"), "ArgMax": _arg("argmax"), "ArgMin": _arg("argmin"),
    "Reshape": _reshape, "Transpose": _transpose, "Expand": _expand, "Slice": _slice, "Gather": _gather,
    "GatherElements": _gather_elements,
    "ScatterElements": _scatter, "Concat": _concat, "Split": _split, "Squeeze": _squeeze, "Unsqueeze": _unsqueeze,
    "Flatten": _flatten, "ConstantOfShape": _constant_of_shape, "Trilu": _trilu,
    "Conv": _one_d(_conv, True), "ConvTranspose": _one_d(_conv_transpose, True),
    "MaxPool": _one_d(_max_pool, False), "AveragePool": _one_d(_avg_pool, False),
    "GlobalAveragePool": _global_avg, "BatchNormalization": _batch_norm, "LayerNormalization": _layer_norm,
    "InstanceNormalization": _instance_norm,
}
OPS.update(RNN_OPS)
OPS.update(MORE_OPS)
