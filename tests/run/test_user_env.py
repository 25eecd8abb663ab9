"""A user's own pure env, defined here (not in fxrl/) and registered, goes through
everything a built-in id does: `fxrl train` (seeds, a sweep, a task ensemble), eval,
export to ONNX, a video, every algorithm, and eval/resume in a new process."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from fxrl import envs, random, specs, tree
from fxrl.algorithms import core, dqn, ppo, recurrent_ppo, sac, td3
from fxrl.cli import main
from fxrl.envs import Env, TimeStep, params_as_tensors
from fxrl.run.evaluate import evaluate_pure, load_run, seed_params
from fxrl.run.loop import train
from fxrl.run.metrics import read_rows

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore",
       "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])}  # fmt: skip


# ------------------------------------------------------------------------------ the envs


@tree.dataclass
class CorridorParams:
    length: int = 6
    slip: float = 0.1


@tree.dataclass
class CorridorState:
    position: torch.Tensor  # [] int64
    t: torch.Tensor  # [] int64
    key: torch.Tensor  # [2] int64
    params: CorridorParams


class Corridor(Env):
    """Move right to the last cell (reward 1, -0.01 per step); moves slip with `slip`."""

    observation_spec = specs.Box(0.0, 1.0, shape=(1,))
    action_spec = specs.Discrete(2)
    default_params = CorridorParams()

    def reset(self, key, params=None):
        params = params_as_tensors(self.default_params if params is None else params, self.dtype)
        zero = torch.zeros_like(key[..., 0])
        state = CorridorState(zero, zero, key, params)
        no = torch.zeros_like(zero, dtype=torch.bool)
        return state, TimeStep(self.observe(state), torch.zeros(zero.shape), no, no, {})

    def step(self, state, action):
        key, slip_key = random.split(state.key).unbind(-2)
        move = torch.where(action == 1, 1, -1)
        move = torch.where(random.bernoulli(slip_key, state.params.slip), -move, move)
        position = (state.position + move).clamp(min=0)
        state = state.replace(position=position, t=state.t + 1, key=key)
        done = position >= state.params.length
        reward = torch.where(done, 1.0, -0.01)
        return state, TimeStep(self.observe(state), reward, done, torch.zeros_like(done), {})

    def observe(self, state):
        return (state.position / state.params.length).to(self.dtype).unsqueeze(-1)

    def sample_params(self, key, params=None):
        params = self.default_params if params is None else params
        return params.replace(slip=random.uniform(key, (), maxval=0.3))

    def render(self, state):
        cells = torch.arange(16)
        color = torch.where(cells == state.position, 2, (cells == state.params.length).long())
        palette = torch.tensor([[220, 220, 220], [40, 190, 70], [230, 40, 40]], dtype=torch.uint8)
        return palette[color].repeat_interleave(8, 0).unsqueeze(0).repeat(8, 1, 1)


@tree.dataclass
class SlideState:
    x: torch.Tensor  # []
    t: torch.Tensor  # [] int64
    key: torch.Tensor
    params: tuple


class Slide(Env):
    """A point on a line pushed by a bounded force; reward -|x|: continuous actions."""

    observation_spec = specs.Box(-10.0, 10.0, shape=(1,))
    action_spec = specs.Box(-1.0, 1.0, shape=(1,))
    default_params = ()

    def reset(self, key, params=None):
        x = random.uniform(key, (), minval=-1.0, maxval=1.0)
        state = SlideState(x, torch.zeros_like(key[..., 0]), key, ())
        no = torch.zeros(x.shape, dtype=torch.bool)
        return state, TimeStep(self.observe(state), torch.zeros(x.shape), no, no, {})

    def step(self, state, action):
        x = (state.x + 0.1 * action.clamp(-1, 1).squeeze(-1)).clamp(-10.0, 10.0)
        state = state.replace(x=x, t=state.t + 1)
        no = torch.zeros(x.shape, dtype=torch.bool)
        return state, TimeStep(self.observe(state), -x.abs(), no, no, {})

    def observe(self, state):
        return state.x.unsqueeze(-1)


envs.register("TestCorridor-v0", Corridor, max_steps=30)
envs.register("TestSlide-v0", Slide, max_steps=20)

# tiny budgets: these tests are about the plumbing, not about learning
PPO = ["--num-envs", "4", "--num-steps", "16", "--update-epochs", "1",
       "--num-minibatches", "2", "--hidden", "16", "16"]  # fmt: skip
TRAIN = ["train", "ppo", "--env", "test_user_env:TestCorridor-v0", *PPO, "--total-steps", "192",
         "--seeds", "2", "--threads", "1", "--no-compile", "--quiet"]  # fmt: skip


def run_main(capsys, *args):
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    out = capsys.readouterr()
    assert exit_info.value.code == 0, out.err
    return out.out


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory):
    """Three runs of `fxrl train` on the user's env: seeds, a sweep, a task ensemble."""
    root = tmp_path_factory.mktemp("user_env")
    runs = {"seeds": root / "seeds", "sweep": root / "sweep", "tasks": root / "tasks"}
    extra = {"seeds": [], "sweep": ["--sweep", "lr=1e-3,3e-3"],
             "tasks": ["--tasks", "2", "--task-param", "slip=0.0:0.3"]}  # fmt: skip
    for name, d in runs.items():
        with pytest.raises(SystemExit) as exit_info:
            main([*TRAIN, *extra[name], "--out", str(d)])
        assert exit_info.value.code == 0
    return runs


