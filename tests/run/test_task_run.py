"""A task-ensemble run (`fxrl train ppo --tasks N --task-param ...`): each agent is the
PPO agent trained alone on its task, rows tagged by task, eval in the task's own env."""

import json

import pytest
import torch

from fxrl import envs, random, tree
from fxrl.algorithms import ppo
from fxrl.algorithms import tasks as algo_tasks
from fxrl.cli import main
from fxrl.run import checkpoint, tasks
from fxrl.run.evaluate import evaluate_run, load_run, seed_params
from fxrl.run.loop import resume, train
from fxrl.run.metrics import read_rows

CONFIG = ppo.Config(env="CartPole-v1", num_envs=4, num_steps=16, update_epochs=1,
                    num_minibatches=2, hidden=(16, 16), total_steps=64 * 3)  # fmt: skip
RANGES = {"length": (0.25, 1.0)}


@pytest.fixture(scope="module")
def task_run(tmp_path_factory):
    torch.set_num_threads(1)
    d = tmp_path_factory.mktemp("tasks") / "run"
    train("ppo", CONFIG, d, num_seeds=2, quiet=True, compile=False, tasks=2, task_ranges=RANGES)
    return d


def run_main(capsys, *args):
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return exit_info.value.code, out.out, out.err


def test_the_tasks_are_drawn_from_the_run_key_and_kept_in_config_json(task_run):
    entry = json.loads((task_run / "config.json").read_text())["tasks"]
    assert entry["count"] == 2 and entry["ranges"] == {"length": [0.25, 1.0]}
    env = envs.make("CartPole-v1")
    want = algo_tasks.sample_params(
        env, random.fold_in(random.key(0), tasks.TASK_STREAM), 2, RANGES
    )
    got = tasks.env_params(env, entry)
    for name in ("length", "masspole", "gravity"):
        assert torch.equal(getattr(got, name), getattr(want, name)), name
    lengths = entry["params"]["length"]["values"]
    assert all(0.25 <= v <= 1.0 for v in lengths) and lengths[0] != lengths[1]


def test_each_agent_is_the_ppo_agent_trained_alone_on_its_task(task_run):
    torch.set_num_threads(1)
    info, _, state, _ = load_run(task_run)
    algo = ppo.make(CONFIG)
    params = tasks.env_params(algo.env, info["tasks"])
    seed_keys = random.split(random.key(0), 2)  # seed s's key, as a run without tasks
    rows = read_rows(task_run / "metrics.jsonl")
    assert [(r["task"], r["seed"]) for r in rows if r["iteration"] == 1] == [
        (0, 0), (0, 1), (1, 0), (1, 1)
    ]  # fmt: skip
    for t in range(2):
        for s in range(2):
            alone = algo.init(seed_keys[s], env_params=tree.index(params, t))
            for _ in range(3):
                alone, metrics = algo.update(alone)
            mine = seed_params(state, t * 2 + s)
            for a, b in zip(tree.leaves(mine), tree.leaves(alone.params), strict=True):
                # vmapped over 4 agents vs one alone: the same math, not the same kernels
                torch.testing.assert_close(a, b)
            last = [r for r in rows if (r["iteration"], r["task"], r["seed"]) == (3, t, s)]
            assert last[0]["loss"] == pytest.approx(float(metrics["loss"]), rel=1e-5)


def test_eval_plays_each_agent_in_its_task_also_in_gymnasium(task_run):
    torch.set_num_threads(1)
    result = evaluate_run(task_run, episodes=2, gymnasium=True)
    info, algo, state, _ = load_run(task_run)
    lengths = info["tasks"]["params"]["length"]["values"]
    assert result["labels"][3] == f"task 1 (length={lengths[1]:.3g}) seed 1"
    task = tree.index(tasks.env_params(algo.env, info["tasks"]), 1)
    want = algo_tasks.evaluate_gymnasium(algo, seed_params(state, 3), task, 2, seed=0)
    assert result["gymnasium"][3] == want.tolist()


def test_plot_draws_one_panel_per_task(task_run, capsys, tmp_path):
    out = tmp_path / "grid.png"
    code, stdout, _ = run_main(capsys, "plot", task_run, "--out", out)
    assert code == 0 and stdout.strip() == str(out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_export_writes_onnx_and_refuses_the_web_page_in_one_line(task_run, capsys, tmp_path):
    code, out, _ = run_main(capsys, "export", task_run, "--out", tmp_path / "p.onnx")
    assert code == 0 and out.strip() == str(tmp_path / "p.onnx")
    code, _, err = run_main(capsys, "export", task_run, "--format", "web", "--out", tmp_path / "w")
    assert code == 2 and err.count("\n") == 1 and "is a task ensemble" in err
    assert not (tmp_path / "w").exists()


def test_resume_refuses_a_config_json_with_other_tasks(task_run, tmp_path):
    import shutil

    d = tmp_path / "copy"
    shutil.copytree(task_run, d)
    info = json.loads((d / "config.json").read_text())
    info["tasks"]["params"]["length"]["values"][0] = 0.5
    (d / "config.json").write_text(json.dumps(info))
    with pytest.raises(checkpoint.CheckpointError, match="other tasks"):
        resume(d, quiet=True)


def test_tasks_from_the_env_s_own_task_distribution():
    env = envs.make("MetaMaze-misc")
    entry = tasks.draw(env, "MetaMaze-misc", 3, None, seed=5)
    keys = random.split(random.fold_in(random.key(5), tasks.TASK_STREAM), 3)
    got = tasks.env_params(env, entry)
    for i in range(3):
        want = env.sample_params(keys[i])
        for a, b in zip(tree.leaves(tree.index(got, i)), tree.leaves(want), strict=True):
            assert torch.equal(a, torch.as_tensor(b)) and a.dtype == torch.as_tensor(b).dtype
    assert tasks.names({"tasks": entry})[0].startswith("task 0 (goal_row=")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tasks", "2", "--task-param", "lenght=0.2:1"],
         "--task-param: unknown CartPoleParams param 'lenght'. Did you mean 'length'? "
         "Expected one of: gravity,"),
        (["--task-param", "length=0.2:1"], "--task-param needs a task count: --tasks N"),
        (["--tasks", "2"], "CartPole-v1 has no task distribution (sample_params)"),
        (["--tasks", "2", "--task-param", "length=1:0.2"], "expected finite LOW <= HIGH"),
        (["--tasks", "2", "--task-param", "length"], "expected --task-param NAME=LOW:HIGH"),
        (["--tasks", "2", "--task-param", "length=a:1"], "LOW and HIGH must be numbers"),
        (["--tasks", "0", "--task-param", "length=0.2:1"], "--tasks must be a positive int"),
        (["--tasks", "2", "--task-param", "length=0.2:1", "--sweep", "lr=1e-3,1e-4"],
         "a sweep or a task ensemble, not both"),
        (["--algo", "dqn", "--tasks", "2", "--task-param", "length=0.2:1"],
         "dqn's init takes no env params"),
        (["--tasks", "2", "--task-param"], "--task-param needs NAME=LOW:HIGH"),
    ],
)  # fmt: skip
def test_a_bad_task_flag_is_a_one_line_error_and_writes_nothing(capsys, tmp_path, args, message):
    algo = args[1] if args[0] == "--algo" else "ppo"
    args = args[2:] if args[0] == "--algo" else args
    code, _, err = run_main(capsys, "train", algo, "--env", "CartPole-v1", "--no-compile",
                            "--out", tmp_path / "r", *args)  # fmt: skip
    assert code == 2 and err.startswith("fxrl train: error: ")
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "r").exists()
