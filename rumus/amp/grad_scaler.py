"""`rumus.amp.GradScaler`: dynamic loss scaling for float16 training, with no host sync in a step.

PyTorch's scaler reads its found-inf flag on the host to decide whether to call `optimizer.step()`.
Here the flag stays on the device: `unscale_` is one multi-tensor kernel over all gradients (multiply by
1/scale and OR "any inf/NaN" into the flag; one GPU dispatch per group of buffers the device binds),
Adam/AdamW's fused kernel reads the flag and writes nothing on a skipped step (its step count is a device
tensor then, left as PyTorch's scaler leaves it), other optimizers apply their update and undo it with a
select by the flag (rumus/optim/_master.py), and `update`
changes the scale with a device op. Only `get_scale()` and `state_dict()` read the device, when the user
asks for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rumus_contracts import Device, RumusError, float32

from .. import _creation
from ..autograd.grad_mode import no_grad
from ..ops import get as _op
from ..tensor import Tensor

_UNSCALED, _STEPPED = "unscaled", "stepped"


class GradScaler:
    """scaler = GradScaler(); per step: scaler.scale(loss).backward(); scaler.step(opt); scaler.update().

    init_scale, growth_factor, backoff_factor, growth_interval: PyTorch's meaning and defaults (the scale
    starts at 2**16, halves on a step whose gradients hold an inf/NaN — that step is skipped — and
    doubles after 2000 clean steps). `device` is taken from the first scaled loss when not given."""

    def __init__(self, device: str | Device | None = None, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True) -> None:
        if init_scale <= 0 or growth_factor <= 1.0 or not 0.0 < backoff_factor < 1.0 or growth_interval < 1:
            raise RumusError(f"GradScaler: need init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1 and "
                             f"growth_interval >= 1; got {init_scale}, {growth_factor}, {backoff_factor}, "
                             f"{growth_interval}")
        self._device = None if device is None or device in ("cuda", "gpu") else Device.parse(str(device))
        self._init_scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._enabled = bool(enabled)
        self._scale: Tensor | None = None
        self._growth_tracker: Tensor | None = None
        self._per_optimizer: dict[int, dict[str, Any]] = {}

    # ---- the step --------------------------------------------------------------------------------------
    def scale(self, outputs: Any) -> Any:
        """outputs * scale (a tensor, or nested lists/tuples of them)."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * self._lazy_scale(outputs.device).to(outputs.dtype)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise RumusError(f"GradScaler.scale takes a tensor or a list/tuple of tensors, got {type(outputs).__name__}")

    def unscale_(self, optimizer: Any) -> None:
        """Divide the optimizer's gradients by the scale in place (before clipping them), collecting the
        found-inf flag on the device. Once per optimizer per step."""
        if not self._enabled:
            return
        st = self._per_optimizer.setdefault(id(optimizer), {})
        if st.get("stage") == _UNSCALED:
            raise RumusError("GradScaler.unscale_() was already called on this optimizer since the last update()")
        if st.get("stage") == _STEPPED:
            raise RumusError("GradScaler.unscale_() is being called after step(); call update() first")
        if self._scale is None:
            raise RumusError("GradScaler.unscale_(): no loss was scaled yet; call scaler.scale(loss).backward() first")
        grads = optimizer.grads_for_step()
        with no_grad():
            found_inf = _creation.zeros((), dtype=float32, device=self._scale.device)
            inv_scale = self._scale.reciprocal()
            for g in grads:
                if g.dtype != float32:
                    raise RumusError(f"GradScaler: cannot unscale {g.dtype} gradients (their range is what loss "
                                     f"scaling protects); keep float32 parameters under autocast, or build the "
                                     f"optimizer with master_weights=True for a .half()/.bfloat16() model")
            _op("amp_unscale_check_multi_")(grads, found_inf, inv_scale)  # one kernel over all of them
        st.update(stage=_UNSCALED, found_inf=found_inf)

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """optimizer.step(), undone on the device when this step's gradients held an inf or a NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs or args:
            raise RumusError("GradScaler.step does not take a closure (PyTorch's rule): compute the loss, "
                             "backward through scaler.scale(loss), then call step")
        st = self._per_optimizer.setdefault(id(optimizer), {})
        if st.get("stage") == _STEPPED:
            raise RumusError("GradScaler.step() was already called on this optimizer since the last update()")
        if st.get("stage") != _UNSCALED:
            self.unscale_(optimizer)
        optimizer._found_inf = st["found_inf"]
        try:
            out = optimizer.step()
        finally:
            optimizer._found_inf = None
        st["stage"] = _STEPPED
        return out

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Back off (after an inf/NaN) or grow the scale, on the device; or set it to `new_scale`."""
        if not self._enabled or self._scale is None:
            return
        with no_grad():
            if new_scale is not None:
                if isinstance(new_scale, Tensor):
                    self._scale.copy_(new_scale.reshape(()))
                else:
                    self._scale.fill_(float(new_scale))
            else:
                flags = [s["found_inf"] for s in self._per_optimizer.values() if "found_inf" in s]
                if not flags:
                    raise RumusError("GradScaler.update(): no optimizer stepped since the last update()")
                found = flags[0]
                for f in flags[1:]:
                    found = found + f
                assert self._growth_tracker is not None
                _op("amp_update_scale_")(self._scale, self._growth_tracker, found,
                                         growth_factor=self._growth_factor, backoff_factor=self._backoff_factor,
                                         growth_interval=self._growth_interval)
        self._per_optimizer.clear()

    # ---- inspection and checkpoints ---------------------------------------------------------------------
    def get_scale(self) -> float:
        """The current scale (reads the device: call it outside the hot loop)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale.item())

    def is_enabled(self) -> bool:
        return self._enabled

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def _get_growth_tracker(self) -> int:
        return 0 if self._growth_tracker is None else int(self._growth_tracker.item())

    def state_dict(self) -> dict[str, Any]:
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        if not self._enabled:
            return
        if not state_dict:
            raise RumusError("GradScaler.load_state_dict: the state dict is empty (saved from a disabled scaler)")
        self._init_scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        tracker = float(state_dict["_growth_tracker"])
        if self._scale is not None:
            assert self._growth_tracker is not None
            with no_grad():
                self._scale.fill_(self._init_scale)
                self._growth_tracker.fill_(tracker)
        else:
            self._pending_tracker = tracker

    def _lazy_scale(self, device: Device) -> Tensor:
        if self._scale is None:
            dev = self._device or device
            self._scale = _creation.full((), self._init_scale, dtype=float32, device=dev)
            self._growth_tracker = _creation.full((), getattr(self, "_pending_tracker", 0.0), dtype=float32,
                                                  device=dev)
        elif self._scale.device != device:
            raise RumusError(f"GradScaler: its scale lives on {self._scale.device}, the loss on {device}; "
                             f"use one scaler per device")
        return self._scale

