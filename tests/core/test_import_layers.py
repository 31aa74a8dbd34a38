"""The core reads top-down (issue 9): no import cycle among the core's modules.

Storage and the tensor's data (`_tensor_base`) sit at the bottom, dispatch above them, the op functions
(`_creation`, `_math`, `_views`, `_inplace`, `_advanced_index`, ...) above dispatch, and `tensor.Tensor`,
whose methods call the op functions, last. This test builds the import graph of the whole `rumus`
package from the source (every `import`, at module level or inside a function) and fails on any strongly
connected component that holds a core module, naming the edges that close it.

Not counted, because they run no code at import time:
- imports under `if TYPE_CHECKING:` (annotations only);
- an import whose line says `# late binding: <why>`: a function that calls upward on purpose (e.g. the
  autograd graph summing a broadcast gradient with `_math`), resolved when it first runs;
- the implicit edge to the root package `rumus` (the public facade, which imports every layer; its own
  explicit imports are still edges).
Importing `rumus.autograd.graph` from outside `rumus.autograd` runs `rumus/autograd/__init__.py` first,
so that import is also an edge to the package.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path
from typing import Any

import rumus

ROOT = Path(rumus.__file__).parent
LATE = "# late binding:"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in ROOT.rglob("*.py")}


def _is_core(name: str) -> bool:
    """The tensor, dispatch, the op functions and autograd: rumus/*.py (but the CLI and the facade),
    rumus/ops and rumus/autograd."""
    tail = name.split(".")[1:]
    if not tail:
        return False
    if len(tail) == 1:  # a module of the top level, not a package such as rumus.nn
        return MODULES[name].name != "__init__.py" and tail[0] not in ("__main__", "cli", "demo")
    return tail[0] in ("ops", "autograd")


def _imports(tree: ast.AST, lines: list[str]) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            end = node.end_lineno or node.lineno
            if not any(LATE in lines[i - 1] for i in range(node.lineno, end + 1)):
                found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = module.split(".") if is_package else module.split(".")[:-1]
        if node.level:
            base = base[: len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        # `from pkg import sub` imports the submodule; `from mod import name` the module
        names = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in MODULES else prefix for a in node.names]
    out = []
    for name in names:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name:
            out.append(name)
    return out


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        text = path.read_text()
        edges: set[str] = set()
        for node in _imports(ast.parse(text), text.splitlines()):
            for target in _targets(name, path.name == "__init__.py", node):
                edges.add(target)
                # the first import of a package's module runs the package's __init__ (the root's excepted:
                # see above); from inside the package, that __init__ is already running or done
                package = target.rpartition(".")[0]
                while package.count(".") and not (name + ".").startswith(package + "."):
                    edges.add(package)
                    package = package.rpartition(".")[0]
        edges.discard(name)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_the_core() -> None:
    graph = import_graph()
    # guards the parser: these edges exist, so a graph without them was read wrong
    assert "rumus._dispatch" in graph["rumus._math"] or "rumus.ops" in graph["rumus._math"]
    assert "rumus._tensor_base" in graph["rumus._dispatch"]
    assert {"rumus._math", "rumus._views", "rumus._inplace"} <= graph["rumus.tensor"]
    assert "rumus.autograd" in graph["rumus._dispatch"]  # the package's __init__ runs first


def test_the_parser_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle_among_core_modules() -> None:
    graph = import_graph()
    bad = [c for c in cycles(graph) if any(_is_core(m) for m in c)]
    detail = [f"{sorted(c)}: " + ", ".join(f"{a} -> {b}" for a in c for b in sorted(graph[a]) if b in c)
              for c in bad]
    assert not bad, "import cycles among core modules (import downward, or mark a function's upward " \
                    f"import '{LATE} <why>'):\n" + "\n".join(detail)


def _layers_contract() -> dict[str, Any]:
    config = tomllib.loads((ROOT.parent / "pyproject.toml").read_text())
    return next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")


def test_import_linter_ignores_exactly_the_marked_late_bindings() -> None:
    """The layers contract in pyproject.toml ignores the upward imports; each must be marked where it is
    made (and each mark among the layered modules listed there), so the two cannot drift apart."""
    contract = _layers_contract()
    layered = set(contract["layers"])
    marked: set[str] = set()
    typing_only: set[str] = set()
    for name, path in MODULES.items():
        text = path.read_text()
        lines = text.splitlines()
        tree = ast.parse(text)
        checked = {id(n) for n in _imports(tree, lines)}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in checked:
                continue  # an import that counts: not ignorable
            late = any(LATE in lines[i - 1] for i in range(node.lineno, (node.end_lineno or node.lineno) + 1))
            for target in _targets(name, path.name == "__init__.py", node):
                (marked if late else typing_only).add(f"{name} -> {target}")
    ignored = set(contract["ignore_imports"])
    # every ignored import is marked late binding, or is an annotation-only import of the layered modules
    assert ignored - marked <= typing_only, f"ignored in pyproject but neither marked '{LATE}' nor " \
                                            f"annotation-only: {sorted(ignored - marked - typing_only)}"
    reaching_layers = {e for e in marked if e.split(" -> ")[1] in layered or e.split(" -> ")[0] in layered}
    assert reaching_layers <= ignored, f"marked late bindings missing from pyproject's ignore_imports: " \
                                       f"{sorted(reaching_layers - ignored)}"


def test_linear_calls_only_downward_but_where_marked() -> None:
    """At run time too: F.linear forward and backward on a parameter and a view that requires grad never
    calls from a layered core module into one above it, except through a marked late binding."""
    import rumus as rm
    from rumus import nn
    from rumus.nn import functional as F

    contract = _layers_contract()
    rank = {m: -i for i, m in enumerate(contract["layers"])}  # higher is further up
    allowed = {tuple(e.split(" -> ")) for e in contract["ignore_imports"]}
    layer = nn.Linear(8, 4)
    leaf = rm.randn(3, 8, requires_grad=True)

    def step() -> None:
        F.linear(leaf[1:], layer.weight, layer.bias).sum().backward()

    step()  # caches filled: the walk below is a training step's
    upward: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call" or frame.f_back is None:
            return
        callee, caller = frame.f_globals.get("__name__"), frame.f_back.f_globals.get("__name__")
        if callee in rank and caller in rank and rank[callee] > rank[caller] and (caller, callee) not in allowed:
            upward.append(f"{caller}.{frame.f_back.f_code.co_name} -> {callee}.{frame.f_code.co_name}")

    sys.setprofile(profile)
    try:
        step()
    finally:
        sys.setprofile(None)
    assert not upward, sorted(set(upward))
