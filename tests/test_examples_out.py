"""Examples write where their user asks, by default under ``runs/``, never into the
repository's ``docs/results/`` (the recorded runs the docs quote): only a command that
names ``docs/results/...`` itself, as the pages and docstrings show for re-recording, may
write there. Read from the source with ``ast``: nothing is run."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))


def _out_defaults(tree: ast.Module) -> list[str]:
    """The defaults of an ``--out``/``--out-dir`` argparse flag or an ``out`` dataclass
    field (tyro): the string the example writes to when not told otherwise."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            flags = [a.value for a in node.args if isinstance(a, ast.Constant)]
            if {"--out", "--out-dir"} & set(flags):
                found += [k.value.value for k in node.keywords if k.arg == "default"
                          and isinstance(k.value, ast.Constant)]  # fmt: skip
        named_out = getattr(getattr(node, "target", None), "id", "") in ("out", "out_dir")
        if isinstance(node, ast.AnnAssign) and named_out and isinstance(node.value, ast.Constant):
            found.append(node.value.value)
    return found


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_an_example_writes_nothing_into_docs_results_unless_told(path):
    tree = ast.parse(path.read_text())
    docstring = ast.get_docstring(tree, clean=False)
    strings = [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value != docstring
    ]
    assert not [s for s in strings if "docs/results" in s], path.name
    for default in _out_defaults(tree):
        assert default is None or default.startswith("runs/"), (path.name, default)


def test_the_examples_that_write_runs_default_to_runs():
    defaults = {p.name: _out_defaults(ast.parse(p.read_text())) for p in EXAMPLES}
    under_runs = [name for name, found in defaults.items() if any(d and d.startswith("runs/")
                  for d in found)]  # fmt: skip
    assert len(under_runs) >= 8, defaults
    assert {"ppo_cartpole.py", "dqn_cartpole.py", "sac_pendulum.py"} <= set(under_runs)
