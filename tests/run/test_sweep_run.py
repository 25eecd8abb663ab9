"""A sweep run from the command line: tagged metrics, one checkpoint, the grid, --pick."""

import json
import math
import os

import numpy as np
import pytest
import torch
from zygote import shared

from fxrl import run, tree
from fxrl.algorithms import ppo, sweeps
from fxrl.cli import main
from fxrl.run import sweep
from fxrl.run.checkpoint import read_meta
from fxrl.run.config_io import read_run_config
from fxrl.run.evaluate import load_run, seed_params
from fxrl.run.metrics import read_rows
from fxrl.run.plots import plot_sweep, seed_curves

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
SMALL = ["--num-envs", "4", "--num-steps", "16", "--update-epochs", "1", "--num-minibatches",
         "2", "--hidden", "16", "16"]  # fmt: skip
SWEEP = ["--sweep", "lr=1e-3,3e-3", "--sweep", "ent_coef=0,0.01"]
NAMES = ["lr=0.001,ent_coef=0", "lr=0.001,ent_coef=0.01", "lr=0.003,ent_coef=0",
         "lr=0.003,ent_coef=0.01"]  # fmt: skip
ITERATIONS = 6


def fxrl(*args, expect=0):
    out = shared(ENV).run(list(args), timeout=600)  # a process forked from tests/run/zygote.py
    assert out.returncode == expect, f"fxrl {args}: {out.returncode}\n{out.stdout}\n{out.stderr}"
    return out


def run_main(capsys, *args):
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return exit_info.value.code, out.out, out.err


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep") / "run"
    fxrl("train", "ppo", "--env", "CartPole-v1", *SMALL, *SWEEP, "--seeds", "2",
         "--total-steps", 64 * ITERATIONS, "--threads", "1", "--quiet", "--no-compile",
         "--out", d)  # fmt: skip
    return d


def without(row, *keys):
    return {k: v for k, v in row.items() if k not in ("steps_per_s", "time", *keys)}


def test_each_row_names_its_combination_and_its_seed_within_it(swept):
    info = json.loads((swept / "config.json").read_text())
    assert info["sweep"] == {"lr": [1e-3, 3e-3], "ent_coef": [0.0, 0.01]}
    assert info["num_seeds"] == 2
    rows = read_rows(swept / "metrics.jsonl")
    assert len(rows) == ITERATIONS * 8
    for i in range(1, ITERATIONS + 1):
        tags = [(r["combination"], r["seed"]) for r in rows if r["iteration"] == i]
        assert tags == [(n, s) for n in NAMES for s in (0, 1)]
    assert list(rows[0])[:4] == ["iteration", "combination", "seed", "steps"]
    header = (swept / "metrics.csv").read_text().splitlines()[0].split(",")
    assert header[:3] == ["iteration", "combination", "seed"]
    # the lr each row reports is its combination's, annealed
    first = [r for r in rows if r["iteration"] == 1]
    assert [r["lr"] for r in first] == pytest.approx([1e-3] * 4 + [3e-3] * 4)


def test_a_combination_of_the_sweep_is_the_run_of_its_settings_alone(swept, tmp_path):
    config = ppo.Config(
        num_envs=4,
        num_steps=16,
        update_epochs=1,
        num_minibatches=2,
        hidden=(16, 16),
        total_steps=64 * ITERATIONS,
        lr=3e-3,
        ent_coef=0.01,
    )
    torch.set_num_threads(1)
    run.train("ppo", config, tmp_path / "alone", num_seeds=2, quiet=True, compile=False)
    alone = [without(r) for r in read_rows(tmp_path / "alone" / "metrics.jsonl")]
    rows = read_rows(swept / "metrics.jsonl")
    mine = [without(r, "combination") for r in rows if r["combination"] == NAMES[3]]
    assert mine == alone  # float32 numbers act as the Python floats do: the same bits
    _, _, whole, _ = load_run(swept)
    _, _, single, _ = load_run(tmp_path / "alone")
    for a, b in zip(tree.leaves(whole.params), tree.leaves(single.params), strict=True):
        assert torch.equal(a[6:8], b)  # agents 6, 7: combination 3's seeds


