"""Structure figures of the code: package-level cycle edges, modules > 400 lines, functions > 80 lines.

``python bench/structure_figures.py [ROOT]`` (ROOT defaults to the current directory; any checkout works,
e.g. one made with ``git archive <commit> | tar -x -C DIR``). Cycle edges are the import edges between
units that lie on a cycle (inside a strongly connected component of more than one unit), counted twice:
with the top-level packages as units, and with ``services/`` split into its runtime and its top floor
(the floors of ``tests/unit/test_layering.py``).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGES = ("schemas", "services", "ingest", "embedder", "extractor", "retriever")
TOP_FLOOR = (
    "services.api",
    "services.cli",
    "services.serve",
    "services.ops",
    "services.eval",
    "services.waitready",
    "services.stages",
    "services.wiring",
)
MODULE_LINES = 400
FUNCTION_LINES = 80


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit(module: str, split: bool) -> str:
    top = module.split(".")[0]
    if top != "services" or not split:
        return top
    on_top = any(module == t or module.startswith(t + ".") for t in TOP_FLOOR)
    return "services(top)" if on_top else "services(runtime)"


def imports(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                out.add(".".join(base + ([node.module] if node.module else [])))
            else:
                out.add(node.module or "")
    return {m for m in out if m.split(".")[0] in PACKAGES}


def components(nodes: list[str], edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp: set[str] = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            found.append(comp)

    for v in nodes:
        if v not in index:
            visit(v)
    return found


def cycle_edges(root: Path, files: list[Path], split: bool) -> list[tuple[str, str]]:
    edges: dict[str, set[str]] = {}
    for path in files:
        module = module_name(root, path)
        for target in imports(ast.parse(path.read_text()), module, path.name == "__init__.py"):
            a, b = unit(module, split), unit(target, split)
            if a != b:
                edges.setdefault(a, set()).add(b)
    nodes = sorted(set(edges) | {b for targets in edges.values() for b in targets})
    return sorted(
        (a, b)
        for comp in components(nodes, edges)
        if len(comp) > 1
        for a in comp
        for b in edges.get(a, ())
        if b in comp
    )


def main(root: Path) -> None:
    files = sorted(p for pkg in PACKAGES for p in (root / pkg).rglob("*.py"))
    for split, label in ((False, "top-level packages"), (True, "services split into runtime / top floor")):
        edges = cycle_edges(root, files, split)
        print(f"cycle edges ({label}): {len(edges)} {edges}")
    big_modules: list[tuple[int, str]] = []
    big_functions: list[tuple[int, str]] = []
    for path in files:
        source = path.read_text()
        lines = source.count("\n")
        if lines > MODULE_LINES:
            big_modules.append((lines, str(path.relative_to(root))))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > FUNCTION_LINES:
                    big_functions.append((length, f"{path.relative_to(root)}:{node.name}"))
    print(f"modules > {MODULE_LINES} lines: {len(big_modules)} {sorted(big_modules, reverse=True)}")
    print(f"functions > {FUNCTION_LINES} lines: {len(big_functions)} {sorted(big_functions, reverse=True)}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "."))
