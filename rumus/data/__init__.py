"""The data engine: `.rrec` record files, datasets and the DataLoader (PyTorch-shaped)."""

from ._workers import WorkerError, WorkerInfo, get_worker_info
from .collate import as_tensors, default_collate, numpy_collate
from .dataloader import DataLoader
from .dataset import ConcatDataset, Dataset, Subset, TensorDataset, random_split
from .iterable import ChainDataset, IterableDataset
from .sampler import (
    BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler, WeightedRandomSampler,
)
from .record_dataset import RecordDataset
from .rrec_reader import BlockLayout, RecordFile, RecordLayout
from .rrec_writer import RecordWriter

__all__ = [
    "BatchSampler", "ChainDataset", "IterableDataset", "RandomSampler", "Sampler", "SequentialSampler",
    "SubsetRandomSampler", "WeightedRandomSampler",
    "BlockLayout", "ConcatDataset", "DataLoader", "Dataset", "RecordDataset", "RecordFile", "RecordLayout",
    "RecordWriter", "Subset", "TensorDataset", "WorkerError", "WorkerInfo", "as_tensors", "default_collate",
    "get_worker_info", "numpy_collate", "random_split",
]
