"""PyTorch's structural tensor ops as composites of core ops (index_select, cat, where, matmul, sums):
no kernels of their own, so they run on every backend and their gradients come from the primitives.

Index patterns that depend only on shapes (flip, roll, reflect padding ...) are computed on the host and
uploaded as small int64 tensors; nothing here reads tensor values back to the host except multinomial.
"""

from __future__ import annotations

import builtins
import math
from typing import Any, NamedTuple

import numpy as np

from rumus_contracts import DTypeError, RumusError, ShapeError, bool_, int64
from rumus_contracts.shapes import normalize_dim

from . import _creation, _dispatch
from . import _math as M
from ._indexing import gather, index_add, index_select, scatter_add
from .amp.policy import for_op as autocast_for_op
from .autograd.formulas import formula
from .autograd.graph import Context
from .ops import get as _op
from .tensor import Tensor


def _idx(values: Any, like: Tensor) -> Tensor:
    return _creation.tensor(np.asarray(values, dtype=np.int64).tolist(), dtype=int64, device=like.device)


def _dims_arg(dims: Any) -> tuple[int, ...]:
    return (int(dims),) if isinstance(dims, int) else tuple(int(d) for d in dims)


# ---- triangles --------------------------------------------------------------------------------------
def _triangle(name: str, x: Tensor, diagonal: int, lower: bool) -> Tensor:
    if x.ndim < 2:
        raise ShapeError(f"{name}: input tensor must have at least 2 dimensions, got shape {tuple(x.shape)}")
    rows, cols = x.shape[-2], x.shape[-1]
    _creation.check_size(name, x.shape, x.element_size())  # the output; the host mask is at most as big
    r = np.arange(rows)[:, None]
    c = np.arange(cols)[None, :]
    keep = (c - r <= diagonal) if lower else (c - r >= diagonal)
    mask = _creation.tensor(keep.tolist() if rows * cols else np.zeros((rows, cols), bool), dtype="bool",
                            device=x.device)
    if x.dtype == bool_:  # bool stays bool, as in torch (an attn_mask built with triu)
        return M.logical_and(x, mask)
    return M.where(mask, x, M._t(0, x))


def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    return _triangle("tril", x, diagonal, True)


def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    return _triangle("triu", x, diagonal, False)


# ---- reordering -------------------------------------------------------------------------------------
def flip(x: Tensor, dims: Any) -> Tensor:
    for d in _dims_arg(dims):
        d = normalize_dim("flip", d, x.ndim)
        x = index_select(x, d, _idx(np.arange(x.shape[d] - 1, -1, -1), x))
    return x


def fliplr(x: Tensor) -> Tensor:
    return flip(x, 1)


def flipud(x: Tensor) -> Tensor:
    return flip(x, 0)


def roll(x: Tensor, shifts: Any, dims: Any = None) -> Tensor:
    if dims is None:
        return roll(x.flatten(), shifts, 0).reshape(x.shape)
    shift_list, dim_list = _dims_arg(shifts), _dims_arg(dims)
    if len(shift_list) != len(dim_list):
        raise RumusError(f"roll: shifts {shift_list} and dims {dim_list} must have the same length")
    for s, d in zip(shift_list, dim_list):
        d = normalize_dim("roll", d, x.ndim)
        n = x.shape[d]
        if n == 0 or s % n == 0:
            continue
        k = s % n
        x = M.cat([x.narrow(d, n - k, k), x.narrow(d, 0, n - k)], d)
    return x


def repeat(x: Tensor, *sizes: Any) -> Tensor:
    reps = tuple(int(s) for s in (sizes[0] if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes))
    if len(reps) < x.ndim:
        raise RumusError(f"repeat: number of repeat dims ({len(reps)}) can not be smaller than the number of "
                         f"dimensions of the tensor ({x.ndim})")
    shape = (1,) * (len(reps) - x.ndim) + tuple(x.shape)
    inter: list[int] = []
    expanded: list[int] = []
    for r, s in zip(reps, shape):
        inter += [1, s]
        expanded += [r, s]
    out = x.reshape(inter).expand(expanded)
    return out.reshape([r * s for r, s in zip(reps, shape)])


