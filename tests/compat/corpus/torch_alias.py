"""Make `import torch` (and every `torch.x.y`) resolve to rumus's modules, for a program run under rumus.

Only the import names change: `torch` is `rumus`, `torch.nn.functional` is `rumus.nn.functional`, and so
on. A `torch.x` module rumus does not have fails the import with ModuleNotFoundError naming it, which
the harness records as the program's first error.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Sequence


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target
        self.own_spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = importlib.import_module(self.target)
        self.own_spec = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        # Nothing to run: the module is the real rumus one. The import system overwrote its __spec__
        # with the alias's; give it back its own so reload/pickle still see rumus.
        module.__spec__ = self.own_spec


class TorchToRumus(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "torch" and not fullname.startswith("torch."):
            return None
        real = "rumus" + fullname[len("torch"):]
        if importlib.util.find_spec(real) is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(real), is_package=True)


def install() -> None:
    import importlib.util  # noqa: F401  (find_spec above)

    sys.meta_path.insert(0, TorchToRumus())
