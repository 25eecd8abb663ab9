"""Every measured figure on the site's pages and in the README is the one recorded in
docs/results: each sits above a ``<!-- figures: FILE ... -->`` comment whose expression
reads it from the file (docs/hooks/figures.py says how). A page whose number is changed,
or that gains a number no comment backs, fails here."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("docs_figures", ROOT / "docs/hooks/figures.py")
figures = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = figures  # dataclasses look their module up
_spec.loader.exec_module(figures)

DOCS = ROOT / "docs"
PAGES = [
    ROOT / "README.md",
    *sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.relative_to(DOCS).parts),
]


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", PAGES, ids=_name)
def test_the_pages_figures_are_the_recorded_ones(path):
    problems = figures.problems(path.read_text(), _name(path))
    assert not problems, "\n".join(problems)


def _checked_lines() -> list[tuple[Path, object, object]]:
    return [
        (path, block, line)
        for path in PAGES
        for block in figures.blocks(path.read_text())
        for line in block.lines
        if line.expression and not line.let
    ]


def _bumped(text: str) -> str:
    """The figure with its last number moved by 3 units of its last digit: 17.8x -> 18.1x."""
    *_, last = re.finditer(r"\d+(?:\.\d+)?", text)
    digits = last.group(0)
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    moved = f"{float(digits) + 3 * 10.0**-decimals:.{decimals}f}"
    if moved.endswith("0"):  # "about 10" would round to tens: move one unit further
        moved = f"{float(digits) + 4 * 10.0**-decimals:.{decimals}f}"
    return text[: last.start()] + moved + text[last.end() :]


def test_the_pages_carry_checked_figures():
    lines = _checked_lines()
    assert len(lines) >= 300
    assert {_name(p) for p, _, _ in lines} >= {"README.md", "docs/index.md"}


def test_a_figure_changed_on_the_page_and_in_its_comment_fails():
    """For every checked figure: write another number in the text and in the comment alike,
    and the check against the file reports it (so no check passes whatever the page says)."""
    for path, block, line in _checked_lines():
        page = path.read_text()
        bumped = _bumped(line.text)
        region_start = max((b.end for b in figures.blocks(page) if b.end <= block.start), default=0)
        region = page[region_start : block.start]
        pattern = r"(?<![\w.])" + r"\s+".join(map(re.escape, line.text.split())) + r"(?!\d|\.\d)"
        region = re.sub(pattern, bumped, region)
        comment = page[block.start : block.end].replace(f"\n{line.text} = ", f"\n{bumped} = ", 1)
        # the region and its comment alone: the other comments' checks do not change
        said = [p for p in figures.problems(region + comment, _name(path)) if "page says" in p]
        assert said, f"{_name(path)}:{line.lineno}: {line.text} -> {bumped} passed"


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setattr(figures, "RESULTS", tmp_path)
    figures._read.cache_clear()
    lines = [
        {"bench": "b", "cpu": "x"},
        {"case": "ppo", "ratio": "a/b", "value": 17.8329},
        {"case": "ppo", "steps_per_s": 125944.7},
        {"case": "dqn", "value": 0.7512},
    ]
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (tmp_path / "e.json").write_text(json.dumps({"returns": [500.0, 480.0, 20.0]}))
    yield tmp_path
    figures._read.cache_clear()


PAGE = """# A page

The 8 seeds run at **17.8x** the peer's steps/s (125.9 k), and DQN at 0.75x; returns
average 333.3, between 20 and 500 (2 of 3 at 480 or more), every 30 s.

<!-- figures: b.jsonl, e.json
17.8x = row(ratio="a/b")["value"]
125.9 k = row(case="ppo", steps_per_s=125944.7)["steps_per_s"]
0.75x = row(case="dqn")["value"]
let returns, n = data("e.json")["returns"], 3
333.3 = mean(returns)
2 of 3 = sum(r >= 480 for r in returns), n
30 s: how often the loop writes a curve, a setting
-->
"""


def test_a_page_whose_figures_are_the_files_has_no_problems(results):
    assert figures.problems(PAGE, "page.md") == []


@pytest.mark.parametrize(
    "old, new, problem",
    [
        ("(125.9 k)", "(126.1 k)", "'125.9 k' is not in the text above"),  # the page changed
        ("\n125.9 k = ", "\n126.1 k = ", "the page says '126.1 k'"),  # and its comment too
        ("at 0.75x;", "at 0.75x, 3.1x;", "'3.1x' has no figures comment"),  # a new number
        ("average 333.3", "average 333.3 (a 4% drop)", "'4%' has no figures comment"),
        ('(case="dqn")["value"]', '(case="dqn")["valeu"]', "failed: KeyError"),
        ('row(ratio="a/b")', 'row(case="ppo")', "2 records match"),
        ("b.jsonl, e.json", "b.jsonl, f.json", "no file docs/results/f.json"),
        ("30 s: how", "30 s how", "expected 'TEXT = EXPRESSION' or 'TEXT: why'"),
        ("= mean(", "= 1 + mean(", "the page says '333.3'"),
        ("returns, n = data", "returns, n, m = data", "failed: ValueError"),  # let unpacks
    ],
)
def test_a_page_that_disagrees_with_its_files_says_where(results, old, new, problem):
    assert old in PAGE
    found = figures.problems(PAGE.replace(old, new), "page.md")
    assert any(problem in p and p.startswith("page.md:") for p in found), found


def test_figures_are_read_with_the_rounding_they_are_written_with():
    assert figures.written_numbers("17.8x") == [(17.8, pytest.approx(0.05))]
    assert figures.written_numbers("125.9 k") == [(125900.0, pytest.approx(50.0))]
    assert figures.written_numbers("121-127 k") == [(121e3, 500.0), (127e3, 500.0)]
    assert figures.written_numbers("about 410x") == [(410.0, 5.0)]
    assert figures.written_numbers("410x") == [(410.0, 0.5)]
    assert figures.written_numbers("24k-49k") == [(24e3, 500.0), (49e3, 500.0)]
    assert figures.written_numbers("196,608") == [(196608.0, 0.5)]
    half = pytest.approx(0.05)
    assert figures.written_numbers("2.4-2.5x") == [(2.4, half), (2.5, half)]
    assert figures.written_numbers("-19 to -21") == [(-19.0, 0.5), (-21.0, 0.5)]
    assert figures.written_numbers("4.3e-08") == [(4.3e-08, pytest.approx(0.05e-08))]
    assert figures.written_numbers("1.7 MB") == [(1.7, pytest.approx(0.05))]
    assert figures._close(17.849, figures.written_numbers("17.8x"))
    assert not figures._close(17.86, figures.written_numbers("17.8x"))
    assert not figures._close((2.4, 2.56), figures.written_numbers("2.4-2.5x"))
    assert not figures._close(2.4, figures.written_numbers("2.4-2.5x"))  # one of two


def test_what_is_not_prose_is_not_read_as_a_figure():
    page = (
        "Text 1.5x.\n\n```python\nx = 2.5  # 3.5x\n```\n\n    .venv/bin/python a.py --lr 0.5\n\n"
        '`ratio 4.5x` and [a link](b.md#c-6.5) <img width="8.5">\n<!-- 9.5x -->\n\n'
        "On torch 2.13 and Python 3.10.\n\n"
        "```text\nShown: 4.5x.\n\n<!-- figures: none.jsonl\n4.5x = 1\n-->\n```\n"
    )
    found = figures.problems(page, "p.md")
    assert [p.split(": ", 1)[1] for p in found] == [
        "'1.5x' has no figures comment saying where it comes from"
    ]
