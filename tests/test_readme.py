"""The README stays a two-minute read, keeps the two commands first, and its code runs:
its ```python blocks run in order in one fresh namespace (as tests/test_docs.py runs each
page of the site), a ``<!-- skip-test -->`` block is only parsed."""

import re
from pathlib import Path

from test_docs import python_blocks, run_page

README = Path(__file__).resolve().parents[1] / "README.md"
COMMANDS = (
    "```bash\n"
    "make demo    # creates .venv on first use, then trains PPO on CartPole (8 seeds), plots, "
    "exports to ONNX, replays in gymnasium\n"
    "make test    # creates .venv on first use, then runs ruff and the whole test suite\n"
    "```"
)


def test_the_readme_is_at_most_250_lines():
    assert len(README.read_text().splitlines()) <= 250


def test_the_readme_starts_with_the_two_commands():
    assert README.read_text().startswith("# fxrl\n\n" + COMMANDS)


def test_the_readme_links_only_to_files_that_exist():
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text()):
        if not target.startswith("http"):
            assert (README.parent / target).exists(), target


def test_the_readme_blocks_run_in_order(tmp_path, monkeypatch):
    assert python_blocks(README)
    monkeypatch.chdir(tmp_path)
    run_page(README)
