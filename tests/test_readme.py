"""Every ```python block of the README runs, in order, in one namespace, as a user would
paste them: the tour must not rot."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_the_readme_has_python_snippets():
    assert len(BLOCKS) >= 4


@pytest.fixture(scope="module")
def namespace():
    return {"__name__": "readme"}


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_snippet_runs(index, namespace):
    code = compile(BLOCKS[index], f"README.md[python block {index}]", "exec")
    exec(code, namespace)
