"""DistributedDataParallel: one replica per rank, gradients averaged across ranks.

- At construction, rank 0's parameters and buffers are broadcast to every rank.
- Each forward (grad mode on, outside `no_sync()`) counts, by walking the autograd graph from the
  outputs, how many gradient contributions each parameter will receive. A hook on every parameter
  (`Tensor.register_post_accumulate_grad_hook`, called after each accumulation into `.grad`) marks the parameter ready
  when its count is reached; a bucket (parameters in reverse registration order, up to
  `bucket_cap_mb`) whose parameters are all ready is staged to host and all-reduced *asynchronously*
  while backward goes on. Buckets start in index order on every rank (so ranks never pair different
  collectives); when the last one started, the hook waits for all and writes the averages into `.grad`.
- A parameter the graph does not reach contributes zeros. If a backward ends with buckets unreduced
  (the loss used only part of the outputs), the next forward raises instead of training on
  unsynchronised gradients: synchronised gradients are not silently skipped.
- `no_sync()`: gradients accumulate locally; the first backward outside it reduces the total.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from rumus_contracts.communicator import Communicator, CommunicatorError, ReduceOp, Work

from .._creation import from_host
from ..autograd import grad_mode
from ..nn.module import Module
from ..nn.parameter import Parameter
from ..tensor import Tensor
from .collectives import broadcast, to_host
from .state import get_communicator


class _Bucket:
    def __init__(self, params: list[Parameter]) -> None:
        self.params = params
        self.ready = 0
        self.host: np.ndarray | None = None
        self.work: Work | None = None


def _graph_counts(outputs: Any, wanted: dict[int, Parameter]) -> dict[int, int]:
    """How many gradient edges point at each wanted leaf in the graph behind `outputs`."""
    counts = {pid: 0 for pid in wanted}
    stack = [t.grad_fn for t in _tensors(outputs) if t.grad_fn is not None]
    seen = {id(n) for n in stack}
    for t in _tensors(outputs):  # an output that is itself a parameter
        if t.grad_fn is None and id(t) in counts:
            counts[id(t)] += 1
    while stack:
        node = stack.pop()
        for edge in node.edges:
            if edge is None:
                continue
            target = edge[0]
            if isinstance(target, Tensor):
                if id(target) in counts:
                    counts[id(target)] += 1
            elif id(target) not in seen:
                seen.add(id(target))
                stack.append(target)
    return counts


def _tensors(x: Any) -> Iterator[Tensor]:
    if isinstance(x, Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _tensors(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _tensors(v)


class DistributedDataParallel(Module):
    """Wrap `module` so that backward averages its gradients over every rank of `comm`.

    torch's arguments are accepted: `device_ids` / `output_device` (each rank already runs on its own device:
    `rumus launch --device wgpu` gives rank r `wgpu:<local rank>`), `process_group` (a communicator, or None
    for the default); `find_unused_parameters`, `gradient_as_bucket_view` and `static_graph` are accepted and
    need no setting here: which parameters a backward reaches is read from the autograd graph at forward."""

    def __init__(self, module: Module, comm: Any = None, bucket_cap_mb: float | None = 25.0,
                 broadcast_buffers: bool = True, *, device_ids: Any = None, output_device: Any = None,
                 dim: int = 0, process_group: Communicator | None = None, find_unused_parameters: bool = False,
                 gradient_as_bucket_view: bool = False, static_graph: bool = False, **torch_options: Any) -> None:
        if isinstance(comm, (list, tuple)) or (comm is not None and not isinstance(comm, Communicator)):
            comm = None  # torch's second positional argument is device_ids (see the docstring)
        comm = comm if comm is not None else process_group
        bucket_cap_mb = 25.0 if bucket_cap_mb is None else bucket_cap_mb
        super().__init__()
        self.module = module
        object.__setattr__(self, "comm", get_communicator(comm))
        object.__setattr__(self, "broadcast_buffers", broadcast_buffers)
        for p in module.parameters():
            broadcast(p, 0, self.comm)
        for b in module.buffers():
            broadcast(b, 0, self.comm)
        params = [p for p in module.parameters() if p.requires_grad]
        buckets: list[_Bucket] = []
        cap = max(1, int(bucket_cap_mb * (1 << 20)))
        current: list[Parameter] = []
        size = 0
        for p in reversed(params):  # backward produces the last layers' gradients first
            if current and (size + p.numel() * p.element_size() > cap or p.dtype != current[0].dtype
                            or p.device != current[0].device):
                buckets.append(_Bucket(current))
                current, size = [], 0
            current.append(p)
            size += p.numel() * p.element_size()
        if current:
            buckets.append(_Bucket(current))
        object.__setattr__(self, "_buckets", buckets)
        object.__setattr__(self, "_bucket_of", {id(p): i for i, b in enumerate(buckets) for p in b.params})
        object.__setattr__(self, "_params", {id(p): p for p in params})
        object.__setattr__(self, "_expected", {})
        object.__setattr__(self, "_seen", {})
        object.__setattr__(self, "_armed", False)
        object.__setattr__(self, "_started", 0)
        object.__setattr__(self, "_sync", True)
        for p in params:
            p.register_post_accumulate_grad_hook(self._on_grad)

    @property
    def bucket_sizes(self) -> list[int]:
        """Parameters per bucket, in reduction order."""
        return [len(b.params) for b in self._buckets]

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backward inside accumulates gradients locally; the next synced backward reduces the total."""
        old = self._sync
        object.__setattr__(self, "_sync", False)
        try:
            yield
        finally:
            object.__setattr__(self, "_sync", old)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if self._armed and any(self._seen.values()):
            missing = [n for n, p in self.module.named_parameters()
                       if id(p) in self._expected and self._seen.get(id(p), 0) < self._expected[id(p)]]
            raise CommunicatorError(
                "DistributedDataParallel: the previous backward did not produce every expected gradient, so "
                f"its all-reduce never finished (parameters waiting: {', '.join(missing[:8])}). Compute the "
                "loss from all of the model's outputs, or run forward under rumus.no_grad() when not training")
        if self.broadcast_buffers and self._sync:
            for b in self.module.buffers():
                broadcast(b, 0, self.comm)
        out = self.module(*args, **kwargs)
        object.__setattr__(self, "_armed", False)
        if self._sync and grad_mode.state.enabled and self._params:
            self._prepare(out)
        return out

    def _prepare(self, out: Any) -> None:
        expected = _graph_counts(out, self._params)
        object.__setattr__(self, "_expected", expected)
        object.__setattr__(self, "_seen", {pid: 0 for pid in expected})
        object.__setattr__(self, "_started", 0)
        for b in self._buckets:
            b.ready = sum(1 for p in b.params if expected[id(p)] == 0)  # unreached: contributes zeros
            b.host, b.work = None, None
        object.__setattr__(self, "_armed", True)
        self._start_ready_buckets()

    def _on_grad(self, p: Tensor) -> None:
        if not self._armed or id(p) not in self._expected:
            return
        self._seen[id(p)] += 1
        if self._seen[id(p)] == self._expected[id(p)]:
            self._buckets[self._bucket_of[id(p)]].ready += 1
            self._start_ready_buckets()

    def _start_ready_buckets(self) -> None:
        buckets = self._buckets
        while self._started < len(buckets) and buckets[self._started].ready == len(buckets[self._started].params):
            b = buckets[self._started]
            parts = [to_host(p.grad).reshape(-1) if p.grad is not None else
                     np.zeros(p.numel(), np.float32 if p.dtype.name in ("float16", "bfloat16") else p.dtype.numpy)
                     for p in b.params]
            b.host = np.concatenate(parts)
            b.work = self.comm.all_reduce(b.host, ReduceOp.AVG, async_op=True)
            object.__setattr__(self, "_started", self._started + 1)
        if self._started == len(buckets) and self._armed:
            object.__setattr__(self, "_armed", False)
            self._finish()

    def _finish(self) -> None:
        for b in self._buckets:
            assert b.work is not None and b.host is not None
            b.work.wait()
            at = 0
            for p in b.params:
                n = p.numel()
                p.grad = from_host(b.host[at:at + n].reshape(p.shape), p.dtype, p.device)
                at += n
            b.host, b.work = None, None
