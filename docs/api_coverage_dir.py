"""The unweighted half of docs/API_COVERAGE.md (docs/api_coverage.py calls `table()`): which public names
of torch, torch.nn, torch.nn.functional, torch.optim and torch.utils.data exist in rumus under the same path.

"Implemented" means the name exists at the same path in rumus; the tests in tests/compat/ check behaviour
for the names PyTorch programs use most. A name can exist and still lack options (see the docstrings)."""

from __future__ import annotations

import importlib
import inspect
import types

PAIRS = [("torch", "rumus"), ("torch.nn", "rumus.nn"), ("torch.nn.functional", "rumus.nn.functional"),
         ("torch.optim", "rumus.optim"), ("torch.utils.data", "rumus.utils.data")]


def public_names(module: types.ModuleType) -> list[str]:
    names = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
    out = []
    for n in sorted(set(names)):
        obj = getattr(module, n, None)
        if n.startswith("_") or obj is None or inspect.ismodule(obj):
            continue  # submodules are listed by their own section; typing helpers are not API
        if getattr(obj, "__module__", "") in ("typing", "typing_extensions", "builtins") and not callable(obj):
            continue
        out.append(n)
    return out


def table() -> list[str]:
    """Every public name of each torch namespace, and whether rumus has it at the same path."""
    lines = ["## Every public name, per namespace (unweighted)", "",
             "From `dir()` of each torch module against the rumus module at the same path. *Implemented* means",
             "the name exists there.", "",
             "| module | implemented | not yet | share |", "|---|---:|---:|---:|"]
    sections = []
    for tname, rname in PAIRS:
        tmod, rmod = importlib.import_module(tname), importlib.import_module(rname)
        names = public_names(tmod)
        have = [n for n in names if hasattr(rmod, n)]
        missing = [n for n in names if not hasattr(rmod, n)]
        lines.append(f"| `{tname}` | {len(have)} | {len(missing)} | {100 * len(have) / max(len(names), 1):.0f}% |")
        sections += ["", f"### `{tname}` → `{rname}`", "", f"**Implemented ({len(have)}):** "
                     + ", ".join(f"`{n}`" for n in have), "", f"**Not yet ({len(missing)}):** "
                     + ", ".join(f"`{n}`" for n in missing)]
    return lines + sections
