"""fxrl's modules form a layering: no module imports, however indirectly, one that imports it.

The graph is read from the source with ``ast`` (nothing is imported): an edge ``a -> b`` for
every ``import`` or ``from ... import`` statement in ``a`` that names ``b``, wherever it
stands. Imports inside functions count, and so do those under ``if TYPE_CHECKING:``: an
import deferred into a function still makes its module depend on the other one; it only
moves the failure of a cycle from import time to call time, and hides the layering
problem instead of solving it. ``from pkg import name`` is an edge to the submodule
``pkg.name`` when there is one, else to ``pkg`` (its ``__init__``). A package's
``__init__`` that runs before its submodule is not an edge (it would make every package
that re-exports its modules a cycle); a module importing itself is not one either.
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


def import_edges(root: Path) -> dict[str, dict[str, int]]:
    """``{importer: {imported: line}}`` between the modules of the package ``root``."""
    modules = module_names(root)
    edges: dict[str, dict[str, int]] = {m: {} for m in modules}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
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


def test_fxrl_imports_form_no_cycle():
    edges = import_edges(FXRL)
    assert len(edges) > 100, sorted(edges)  # the walk found the package
    cycles = [describe(edges, c) for c in find_cycles(edges)]
    assert cycles == [], "import cycles (break each at one of its edges):\n" + "\n".join(cycles)


def test_the_layers_the_cycles_were_broken_at_hold():
    edges = import_edges(FXRL)
    # the Buffer type sits below everything that acts on a buffer
    assert "fxrl.buffers.core" not in edges["fxrl.buffers.prioritized"]
    assert "fxrl.buffers.state" in edges["fxrl.buffers.prioritized"]
    # transforms sit below the env wrappers that apply them: of fxrl.envs they know TimeStep
    below = {e for t in edges if t.startswith("fxrl.transforms") for e in edges[t]}
    assert sorted(e for e in below if e.startswith("fxrl.envs")) == ["fxrl.envs.core"]
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