def test_the_checkpoint_holds_every_agent_and_the_sweep(swept):
    info, _, state, meta = load_run(swept)
    assert info["num_seeds"] == 8 and info["seeds"] == 2
    assert all(x.shape[0] == 8 for x in tree.leaves(state))
    assert meta["sweep"] == info["sweep"] and sorted(map(int, meta["returns"])) == list(range(8))


def final_means(run_dir):
    """Per combination: the mean over its seeds of each seed's last finished return."""
    last = {}
    for r in read_rows(run_dir / "metrics.jsonl"):
        if r["episode_return"] is not None:
            last[(r["combination"], r["seed"])] = r["episode_return"]
    return {n: np.mean([v for (c, _), v in last.items() if c == n]) for n in NAMES}


def test_pick_best_is_the_combination_with_the_highest_final_mean_return(swept):
    info, meta = read_run_config(swept), read_meta(swept / "checkpoints" / "latest.safetensors")
    means = final_means(swept)
    assert NAMES[sweep.pick(info, meta, "best")] == max(means, key=means.get)


@pytest.mark.parametrize(
    ("name", "index"),
    [("lr=0.003,ent_coef=0.01", 3), ("lr=3e-3,ent_coef=1e-2", 3), ("ent_coef=0.01,lr=1e-3", 1),
     ("ent-coef=0,lr=0.003", 2)],
)  # fmt: skip
def test_pick_by_name_compares_numbers_not_spellings(swept, name, index):
    assert sweep.pick(read_run_config(swept), {}, name) == index


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("lr=1e-3", r"--pick 'lr=1e-3' matches 2 combinations; the run's combinations: "
         r"lr=0.001,ent_coef=0; lr=0.001,ent_coef=0.01; .* \(or best\)"),
        ("lr=5e-4,ent_coef=0", r"matches no combination"),
        ("lrr=1e-3", r"expected FIELD=VALUE,\.\.\. over the swept fields \(lr, ent_coef\)"),
        ("lr=fast", r"expected FIELD=VALUE"),
    ],
)  # fmt: skip
def test_a_pick_that_names_no_single_combination_lists_them(swept, name, message):
    with pytest.raises(ValueError, match=message):
        sweep.pick(read_run_config(swept), {}, name)


def test_pick_on_a_run_without_a_sweep_says_there_is_nothing_to_pick():
    info = {"sweep": None, "num_seeds": 2}
    with pytest.raises(ValueError, match="not a sweep"):
        sweep.pick(info, {}, "best")


def test_the_grid_has_one_panel_per_combination_and_one_line_per_seed(swept, tmp_path):
    import matplotlib.image

    out = fxrl("plot", swept, "--out", tmp_path / "grid.png").stdout.strip()
    image = matplotlib.image.imread(out)
    # two fields of two values: a 2 x 2 grid of 2.8 x 2.2 inch panels at 100 dpi
    assert image.shape[:2] == (500, 620)
    rows = [r for r in read_rows(swept / "metrics.jsonl") if r["combination"] == NAMES[0]]
    curves = seed_curves(rows)
    assert sorted(curves) == [0, 1]
    for seed, (steps, values) in curves.items():  # a naive loop: carry the last return on
        last, want_steps, want = None, [], []
        for r in (r for r in rows if r["seed"] == seed):
            last = r["episode_return"] if r["episode_return"] is not None else last
            if last is not None:
                want_steps.append(r["steps"])
                want.append(last)
        assert (steps, values) == (want_steps, want)
    assert (swept / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_sweep_refuses_a_run_without_a_sweep(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"sweep": None}))
    with pytest.raises(ValueError, match="not a sweep or task run"):
        plot_sweep(tmp_path, tmp_path / "x.png")


