"""Usage-weighted torch API coverage: which torch names real model code uses, how often, and whether
rumus has each one. Writes docs/API_COVERAGE.md.

    python tests/compat/corpus/fetch_packages.py --scan   # the corpus and model packages, pinned
    python docs/api_coverage.py                           # scan and write the table

What is scanned: the corpus programs' packages (tests/compat/corpus/packages.py) and larger model code
(torchvision's models, timm's models and layers, Hugging Face's BERT, GPT-2 and T5 modeling files).
Counted, with `ast`, per source line ("call site"):
- every attribute chain rooted at a name bound to torch (`import torch`, `import torch.nn as nn`,
  `from torch import nn`, `from torch.nn import functional as F`, `from torch.nn import Linear`, ...),
  taken at its longest prefix that names something in torch (`torch.nn.functional.relu`), and every
  name imported from a torch module;
- every `.name(...)` call, and every `.shape`/`.dtype`/`.device`-style attribute read, whose name is a
  torch.Tensor attribute and not also a method of Python's str/list/dict/set/tuple (a value's type is
  unknown to `ast`, so shared names like `.split`, `.index`, `.copy` are left out rather than guessed).
Only names that exist in the reference torch install count (torch.utils.tensorboard, which needs the
separate tensorboard package, does not). A site resolves when the same chain exists on rumus (`torch.` read as
`rumus.`; tensor names on
a rumus tensor).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "compat" / "corpus"))

import fetch_packages  # noqa: E402

sys.path.insert(0, str(ROOT / "docs"))
import api_coverage_dir  # noqa: E402

TENSOR_PROPERTIES = {"shape", "dtype", "device", "T", "mT", "H", "grad", "data", "ndim", "requires_grad",
                     "is_cuda", "is_leaf", "grad_fn", "real", "imag", "layout", "is_sparse", "itemsize", "nbytes"}
_PY_METHODS = set().union(*(dir(t) for t in (str, list, dict, set, tuple, bytes, int, float)))

# (group name, folder under the cache, glob patterns)
SOURCES: list[tuple[str, str, list[str]]] = [
    ("corpus", "site", ["vit_pytorch/*.py", "mlp_mixer_pytorch/*.py", "perceiver_pytorch/*.py", "linformer/*.py",
                        "pytorch_pretrained_bert/*.py", "pytorch_tcn/*.py", "d2l/torch.py",
                        "cleanrl/*.py"]),
    ("torchvision models", "scan", ["torchvision/models/**/*.py"]),
    ("timm models and layers", "scan", ["timm/models/*.py", "timm/layers/*.py"]),
    ("HF BERT / GPT-2 / T5", "scan", ["transformers/models/bert/modeling_bert.py",
                                      "transformers/models/gpt2/modeling_gpt2.py",
                                      "transformers/models/t5/modeling_t5.py"]),
]


def _resolve(root: Any, dotted: list[str]) -> bool:
    obj = root
    prefix = root.__name__
    for part in dotted:
        prefix = f"{prefix}.{part}"
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        try:
            obj = importlib.import_module(prefix)
        except Exception:  # noqa: BLE001 - any failure to import means the name is not there
            return False
    return True


def _longest_torch_prefix(parts: list[str]) -> list[str] | None:
    """The longest prefix of `parts` (after 'torch') that names something in real torch."""
    best: list[str] | None = None
    for n in range(1, len(parts) + 1):
        if _resolve_cached("torch", tuple(parts[:n])):
            best = parts[:n]
        else:
            break
    return best


_cache: dict[tuple[str, tuple[str, ...]], bool] = {}


def _resolve_cached(framework: str, parts: tuple[str, ...]) -> bool:
    key = (framework, parts)
    if key not in _cache:
        root = torch if framework == "torch" else importlib.import_module("rumus")
        _cache[key] = _resolve(root, list(parts))
    return _cache[key]


def _chain(node: ast.AST) -> list[str] | None:
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        names.append(node.id)
        return names[::-1]
    return None


def _torch_aliases(tree: ast.Module) -> dict[str, list[str]]:
    aliases: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "torch" or a.name.startswith("torch."):
                    if a.asname:
                        aliases[a.asname] = a.name.split(".")
                    else:
                        aliases["torch"] = ["torch"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "torch" or node.module.startswith("torch."):
                for a in node.names:
                    if a.name != "*":
                        aliases[a.asname or a.name] = [*node.module.split("."), a.name]
    return aliases


def sites(tree: ast.Module) -> Iterator[tuple[str, str]]:
    """(kind, name) per use: kind 'torch' with a dotted torch path, or 'tensor' with an attribute name."""
    aliases = _torch_aliases(tree)
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and (
                node.module == "torch" or node.module.startswith("torch.")):
            for a in node.names:
                if a.name != "*":
                    full = [*node.module.split(".")[1:], a.name]
                    if _longest_torch_prefix(full) == full:
                        yield "torch", ".".join(["torch", *full])
        if isinstance(node, (ast.Attribute, ast.Name)) and isinstance(node.ctx, ast.Load):
            parent = parents.get(node)
            if isinstance(parent, ast.Attribute) and parent.value is node:
                continue  # counted at the outermost attribute
            chain = _chain(node)
            if chain and chain[0] in aliases:
                full = aliases[chain[0]] + chain[1:]
                if full[0] != "torch":
                    continue
                if isinstance(node, ast.Name) and len(full) > 1 and chain == [node.id]:
                    pass  # a bare use of a name imported from torch: counted at its import
                best = _longest_torch_prefix(full[1:])
                if best is not None and not (isinstance(node, ast.Name) and chain[0] != "torch"):
                    yield "torch", ".".join(["torch", *best])
                continue
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            chain = _chain(node)
            if chain and chain[0] in aliases:
                continue
            name = node.attr
            parent = parents.get(node)
            is_call = isinstance(parent, ast.Call) and parent.func is node
            if name in _PY_METHODS or name.startswith("_") or not hasattr(torch.Tensor, name):
                continue
            if is_call or name in TENSOR_PROPERTIES:
                yield "tensor", name


def namespace(kind: str, name: str) -> str:
    if kind == "tensor":
        return "Tensor methods and attributes"
    parts = name.split(".")
    for ns in ("torch.nn.functional", "torch.nn.init", "torch.nn.utils", "torch.nn", "torch.optim",
               "torch.utils.data", "torch.distributions", "torch.linalg", "torch.fft", "torch.cuda",
               "torch.distributed", "torch.jit", "torch.autograd", "torch.fx", "torch.utils.checkpoint",
               "torch.amp", "torch.backends"):
        if name == ns or name.startswith(ns + "."):
            return ns
    if len(parts) == 2:
        return "torch"
    return "torch (other submodules)"


def resolves(kind: str, name: str) -> bool:
    if kind == "tensor":
        import rumus

        # rumus binds some tensor methods per instance, so ask a tensor, not the class.
        return hasattr(rumus.zeros(2, 2), name)
    return _resolve_cached("rumus", tuple(name.split(".")[1:]))


def scan() -> dict[str, Counter[tuple[str, str]]]:
    per_group: dict[str, Counter[tuple[str, str]]] = {}
    for group, where, patterns in SOURCES:
        base = fetch_packages.site_dir() if where == "site" else fetch_packages.scan_dir()
        counts: Counter[tuple[str, str]] = Counter()
        for pattern in patterns:
            for path in sorted(base.glob(pattern)):
                if path.name.endswith("_jax.py") or "jax" in path.name:
                    continue
                try:
                    tree = ast.parse(path.read_text(encoding="utf-8"))
                except SyntaxError:
                    continue
                counts.update(sites(tree))
        per_group[group] = counts
    return per_group


def report(per_group: dict[str, Counter[tuple[str, str]]]) -> str:
    total: Counter[tuple[str, str]] = Counter()
    for c in per_group.values():
        total.update(c)
    ok = {k: resolves(*k) for k in total}
    n_all = sum(total.values())
    n_ok = sum(v for k, v in total.items() if ok[k])
    lines = ["# torch API coverage, weighted by use", "",
             "Generated by `python docs/api_coverage.py` (after `python tests/compat/corpus/fetch_packages.py"
             " --scan`); do not edit by hand. The method and its limits are in that script's docstring.", "",
             f"**Weighted coverage: {n_ok} of {n_all} call sites resolve in rumus ({100 * n_ok / n_all:.2f}%).**",
             "", "| source | files' call sites | resolve | weighted |", "| --- | --- | --- | --- |"]
    for group, c in per_group.items():
        g_all = sum(c.values())
        g_ok = sum(v for k, v in c.items() if ok[k])
        lines.append(f"| {group} | {g_all} | {g_ok} | {100 * g_ok / max(g_all, 1):.2f}% |")
    lines += ["", "## Per namespace (unweighted: distinct names)", "",
              "| namespace | names used | names in rumus | unweighted | call sites | sites resolved | weighted |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    by_ns: dict[str, list[tuple[str, str]]] = {}
    for k in total:
        by_ns.setdefault(namespace(*k), []).append(k)
    for ns in sorted(by_ns, key=lambda s: -sum(total[k] for k in by_ns[s])):
        ks = by_ns[ns]
        names_ok = sum(ok[k] for k in ks)
        s_all = sum(total[k] for k in ks)
        s_ok = sum(total[k] for k in ks if ok[k])
        lines.append(f"| {ns} | {len(ks)} | {names_ok} | {100 * names_ok / len(ks):.1f}% | {s_all} | {s_ok} |"
                     f" {100 * s_ok / s_all:.2f}% |")
    missing = sorted((k for k in total if not ok[k]), key=lambda k: (-total[k], k))
    lines += ["", f"## Still missing, ranked by call sites ({len(missing)} names)", "",
              "| rank | name | call sites | " + " | ".join(per_group) + " |",
              "| --- | --- | --- | " + " | ".join("---" for _ in per_group) + " |"]
    for i, k in enumerate(missing, 1):
        shown = k[1] if k[0] == "torch" else f"Tensor.{k[1]}"
        per = " | ".join(str(per_group[g][k]) for g in per_group)
        lines.append(f"| {i} | `{shown}` | {total[k]} | {per} |")
    lines += [""] + api_coverage_dir.table()
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "API_COVERAGE.md")
    args = ap.parse_args()
    text = report(scan())
    args.out.write_text(text)
    print("\n".join(text.splitlines()[:8]))


if __name__ == "__main__":
    main()
