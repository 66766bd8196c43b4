"""The packages of tracker_core and what each may import (docs/architecture.md, "Layers").

Each package's docstring ends with a "May import:" paragraph naming the other parts of
tracker_core it may use; this test holds the code to it, and to three rules of the layout: no
circle between modules, no import of tracker_core inside a function (an import deferred to
dodge a circle hides the circle), and no package beside those that say what they may import.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
CORE = SRC / "tracker_core"
# The foundation modules at the top of tracker_core, and what each may import.
TOP_LEVEL = {"keyspace": set(), "errors": set(), "blocks": {"keyspace"}}
EVERYTHING = "every package of tracker_core"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.Module, module: str) -> list[tuple[str, ast.stmt, bool]]:
    """(imported tracker_core module or name, node, at module level) for every import."""
    top = set(map(id, tree.body))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            if node.level:  # relative: resolved against this module's package
                base = ".".join(module.split(".")[: -node.level] + ([node.module] if node.module else []))
            for alias in node.names:
                found.append((f"{base}.{alias.name}", node, id(node) in top))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, node, id(node) in top) for alias in node.names)
    return [(name, node, at_top) for name, node, at_top in found if name.startswith("tracker_core.")]


def _unit(dotted: str) -> str:
    """The package (or top-level module) of tracker_core that DOTTED belongs to."""
    return dotted.split(".")[1]


def _sources() -> dict[str, ast.Module]:
    return {_module_name(p): ast.parse(p.read_text(), str(p)) for p in sorted(CORE.rglob("*.py"))}


def _allowed(package: str) -> set[str] | None:
    """The units PACKAGE may import, from its docstring's "May import:" paragraph (None: all)."""
    doc = ast.get_docstring(ast.parse((CORE / package / "__init__.py").read_text())) or ""
    found = re.search(r"May import:(.*?)(?:\n\n|\Z)", doc, re.S)
    assert found, f"tracker_core.{package}: its docstring says nothing of what it may import"
    if EVERYTHING in found.group(1):
        return None
    return set(re.findall(r"tracker_core\.(\w+)", found.group(1)))


def test_every_package_says_what_it_owns_and_may_import():
    packages = [p.parent.name for p in CORE.glob("*/__init__.py")]
    assert len(packages) >= 10
    for package in packages:
        doc = ast.get_docstring(ast.parse((CORE / package / "__init__.py").read_text()))
        assert doc and len(doc.splitlines()[0]) > 20, package
        _allowed(package)
    modules = {p.stem for p in CORE.glob("*.py")} - {"__init__"}
    assert modules == set(TOP_LEVEL), "a module at the top of tracker_core belongs in a package"


def test_each_part_imports_only_what_its_docstring_allows():
    wrong = []
    for module, tree in _sources().items():
        if module == "tracker_core":
            continue
        unit = _unit(module)
        allowed = TOP_LEVEL[unit] if unit in TOP_LEVEL else _allowed(unit)
        if allowed is None:
            continue
        for name, node, _ in _imports(tree, module):
            target = _unit(name)
            if target != unit and target not in allowed:
                wrong.append(f"{module}:{node.lineno} imports {name}")
    assert wrong == []


def test_no_tracker_core_import_is_deferred_into_a_function():
    deferred = [
        f"{module}:{node.lineno} {name}"
        for module, tree in _sources().items()
        for name, node, at_top in _imports(tree, module)
        if not at_top and not _under_type_checking(tree, node)
    ]
    assert deferred == []


def _under_type_checking(tree: ast.Module, node: ast.stmt) -> bool:
    for statement in tree.body:
        if isinstance(statement, ast.If) and "TYPE_CHECKING" in ast.unparse(statement.test):
            if any(child is node for child in ast.walk(statement)):
                return True
    return False


def _graph() -> dict[str, set[str]]:
    sources = _sources()
    graph = {}
    for module, tree in sources.items():
        targets = set()
        for name, _, _ in _imports(tree, module):
            # `from package import name`: the submodule when NAME is one, else the package
            targets.add(name if name in sources else name.rsplit(".", 1)[0])
        graph[module] = {t for t in targets if t in sources and t != module}
    return graph


def test_no_circle_between_modules():
    graph = _graph()
    state: dict[str, int] = {}
    circles = []

    def visit(module, path):
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                circles.append(" -> ".join([*path[path.index(target) :], target]))
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert circles == []


@pytest.mark.parametrize("package", ["tracker_core"])
def test_no_circle_between_folders(package):
    folders: dict[str, set[str]] = {}
    for path in sorted((SRC / package).rglob("*.py")):
        module = _module_name(path)
        folder = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if not name.startswith(package + "."):
                    continue
                target = _folder_of(name, package)
                if target and target != folder:
                    folders.setdefault(folder, set()).add(target)
    both_ways = sorted(
        f"{a} <-> {b}" for a in folders for b in folders[a] if a < b and a in folders.get(b, ())
    )
    assert both_ways == []


def _folder_of(name: str, package: str) -> str | None:
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        candidate = SRC.joinpath(*parts[:n])
        if candidate.is_dir():
            return ".".join(parts[:n])
        if candidate.with_suffix(".py").exists():
            return ".".join(parts[: n - 1])
    return None
