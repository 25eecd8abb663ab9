"""The command lines of docs/tutorials/your-env.md run as the page writes them, next to the
page's env saved as corridor.py (budgets shrunk, eager: the page's own numbers are a
recorded run). test_docs.py runs the page's Python blocks."""

import shlex
import sys
from pathlib import Path

import pytest
from test_docs import code_blocks

from fxrl.cli import main

PAGE = Path(__file__).resolve().parents[1] / "docs" / "tutorials" / "your-env.md"


def _commands(text: str) -> list[list[str]]:
    """Every ``fxrl ...`` line of the page's bash blocks, as argv (comments dropped)."""
    out = []
    for block in code_blocks(text):
        if block.lang != "bash":
            continue
        for line in block.code.splitlines():
            words = shlex.split(line, comments=True)
            if words and words[0] == "fxrl":
                out.append(words[1:])
    return out


def _small(argv: list[str]) -> list[str]:
    """A train command with one small update's budget, eager and quiet; eval with one
    episode per seed; others as written."""
    if argv[0] == "eval":
        if "--episodes" in argv:
            i = argv.index("--episodes")
            argv = [*argv[:i], *argv[i + 2 :]]
        return [*argv, "--episodes", "1"]
    if argv[0] != "train":
        return argv
    if "--total-steps" in argv:
        i = argv.index("--total-steps")
        argv = [*argv[:i], *argv[i + 2 :]]
    small = ["--num-envs", "4", "--num-steps", "16", "--update-epochs", "1", "--total-steps", "64"]
    return [*argv, *small, "--no-compile", "--threads", "1", "--quiet"]


def test_the_page_s_fxrl_commands_run_next_to_corridor_py(tmp_path, monkeypatch, capsys):
    text = PAGE.read_text()
    corridor = next(b for b in code_blocks(text) if b.lang == "python")
    assert corridor.code.startswith('"""corridor.py:')
    (tmp_path / "corridor.py").write_text(corridor.code)
    commands = _commands(text)
    assert [c[0] for c in commands] == ["train", "eval", "export", "eval", "train", "train",
                                        "train"]  # fmt: skip
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the CLI adds the current directory
    monkeypatch.delitem(sys.modules, "corridor", raising=False)
    try:
        for argv in commands:
            if argv[0] == "train" and "--out" not in argv:
                argv = [*argv, "--out", f"runs/{len(list(tmp_path.glob('runs/*')))}"]
            with pytest.raises(SystemExit) as exit_info:
                main(_small(argv))
            out = capsys.readouterr()
            assert exit_info.value.code == 0, f"fxrl {shlex.join(argv)}: {out.err}"
    finally:
        sys.modules.pop("corridor", None)
    run = tmp_path / "runs" / "corridor"
    assert (run / "policy.onnx").exists() and (tmp_path / "corridor.gif").exists()
    assert '"env": "corridor:Corridor-v0"' in (run / "config.json").read_text()
