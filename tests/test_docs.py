"""Every code block on the documentation site runs: the site's pages must not rot.

Each page's ```python blocks run in page order in one fresh namespace per page, as a reader
pastes them into a new interpreter. A block preceded by the line ``<!-- skip-test -->`` is
only parsed (``ast.parse``): it needs something CI does not have (a Ray cluster, hours of
training), and the page says how to run it. Other fences (```bash, ```text) are not Python.
"""

from __future__ import annotations

import ast
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SKIP = "<!-- skip-test -->"
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
PAGES = sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.relative_to(DOCS).parts)


@dataclass
class Block:
    lang: str
    code: str
    line: int  # 1-based line of the opening fence
    skip: bool


def code_blocks(text: str) -> list[Block]:
    """The fenced code blocks of a markdown text, dedented, with their skip-test marks."""
    lines = text.split("\n")
    blocks, i = [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence = len(match["indent"]), match["fence"]
        previous = next((ln.strip() for ln in reversed(lines[:i]) if ln.strip()), "")
        body, j = [], i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][indent:] if lines[j][:indent].isspace() else lines[j])
            j += 1
        blocks.append(Block(match["lang"].lower(), "\n".join(body), i + 1, previous == SKIP))
        i = j + 1
    return blocks


def python_blocks(path: Path) -> list[Block]:
    return [b for b in code_blocks(path.read_text()) if b.lang == "python"]


def run_page(path: Path) -> None:
    """Run a page's python blocks in order in one fresh namespace; parse the skip-test ones."""
    name = path.relative_to(ROOT)
    # A real module, so classes defined on a page (tree.dataclass states) have a home.
    module = types.ModuleType("docs_page_" + re.sub(r"\W", "_", str(name.with_suffix(""))))
    sys.modules[module.__name__] = module
    try:
        for block in python_blocks(path):
            where = f"{name}:{block.line}"
            if block.skip:
                ast.parse(block.code, filename=where)
            else:
                exec(compile(block.code, where, "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]


def test_the_site_has_pages_with_python_blocks():
    assert sum(bool(python_blocks(p)) for p in PAGES) >= 20


def test_code_fences_name_a_language_and_python_is_spelled_python():
    """A ```py or unlabeled fence would hold Python that no test runs."""
    for path in [*PAGES, ROOT / "README.md"]:
        for block in code_blocks(path.read_text()):
            assert block.lang not in ("py", "python3", "pycon"), (path, block.line, block.lang)


def test_skip_test_marks_sit_right_before_a_python_block():
    for path in PAGES:
        lines = path.read_text().split("\n")
        for i, line in enumerate(lines):
            if line.strip() == SKIP:
                following = next((ln for ln in lines[i + 1 :] if ln.strip()), "")
                assert following.strip().startswith("```python"), (path, i + 1)


@pytest.mark.parametrize(
    "path",
    [p for p in PAGES if python_blocks(p)],
    ids=lambda p: str(p.relative_to(DOCS)),
)
def test_page_blocks_run_in_order(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # files a page writes land in a temporary directory
    monkeypatch.setenv("SB3_LOGDIR", str(tmp_path / "sb3"))  # else SB3 logs to /tmp/SB3-<date>
    run_page(path)
