"""rumus.train: a Trainer (fit / evaluate loops, gradient accumulation, clipping, schedulers, callbacks,
tqdm progress, resumable checkpoints)."""

from .callbacks import Callback, CheckpointEvery, EarlyStopping, History
from .trainer import Trainer, accuracy

__all__ = ["Callback", "CheckpointEvery", "EarlyStopping", "History", "Trainer", "accuracy"]