def test_eval_pick_plays_that_combinations_seeds(swept):
    out = fxrl("eval", swept, "--pick", "lr=3e-3,ent_coef=0", "--episodes", "1").stdout
    assert "(lr=0.003,ent_coef=0)" in out
    assert "lr=0.003,ent_coef=0 seed 0" in out and "lr=0.003,ent_coef=0 seed 1" in out
    result = json.loads((swept / "eval.json").read_text())
    assert sorted(result["pure"]) == ["4", "5"]


def test_export_pick_writes_that_combinations_best_seed_as_onnx(swept, tmp_path):
    import onnxruntime as ort

    target = tmp_path / "p.onnx"
    fxrl("export", swept, "--pick", "best", "--out", target, "--checkpoint", "latest")
    info, meta = read_run_config(swept), read_meta(swept / "checkpoints" / "latest.safetensors")
    best = sweep.pick(info, meta, "best")
    agent = json.loads(target.with_name("p.onnx.json").read_text())["seed"]
    returns = {int(k): (v if v is not None else -math.inf) for k, v in meta["returns"].items()}
    assert agent in sweep.agents(info, best)
    assert returns[agent] == max(returns[a] for a in sweep.agents(info, best))
    session = ort.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    obs = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
    (action,) = session.run(None, {session.get_inputs()[0].name: obs})
    _, algo, state, _ = load_run(swept, "latest")
    expected = algo.policy(seed_params(state, agent), torch.from_numpy(obs), mode="mode")
    np.testing.assert_array_equal(action, expected.numpy())


def test_export_of_a_sweep_without_pick_is_a_one_line_error(swept, capsys):
    code, _, err = run_main(capsys, "export", swept)
    assert code == 2 and err.count("\n") == 1
    assert "is a sweep of 4 combinations; choose one with --pick NAME" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sweep", "num_envs=4,8"], "cannot sweep 'num_envs': it is structural"),
        (["--sweep", "lrr=1e-3"], "Did you mean 'lr'? Fields of ppo.Config that can be swept"),
        (["--sweep", "lr"], "expected --sweep FIELD=V1,V2,..."),
        (["--sweep", "lr=1e-3,fast"], "the values are not all numbers"),
        (["--sweep", "lr=1e-3", "--sweep", "lr=1e-4"], "--sweep lr is given twice"),
        (["--sweep"], "--sweep needs FIELD=V1,V2,..."),
    ],
)
def test_a_bad_sweep_flag_is_a_one_line_error_and_writes_nothing(capsys, tmp_path, args, message):
    algo = args[1] if args[0] == "--algo" else "ppo"
    args = args[2:] if args[0] == "--algo" else args
    code, _, err = run_main(capsys, "train", algo, "--out", tmp_path / "r", *args)
    assert code == 2 and err.startswith("fxrl train: error: ")
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "r").exists()


def test_parse_flag_reads_fields_and_values():
    assert sweep.parse_flag(["lr=1e-4,3e-4", "ent-coef=0"]) == {"lr": [1e-4, 3e-4],
                                                                "ent_coef": [0.0]}  # fmt: skip
    assert sweeps.combination_names(sweep.parse_flag(["lr=1e-4,3e-4"])) == [
        "lr=0.0001",
        "lr=0.0003",
    ]


def test_tag_rows_leaves_a_run_without_a_sweep_as_it_was():
    rows = [{"iteration": 1, "seed": 0, "steps": 4}]
    assert sweep.tag_rows(rows, {"sweep": None}) is rows
    info = {"sweep": {"lr": [1.0, 2.0]}, "seeds": 2}
    tagged = sweep.tag_rows([{"iteration": 1, "seed": 3, "steps": 4}], info)
    assert tagged == [{"iteration": 1, "combination": "lr=2", "seed": 1, "steps": 4}]
    assert sweep.agent_of(tagged[0], info) == 3