def repeat_interleave(x: Tensor, repeats: Any, dim: int | None = None) -> Tensor:
    if dim is None:
        x, dim = x.flatten(), 0
    d = normalize_dim("repeat_interleave", dim, x.ndim)
    if isinstance(repeats, int):
        if repeats < 0:
            raise ShapeError(f"repeat_interleave: repeats must be non-negative, got {repeats}")
        _creation.check_size("repeat_interleave", [*x.shape[:d], x.shape[d] * repeats, *x.shape[d + 1:]],
                             builtins.max(x.element_size(), 8))
        reps = np.full(x.shape[d], repeats, dtype=np.int64)
    else:
        reps = np.asarray(repeats.tolist() if isinstance(repeats, Tensor) else repeats, dtype=np.int64).reshape(-1)
        if reps.size == 1:
            reps = np.full(x.shape[d], int(reps[0]), dtype=np.int64)
    if reps.size != x.shape[d] or (reps.size and reps.min() < 0):
        raise ShapeError(f"repeat_interleave: repeats must be non-negative and match dim {d} of size "
                         f"{x.shape[d]}, got {reps.tolist()[:16]}")
    total = builtins.sum(int(r) for r in reps)  # Python ints: no int64 overflow on absurd repeats
    out_shape = [*x.shape[:d], total, *x.shape[d + 1:]]
    _creation.check_size("repeat_interleave", out_shape, builtins.max(x.element_size(), 8))  # and its int64 index
    return index_select(x, d, _idx(np.repeat(np.arange(x.shape[d]), reps), x))


# ---- scans ------------------------------------------------------------------------------------------
# A backend's cumsum / cumprod kernel walks each row in order, as PyTorch does (rumus_cpu: float64
# accumulation like PyTorch's CPU; rumus_wgpu: float32 like PyTorch's CUDA). The doubling scan below is the
# composite for a backend without one (and what an ONNX trace records): it reorders the additions, so it is
# exact only for integers and for values of one magnitude.
def _scan(name: str, x: Tensor, dim: int, combine: Any, identity: float) -> Tensor:
    """Inclusive scan by doubling (Hillis-Steele): log2(n) steps of x <- x (+) x shifted by 2**k."""
    d = normalize_dim(name, dim, x.ndim) if x.ndim else 0
    if x.ndim == 0:
        return M.add(x, M._t(0, x))
    n = x.shape[d]
    step = 1
    while step < n:
        pad_shape = list(x.shape)
        pad_shape[d] = step
        pad = _creation.full(tuple(pad_shape), identity, dtype=x.dtype, device=x.device)
        x = combine(x, M.cat([pad, x.narrow(d, 0, n - step)], d))
        step *= 2
    return x


def _cumsum_composite(x: Tensor, dim: int = 0) -> Tensor:
    out = _scan("cumsum", x, dim, M.add, 0)
    return out if out is not x else M.add(x, M._t(0, x))


def _cumprod_composite(x: Tensor, dim: int = 0) -> Tensor:
    out = _scan("cumprod", x, dim, M.mul, 1)
    return out if out is not x else M.mul(x, M._t(1, x))


def _scan_input(name: str, x: Tensor, dim: int, dtype: Any) -> tuple[Tensor, int]:
    (x,) = autocast_for_op(name, x)
    if dtype is not None:
        x = x.to(dtype=dtype)
    elif not x.dtype.is_floating:
        x = x.to(dtype=int64)  # PyTorch: integer and bool cumulative sums are int64
    return x, (normalize_dim(name, dim, x.ndim) if x.ndim else 0)


def _traced() -> bool:
    return _dispatch._tracer is not None  # rumus.onnx installs its tracer on the dispatcher while it traces


def cumsum(x: Tensor, dim: int, dtype: Any = None) -> Tensor:
    x, d = _scan_input("cumsum", x, dim, dtype)
    return _cumsum_composite(x, d) if _traced() else _op("cumsum")(x, dim=d)


def cumprod(x: Tensor, dim: int, dtype: Any = None) -> Tensor:
    x, d = _scan_input("cumprod", x, dim, dtype)
    return _cumprod_composite(x, d) if _traced() else _op("cumprod")(x, dim=d)


