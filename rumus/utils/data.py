"""`torch.utils.data` as a module path: `from rumus.utils.data import DataLoader, Dataset` (the data engine
itself lives in rumus.data)."""

from ..data import *  # noqa: F401, F403
from ..data import __all__  # noqa: F401
