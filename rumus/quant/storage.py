"""Quantized checkpoints in safetensors.

Layout (one file): every entry of `model.state_dict()` that is not part of a QLinear is stored as
usual. A QLinear at prefix `p` stores
    p.qweight      U32 [words]   the packed words exactly as SPEC C (q8) / SPEC D (int4) lay them out
    p.scales       F32 [G, N]    int4 only
    p.zeros        F32 [G, N]    int4 only (zero points, SPEC D)
    p.input_scale  F32 [K]       only when AWQ's 1/s could not be folded into the preceding op
    p.bias         F32 [N]       when the layer has a bias
and the header's __metadata__ holds "rumus.quant.p" = "q8:<block_size>:<K>:<N>" or
"int4:<group_size>:<K>:<N>". `load_quantized(model, path)` swaps the matching Linear layers of a float
model of the same architecture for QLinear layers and loads everything else into the model.
"""

from __future__ import annotations

import os

import numpy as np

from rumus_contracts import FormatError

from .._creation import from_storage, tensor
from ..nn.module import Module
from .qlinear import QLinear
from .quantize import _parent

PREFIX = "rumus.quant."


def save_quantized(model: Module, path: str | os.PathLike[str]) -> None:
    from safetensors.numpy import save_file
    arrays: dict[str, np.ndarray] = {}
    meta: dict[str, str] = {}
    qnames = {n for n, m in model.named_modules() if isinstance(m, QLinear)}
    for name, t in model.state_dict().items():
        owner = name.rsplit(".", 1)[0] if "." in name else ""
        if owner in qnames and name.endswith(".qweight"):
            arrays[name] = np.ascontiguousarray(
                t._storage.backend.to_numpy(t._arg)).view(np.uint32)
        else:
            arrays[name] = np.ascontiguousarray(t.detach().numpy())
    for n in qnames:
        q = dict(model.named_modules())[n]
        assert isinstance(q, QLinear)
        meta[PREFIX + n] = f"{q.scheme}:{q.size}:{q.in_features}:{q.out_features}"
    tmp = f"{os.fspath(path)}.tmp"
    save_file(arrays, tmp, metadata=meta)
    os.replace(tmp, path)


def load_quantized(model: Module, path: str | os.PathLike[str], device: str | None = None) -> Module:
    from safetensors import safe_open
    try:
        with safe_open(os.fspath(path), framework="numpy") as f:
            meta = f.metadata() or {}
            arrays = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as exc:
        raise FormatError(f"{path}: not a readable safetensors file: {exc}") from None
    for key, spec in meta.items():
        if not key.startswith(PREFIX):
            continue
        name = key[len(PREFIX):]
        try:
            scheme, size_s, k_s, n_s = spec.split(":")
            size, k, n = int(size_s), int(k_s), int(n_s)
        except ValueError:
            raise FormatError(f"{path}: bad quantization entry {key}={spec!r}") from None
        if scheme not in ("q8", "int4") or f"{name}.qweight" not in arrays:
            raise FormatError(f"{path}: layer '{name}': scheme {scheme!r} or its qweight is missing")
        words = from_storage(arrays.pop(f"{name}.qweight").view(np.uint32), QLinear.dtype_for(scheme, size), device)

        def opt(suffix: str, name: str = name) -> object:
            a = arrays.pop(f"{name}.{suffix}", None)
            return None if a is None else tensor(a, device=device)
        sc, zp, inv, b = opt("scales"), opt("zeros"), opt("input_scale"), opt("bias")
        q = QLinear(k, n, scheme, size, words, sc, zp, b, inv)  # type: ignore[arg-type]
        parent, leaf = _parent(model, name)
        parent._modules[leaf] = q
    rest = {k: tensor(v, device=device) for k, v in arrays.items()}
    missing, unexpected = model.load_state_dict(rest, strict=False)
    if unexpected:
        raise FormatError(f"{path}: entries {unexpected[:5]} do not belong to this model")
    quantized = {n for n, m in model.named_modules() if isinstance(m, QLinear)}
    missing = [k for k in missing if k.rsplit(".", 1)[0] not in quantized]
    if missing:  # a float weight left at its random initialisation would be a silently wrong model
        raise FormatError(f"{path}: the file lacks {missing[:5]}; is it a checkpoint of this model?")
    return model
