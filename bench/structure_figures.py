"""Structure figures: package-level cycle edges, modules > 400 lines, functions > 80 lines."""
from __future__ import annotations
import ast, sys
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
PKGS = ("schemas", "services", "ingest", "embedder", "extractor", "retriever")
TOP = ("services.api", "services.cli", "services.serve", "services.ops", "services.eval", "services.waitready", "services.stages", "services.wiring")

def modname(p: Path) -> str:
    parts = list(p.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)

def unit(mod: str, split: bool) -> str:
    top = mod.split(".")[0]
    if top == "services" and split:
        return "services(top)" if any(mod == t or mod.startswith(t + ".") for t in TOP) else "services(runtime)"
    return top

def imports(tree: ast.AST, mod: str, is_pkg: bool) -> set[str]:
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            out |= {a.name for a in n.names}
        elif isinstance(n, ast.ImportFrom):
            if n.level:
                base = mod.split(".")
                base = base[: len(base) - n.level + (1 if is_pkg else 0)]
                m = ".".join(base + ([n.module] if n.module else []))
            else:
                m = n.module or ""
            out.add(m)
            out |= {m + "." + a.name for a in n.names}
    return {m for m in out if m.split(".")[0] in PKGS}

def sccs(nodes, edges):
    idx, low, st, on, res, c = {}, {}, [], set(), [], [0]
    def f(v):
        idx[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
        for w in edges.get(v, ()):
            if w not in idx: f(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], idx[w])
        if low[v] == idx[v]:
            comp = set()
            while True:
                w = st.pop(); on.discard(w); comp.add(w)
                if w == v: break
            res.append(comp)
    for v in nodes:
        if v not in idx: f(v)
    return res

files = [p for pkg in PKGS for p in (ROOT / pkg).rglob("*.py")]
big_mods, big_funcs = [], []
for split in (False, True):
    edges: dict[str, set[str]] = {}
    for p in files:
        mod = modname(p); tree = ast.parse(p.read_text())
        for m in imports(tree, mod, p.name == "__init__.py"):
            a, b = unit(mod, split), unit(m, split)
            if a != b:
                edges.setdefault(a, set()).add(b)
    nodes = set(edges) | {b for s in edges.values() for b in s}
    cyc = [(a, b) for comp in sccs(sorted(nodes), edges) if len(comp) > 1 for a in comp for b in edges.get(a, ()) if b in comp]
    label = "services split runtime/top floor" if split else "top-level packages"
    print(f"cycle edges ({label}): {len(cyc)}  {sorted(cyc)}")
for p in files:
    src = p.read_text(); n = src.count("\n")
    if n > 400: big_mods.append((n, str(p.relative_to(ROOT))))
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            ln = (node.end_lineno or node.lineno) - node.lineno + 1
            if ln > 80: big_funcs.append((ln, f"{p.relative_to(ROOT)}:{node.name}"))
print(f"modules > 400 lines: {len(big_mods)} {sorted(big_mods, reverse=True)}")
print(f"functions > 80 lines: {len(big_funcs)} {sorted(big_funcs, reverse=True)}")
