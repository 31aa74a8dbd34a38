"""Trainer callbacks: override the hooks you need; a callback may set `trainer.stop_training = True`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..tensor import Tensor
    from .trainer import Trainer


class Callback:
    """Hooks called by Trainer.fit / Trainer.evaluate. `loss` arguments are device tensors: reading one
    (float(loss)) is a host sync, so do it only when needed."""

    def on_fit_begin(self, trainer: Trainer) -> None:
        pass

    def on_epoch_begin(self, trainer: Trainer, epoch: int) -> None:
        pass

    def on_step_end(self, trainer: Trainer, step: int, loss: Tensor) -> None:
        """After every optimizer step (step = trainer.global_step)."""

    def on_epoch_end(self, trainer: Trainer, epoch: int, logs: dict[str, Any]) -> None:
        pass

    def on_evaluate(self, trainer: Trainer, logs: dict[str, Any]) -> None:
        pass

    def on_fit_end(self, trainer: Trainer) -> None:
        pass


class History(Callback):
    """Keeps every epoch's logs (Trainer.fit also returns them)."""

    def __init__(self) -> None:
        self.epochs: list[dict[str, Any]] = []

    def on_epoch_end(self, trainer: Trainer, epoch: int, logs: dict[str, Any]) -> None:
        self.epochs.append(dict(logs))


class EarlyStopping(Callback):
    """Stop when `monitor` (an epoch log key, e.g. "val_loss") has not improved by min_delta for `patience` epochs."""

    def __init__(self, monitor: str = "val_loss", patience: int = 3, min_delta: float = 0.0, mode: str = "min") -> None:
        self.monitor, self.patience, self.min_delta, self.mode = monitor, patience, min_delta, mode
        self.best: float | None = None
        self.bad_epochs = 0

    def on_epoch_end(self, trainer: Trainer, epoch: int, logs: dict[str, Any]) -> None:
        value = logs.get(self.monitor)
        if value is None:
            return
        better = self.best is None or (value < self.best - self.min_delta if self.mode == "min"
                                       else value > self.best + self.min_delta)
        if better:
            self.best, self.bad_epochs = float(value), 0
            return
        self.bad_epochs += 1
        if self.bad_epochs >= self.patience:
            trainer.stop_training = True


class CheckpointEvery(Callback):
    """Save a resumable checkpoint every `every` optimizer steps (and at the end of fit)."""

    def __init__(self, directory: str, every: int = 1000) -> None:
        self.directory, self.every = directory, every

    def on_step_end(self, trainer: Trainer, step: int, loss: Tensor) -> None:
        if step % self.every == 0:
            trainer.save_checkpoint(self.directory)

    def on_fit_end(self, trainer: Trainer) -> None:
        trainer.save_checkpoint(self.directory)