def test_fxrl_train_trains_seeds_a_sweep_and_a_task_ensemble_on_the_user_env(cli_runs):
    for name, agents in (("seeds", 2), ("sweep", 4), ("tasks", 4)):
        info = json.loads((cli_runs[name] / "config.json").read_text())
        assert info["config"]["env"] == "test_user_env:TestCorridor-v0"
        rows = read_rows(cli_runs[name] / "metrics.jsonl")
        assert len(rows) == agents * 3 and rows[-1]["steps"] == 192, name
        assert (cli_runs[name] / "checkpoints" / "latest.safetensors").exists()
    tasks = json.loads((cli_runs["tasks"] / "config.json").read_text())["tasks"]
    slips = tasks["params"]["slip"]["values"]
    assert all(0.0 <= s <= 0.3 for s in slips) and slips[0] != slips[1]
    assert tasks["params"]["length"]["values"] == [6, 6]


def test_a_task_ensemble_without_ranges_draws_from_the_env_s_sample_params(tmp_path, capsys):
    run_main(capsys, *TRAIN, "--tasks", "3", "--out", tmp_path / "run")
    slips = json.loads((tmp_path / "run" / "config.json").read_text())["tasks"]
    want = [float(Corridor().sample_params(k).slip) for k in _task_keys(3)]
    assert slips["params"]["slip"]["values"] == pytest.approx(want)


def _task_keys(count):
    from fxrl.run.tasks import TASK_STREAM

    return random.split(random.fold_in(random.key(0), TASK_STREAM), count).unbind(0)


def test_eval_export_and_video_of_the_user_env_runs(cli_runs, capsys, tmp_path):
    out = run_main(capsys, "eval", cli_runs["seeds"], "--episodes", "2")
    assert "greedy return over 2 episodes" in out
    out = run_main(capsys, "eval", cli_runs["sweep"], "--pick", "lr=0.003", "--episodes", "1")
    assert "(lr=0.003)" in out
    # the ONNX file acts as the torch policy does on observations of the env
    path = Path(run_main(capsys, "export", cli_runs["seeds"], "--format", "onnx").split()[0])
    from fxrl.export import load_onnx

    record = json.loads(path.with_name(path.name + ".json").read_text())
    _, algo, state, _ = load_run(cli_runs["seeds"], record["checkpoint"])
    seed = record["seed"]
    obs = torch.linspace(0, 1, 7).unsqueeze(-1)
    want = algo.policy(seed_params(state, seed), obs, mode="mode")
    assert np.array_equal(np.asarray(load_onnx(path)(obs.numpy())), want.numpy())
    run_main(capsys, "export", cli_runs["tasks"], "--format", "onnx", "--out", tmp_path / "t.onnx")
    assert (tmp_path / "t.onnx").stat().st_size > 0
    # a GIF drawn by the env's own render, one frame per step
    gif = tmp_path / "corridor.gif"
    run_main(capsys, "eval", cli_runs["tasks"], "--episodes", "1", "--video", gif)
    from PIL import Image

    with Image.open(gif) as image:
        assert image.size == (128, 8) and image.n_frames >= 2


