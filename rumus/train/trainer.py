"""Trainer: fit / evaluate loops with gradient accumulation, clipping, LR scheduling, callbacks, a tqdm
progress bar (loss and throughput) and resumable checkpoints.

The running loss stays on the device (one small add per step); it is read back only when someone looks
(`average_loss`, the progress bar every `log_every` steps, epoch logs), so a GPU backend is not forced
to synchronise on every step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from rumus_contracts import Device, RumusError

from .. import _creation
from .. import _math as M
from ..autograd.grad_mode import no_grad
from ..nn.module import Module
from ..nn.utils import clip_grad_norm_
from ..optim.lr_scheduler import LRScheduler
from ..optim.optimizer import Optimizer
from ..random import default_generator
from ..tensor import Tensor
from . import checkpointing
from .callbacks import Callback

LossFn = Callable[[Any, Any], Tensor]


def _batches(data: Any) -> Iterable[Any]:
    """A DataLoader-like iterable of batches, or one (inputs, target) batch given directly."""
    if isinstance(data, tuple) and len(data) == 2 and all(isinstance(d, (Tensor, np.ndarray)) for d in data):
        return [data]
    return data  # type: ignore[no-any-return]


def _batch_size(x: Any) -> int:
    if isinstance(x, Tensor):
        return x.shape[0] if x.ndim else 1
    if isinstance(x, (tuple, list)) and x:
        return _batch_size(x[0])
    return 1


class Trainer:
    """Train `model` with `optimizer` on `loss_fn(output, target)`.

    grad_accum_steps  -- micro-batches per optimizer step (each loss is scaled by 1/grad_accum_steps).
    max_grad_norm     -- clip the total gradient norm before each step (device-side, no host sync).
    scheduler         -- stepped after every optimizer step (scheduler_interval="step") or every epoch.
    progress          -- tqdm bar with loss and samples/s (None: only when stderr is a terminal).
    """

    def __init__(self, model: Module, optimizer: Optimizer, loss_fn: LossFn, scheduler: LRScheduler | None = None,
                 device: Any = None, grad_accum_steps: int = 1, max_grad_norm: float | None = None,
                 scheduler_interval: str = "step", callbacks: Sequence[Callback] = (), progress: bool | None = None,
                 log_every: int = 10, metrics: dict[str, Callable[[Any, Any], Tensor]] | None = None) -> None:
        if grad_accum_steps < 1:
            raise RumusError(f"Trainer: grad_accum_steps must be >= 1, got {grad_accum_steps}")
        if scheduler_interval not in ("step", "epoch"):
            raise RumusError(f"Trainer: scheduler_interval must be 'step' or 'epoch', got {scheduler_interval!r}")
        self.model, self.optimizer, self.loss_fn, self.scheduler = model, optimizer, loss_fn, scheduler
        self.device = Device.parse(device) if device is not None else self._model_device()
        self.grad_accum_steps, self.max_grad_norm = grad_accum_steps, max_grad_norm
        self.scheduler_interval = scheduler_interval
        self.callbacks = list(callbacks)
        self.progress, self.log_every = progress, max(int(log_every), 1)
        self.metrics = dict(metrics or {})
        self.global_step = 0  # optimizer steps taken
        self.micro_step = 0  # batches seen (forward/backward passes)
        self.epoch = 0  # completed epochs
        self.batch_in_epoch = 0  # batches of the current epoch already trained
        self.stop_training = False
        self.last_loss: Tensor | None = None
        self._loss_sum: Tensor | None = None
        self._loss_count = 0

    def _model_device(self) -> Device:
        for p in self.model.parameters():
            return p.device
        from .._runtime import default_device
        return default_device()

    # ---- running loss ---------------------------------------------------------------------------------
    @property
    def average_loss(self) -> float:
        """Mean loss over the batches trained since the epoch began (or reset_epoch()); 0.0 before any."""
        if self._loss_sum is None or self._loss_count == 0:
            return 0.0
        return float(self._loss_sum.item()) / self._loss_count

    def reset_epoch(self) -> None:
        """Start a new averaging window (fit calls it at every epoch start)."""
        self._loss_sum, self._loss_count = None, 0

    # ---- one batch ------------------------------------------------------------------------------------
    def _to_device(self, x: Any) -> Any:
        if isinstance(x, Tensor):
            return x if x.device == self.device else x.to(self.device)
        if isinstance(x, np.ndarray):
            return _creation.tensor(x, device=self.device)
        if isinstance(x, (tuple, list)):
            return type(x)(self._to_device(v) for v in x)
        if isinstance(x, dict):
            return {k: self._to_device(v) for k, v in x.items()}
        return x

    def _split(self, batch: Any) -> tuple[Any, Any]:
        if isinstance(batch, dict):
            batch = dict(batch)
            target = batch.pop("target", batch.pop("labels", None))
            return batch, target
        if isinstance(batch, (tuple, list)) and len(batch) >= 2:
            inputs = batch[0] if len(batch) == 2 else tuple(batch[:-1])
            return inputs, batch[-1]
        raise RumusError("Trainer: a batch must be (inputs, target), (*inputs, target) or a dict with 'target'")

    def _forward(self, inputs: Any) -> Any:
        if isinstance(inputs, dict):
            return self.model(**inputs)
        if isinstance(inputs, tuple):
            return self.model(*inputs)
        return self.model(inputs)

    def train_step(self, batch: Any) -> Tensor:
        """Forward + backward on one batch; steps the optimizer when grad_accum_steps batches have been seen.
        Returns the (unscaled) loss as a device tensor."""
        self.model.train()
        inputs, target = self._split(self._to_device(batch))
        loss = self.loss_fn(self._forward(inputs), target)
        (M.mul(loss, 1.0 / self.grad_accum_steps) if self.grad_accum_steps > 1 else loss).backward()
        self.micro_step += 1
        detached = loss.detach()
        self._loss_sum = detached if self._loss_sum is None else M.add(self._loss_sum, detached)
        self._loss_count += 1
        self.last_loss = detached
        if self.micro_step % self.grad_accum_steps == 0:
            self._optimizer_step(detached)
        return detached

    def _optimizer_step(self, loss: Tensor) -> None:
        if self.max_grad_norm is not None:
            clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad()  # the next accumulation window starts from nothing (torch's loop)
        self.global_step += 1
        if self.scheduler is not None and self.scheduler_interval == "step":
            self.scheduler.step()
        for cb in self.callbacks:
            cb.on_step_end(self, self.global_step, loss)

    # ---- loops -------------------------------------------------------------------------------------
    def _bar(self, total: int | None, desc: str) -> Any:
        show = self.progress
        if show is None:
            import sys
            show = sys.stderr.isatty()
        if not show:
            return None
        from tqdm import tqdm
        return tqdm(total=total, desc=desc, unit="batch", leave=False, dynamic_ncols=True)

    def fit(self, train_data: Any, epochs: int = 1, eval_data: Any = None, max_steps: int | None = None,
            checkpoint_dir: str | None = None) -> list[dict[str, Any]]:
        """Train until `epochs` epochs are complete (counting epochs done before a resume) or max_steps
        optimizer steps; returns one log dict per epoch (loss, val_loss, lr, samples/s, time)."""
        history: list[dict[str, Any]] = []
        self.stop_training = False
        for cb in self.callbacks:
            cb.on_fit_begin(self)
        while self.epoch < epochs and not self.stop_training and (max_steps is None or self.global_step < max_steps):
            logs = self._train_epoch(train_data, max_steps)
            if eval_data is not None:
                logs.update({f"val_{k}": v for k, v in self.evaluate(eval_data).items()})
            history.append(logs)
            for cb in self.callbacks:
                cb.on_epoch_end(self, self.epoch, logs)
            if checkpoint_dir is not None:
                self.save_checkpoint(checkpoint_dir)
            if max_steps is not None and self.global_step >= max_steps:
                break
        for cb in self.callbacks:
            cb.on_fit_end(self)
        return history

    def _train_epoch(self, data: Any, max_steps: int | None) -> dict[str, Any]:
        batches = _batches(data)
        skip = self.batch_in_epoch  # resuming mid-epoch: these batches were trained before the checkpoint
        if skip == 0:
            self.reset_epoch()
        for cb in self.callbacks:
            cb.on_epoch_begin(self, self.epoch)
        total = len(batches) if hasattr(batches, "__len__") else None  # type: ignore[arg-type]
        bar = self._bar(total, f"epoch {self.epoch + 1}")
        start, samples, seen, interrupted = time.perf_counter(), 0, 0, False
        try:
            for i, batch in enumerate(batches):
                if i < skip:
                    continue
                loss = self.train_step(batch)
                self.batch_in_epoch += 1
                seen += 1
                samples += _batch_size(self._split(batch)[0])
                if bar is not None:
                    bar.update(1)
                    if seen % self.log_every == 0:
                        rate = samples / max(time.perf_counter() - start, 1e-9)
                        bar.set_postfix(loss=f"{float(loss.item()):.4f}", samples_s=f"{rate:.0f}")
                if self.stop_training or (max_steps is not None and self.global_step >= max_steps):
                    interrupted = True  # the epoch stays open: a resumed fit() continues it
                    break
        finally:
            if bar is not None:
                bar.close()
        elapsed = time.perf_counter() - start
        logs: dict[str, Any] = {"epoch": self.epoch + 1, "loss": self.average_loss, "steps": self.global_step,
                                "samples_per_s": samples / elapsed if elapsed > 0 else 0.0, "time_s": elapsed}
        if self.scheduler is not None:
            logs["lr"] = self.scheduler.get_last_lr()[0]
        if not interrupted:
            if self.scheduler is not None and self.scheduler_interval == "epoch":
                self.scheduler.step()
            self.epoch += 1
            self.batch_in_epoch = 0
        return logs

    def evaluate(self, data: Any) -> dict[str, float]:
        """Mean loss (and metrics) over the batches, weighted by batch size; no gradients, eval mode."""
        was_training = self.model.training
        self.model.eval()
        sums: dict[str, Tensor] = {}
        count = 0
        try:
            with no_grad():
                for batch in _batches(data):
                    inputs, target = self._split(self._to_device(batch))
                    out = self._forward(inputs)
                    n = _batch_size(inputs)
                    values = {"loss": self.loss_fn(out, target)}
                    values.update({name: fn(out, target) for name, fn in self.metrics.items()})
                    for name, v in values.items():
                        v = M.mul(v.detach(), float(n))
                        sums[name] = v if name not in sums else M.add(sums[name], v)
                    count += n
        finally:
            self.model.train(was_training)
        logs = {name: float(s.item()) / max(count, 1) for name, s in sums.items()}
        for cb in self.callbacks:
            cb.on_evaluate(self, logs)
        return logs

    # ---- checkpoints ---------------------------------------------------------------------------------
    def save_checkpoint(self, directory: str) -> str:
        """Model, optimizer, scheduler, counters and RNG state into `directory` (atomic; see checkpointing)."""
        extra = {
            "trainer": {"global_step": self.global_step, "micro_step": self.micro_step, "epoch": self.epoch,
                        "batch_in_epoch": self.batch_in_epoch,
                        "loss_sum": float(self._loss_sum.item()) if self._loss_sum is not None else 0.0,
                        "loss_count": self._loss_count},
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
            "rng": default_generator.get_state(),
        }
        return checkpointing.save(directory, self.model.state_dict(), self.optimizer.state_dict(), extra,
                                  self.global_step)

    def load_checkpoint(self, directory: str) -> None:
        """Restore everything save_checkpoint wrote; fit() then continues where training stopped."""
        model_state, opt_state, sidecar = checkpointing.load(directory, device=self.device)
        self.model.load_state_dict(model_state)
        if opt_state is not None:
            self.optimizer.load_state_dict(opt_state)
        if self.scheduler is not None and sidecar.get("scheduler") is not None:
            self.scheduler.load_state_dict(sidecar["scheduler"])
            for group, lr in zip(self.optimizer.param_groups, self.scheduler.get_last_lr()):
                group["lr"] = lr
        t = sidecar["trainer"]
        self.global_step, self.micro_step = int(t["global_step"]), int(t["micro_step"])
        self.epoch, self.batch_in_epoch = int(t["epoch"]), int(t["batch_in_epoch"])
        self._loss_count = int(t["loss_count"])
        self._loss_sum = _creation.tensor(float(t["loss_sum"]), device=self.device) if self._loss_count else None
        if sidecar.get("rng"):
            default_generator.set_state(sidecar["rng"])


def accuracy(output: Tensor, target: Tensor) -> Tensor:
    """Fraction of rows whose arg-max class equals the integer target (a Trainer metric)."""
    return M.mean(M.eq(M.argmax(output, -1), target).to(output.dtype))

