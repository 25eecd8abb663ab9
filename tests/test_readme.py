"""The README stays a two-minute read, keeps the two commands first, its code runs and does
what its comments say, its commands name flags that exist, and its figures are the ones
recorded in docs/results and on the pages it links.

Its ```python blocks run in order in one fresh namespace (as tests/test_docs.py runs each
page of the site), a ``<!-- skip-test -->`` block is only parsed."""

import ast
import json
import re
import shlex
import sys
import types
from pathlib import Path

import pytest
import torch
from test_docs import code_blocks, python_blocks

from fxrl import tree
from fxrl.algorithms import core

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TEXT = README.read_text()
COMMANDS = (
    "```bash\n"
    "make demo    # creates .venv on first use, then trains PPO on CartPole (8 seeds), plots, "
    "exports to ONNX, replays in gymnasium\n"
    "make test    # creates .venv on first use, then runs ruff and the whole test suite\n"
    "```"
)


def _section(title: str) -> str:
    """The README's text under ``## title``, up to the next ``## ``."""
    start = TEXT.index(f"\n## {title}\n")
    end = TEXT.find("\n## ", start + 1)
    return TEXT[start : end if end >= 0 else None]


def test_the_readme_is_at_most_250_lines():
    assert len(TEXT.splitlines()) <= 250


def test_the_readme_starts_with_the_two_commands():
    assert TEXT.startswith("# fxrl\n\n" + COMMANDS)


