"""fxrl's modules form a layering: no module imports, however indirectly, one that imports it.

The graph is read from the source with ``ast`` (nothing is imported): an edge ``a -> b`` for
every ``import`` or ``from ... import`` statement in ``a`` that names ``b``, wherever it
stands. Imports inside functions count, and so do those under ``if TYPE_CHECKING:``: an
import deferred into a function still makes its module depend on the other one; it only
moves the failure of a cycle from import time to call time, and hides the layering
problem instead of solving it. ``from pkg import name`` is an edge to the submodule
``pkg.name`` when there is one, else to ``pkg`` (its ``__init__``).

Importing ``pkg.sub.mod`` runs ``pkg/sub/__init__.py`` first, so a module outside
``pkg.sub`` that imports ``pkg.sub.mod`` depends on everything that ``__init__`` imports:
that is an edge to ``pkg.sub`` too. (``fxrl.transforms`` once imported ``fxrl.envs.core``
while ``fxrl.envs.wrappers``, which ``fxrl/envs/__init__.py`` imports, imported the
transforms inside its functions: a cycle only this edge shows.) A module inside the
package is not given that edge (the ``__init__`` is already running when it is
imported, or it would make every package that re-exports its modules a cycle), and a
module importing itself is not an edge either.

One kind of import may point up the layers, and only from inside a function: a module
that offers a feature through an optional package's tool (``UPWARD``, each with its
reason). Those edges are left out of the cycle check, and the test keeps the list true.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

FXRL = Path(__file__).resolve().parents[1] / "fxrl"


def module_names(root: Path) -> dict[str, Path]:
    """``{"pkg.sub.mod": path}`` for every ``.py`` file under the package ``root``."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _packages_around(target: str, importer: str, modules: dict[str, Path]) -> list[str]:
    """The packages whose ``__init__`` importing ``target`` runs first, less those that
    hold ``importer`` (or are it)."""
    parts = target.split(".")
    around = [".".join(parts[:i]) for i in range(1, len(parts))]
    return [p for p in around if p in modules and not f"{importer}.".startswith(f"{p}.")]


def import_statements(path: Path) -> list[tuple[ast.AST, bool]]:
    """Every import statement of the file, and whether it stands inside a function."""
    out = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                out.append((child, in_function))
            inside = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            visit(child, inside)

    visit(ast.parse(path.read_text(), str(path)), False)
    return out


def import_edges(root: Path, *, function_level: bool | None = None) -> dict[str, dict[str, int]]:
    """``{importer: {imported: line}}`` between the modules of the package ``root``, a
    package's ``__init__`` included where importing a module of it runs that first.
    ``function_level``: only imports inside functions (True), only the others (False),
    or all (None)."""
    modules = module_names(root)
    edges: dict[str, dict[str, int]] = {m: {} for m in modules}
    for module, path in modules.items():
        for node, in_function in import_statements(path):
            if function_level is not None and in_function != function_level:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(module, node, path.name == "__init__.py")
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    targets.append(sub if sub in modules else source)
            for target in targets:
                if target in modules and target != module:
                    edges[module].setdefault(target, node.lineno)
                    for package in _packages_around(target, module, modules):
                        edges[module].setdefault(package, node.lineno)
    return edges