def _reverse_cumsum(g: Tensor, d: int) -> Tensor:
    return flip(_op("cumsum")(flip(g, d), dim=d), d) if g.ndim else g


@formula("cumsum")
def _cumsum_backward(ctx: Context, g: Tensor) -> tuple[Tensor]:
    return (_reverse_cumsum(g, int(ctx.attrs["dim"])),)


@formula("cumprod", inputs=True, outputs=True)
def _cumprod_backward(ctx: Context, g: Tensor) -> tuple[Tensor]:
    """d out_k / d x_i = prod_{j <= k, j != i} x_j. Away from zeros that is out_k / x_i (PyTorch's
    reverse_cumsum(g * out) / x); after a row's first zero every gradient is 0, and at the first zero it
    is the reverse cumsum of g times the products with that zero left out."""
    (x,), (out,) = ctx.inputs, ctx.outputs
    d = int(ctx.attrs["dim"]) if x.ndim else 0
    if not x.ndim:
        return (g,)
    zero = M.eq(x, 0)
    first = M.logical_and(zero, M.eq(_op("cumsum")(zero.to(dtype=x.dtype), dim=d), 1))
    skipped = _op("cumprod")(M.where(first, M._t(1, x), x), dim=d)
    away = M.div(_reverse_cumsum(M.mul(g, out), d), M.where(zero, M._t(1, x), x))
    at_first = _reverse_cumsum(M.mul(g, skipped), d)
    return (M.where(zero, M.where(first, at_first, M._t(0, x)), away),)


