"""torch.utils.data.dataloader's path."""

from ...data._workers import get_worker_info
from ...data.collate import default_collate
from ...data.dataloader import DataLoader

__all__ = ["DataLoader", "default_collate", "get_worker_info"]