def find_cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) through each strongly connected group of modules
    (Tarjan's algorithm, then a shortest way back to the group's first module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return [_cycle_through(edges, group) for group in sorted(groups)]


def _cycle_through(edges: dict[str, dict[str, int]], group: list[str]) -> list[str]:
    start, members = group[0], set(group)
    paths = {w: [start, w] for w in sorted(edges[start]) if w in members}
    frontier = list(paths)
    while start not in paths:
        nxt = []
        for v in frontier:
            for w in sorted(edges[v]):
                if w in members and w not in paths:
                    paths[w] = [*paths[v], w]
                    nxt.append(w)
        frontier = nxt
    return paths[start]


def describe(edges: dict[str, dict[str, int]], cycle: list[str]) -> str:
    steps = [f"{a} (line {edges[a][b]})" for a, b in itertools.pairwise(cycle)]
    return " -> ".join([*steps, cycle[-1]])


# ------------------------------------------------------------------------------ fxrl

# (importer, imported): a feature offered through an optional package's tool, imported in
# the function that offers it, pointing up the layers. Each with why.
UPWARD = {
    ("fxrl.envs.registry", "fxrl.testing.envs"): (
        "fxrl.envs.register runs the env contract check, fxrl.testing.check_env, which "
        "needs hypothesis (the testing extra); fxrl.testing checks envs, so sits above them"
    ),
}


def _without_upward(edges: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    out = {m: dict(targets) for m, targets in edges.items()}
    for importer, imported in UPWARD:
        out[importer].pop(imported)
        out[importer].pop(imported.rsplit(".", 1)[0], None)  # the package around it
    return out


def test_fxrl_imports_form_no_cycle():
    edges = import_edges(FXRL)
    assert len(edges) > 100, sorted(edges)  # the walk found the package
    edges = _without_upward(edges)
    cycles = [describe(edges, c) for c in find_cycles(edges)]
    assert cycles == [], "import cycles (break each at one of its edges):\n" + "\n".join(cycles)


def test_each_upward_import_stands_in_a_function_and_reaches_an_optional_tool():
    inside, top = import_edges(FXRL, function_level=True), import_edges(FXRL, function_level=False)
    for importer, imported in UPWARD:
        assert imported in inside[importer], f"{importer} no longer imports {imported}"
        assert imported not in top[importer], f"{importer} imports {imported} at the top"
    # the upward edge is one: without it the graph has a cycle no more
    assert find_cycles(import_edges(FXRL)) != []


def test_the_layers_the_cycles_were_broken_at_hold():
    edges, top = import_edges(FXRL), import_edges(FXRL, function_level=False)
    # the Buffer type sits below everything that acts on a buffer
    assert "fxrl.buffers.core" not in edges["fxrl.buffers.prioritized"]
    assert "fxrl.buffers.state" in edges["fxrl.buffers.prioritized"]
    # transforms sit below the envs: they know the TimeStep a step reports
    # (fxrl.timestep), nothing of fxrl.envs, and the env wrappers import them at the top
    below = {e for t in edges if t.startswith("fxrl.transforms") for e in edges[t]}
    assert sorted(e for e in below if e.startswith("fxrl.envs")) == []
    assert "fxrl.timestep" in below
    assert {"fxrl.transforms", "fxrl.transforms.episodes"} <= set(top["fxrl.envs.wrappers"])
    # the demo is below the command line that runs it
    assert "fxrl.cli" not in edges["fxrl.run.demo"]


# ------------------------------------------------------------------------------ the walker


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_a_cycle_through_a_function_level_import_is_found_and_named(tmp_path):
    pkg = _package(tmp_path, {
        "pkg/__init__.py": "from pkg.a import f\n",
        "pkg/a.py": "from pkg import b\n\ndef f():\n    return b.g()\n",
        "pkg/b.py": "def g():\n    from pkg.a import f\n    return f\n",
        "pkg/c.py": "import pkg.a\n",
    })  # fmt: skip
    edges = import_edges(pkg)
    assert edges["pkg.a"] == {"pkg.b": 1} and edges["pkg.b"] == {"pkg.a": 2}
    cycles = find_cycles(edges)
    assert cycles == [["pkg.a", "pkg.b", "pkg.a"]]
    assert describe(edges, cycles[0]) == "pkg.a (line 1) -> pkg.b (line 2) -> pkg.a"


def test_a_cycle_through_a_package_init_is_found(tmp_path):
    # transforms import envs.core, whose package __init__ imports the wrappers, which
    # import the transforms inside a function: no two modules import each other
    pkg = _package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/envs/__init__.py": "from pkg.envs.wrappers import wrap\n",
        "pkg/envs/core.py": "X = 1\n",
        "pkg/envs/wrappers.py": "from pkg.envs.core import X\n\ndef wrap():\n"
                                "    from pkg.transforms import T\n",
        "pkg/transforms.py": "from pkg.envs.core import X\nT = X\n",
    })  # fmt: skip
    edges = import_edges(pkg)
    assert edges["pkg.transforms"] == {"pkg.envs.core": 1, "pkg.envs": 1}
    assert "pkg.envs" not in edges["pkg.envs.wrappers"]  # inside its own package
    assert find_cycles(edges) == [["pkg.envs", "pkg.envs.wrappers", "pkg.transforms", "pkg.envs"]]
    assert import_edges(pkg, function_level=True)["pkg.envs.wrappers"] == {"pkg.transforms": 4}
    assert import_edges(pkg, function_level=False)["pkg.envs.wrappers"] == {"pkg.envs.core": 1}


@pytest.mark.parametrize(
    ("b_source", "has_cycle"),
    [
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import X\n", True),
        ("from . import a\n", True),  # relative, to a sibling module
        ("from .a import X\n", True),
        ("from pkg import X\n", False),  # a name of pkg/__init__.py, which imports nothing
        ("import pkg\n", False),
        ("import os\nfrom pkg import b\n", False),  # itself
    ],
)
def test_imports_are_resolved_to_the_module_they_load(tmp_path, b_source, has_cycle):
    pkg = _package(tmp_path, {
        "pkg/__init__.py": "X = 1\n",
        "pkg/a.py": "from pkg.b import Y\nX = 2\n",
        "pkg/b.py": b_source + "Y = 3\n",
    })  # fmt: skip
    assert bool(find_cycles(import_edges(pkg))) is has_cycle


def test_a_long_cycle_is_reported_once_with_every_module_on_it(tmp_path):
    pkg = _package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/sub/__init__.py": "",
        "pkg/sub/host.py": "def make():\n    from pkg.sub import registry\n",
        "pkg/sub/registry.py": "from pkg.sub.wrappers import wrap\n",
        "pkg/sub/wrappers.py": "def wrap():\n    from pkg.transforms import T\n",
        "pkg/transforms.py": "def t():\n    from pkg.sub.host import make\nT = 1\n",
        "pkg/other.py": "from pkg.transforms import T\n",
    })  # fmt: skip
    cycles = find_cycles(import_edges(pkg))
    assert cycles == [
        ["pkg.sub.host", "pkg.sub.registry", "pkg.sub.wrappers", "pkg.transforms", "pkg.sub.host"]
    ]
