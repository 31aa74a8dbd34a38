"""Whole Python objects in a checkpoint: `rumus.save(model)`, `rumus.save(numpy_array)`, an EMA copy, any
picklable object — what torch.save takes. The object is pickled with every tensor lifted out into its own
raw payload (as torch does), and `rumus.load` refuses to unpickle it unless the caller opts in with
`weights_only=False`, exactly as torch 2.6+ refuses: unpickling runs code that the file names, so it is
only for files from a source you trust. A file that holds only tensors and containers never pickles."""

from __future__ import annotations

import io
import pickle
from typing import Any


from rumus_contracts import FormatError, RumusError, parse_dtype

from ..tensor import Tensor


class WeightsOnlyRefused(RumusError, pickle.UnpicklingError):
    """load() met pickled Python objects with weights_only=True (torch raises UnpicklingError here too)."""


REFUSAL = ("Weights only load failed: {name} holds pickled Python objects (a whole module, numpy arrays, "
           "custom classes), and unpickling them runs code that the file names. If you trust the source, load "
           "it with rumus.load(f, weights_only=False); otherwise ask for (or save) a state_dict(), which loads "
           "without pickle.")


class _Saver(pickle.Pickler):
    """Tensors (Parameters and Buffers too) leave the pickle as persistent ids; their bytes become payloads.
    The same tensor object twice is one payload, so tied weights stay tied."""

    def __init__(self, file: io.BytesIO, payloads: list[bytes]) -> None:
        super().__init__(file, protocol=4)
        self.payloads = payloads
        self._seen: dict[int, int] = {}
        self._keep: list[Tensor] = []  # ids stay valid while pickling

    def persistent_id(self, obj: Any) -> Any:
        if not isinstance(obj, Tensor):
            return None
        key = self._seen.get(id(obj))
        if key is None:
            from .checkpoint import payload_bytes  # late binding: checkpoint imports this module lazily too
            key = len(self.payloads)
            self.payloads.append(payload_bytes(obj))
            self._seen[id(obj)] = key
            self._keep.append(obj)
        from ..nn.parameter import Buffer, Parameter
        kind = "parameter" if isinstance(obj, Parameter) else "buffer" if isinstance(obj, Buffer) else "tensor"
        extra = obj.persistent if isinstance(obj, Buffer) else None
        return ("rumus-tensor", key, kind, obj.dtype.name, tuple(obj.shape), obj.requires_grad, extra)


def dumps(obj: Any, payloads: list[bytes]) -> bytes:
    buf = io.BytesIO()
    try:
        _Saver(buf, payloads).dump(obj)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise RumusError(f"save: the object cannot be pickled ({exc}); save its state_dict() instead") from None
    return buf.getvalue()


class _Loader(pickle.Unpickler):
    def __init__(self, data: bytes, read_payload: Any, device: Any, name: str) -> None:
        super().__init__(io.BytesIO(data))
        self.read_payload, self.device, self.name = read_payload, device, name
        self._made: dict[int, Tensor] = {}

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and len(pid) == 7 and pid[0] == "rumus-tensor"):
            raise FormatError(f"{self.name}: unknown persistent id in the pickled object")
        _, key, kind, dtype_name, shape, requires_grad, extra = pid
        base = self._made.get(key)
        if base is None:
            from .._creation import from_storage
            dtype = parse_dtype(dtype_name)
            raw = self.read_payload(key, dtype, tuple(shape))
            base = from_storage(raw, dtype, self.device)
            self._made[key] = base
        if kind == "parameter":
            from ..nn.parameter import Parameter
            return Parameter(base, bool(requires_grad))
        if kind == "buffer":
            from ..nn.parameter import Buffer
            return Buffer(base, bool(extra))
        return base.requires_grad_(True) if requires_grad and not base.requires_grad else base


def loads(data: bytes, read_payload: Any, device: Any, name: str) -> Any:
    return _Loader(data, read_payload, device, name).load()
