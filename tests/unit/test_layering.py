"""The floor plan, checked on every import statement of the code (an AST walk, no import is executed).

Floors, from the ground up (a module may import its own floor and the floors below, never above):

1. ``schemas`` — data contracts only; imports nothing else of ours but the agent SDK's wire contracts
   (``orgmem_sdk``: a distribution of its own below every floor, which imports nothing of the server).
2. the runtime — every module under ``services/`` that is neither a stage nor the top floor: settings,
   errors, ids, names, viewer, hierarchy, ports, runtime, stagekit, kafka, db, objectstore, producer,
   taxonomy, metrics, health … (the graph's reads are the retriever's: ``retriever/graph/``)
3. the stages — ``ingest``, ``embedder``, ``extractor``, ``retriever`` and the two stages that live in
   ``services/``: ``services/conflicts`` and ``services/collaboration``. A stage imports ``schemas``, the
   runtime and itself; never another stage (stages share code only through the runtime: the query
   embedder reaches the retriever through ``services.ports.Embedder`` on ``Runtime``).
4. the top floor — what assembles stages into processes and doors: ``services/api/``, ``services/ops/``,
   ``services/eval/``, ``services/cli.py``, ``services/serve.py``, ``services/waitready.py``, the stage
   catalogue ``services/stages.py`` and the client factory ``services/wiring.py``. It may import anything.

``bench/`` and ``tests/`` stand above the top floor and are not checked. An import inside a function or
under ``TYPE_CHECKING`` counts like any other: it is still a dependency. String imports of our own modules
(``importlib.import_module``, ``__import__``) are refused outright, since they hide dependencies from
this check, from mypy and from a reader's "go to definition".
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = ("schemas", "services", "ingest", "embedder", "extractor", "retriever")
STAGES = ("ingest", "embedder", "extractor", "retriever", "services.conflicts", "services.collaboration")
TOP = (
    "services.api",
    "services.ops",
    "services.eval",
    "services.cli",
    "services.serve",
    "services.waitready",
    "services.stages",
    "services.wiring",
)
SCHEMAS, RUNTIME, STAGE, TOP_FLOOR = 1, 2, 3, 4


def _within(module: str, prefixes: tuple[str, ...]) -> str | None:
    return next((p for p in prefixes if module == p or module.startswith(p + ".")), None)


def floor_of(module: str) -> tuple[int, str]:
    """(floor, unit): the unit is the stage package for stages, else the floor's name."""
    if _within(module, ("schemas",)):
        return SCHEMAS, "schemas"
    if _within(module, TOP):
        return TOP_FLOOR, "top"
    stage = _within(module, STAGES)
    if stage:
        return STAGE, stage
    return RUNTIME, "runtime"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, module) of every import of one of our packages."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # ``from services import generations`` imports the module services.generations
            out += [(node.lineno, f"{target}.{a.name}") for a in node.names]
    return [(line, m) for line, m in out if m.split(".")[0] in OURS]


def violation(importer: str, target: str) -> str | None:
    floor, unit = floor_of(importer)
    t_floor, t_unit = floor_of(target)
    if t_floor > floor:
        return f"floor {floor} ({unit}) imports floor {t_floor} ({t_unit})"
    if floor == STAGE and t_floor == STAGE and unit != t_unit:
        return f"stage {unit} imports stage {t_unit}"
    return None


def source_files() -> list[Path]:
    return sorted(p for pkg in OURS for p in (ROOT / pkg).rglob("*.py"))


def upward_imports() -> list[str]:
    found: list[str] = []
    for path in source_files():
        module = module_name(path)
        tree = ast.parse(path.read_text(), filename=str(path))
        for line, target in imported(tree, module, path.name == "__init__.py"):
            why = violation(module, target)
            if why:
                found.append(f"{path.relative_to(ROOT)}:{line} imports {target}: {why}")
    return found


def string_imports() -> list[str]:
    found: list[str] = []
    for path in source_files():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if name in ("import_module", "__import__"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} calls {name}")
    return found


def test_the_tree_is_read() -> None:
    files = source_files()
    assert len(files) > 100
    assert {module_name(p).split(".")[0] for p in files} == set(OURS)


def test_no_import_runs_up_a_floor_or_across_stages() -> None:
    assert upward_imports() == []


def test_no_string_imports_of_our_modules() -> None:
    assert string_imports() == []


@pytest.mark.parametrize(
    ("importer", "target", "expected"),
    [
        ("services.runtime", "retriever.scope", "floor 2 (runtime) imports floor 3 (retriever)"),
        ("retriever.service", "services.api.auth", "floor 3 (retriever) imports floor 4 (top)"),
        ("embedder.handler", "ingest.handler", "stage embedder imports stage ingest"),
        ("extractor.assemble", "services.conflicts.resolution", "stage extractor imports stage services.conflicts"),
        ("services.people", "services.collaboration.weights", "floor 2 (runtime) imports floor 3"),
        ("schemas.tools", "services.viewer", "floor 1 (schemas) imports floor 2 (runtime)"),
        ("services.stagekit", "services.stages", "floor 2 (runtime) imports floor 4 (top)"),
    ],
)
def test_the_check_catches_each_kind_of_upward_import(importer: str, target: str, expected: str) -> None:
    why = violation(importer, target)
    assert why is not None and why.startswith(expected)


@pytest.mark.parametrize(
    ("importer", "target"),
    [
        ("retriever.service", "services.viewer"),
        ("services.api.tools", "retriever.wiring"),
        ("services.conflicts.handler", "services.names"),
        ("extractor.patterns", "extractor.rules"),
        ("services.stages", "embedder.stage"),
        ("services.viewer", "services.hierarchy"),
    ],
)
def test_downward_and_same_unit_imports_pass(importer: str, target: str) -> None:
    assert violation(importer, target) is None


def test_relative_and_from_package_imports_are_resolved(tmp_path: Path) -> None:
    tree = ast.parse("from . import handler\nfrom ..api import auth\nfrom services import generations\n")
    assert [m for _, m in imported(tree, "services.ops.cli", False)] == [
        "services.ops.handler",
        "services.api.auth",
        "services.generations",
    ]
