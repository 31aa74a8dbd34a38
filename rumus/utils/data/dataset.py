"""torch.utils.data.dataset's path."""

from ...data.dataset import ConcatDataset, Dataset, Subset, TensorDataset, random_split
from ...data.iterable import ChainDataset, IterableDataset

__all__ = ["ChainDataset", "ConcatDataset", "Dataset", "IterableDataset", "Subset", "TensorDataset", "random_split"]