def test_gymnasium_has_no_original_of_the_user_env_and_eval_says_so(cli_runs, capsys):
    with pytest.raises(SystemExit):
        main(["eval", str(cli_runs["seeds"]), "--gymnasium"])
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "gymnasium has no env 'test_user_env:TestCorridor-v0'" in err


@pytest.mark.parametrize(
    "config",
    [
        ppo.Config(env="TestCorridor-v0", num_envs=2, num_steps=8, num_minibatches=2, hidden=(8,)),
        recurrent_ppo.Config(env="TestCorridor-v0", mask_velocity=False, num_envs=2, num_steps=8,
                             num_minibatches=2, rnn_hidden=8, hidden=(8,)),
        dqn.Config(env="TestCorridor-v0", num_envs=2, num_steps=4, gradient_steps=2, batch_size=8,
                   buffer_size=64, learning_starts=8, hidden=(8,)),
        sac.Config(env="TestSlide-v0", num_envs=2, num_steps=4, gradient_steps=2, batch_size=8,
                   buffer_size=64, learning_starts=8, hidden=(8,)),
        td3.Config(env="TestSlide-v0", num_envs=2, num_steps=4, gradient_steps=2, batch_size=8,
                   buffer_size=64, learning_starts=8, hidden=(8,)),
    ],
    ids=lambda c: type(c).__module__.rsplit(".", 1)[-1],
)  # fmt: skip
def test_every_algorithm_trains_and_plays_on_a_registered_env(config):
    algo = sys.modules[type(config).__module__].make(config)
    state, metrics = core.train(algo, random.key(0), num_seeds=2, compile=False, num_updates=3)
    assert metrics["steps"].shape == (3, 2) and int(metrics["steps"][-1, 0]) == 3 * (
        algo.steps_per_update
    )
    returns = evaluate_pure(algo, tree.index(state.params, 0), random.key(1), 2, max_steps=100)
    assert len(returns) == 2 and all(np.isfinite(returns))


# ------------------------------------------------------------------------------ new process


def test_a_run_of_a_registered_env_is_evaluated_and_resumed_in_a_new_process(tmp_path):
    config = ppo.Config(env="TestCorridor-v0", num_envs=4, num_steps=16, update_epochs=1,
                        num_minibatches=2, hidden=(16, 16), total_steps=192)  # fmt: skip
    torch.set_num_threads(1)
    d = tmp_path / "run"
    train("ppo", config, d, num_seeds=2, compile=False, quiet=True, max_iterations=1)
    # config.json names the module that registered the env: a new process imports it
    assert json.loads((d / "config.json").read_text())["env_module"] == "test_user_env"
    code = (
        "import sys\n"
        "from fxrl.run.loop import resume\n"
        "from fxrl.run.evaluate import evaluate_run\n"
        "assert 'test_user_env' not in sys.modules\n"
        f"result = resume({str(d)!r}, quiet=True)\n"
        f"print(result.steps, len(evaluate_run({str(d)!r}, episodes=1)['pure']))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV,
                         timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-2:] == ["192", "2"]


def test_a_run_whose_env_is_not_registered_here_says_how_to_register_it(tmp_path, capsys):
    config = ppo.Config(env="TestCorridor-v0", num_envs=2, num_steps=8, num_minibatches=2,
                        hidden=(8,), total_steps=16)  # fmt: skip
    d = tmp_path / "run"
    train("ppo", config, d, compile=False, quiet=True)
    info = json.loads((d / "config.json").read_text())
    info["config"]["env"] = "Elsewhere-v0"  # an id no module of this process registers
    del info["env_module"]
    (d / "config.json").write_text(json.dumps(info))
    with pytest.raises(SystemExit):
        main(["eval", str(d)])
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert "was trained on env 'Elsewhere-v0', which is not registered in this process" in err
    assert "fxrl.envs.register('Elsewhere-v0', ...)" in err and "entry point" in err
