"""rm.quant.quantize(model, scheme, group_size=, method=, calib=): swap every nn.Linear for a QLinear.

GPTQ and AWQ need each layer's inputs on calibration data. Layers are done one after another in module
order and each one's inputs are recorded with every earlier layer already quantised (as GPTQ publishes:
later layers compensate the error of earlier ones), so a model of L linears runs the calibration set L
times. The host-side math is float64 numpy (calibration, not a kernel).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from rumus_contracts import RumusError
from rumus_contracts.ops.quant import INT4_GROUP_SIZES, Q8_BLOCK_SIZES

from ..autograd import no_grad
from ..nn.linear import Linear
from ..nn.module import Module
from ..nn.normalization import LayerNorm
from ..tensor import Tensor
from .awq import awq_int4
from .gptq import gptq_int4
from .qlinear import QLinear

METHODS = ("rtn", "gptq", "awq")


class _Recorder(Module):
    """Stands in for a Linear while the calibration set runs through the model; keeps its inputs."""

    def __init__(self, inner: Module) -> None:
        super().__init__()
        self.inner = inner
        self.seen: list[np.ndarray] = []

    def forward(self, x: Tensor) -> Tensor:
        self.seen.append(x.detach().numpy().reshape(-1, x.shape[-1]).astype(np.float64))
        out: Tensor = self.inner(x)
        return out


def _parent(model: Module, name: str) -> tuple[Module, str]:
    parts = name.split(".")
    mod = model
    for p in parts[:-1]:
        mod = mod._modules[p]
    return mod, parts[-1]


def _inputs_of(model: Module, name: str, calib: Sequence[Any]) -> np.ndarray:
    parent, leaf = _parent(model, name)
    layer = parent._modules[leaf]
    rec = _Recorder(layer)
    parent._modules[leaf] = rec
    try:
        with no_grad():
            for batch in calib:
                model(*batch) if isinstance(batch, tuple) else model(batch)
    finally:
        parent._modules[leaf] = layer
    if not rec.seen:
        raise RumusError(f"quantize: layer '{name}' saw no input while the calibration data ran through the model; "
                         f"check that calib feeds this model")
    return np.concatenate(rec.seen, axis=0)


def _foldable_layernorm(model: Module, name: str) -> LayerNorm | None:
    """The LayerNorm right before `name` in the same Sequential-style parent, if it feeds only this layer."""
    parent, leaf = _parent(model, name)
    keys = list(parent._modules)
    if type(parent).__name__ != "Sequential" or keys.index(leaf) == 0:
        return None
    prev = parent._modules[keys[keys.index(leaf) - 1]]
    return prev if isinstance(prev, LayerNorm) and prev.weight is not None else None


def _fold_into_layernorm(ln: LayerNorm, inv_s: np.ndarray) -> None:
    from .._creation import tensor
    assert ln.weight is not None
    with no_grad():
        ln.weight.copy_(tensor((ln.weight.numpy() * inv_s).astype(np.float32), device=ln.weight.device))
        if ln.bias is not None:
            ln.bias.copy_(tensor((ln.bias.numpy() * inv_s).astype(np.float32), device=ln.bias.device))


def _check(scheme: str, group_size: int, method: str, calib: Any) -> None:
    if scheme not in ("q8", "int4"):
        raise RumusError(f"quantize: scheme must be 'q8' or 'int4', got {scheme!r}")
    sizes = Q8_BLOCK_SIZES if scheme == "q8" else INT4_GROUP_SIZES
    if group_size not in sizes:
        raise RumusError(f"quantize: {scheme} supports group/block sizes {sizes}, got {group_size}")
    if method not in METHODS:
        raise RumusError(f"quantize: method must be one of {METHODS}, got {method!r}")
    if scheme == "q8" and method != "rtn":
        raise RumusError("quantize: q8 blocks are round-to-nearest only; GPTQ and AWQ apply to int4")
    if method != "rtn" and calib is None:
        raise RumusError(f"quantize: method '{method}' needs calibration inputs: pass calib=[batch, ...]")


def quantize(model: Module, scheme: str = "int4", group_size: int = 128, method: str = "rtn",
             calib: Iterable[Any] | Tensor | None = None, skip: Sequence[str] = (), act_order: bool = False,
             percdamp: float = 0.01, awq_grid: int = 20) -> Module:
    """Replace every nn.Linear of `model` (except names in `skip`) by a QLinear, in place; returns model.

    scheme "q8" (block_size = group_size, round to nearest) or "int4" (groups along K); method "rtn",
    "gptq" or "awq" (int4 only; both need `calib`, a tensor or a list of model inputs).
    """
    _check(scheme, group_size, method, calib)
    batches: list[Any] = [] if calib is None else ([calib] if isinstance(calib, Tensor) else list(calib))
    names = [n for n, m in model.named_modules() if isinstance(m, Linear) and n and n not in skip]
    for name in names:
        parent, leaf = _parent(model, name)
        lin = parent._modules[leaf]
        assert isinstance(lin, Linear)
        w = lin.weight.detach().numpy().astype(np.float64)  # [out, in]
        if not np.isfinite(w).all():
            raise RumusError(f"quantize: layer '{name}' has NaN or inf weights; they have no quantized code")
        dev = lin.weight.device
        if method == "rtn":
            q = QLinear.from_codes(scheme, group_size, np.ascontiguousarray(w.T), bias=lin.bias, device=dev)
        elif method == "gptq":
            codes, sc, zp = gptq_int4(w, _inputs_of(model, name, batches), group_size, act_order=act_order,
                                      percdamp=percdamp)
            q = QLinear.from_codes("int4", group_size, None, codes, sc, zp, bias=lin.bias, device=dev)
        else:
            codes, sc, zp, s = awq_int4(w, _inputs_of(model, name, batches), group_size, grid=awq_grid)
            ln = _foldable_layernorm(model, name)
            if ln is not None:
                _fold_into_layernorm(ln, 1.0 / s)
                inv = None
            else:
                inv = 1.0 / s
            q = QLinear.from_codes("int4", group_size, None, codes, sc, zp, bias=lin.bias, input_scale=inv,
                                   device=dev)
        parent._modules[leaf] = q
    return model
