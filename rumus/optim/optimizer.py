"""Optimizer base: PyTorch-style param_groups and PyTorch's gradient rules.

As in torch, step() reads each parameter's .grad and leaves it in place (code that logs gradient norms
after the step sees them); `zero_grad()` clears them (`set_to_none=False` zeroes them in place).
Parameters that don't require grad may be passed (`model.parameters()` of a partly frozen model) and are
skipped, as is any parameter that got no gradient. Draining — setting each .grad to None once the step
consumed it, so two optimizers over disjoint parameter sets never see each other's gradients even
without zero_grad — is RUMUS's addition, opted into per optimizer with `opt.drain_grads = True`.

Mixed precision: `master_weights=True` (or `enable_master_weights()`) keeps a float32 copy of
every float16/bfloat16 parameter in its state ("master_param"); the update runs on the copy with the
gradient widened to float32, and the parameter gets the rounded result — the model keeps its dtype,
checkpoints included. `rumus.amp.GradScaler.step` sets `_found_inf` (a float32 device flag, 1.0 = skip):
an optimizer with a fused form that reads the flag itself (`fused_skip`, Adam/AdamW) gets it in `_update`;
the others' updates are applied and undone with a select on the device (update_unless), so skipping a step
never needs the host to read the flag.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rumus_contracts import RumusError, float32

from ..autograd.grad_mode import enable_grad, no_grad
from ..compile.host import host_region
from ..tensor import Tensor
from ._master import master_of, update_unless


class Optimizer:
    """Base class of the optimizers: parameter groups, `zero_grad()`, `step()`, `state_dict()` / `load_state_dict()` in
    PyTorch's format.
    """
    defaults: dict[str, Any]
    fused_skip = False  # True: _update honours _found_inf itself (no update_unless around it)

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self.param_groups: list[dict[str, Any]] = []
        self.state: dict[int, dict[str, Any]] = {}
        self.master_weights = False
        self._found_inf: Tensor | None = None  # GradScaler: a float32 device flag, not 0 when this step is skipped
        self.drain_grads = False  # True: step() sets each consumed .grad to None (see the module docstring)
        params = list(params)
        if not params:
            raise RumusError(f"{type(self).__name__} got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, group: Mapping[str, Any]) -> None:
        g = dict(self.defaults)
        g.update(group)
        g["params"] = list(group["params"])
        for p in g["params"]:
            if not isinstance(p, Tensor):
                raise RumusError(f"{type(self).__name__}: parameters must be tensors, got {type(p).__name__}")
            if p.grad_fn is not None:  # torch: "can't optimize a non-leaf Tensor"
                raise ValueError(f"{type(self).__name__}: can't optimize a non-leaf Tensor (shape {p.shape}); pass "
                                 f"the leaf parameters (e.g. model.parameters()) or .detach().requires_grad_()")
        seen = {id(p) for grp in self.param_groups for p in grp["params"]}
        if any(id(p) in seen for p in g["params"]):
            raise RumusError(f"{type(self).__name__}: a parameter appears in more than one param group")
        g.setdefault("initial_lr", g["lr"])
        self.param_groups.append(g)

    @host_region  # rm.compile re-runs it on every replay (Python state: .grad set to None)
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's gradient: None (the default, as torch's), or zeros in place."""
        for g in self.param_groups:
            for p in g["params"]:
                if set_to_none or p.grad is None:
                    p.grad = None
                else:
                    with no_grad():
                        p.grad = p.grad.detach().zero_()

    @host_region  # rm.compile re-runs it on every replay (step counts, lr and state advance in Python)
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Apply one update; `closure` (re-evaluates the model, returns the loss) runs first, with grad on."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        self._apply()
        return loss

    def enable_master_weights(self) -> Optimizer:
        """Keep float32 master copies of the float16/bfloat16 parameters (made now, from their values)."""
        self.master_weights = True
        with no_grad():
            for p in self._all_params():
                master_of(p, self.state.setdefault(id(p), {}))
        return self

    def _all_params(self) -> list[Tensor]:
        return [p for g in self.param_groups for p in g["params"]]

    def grads_for_step(self) -> list[Tensor]:
        """The gradients the next step will use, as it uses them (each becomes its parameter's .grad):
        what GradScaler.unscale_ unscales in place."""
        out = []
        with no_grad():
            for p in self._all_params():
                g = self._step_grad(p)
                if g is not None:
                    out.append(g)
        return out

    def _step_grad(self, p: Tensor) -> Tensor | None:
        """p's gradient as the update reads it: on p's device, contiguous (the fused kernels write it in
        place), float32 for a master-weight parameter. It becomes p.grad, so clipping after
        GradScaler.unscale_ acts on what the step uses."""
        grad = p.grad
        if grad is None:
            return None
        if grad.shape != p.shape:
            raise RumusError(f"gradient of shape {grad.shape} for a parameter of shape {p.shape}")
        g = grad.detach()
        if g.device != p.device:
            g = g.to(p.device)
        if self.master_weights and g.dtype != float32 and "master_param" in self.state.get(id(p), {}):
            g = g.to(float32)
        if not g.is_contiguous():
            g = g.contiguous()
        if g is not grad:
            p.grad = g
        return g

    def _apply(self) -> None:
        skip: Tensor | None = None  # found_inf != 0, made once per step for update_unless
        with no_grad():
            try:
                for group in self.param_groups:
                    for p in group["params"]:
                        state = self.state.setdefault(id(p), {})
                        if self.master_weights:
                            master_of(p, state)  # before the step: a skipped first step restores it too
                        grad = self._step_grad(p)
                        if grad is None:
                            continue  # no gradient reached this parameter: nothing to do
                        target = state.get("master_param", p)
                        if self._found_inf is None or self.fused_skip:
                            self._update(target, grad, group, state)
                        else:
                            if skip is None:
                                skip = self._found_inf != 0
                            update_unless(skip, self, target, grad, group, state)
                        if target is not p:
                            p.copy_(target)  # the model's parameter: the master rounded to its dtype
                        if self.drain_grads:
                            p.grad = None
            finally:  # the parameters updated so far count this step, even if a later one raised
                self._finish_step()

    def _finish_step(self) -> None:
        """After every parameter's update: what one step does once (Adam advances its device counts)."""

    def _update(self, p: Tensor, grad: Tensor, group: dict[str, Any], state: dict[str, Any]) -> None:
        raise NotImplementedError

    # ---- checkpointing ----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        index = {id(p): i for i, p in enumerate(p for g in self.param_groups for p in g["params"])}
        groups = [{k: v for k, v in g.items() if k != "params"} | {"params": [index[id(p)] for p in g["params"]]}
                  for g in self.param_groups]
        state = {index[pid]: dict(s) for pid, s in self.state.items() if pid in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, sd: Mapping[str, Any]) -> None:
        params = [p for g in self.param_groups for p in g["params"]]
        if len(sd["param_groups"]) != len(self.param_groups):
            raise RumusError("optimizer state_dict has a different number of parameter groups")
        for g, saved in zip(self.param_groups, sd["param_groups"]):
            if len(saved["params"]) != len(g["params"]):
                raise RumusError("optimizer state_dict has groups of different sizes than this optimizer")
            g.update({k: v for k, v in saved.items() if k != "params"})
        self.state = {}
        for i, s in sd["state"].items():
            p = params[int(i)]
            self.state[id(p)] = {k: (v.to(p.device) if isinstance(v, Tensor) else v) for k, v in s.items()}

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in sorted(g.items()) if k != "params"]
        return "\n".join(lines + [")"])
