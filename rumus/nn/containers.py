"""Sequential, ModuleList, ModuleDict."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .module import Module

# rumus.nn star-imports these.
__all__ = ["Sequential", "ModuleList", "ModuleDict"]


class Sequential(Module):
    """Runs its modules in order, each one's output the next one's input; indexable and sliceable like torch's."""
    def __init__(self, *modules: Any) -> None:
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], (OrderedDict, dict)):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def forward(self, x: Any) -> Any:
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, i: int | slice) -> Any:
        items = list(self._modules.values())
        if isinstance(i, slice):
            return Sequential(*items[i])
        return items[i]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, m: Module) -> Sequential:
        self.add_module(str(len(self._modules)), m)
        return self


class ModuleList(Module):
    """A list of modules registered as submodules (their parameters are the list's)."""
    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        for m in modules or []:
            self.append(m)

    def append(self, m: Module) -> ModuleList:
        self.add_module(str(len(self._modules)), m)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        for m in modules:
            self.append(m)
        return self

    def __getitem__(self, i: int) -> Any:
        return list(self._modules.values())[i]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(list(self._modules.values()))


class ModuleDict(Module):
    """A dict of modules registered as submodules under their keys."""
    def __init__(self, modules: Mapping[str, Module] | None = None) -> None:
        super().__init__()
        for k, m in (modules or {}).items():
            self.add_module(k, m)

    def __getitem__(self, k: str) -> Module:
        module: Module = self._modules[k]
        return module

    def __setitem__(self, k: str, m: Module) -> None:
        self.add_module(k, m)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, k: object) -> bool:
        return k in self._modules

    def keys(self) -> Any:
        return self._modules.keys()

    def values(self) -> Any:
        return self._modules.values()

    def items(self) -> Any:
        return self._modules.items()
