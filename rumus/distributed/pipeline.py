"""Pipeline parallelism: a model cut into stages, one per rank, trained on micro-batches with the
1F1B schedule (warm-up forwards, steady one-forward-one-backward, cool-down backwards), which keeps
at most `stages - stage` micro-batches' activations alive on a stage instead of GPipe's `m`.

Activations go to the next stage and their gradients come back through the Communicator (host
staged). Sends are asynchronous and waited for at the end of the step, so no rank blocks on a send;
receives block, and the schedule's order makes every receive's sender run ahead of it (no cycles).
The loss of micro-batch i is `loss_fn(out_i, target_i) / m`, so the accumulated gradients equal
those of the whole batch under a mean loss.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rumus_contracts.communicator import Communicator, CommunicatorError, Work

from .._creation import from_host
from ..nn.module import Module
from ..tensor import Tensor
from .collectives import to_host
from .state import get_communicator

_MAX_DIMS = 8
_FLOAT_DTYPES = ("float32", "float64", "float16", "bfloat16")


def one_f_one_b(stage: int, stages: int, microbatches: int) -> list[tuple[str, int]]:
    """The 1F1B order of ("F", i) / ("B", i) steps on `stage` of `stages` for `microbatches`."""
    warmup = min(stages - stage - 1, microbatches)
    steps = [("F", i) for i in range(warmup)]
    f, b = warmup, 0
    while f < microbatches:
        steps += [("F", f), ("B", b)]
        f, b = f + 1, b + 1
    steps += [("B", i) for i in range(b, microbatches)]
    return steps


class PipelineStage:
    """This rank's stage (rank r runs stage r of `comm.world_size`)."""

    def __init__(self, module: Module, comm: Communicator | None = None) -> None:
        self.module = module
        self.comm = get_communicator(comm)
        self.stage, self.stages = self.comm.rank, self.comm.world_size
        self.timeline: list[tuple[str, int, float, float]] = []  # (kind, microbatch, start, end) of the last step
        self.recv_wait_s = 0.0  # time the last step spent blocked in receives: the bubble, measured

    @property
    def is_first(self) -> bool:
        return self.stage == 0

    @property
    def is_last(self) -> bool:
        return self.stage == self.stages - 1

    def train_step(self, inputs: Sequence[Tensor] | None, targets: Sequence[Tensor] | None,
                   loss_fn: Callable[[Any, Tensor], Tensor], microbatches: int) -> float | None:
        """Forward and backward of `microbatches` micro-batches; gradients accumulate in the stage's
        parameters (call the optimizer afterwards). The first stage passes `inputs`, the last `targets`;
        returns the batch's mean loss on the last stage, None elsewhere."""
        m = int(microbatches)
        if self.is_first and (inputs is None or len(inputs) != m):
            raise CommunicatorError(f"pipeline stage 0 needs {m} input micro-batches")
        if self.is_last and (targets is None or len(targets) != m):
            raise CommunicatorError(f"the last pipeline stage needs {m} target micro-batches")
        saved: dict[int, tuple[Tensor | None, Tensor]] = {}
        sends: list[tuple[Work, np.ndarray]] = []
        total = 0.0
        self.timeline, self.recv_wait_s = [], 0.0
        for kind, i in one_f_one_b(self.stage, self.stages, m):
            start = time.perf_counter()
            if kind == "F":
                x = inputs[i] if self.is_first else self._recv_activation(i)  # type: ignore[index]
                y = self.module(x)
                if self.is_last:
                    loss = loss_fn(y, targets[i]) / m  # type: ignore[index]
                    total += float(loss.item())
                    saved[i] = (None if self.is_first else x, loss)
                else:
                    sends += self._send_activation(y, i)
                    saved[i] = (None if self.is_first else x, y)
            else:
                x_in, out = saved.pop(i)
                if self.is_last:
                    out.backward()
                else:
                    out.backward(self._recv_grad(out, i))
                if x_in is not None:
                    if x_in.grad is None:
                        raise CommunicatorError(f"pipeline stage {self.stage}: its input got no gradient")
                    host = to_host(x_in.grad)
                    sends.append((self.comm.send(host, self.stage - 1, 4 * i + 3, async_op=True), host))
            self.timeline.append((kind, i, start, time.perf_counter()))
        for work, _buf in sends:
            work.wait()
        return total if self.is_last else None

    def _send_activation(self, y: Tensor, i: int) -> list[tuple[Work, np.ndarray]]:
        if y.ndim > _MAX_DIMS or y.dtype.name not in _FLOAT_DTYPES:
            raise CommunicatorError(f"pipeline: a stage output must be a floating tensor of <= {_MAX_DIMS} dims, "
                                    f"got {y.dtype} {tuple(y.shape)}")
        header = np.zeros(_MAX_DIMS + 2, np.int64)
        header[0], header[1:1 + y.ndim], header[-1] = y.ndim, y.shape, _FLOAT_DTYPES.index(y.dtype.name)
        host = to_host(y)
        dst = self.stage + 1
        return [(self.comm.send(header, dst, 4 * i, async_op=True), header),
                (self.comm.send(host, dst, 4 * i + 1, async_op=True), host)]

    def _recv_activation(self, i: int) -> Tensor:
        header = np.zeros(_MAX_DIMS + 2, np.int64)
        start = time.perf_counter()
        self.comm.recv(header, self.stage - 1, 4 * i)
        self.recv_wait_s += time.perf_counter() - start
        shape = tuple(int(d) for d in header[1:1 + int(header[0])])
        name = _FLOAT_DTYPES[int(header[-1])]
        host = np.empty(shape, np.float64 if name == "float64" else np.float32)  # halves travel as float32
        self.comm.recv(host, self.stage - 1, 4 * i + 1)
        dev = next((p.device for p in self.module.parameters()), None) or _default_device()
        return from_host(host, _dtype(name), dev).requires_grad_(True)

    def _recv_grad(self, out: Tensor, i: int) -> Tensor:
        host = np.empty(out.shape, np.float64 if out.dtype.name == "float64" else np.float32)
        start = time.perf_counter()
        self.comm.recv(host, self.stage + 1, 4 * i + 3)
        self.recv_wait_s += time.perf_counter() - start
        return from_host(host, out.dtype, out.device)


def _dtype(name: str) -> Any:
    from rumus_contracts import parse_dtype
    return parse_dtype(name)


def _default_device() -> Any:
    from .._runtime import default_device
    return default_device()
