"""The packages of tracker_core and tracker_api and what each may import (docs/guide.md,
"Layout").

Each package's docstring ends with a "May import:" paragraph naming the other parts of its
tree it may use; this test holds the code to it, and to three rules of the layout: no circle
between modules, no import of the tree inside a function unless it says why (an import deferred
to dodge a circle hides the circle), and no module at the top of a tree beside the few named
here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
TREES = ("tracker_core", "tracker_api")
# The modules at the top of each tree, and the parts each may import (None: every part).
TOP_LEVEL = {
    "tracker_core": {"keyspace": set(), "errors": set(), "blocks": {"keyspace"}},
    "tracker_api": {"app": None, "server": None},
}
EVERYTHING = re.compile(r"every (package|part) of tracker_(core|api)")
# Imports deferred into a function on purpose: the command line loads a command's modules when
# the command runs, so `tracker --help` and a short command start fast (tracker_api.cli).
DEFERRED_ON_PURPOSE = ("tracker_api.cli.",)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources(tree: str) -> dict[str, ast.Module]:
    return {_module_name(p): ast.parse(p.read_text(), str(p)) for p in sorted((SRC / tree).rglob("*.py"))}


def _imports(tree: ast.Module, root: str) -> list[tuple[str, ast.stmt, bool]]:
    """(imported module or name of ROOT, node, at module level) for every import."""
    top = set(map(id, tree.body))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.extend((f"{node.module}.{a.name}", node, id(node) in top) for a in node.names)
        elif isinstance(node, ast.Import):
            found.extend((a.name, node, id(node) in top) for a in node.names)
    return [(name, node, at_top) for name, node, at_top in found if name.startswith(root + ".")]


def _unit(dotted: str) -> str:
    """The package (or top-level module) of its tree that DOTTED belongs to."""
    return dotted.split(".")[1]


def _allowed(root: str, unit: str) -> set[str] | None:
    """The parts UNIT of ROOT may import (None: every part): its docstring's "May import:"
    paragraph for a package, TOP_LEVEL for a module at the top."""
    if unit in TOP_LEVEL[root]:
        return TOP_LEVEL[root][unit]
    doc = ast.get_docstring(ast.parse((SRC / root / unit / "__init__.py").read_text())) or ""
    found = re.search(r"May import:(.*?)(?:\n\n|\Z)", doc, re.S)
    assert found, f"{root}.{unit}: its docstring says nothing of what it may import"
    if EVERYTHING.search(found.group(1)):
        return None
    return set(re.findall(rf"{root}\.(\w+)", found.group(1)))


@pytest.mark.parametrize("root", TREES)
def test_every_package_says_what_it_owns_and_may_import(root):
    packages = [p.parent.name for p in (SRC / root).glob("*/__init__.py")]
    assert len(packages) >= 5
    for package in packages:
        doc = ast.get_docstring(ast.parse((SRC / root / package / "__init__.py").read_text()))
        assert doc and len(doc.splitlines()[0]) > 20, package
        _allowed(root, package)
    modules = {p.stem for p in (SRC / root).glob("*.py")} - {"__init__"}
    assert modules == set(TOP_LEVEL[root]), "a module at the top of the tree belongs in a package"


@pytest.mark.parametrize("root", TREES)
def test_each_part_imports_only_what_its_docstring_allows(root):
    wrong = []
    for module, tree in _sources(root).items():
        if module == root:
            continue
        unit = _unit(module)
        allowed = _allowed(root, unit)
        if allowed is None:
            continue
        for name, node, _ in _imports(tree, root):
            target = _unit(name)
            if target != unit and target not in allowed:
                wrong.append(f"{module}:{node.lineno} imports {name}")
    assert wrong == []


@pytest.mark.parametrize("root", TREES)
def test_no_import_of_the_tree_is_deferred_into_a_function(root):
    deferred = [
        f"{module}:{node.lineno} {name}"
        for module, tree in _sources(root).items()
        for name, node, at_top in _imports(tree, root)
        if not at_top and not module.startswith(DEFERRED_ON_PURPOSE) and not _under_type_checking(tree, node)
    ]
    assert deferred == []


def _under_type_checking(tree: ast.Module, node: ast.stmt) -> bool:
    return any(
        isinstance(statement, ast.If)
        and "TYPE_CHECKING" in ast.unparse(statement.test)
        and any(child is node for child in ast.walk(statement))
        for statement in tree.body
    )


@pytest.mark.parametrize("root", TREES)
def test_no_circle_between_modules(root):
    sources = _sources(root)
    graph = {}
    for module, tree in sources.items():
        # `from package import name`: the submodule when NAME is one, else the package
        targets = {
            name if name in sources else name.rsplit(".", 1)[0]
            for name, _, at_top in _imports(tree, root)
            if at_top
        }
        graph[module] = {t for t in targets if t in sources and t != module}
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


@pytest.mark.parametrize("root", TREES)
def test_no_circle_between_folders(root):
    folders: dict[str, set[str]] = {}
    for module, tree in _sources(root).items():
        path = SRC.joinpath(*module.split("."))
        folder = module if path.is_dir() else module.rsplit(".", 1)[0]
        for name, _, _ in _imports(tree, root):
            target = _folder_of(name)
            if target and target != folder:
                folders.setdefault(folder, set()).add(target)
    both_ways = sorted(
        f"{a} <-> {b}" for a in folders for b in folders[a] if a < b and a in folders.get(b, ())
    )
    assert both_ways == []


def _folder_of(name: str) -> str | None:
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        candidate = SRC.joinpath(*parts[:n])
        if candidate.is_dir():
            return ".".join(parts[:n])
        if candidate.with_suffix(".py").exists():
            return ".".join(parts[: n - 1])
    return None