def test_the_readme_links_only_to_files_that_exist():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", TEXT) + re.findall(r'src="([^"]+)"', TEXT)
    assert len(links) >= 10
    for target in links:
        if not target.startswith("http"):
            assert (README.parent / target).exists(), target


@pytest.fixture(scope="module")
def first_agent(tmp_path_factory):
    """The README's python blocks run in order in one fresh namespace, in an empty folder,
    as a reader pastes them (``<!-- skip-test -->`` ones only parsed): the namespace and
    what the blocks printed."""
    module = types.ModuleType("readme_blocks")
    sys.modules[module.__name__] = module  # a home for classes a block might define
    printed: list[tuple] = []
    module.__dict__["print"] = lambda *args, **kwargs: printed.append(args)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path_factory.mktemp("readme"))
        try:
            for block in python_blocks(README):
                where = f"README.md:{block.line}"
                if block.skip:
                    ast.parse(block.code, filename=where)
                else:
                    exec(compile(block.code, where, "exec"), module.__dict__)
        finally:
            del sys.modules[module.__name__]
    return module.__dict__, printed


def test_the_readme_has_python_blocks_and_they_run_in_order(first_agent):
    assert [b for b in python_blocks(README) if not b.skip]
    assert first_agent[0]["algo"] is not None


def test_the_first_agent_is_four_vmapped_seeds_with_a_loss_each(first_agent):
    ns, printed = first_agent
    algo, states, metrics = ns["algo"], ns["states"], ns["metrics"]
    assert isinstance(algo, core.Algorithm)  # "Algorithm(init, update, policy)"
    assert all(callable(f) for f in (algo.init, algo.update, algo.policy))
    assert all(leaf.shape[0] == 4 for leaf in tree.leaves(states))  # "4 seeds"
    loss = metrics["loss"]  # "one value per seed", and it is what the block prints first
    assert loss.shape == (4,) and bool(loss.isfinite().all())
    assert len(printed) == 2 and printed[0][0] is loss
    # the four seeds are four agents: their parameters differ
    first = tree.leaves(states.params)[0]
    assert not any(torch.equal(first[0], first[i]) for i in (1, 2, 3))


def test_the_first_agents_update_is_pure(first_agent):
    """The comment "collect, then learn; pure": the same state in gives the same state out, and the
    state passed in is left as it was."""
    ns, _ = first_agent
    algo, states = ns["algo"], ns["states"]
    before = tree.map(torch.clone, states)
    once = torch.func.vmap(algo.update)(states)
    again = torch.func.vmap(algo.update)(states)
    for x, y in zip(tree.leaves(states), tree.leaves(before), strict=True):
        assert torch.equal(x, y)
    for x, y in zip(tree.leaves(once), tree.leaves(again), strict=True):
        assert torch.equal(x, y)


def test_the_first_agent_is_judged_greedy_in_gymnasiums_cartpole(first_agent):
    ns, printed = first_agent
    (returns,) = printed[1]
    # one episode of gymnasium's CartPole-v1 (reward 1 a step, cut at 500 steps)
    assert returns.shape == (1,) and returns.dtype == torch.float64
    assert 1 <= float(returns[0]) <= 500 and float(returns[0]).is_integer()
    params = tree.index(ns["states"].params, 0)
    assert torch.equal(core.evaluate(ns["algo"], params, episodes=1), returns)  # "seed 0"


def _fxrl_commands() -> list[list[str]]:
    lines = []
    for block in code_blocks(TEXT):
        if block.lang == "bash":
            for line in block.code.splitlines():
                line = line.split("#")[0].strip()
                if line.startswith("fxrl "):
                    lines.append(shlex.split(line)[1:])
    return lines


def test_the_readme_commands_use_flags_the_cli_has(capsys):
    from fxrl.cli import COMMANDS as CLI_COMMANDS
    from fxrl.cli import main

    commands = _fxrl_commands()
    assert {c[0] for c in commands} >= {"train", "eval", "export", "resume"}
    for argv in commands:
        assert argv[0] in CLI_COMMANDS, argv
        # "fxrl train ppo --help" lists ppo's flags; the other commands take a directory
        head = argv[:2] if argv[0] == "train" else argv[:1]
        with pytest.raises(SystemExit) as exit_info:
            main([*head, "--help"])
        help_text = capsys.readouterr().out
        assert exit_info.value.code == 0, argv
        for flag in (a.split("=")[0] for a in argv if a.startswith("--")):
            assert re.search(rf"{re.escape(flag)}\b", help_text), (argv, flag)


def test_the_install_section_pins_the_torch_and_lists_the_extras_that_exist():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    install = _section("Install")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pinned = re.search(r"^torch==(\S+)$", (ROOT / "constraints.txt").read_text(), re.M)[1]
    assert f"torch {pinned}" in install and f"torch=={pinned}" in install
    assert f"torch=={pinned}" in (ROOT / "Makefile").read_text()
    python = re.search(r"Python >= (\S+?)\.? ", install)[1]
    assert project["project"]["requires-python"] == f">={python}"
    extras = re.search(r"Extras: (.*?) \(\[details\]", install, re.S)[1]
    listed = re.findall(r"`(\w+)`", extras)
    assert sorted(listed) == sorted(project["project"]["optional-dependencies"])


def test_the_demo_figure_is_the_recorded_runs():
    # "On the recorded run the 8 greedy policies averaged 500.0 over 10 gymnasium episodes"
    said = re.search(r"the (\d+) greedy policies averaged ([\d.]+)\s+over (\d+) gymnasium", TEXT)
    seeds, mean, episodes = int(said[1]), said[2], int(said[3])
    record = json.loads((ROOT / "docs/results/demo_cartpole_eval.json").read_text())
    returns = list(record["gymnasium"].values())
    assert len(returns) == seeds and all(len(r) == episodes for r in returns)
    assert f"{sum(map(sum, returns)) / (seeds * episodes):.1f}" == mean
    assert mean in (ROOT / "docs/getting-started.md").read_text()  # the page it cites


def test_the_sweep_figure_is_the_recorded_runs():
    # "greedy gymnasium returns 310-500"
    low, high = map(int, re.search(r"greedy\s+gymnasium returns (\d+)-(\d+)", TEXT).groups())
    record = json.loads((ROOT / "docs/results/ppo_sweep_cartpole_eval.json").read_text())
    means = [sum(r) / len(r) for r in record["gymnasium"].values()]
    assert low <= min(means) < low + 1 and max(means) == high


def test_each_headline_figure_is_on_the_page_it_links():
    """A ratio in a headline bullet ("14.6x", "0.61-0.65x") is written on the benchmark
    page the bullet cites, so the README cannot drift from the recorded figures."""
    prose = re.sub(r"<!--.*?-->", "", _section("Headline figures"), flags=re.S)
    bullets = re.split(r"\n- ", prose)[1:]
    assert len(bullets) >= 3
    for bullet in bullets:
        pages = re.findall(r"\]\((docs/[^)#]+)", bullet)
        assert pages, bullet
        text = " ".join((ROOT / p).read_text() for p in pages)
        ratios = re.findall(r"(\d+(?:\.\d+)?)(?:-(\d+(?:\.\d+)?))?x\b", bullet)
        assert ratios, bullet
        for low, high in ratios:
            for number in filter(None, (low, high)):
                assert re.search(rf"(?<![\d.]){re.escape(number)}(?![\d])", text), (number, pages)


def test_the_sites_home_page_says_what_the_readme_says():
    """docs/index.md repeats the README's demo paragraph, comparison and headline figures
    (links one folder up); a figure corrected in one and not the other fails here."""
    home = (ROOT / "docs" / "index.md").read_text()

    def demo(text: str) -> str:
        start = text.index("`make demo` runs `fxrl demo`")
        return text[start : text.index("-->", start)]

    def section(text: str, title: str) -> str:
        start = text.index(f"\n## {title}\n")
        end = text.find("\n## ", start + 1)
        return text[start : end if end >= 0 else None]

    assert demo(home) == demo(TEXT).replace("](docs/", "](")
    for title in ("How it compares", "Headline figures"):
        assert section(home, title) == section(TEXT, title).replace("](docs/", "]("), title
