"""FullyShardedDataParallel (ZeRO-3) for one unit (wrap each large submodule in its own FSDP).

At construction the unit's parameters (rank 0's values, broadcast) are flattened into one host
vector, padded to a multiple of world_size, and each rank keeps only its 1/N slice as the unit's
single Parameter `flat_param`; the original parameters are removed, so the optimizer (and its state)
sees only the shard.

Forward all-gathers the full vector, runs the module under no_grad (no graph, no saved activations
inside the unit) and frees the gathered parameters. Backward all-gathers them again, re-runs the
unit's forward with a graph (recomputation, as activation checkpointing does), differentiates it, and
reduce-scatters (AVG) the parameter gradients so each rank receives the gradient of its own shard.
Gathered parameters therefore live only during one unit's forward or backward.

The unit's forward must take tensors and return one tensor; it must be deterministic (the recompute
must reproduce the forward: no dropout). `full_state_dict()` gathers the unflattened parameters;
`sharded_state_dict()` / `load_sharded_state_dict()` save and load this rank's shard only.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

from rumus_contracts.communicator import Communicator, CommunicatorError, ReduceOp

from .._creation import from_host
from ..autograd import grad as autograd_grad
from ..autograd.function import Function, FunctionCtx
from ..autograd.grad_mode import enable_grad
from ..nn.module import Module
from ..nn.parameter import Parameter
from ..tensor import Tensor
from .collectives import to_host
from .state import get_communicator


class _Slot:
    """Where one original parameter lives: its owner module, name, shape and flat range."""

    def __init__(self, owner: Module, name: str, full_name: str, shape: tuple[int, ...], start: int) -> None:
        self.owner, self.name, self.full_name, self.shape, self.start = owner, name, full_name, shape, start
        self.size = int(np.prod(shape, dtype=np.int64))


class FullyShardedDataParallel(Module):
    def __init__(self, module: Module, comm: Communicator | None = None) -> None:
        super().__init__()
        c = get_communicator(comm)
        object.__setattr__(self, "comm", c)
        self.module = module
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise CommunicatorError("FullyShardedDataParallel: the module has no parameters to shard")
        dtypes = {p.dtype for _, p in named}
        if len(dtypes) != 1:
            raise CommunicatorError(f"FullyShardedDataParallel: one dtype per unit, got {sorted(map(str, dtypes))}")
        dev = named[0][1].device
        slots: list[_Slot] = []
        at = 0
        for full_name, p in named:
            owner_name, _, leaf = full_name.rpartition(".")
            owner = _submodule(module, owner_name)
            slots.append(_Slot(owner, leaf, full_name, tuple(p.shape), at))
            at += slots[-1].size
        n = c.world_size
        padded = -(-at // n) * n
        flat = np.zeros(padded, np.float64 if named[0][1].dtype.name == "float64" else np.float32)
        flat[:at] = np.concatenate([to_host(p).reshape(-1) for _, p in named])
        c.broadcast(flat, 0)  # every rank starts from rank 0's values
        per = padded // n
        for s in slots:  # the module keeps no full parameter between steps
            s.owner._parameters.pop(s.name, None)
        object.__setattr__(self, "_slots", slots)
        object.__setattr__(self, "numel", at)
        object.__setattr__(self, "_dtype", named[0][1].dtype)
        object.__setattr__(self, "_device", dev)
        self.flat_param = Parameter(from_host(flat[c.rank * per:(c.rank + 1) * per], self._dtype, dev))

    # ---- gather / free ------------------------------------------------------------------------
    def _gather(self) -> np.ndarray:
        shard = to_host(self.flat_param)
        full = np.empty((self.comm.world_size, shard.size), shard.dtype)
        self.comm.all_gather(shard, full)
        return full.reshape(-1)

    def _install(self, flat: np.ndarray, requires_grad: bool) -> list[Tensor]:
        params: list[Tensor] = []
        for s in self._slots:
            t = from_host(flat[s.start:s.start + s.size].reshape(s.shape), self._dtype, self._device)
            p = Parameter(t, requires_grad=requires_grad)
            s.owner._parameters[s.name] = p
            params.append(p)
        return params

    def _free(self) -> None:
        for s in self._slots:
            s.owner._parameters.pop(s.name, None)

    def forward(self, *inputs: Any) -> Any:
        if any(not isinstance(x, Tensor) for x in inputs):
            raise CommunicatorError("FullyShardedDataParallel: the unit's forward must take tensors only")
        return _ShardedUnit.apply(self, self.flat_param, *inputs)

    # ---- state dicts --------------------------------------------------------------------------
    def full_state_dict(self) -> OrderedDict[str, Tensor]:
        """Every original parameter, gathered (on every rank)."""
        flat = self._gather()
        return OrderedDict((s.full_name, from_host(flat[s.start:s.start + s.size].reshape(s.shape), self._dtype,
                                                   self._device)) for s in self._slots)

    def sharded_state_dict(self) -> dict[str, Any]:
        return {"flat_param": self.flat_param.detach().clone(), "rank": self.comm.rank,
                "world_size": self.comm.world_size, "numel": self.numel}

    def load_sharded_state_dict(self, state: dict[str, Any]) -> None:
        if (state["rank"], state["world_size"], state["numel"]) != (self.comm.rank, self.comm.world_size, self.numel):
            raise CommunicatorError(f"load_sharded_state_dict: the checkpoint is rank {state['rank']} of "
                                    f"{state['world_size']} for {state['numel']} elements; this unit is rank "
                                    f"{self.comm.rank} of {self.comm.world_size} for {self.numel}")
        from ..autograd.grad_mode import no_grad
        with no_grad():
            self.flat_param.copy_(state["flat_param"])


def _submodule(module: Module, dotted: str) -> Module:
    for part in dotted.split(".") if dotted else ():
        module = module._modules[part]
    return module


class _ShardedUnit(Function):
    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any) -> Any:
        unit, _shard, *inputs = args
        ctx.unit, ctx.inputs = unit, inputs  # type: ignore[attr-defined]
        unit._install(unit._gather(), requires_grad=False)
        try:
            out = unit.module(*inputs)
        finally:
            unit._free()
        if not isinstance(out, Tensor):
            raise CommunicatorError("FullyShardedDataParallel: the unit's forward must return one tensor")
        return out

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Any) -> Any:
        unit: FullyShardedDataParallel = ctx.unit  # type: ignore[attr-defined]
        inputs = [x.detach().requires_grad_(x.requires_grad) for x in ctx.inputs]  # type: ignore[attr-defined]
        params = unit._install(unit._gather(), requires_grad=True)
        try:
            with enable_grad():
                out = unit.module(*inputs)
            wrt = params + [x for x in inputs if x.requires_grad]
            got = autograd_grad(out, wrt, [grads[0]], allow_unused=True)
        finally:
            unit._free()
        flat = np.zeros(unit.flat_param.numel() * unit.comm.world_size,
                        np.float64 if unit._dtype.name == "float64" else np.float32)
        for s, g in zip(unit._slots, got[:len(params)]):
            if g is not None:
                flat[s.start:s.start + s.size] = to_host(g).reshape(-1)
        shard = np.empty(unit.flat_param.numel(), flat.dtype)
        unit.comm.reduce_scatter(flat, shard, ReduceOp.AVG)
        input_grads = iter(got[len(params):])
        return (None, from_host(shard, unit._dtype, unit._device),
                *[next(input_grads) if x.requires_grad else None for x in inputs])