# ---- norms ------------------------------------------------------------------------------------------
def norm(x: Tensor, p: Any = "fro", dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
    (x,) = autocast_for_op("norm", x)
    if dtype is not None:
        x = x.to(dtype=dtype)
    if not x.dtype.is_floating:
        raise DTypeError(f"norm: needs a floating-point tensor, got {x.dtype}; cast it with .float()")
    if p == "fro" or p == 2 or p is None:
        return _p_norm(x, 2.0, dim, keepdim)
    if p == "nuc":
        raise RumusError("norm(p='nuc') needs singular values, which RUMUS does not compute yet")
    if p == math.inf or p == "inf":
        return M.amax(M.abs(x), dim, keepdim)
    if p == -math.inf:
        return M.amin(M.abs(x), dim, keepdim)
    p = float(p)
    if p == 0:
        return M.sum(M.ne(x, 0).to(dtype=x.dtype), dim, keepdim)
    if p == 1:
        return M.sum(M.abs(x), dim, keepdim)
    return _p_norm(x, p, dim, keepdim)


def _p_norm(x: Tensor, p: float, dim: Any, keepdim: bool) -> Tensor:
    """(sum |x|^p)^(1/p); a slice that is all zeros has norm 0 and gradient 0 (PyTorch's subgradient), not
    the chain rule's 0 * inf = NaN: the root is taken of 1 there and its branch not selected."""
    dims = M._dims("norm", x, dim)
    a = M.abs(x)
    total = _op("sum")(M.mul(x, x) if p == 2.0 else M.pow(a, p), dims=dims)
    zero = M.eq(total, 0)
    safe = M.where(zero, M._t(1, total), total)
    root = M.sqrt(safe) if p == 2.0 else M.pow(safe, 1.0 / p)
    return M._finish(M.where(zero, M._t(0, total), root), dims, keepdim)


# ---- scatter / in-place index forms -----------------------------------------------------------------
def scatter(x: Tensor, dim: int, index: Tensor, src: Any = None, value: Any = None,
            reduce: str | None = None) -> Tensor:
    """Out-of-place scatter: x with x[index[i][j]][j] = src[i][j] (dim 0). Positions named twice are
    undefined in PyTorch; here they receive the sum."""
    if src is None:
        src = value
    if reduce is not None:
        if reduce != "add":
            raise RumusError(f"scatter(reduce={reduce!r}) is not supported; use reduce='add' or scatter_add")
        return scatter_add(x, dim, index, _as_src(src, x, index))
    s = _as_src(src, x, index)
    hit = scatter_add(_creation.zeros_like(x), dim, index, M._t(1, x).expand(index.shape))
    placed = scatter_add(_creation.zeros_like(x), dim, index, s)
    return M.where(M.ne(hit, 0), placed, x)


def _as_src(src: Any, x: Tensor, index: Tensor) -> Tensor:
    if isinstance(src, Tensor):
        s: Tensor = src
        if tuple(s.shape) != tuple(index.shape):
            s = s[tuple(slice(0, n) for n in index.shape)]  # PyTorch reads only index's extent of src
        return s if s.dtype == x.dtype else s.to(dtype=x.dtype)
    out: Tensor = M._t(src, x).expand(index.shape)
    return out


def _write(x: Tensor, result: Tensor, name: str) -> Tensor:
    return M._inplace(M._writable(x, name), result, name)


def scatter_(x: Tensor, dim: int, index: Tensor, src: Any = None, value: Any = None,
             reduce: str | None = None) -> Tensor:
    return _write(x, scatter(x, dim, index, src, value, reduce), "scatter_")


def scatter_add_(x: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    return _write(x, scatter_add(x, dim, index, src), "scatter_add_")


def index_add_(x: Tensor, dim: int, index: Any, source: Tensor, alpha: float = 1.0) -> Tensor:
    return _write(x, index_add(x, dim, index, source, alpha), "index_add_")


def masked_fill(x: Tensor, mask: Tensor, value: Any) -> Tensor:
    if mask.dtype.name != "bool":
        raise DTypeError(f"masked_fill: the mask must be a bool tensor, got {mask.dtype}")
    v = value if isinstance(value, Tensor) else M._t(value, x)
    v = v.to(dtype=x.dtype) if v.dtype != x.dtype else v
    if x.dtype == bool_:  # bool stays bool (torch), as logic
        return M.logical_or(M.logical_and(mask, v), M.logical_and(M.logical_not(mask), x))
    return M.where(mask, v, x)


def masked_fill_(x: Tensor, mask: Tensor, value: Any) -> Tensor:
    return _write(x, masked_fill(x, mask, value), "masked_fill_")


def take_along_dim(x: Tensor, indices: Tensor, dim: int) -> Tensor:
    return gather(x, dim, indices)


# ---- grids and products -----------------------------------------------------------------------------
def meshgrid(*tensors: Any, indexing: str = "ij") -> tuple[Tensor, ...]:
    ts: list[Tensor] = list(tensors[0]) if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else \
        list(tensors)
    if indexing not in ("ij", "xy"):
        raise RumusError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(t.numel() for t in ts)
    out = []
    for i, t in enumerate(ts):
        view = [1] * len(ts)
        view[i] = t.numel()
        out.append(t.reshape(view).expand(shape))
    if swap:
        out[0], out[1] = out[1], out[0]  # grids of shape (len(y), len(x), ...): the ij grid of (y, x)
    return tuple(out)


def einsum(equation: str, *operands: Any) -> Tensor:
    """Every operand is aligned on the union of labels (permute + reshape, broadcasting the missing ones),
    multiplied, and the labels absent from the output are summed. Two-operand contractions go through
    matmul, the usual case (attention, bilinear forms), so they cost one GEMM."""
    ops: list[Tensor] = list(operands[0]) if len(operands) == 1 and isinstance(operands[0], (list, tuple)) else \
        list(operands)
    eq = equation.replace(" ", "")
    if "..." in eq:
        raise RumusError("einsum: ellipsis ('...') is not supported yet; name every dimension")
    lhs, _, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ops):
        raise RumusError(f"einsum: the equation names {len(terms)} operands, {len(ops)} were given")
    sizes: dict[str, int] = {}
    for term, t in zip(terms, ops):
        if len(term) != t.ndim:
            raise ShapeError(f"einsum: operand '{term}' has {t.ndim} dimensions, the equation names {len(term)}")
        for ch, n in zip(term, t.shape):
            if sizes.setdefault(ch, n) != n and n != 1 and sizes[ch] != 1:
                raise ShapeError(f"einsum: label '{ch}' has sizes {sizes[ch]} and {n}")
            sizes[ch] = builtins.max(sizes[ch], n)
    if "->" not in eq:
        counts = {c: lhs.count(c) for c in sizes}
        rhs = "".join(sorted(c for c, k in counts.items() if k == 1))
    ops = [_diagonal_labels(term, t) for term, t in zip(terms, ops)]
    terms = ["".join(dict.fromkeys(term)) for term in terms]
    if len(ops) == 2:
        return _einsum_pair(terms[0], ops[0], terms[1], ops[1], rhs, sizes)
    labels = "".join(dict.fromkeys(rhs + "".join(terms)))
    acc: Tensor | None = None
    for term, t in zip(terms, ops):
        aligned = _align(term, t, labels)
        acc = aligned if acc is None else M.mul(acc, aligned)
    assert acc is not None
    summed = tuple(i for i, c in enumerate(labels) if c not in rhs)
    out = M.sum(acc, summed) if summed else acc
    kept = [c for c in labels if c in rhs]
    out = out.expand([sizes[c] for c in kept]) if kept else out
    return out.permute([kept.index(c) for c in rhs]) if kept else out


def _diagonal_labels(term: str, t: Tensor) -> Tensor:
    """A label repeated inside one operand ('ii') takes the diagonal."""
    while len(set(term)) != len(term):
        c = next(ch for ch in term if term.count(ch) > 1)
        i, j = term.index(c), term.index(c, term.index(c) + 1)
        n = t.shape[i]
        moved = t.permute([k for k in range(t.ndim) if k not in (i, j)] + [i, j])
        flat = moved.reshape(*moved.shape[:-2], n * n)
        t = index_select(flat, flat.ndim - 1, _idx(np.arange(n) * (n + 1), flat))
        term = "".join(ch for k, ch in enumerate(term) if k not in (i, j)) + c
    return t


def _align(term: str, t: Tensor, labels: str) -> Tensor:
    perm = sorted(range(len(term)), key=lambda k: labels.index(term[k]))
    t = t.permute(perm) if perm != list(range(len(term))) else t
    ordered = [term[k] for k in perm]
    return t.reshape([t.shape[ordered.index(c)] if c in ordered else 1 for c in labels])


def _einsum_pair(ta: str, a: Tensor, tb: str, b: Tensor, rhs: str, sizes: dict[str, int]) -> Tensor:
    batch = [c for c in rhs if c in ta and c in tb]
    contract = [c for c in ta if c in tb and c not in rhs]
    only_a = [c for c in ta if c not in tb]
    only_b = [c for c in tb if c not in ta]
    # labels only in one operand and not in the output are summed away first
    for c in [c for c in only_a if c not in rhs]:
        a = M.sum(a, ta.index(c))
        ta = ta.replace(c, "")
    for c in [c for c in only_b if c not in rhs]:
        b = M.sum(b, tb.index(c))
        tb = tb.replace(c, "")
    only_a = [c for c in only_a if c in rhs]
    only_b = [c for c in only_b if c in rhs]

    def prep(t: Tensor, term: str, free: list[str], left: bool) -> Tensor:
        order = batch + (free + contract if left else contract + free)
        t = _align(term, t, "".join(order)).expand([sizes[c] for c in order])
        nb = int(np.prod([sizes[c] for c in batch], dtype=np.int64))
        nf = int(np.prod([sizes[c] for c in free], dtype=np.int64))
        nc = int(np.prod([sizes[c] for c in contract], dtype=np.int64))
        return t.reshape(nb, nf, nc) if left else t.reshape(nb, nc, nf)

    out = M.matmul(prep(a, ta, only_a, True), prep(b, tb, only_b, False))
    labels = batch + only_a + only_b
    out = out.reshape([sizes[c] for c in labels])
    return out.permute([labels.index(c) for c in rhs]) if labels else out.reshape(())


# ---- sampling ---------------------------------------------------------------------------------------
def multinomial(probs: Tensor, num_samples: int, replacement: bool = False, generator: Any = None) -> Tensor:
    """Draw category indices from (unnormalised) weights; one row per distribution. Sampling runs on the
    host from rumus's generator (a sync, like reading a loss)."""
    from .random import default_generator
    p = np.asarray(probs.detach().numpy(), dtype=np.float64)  # on the host: any backend, float64 or not
    rows = p.reshape(-1, p.shape[-1]) if p.ndim else None
    if rows is None or p.ndim > 2:
        raise ShapeError(f"multinomial: prob_dist must be 1 or 2 dim, got shape {tuple(probs.shape)}")
    if (rows < 0).any() or not np.isfinite(rows).all() or (rows.sum(1) <= 0).any():
        raise RumusError("multinomial: probabilities must be finite, non-negative and not all zero")
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples <= 0:
        raise ShapeError(f"multinomial: num_samples must be a positive int, got {num_samples!r}")
    # the int64 result and the float64 uniforms numpy draws for it
    _creation.check_size("multinomial", (*p.shape[:-1], num_samples), 16)
    if not replacement and num_samples > int((rows > 0).sum(1).min()):
        raise RumusError(f"multinomial: cannot draw {num_samples} samples without replacement from fewer "
                         f"non-zero categories")
    rng = (generator or default_generator).rng
    out = np.stack([rng.choice(r.size, size=num_samples, replace=replacement, p=r / r.sum()) for r in rows])
    return _creation.from_numpy(out.reshape(*p.shape[:-1], num_samples).astype(np.int64), device=probs.device)


# ---- sorting ----------------------------------------------------------------------------------------
class SortResult(NamedTuple):
    values: Tensor
    indices: Tensor


def argsort(x: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    """Always stable (ties keep their order), which also satisfies stable=False."""
    d = normalize_dim("argsort", dim, x.ndim) if x.ndim else 0
    keys = x.to(dtype="uint8") if x.dtype.name == "bool" else x
    out: Tensor = _op("argsort")(keys, dim=d, descending=bool(descending))
    return out


def sort(x: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> SortResult:
    idx = argsort(x, dim, descending)
    return SortResult(gather(x, dim, idx) if x.ndim else M.add(x, M._t(0, x)), idx)


def msort(x: Tensor) -> Tensor:
    return sort(x, 0).values


def topk(x: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> SortResult:
    d = normalize_dim("topk", dim, x.ndim) if x.ndim else 0
    n = x.shape[d] if x.ndim else 1
    if not 0 <= k <= n:
        raise RumusError(f"topk: k ({k}) is out of range for a dimension of size {n}")
    idx = argsort(x, d, descending=largest)
    idx = idx.narrow(d, 0, k) if x.ndim else idx
    return SortResult(gather(x, d, idx) if x.ndim else M.add(x, M._t(0, x)), idx)


def kthvalue(x: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> SortResult:
    d = normalize_dim("kthvalue", dim, x.ndim)
    if not 1 <= k <= x.shape[d]:
        raise RumusError(f"kthvalue: k ({k}) must be in 1..{x.shape[d]}")
    idx = argsort(x, d).narrow(d, k - 1, 1)
    vals = gather(x, d, idx)
    return SortResult(vals, idx) if keepdim else SortResult(vals.squeeze(d), idx.squeeze(d))


def _register_composites() -> None:
    """Schemas in rumus_contracts/ops/structural.py name these; the conformance suite calls them through
    rumus.ops.<name>(x, **attrs)."""
    from ._dispatch import COMPOSITES
    from .nn.functional_torch import interpolate, pad  # late binding: nn's composites, registered at import of rumus
    COMPOSITES.update({
        "tril": tril, "triu": triu, "flip": flip, "roll": roll,
        "cumsum": _cumsum_composite, "cumprod": _cumprod_composite,
        "repeat": lambda x, repeats=(1,): repeat(x, tuple(repeats)),
        "repeat_interleave": lambda x, repeats=1, dim=0: repeat_interleave(x, int(repeats), dim),
        "norm": lambda x, p=2.0, dims=(), keepdim=False: norm(x, p, tuple(dims) or None, keepdim),
        "pad": lambda x, **a: pad(x, tuple(a.get("pad", (0, 0))), a.get("mode", "constant"), a.get("value", 0.0)),
        "interpolate": lambda x, size=(1,), mode="nearest", align_corners=False: interpolate(
            x, size=tuple(size), mode=mode, align_corners=None if mode == "nearest" else bool(align_corners)),
    })
