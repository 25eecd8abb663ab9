"""Every algorithm on host envs ("gymnasium:<id>", "ale:<Game>"): the env steps between
the pieces of the pure update, runs write the same run directory, resume exactly by
replaying the logged actions, and bad ids or spaces are one-line errors."""

import json

import gymnasium
import numpy as np
import pytest
import torch

from fxrl import random, tree
from fxrl.algorithms import core, dqn, host, ppo, recurrent_ppo, sac, td3
from fxrl.cli import main
from fxrl.run.evaluate import evaluate_ale, load_run, seed_params
from fxrl.run.loop import resume, train
from fxrl.run.metrics import read_rows

OFF = {"num_envs": 2, "num_steps": 4, "gradient_steps": 2, "batch_size": 8,
       "buffer_size": 64, "learning_starts": 8, "hidden": (8,)}  # fmt: skip


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize(
    "config",
    [
        ppo.Config(env="gymnasium:CartPole-v1", num_envs=2, num_steps=8, num_minibatches=2,
                   hidden=(8,)),
        recurrent_ppo.Config(env="gymnasium:Acrobot-v1", mask_velocity=False, num_envs=2,
                             num_steps=8, num_minibatches=2, rnn_hidden=8, hidden=(8,)),
        dqn.Config(env="gymnasium:CartPole-v1", **OFF),
        sac.Config(env="gymnasium:Pendulum-v1", **OFF),
        td3.Config(env="gymnasium:MountainCarContinuous-v0", noise_type="ou", **OFF),
    ],
    ids=lambda c: type(c).__module__.rsplit(".", 1)[-1],
)  # fmt: skip
def test_every_algorithm_trains_on_a_gymnasium_vector_env(config):
    module = __import__(type(config).__module__, fromlist=["make"])
    algo = module.make(config)
    assert isinstance(algo.env, host.HostSpec)
    state, metrics = core.train(algo, random.key(0), num_seeds=2, compile=False, num_updates=3)
    per_update = algo.steps_per_update
    assert metrics["steps"].tolist() == [[per_update * i] * 2 for i in (1, 2, 3)]
    log = state.env_state  # every action taken, per seed, in the order taken
    assert log.length.tolist() == [3 * config.num_steps] * 2
    assert tuple(log.actions.shape[:3]) == (2, log.actions.shape[1], config.num_envs)
    # gymnasium's own vector env, reset with the logged keys and given the logged actions,
    # ends where the run's state says the envs are
    name = config.env.removeprefix("gymnasium:")
    for s in range(2):
        envs = gymnasium.vector.SyncVectorEnv(
            [lambda: gymnasium.make(name)] * config.num_envs,
            autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP,
        )
        seeds = [int(x) for x in random.bits(log.keys[s]).tolist()]
        obs, _ = envs.reset(seed=seeds)
        for t in range(int(log.length[s])):
            action = log.actions[s, t].numpy().astype(envs.single_action_space.dtype)
            obs, *_ = envs.step(action)
        np.testing.assert_array_equal(obs.astype(np.float32), state.obs[s].numpy())


def test_a_compiled_host_update_equals_the_eager_one():
    config = ppo.Config(env="gymnasium:CartPole-v1", num_envs=2, num_steps=8,
                        num_minibatches=2, update_epochs=1, hidden=(8,))  # fmt: skip
    algo = ppo.make(config)
    runs = []
    for compile in (False, True):
        init, update = core.batched(algo, 2, compile=compile)
        state = init(random.key(1))
        for _ in range(2):
            state, metrics = update(state)
        runs.append((state, metrics))
    (eager, m_eager), (compiled, m_compiled) = runs
    assert torch.equal(eager.env_state.actions, compiled.env_state.actions)  # same actions
    torch.testing.assert_close(compiled.params, eager.params, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(m_compiled["loss"], m_eager["loss"], rtol=1e-5, atol=1e-6)


CARTPOLE = ppo.Config(env="gymnasium:CartPole-v1", num_envs=4, num_steps=16, update_epochs=1,
                      num_minibatches=2, hidden=(16,), total_steps=64 * 4)  # fmt: skip


def _rows(run_dir):
    return [{k: v for k, v in r.items() if k not in ("steps_per_s", "time")}
            for r in read_rows(run_dir / "metrics.jsonl")]  # fmt: skip


def test_a_resumed_host_run_equals_the_uninterrupted_one_bit_for_bit(tmp_path):
    train("ppo", CARTPOLE, tmp_path / "full", num_seeds=2, compile=False, quiet=True)
    train("ppo", CARTPOLE, tmp_path / "cut", num_seeds=2, compile=False, quiet=True,
          max_iterations=2)  # fmt: skip
    assert len(_rows(tmp_path / "cut")) == 2 * 2
    resume(tmp_path / "cut", quiet=True)  # replays the 2 updates' actions, then goes on
    assert _rows(tmp_path / "cut") == _rows(tmp_path / "full")
    _, _, full, _ = load_run(tmp_path / "full")
    _, _, cut, _ = load_run(tmp_path / "cut")
    for a, b in zip(tree.leaves(full), tree.leaves(cut), strict=True):
        assert torch.equal(a, b)


class Drifting(gymnasium.Env):
    """Its reset ignores the seed: a run on it cannot be replayed to the same state."""

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        self.t, self.x = 0, np.random.default_rng().uniform(-1, 1)  # fresh OS entropy
        return np.array([self.x], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.x], np.float32), 0.0, False, self.t >= 5, {}


gymnasium.register("DriftingTest-v0", entry_point=Drifting)


def test_a_host_env_that_does_not_replay_is_refused_on_resume_in_one_line(tmp_path):
    config = ppo.Config(env="gymnasium:DriftingTest-v0", num_envs=2, num_steps=8,
                        num_minibatches=2, hidden=(8,), total_steps=64)  # fmt: skip
    train("ppo", config, tmp_path / "run", compile=False, quiet=True, max_iterations=1)
    with pytest.raises(ValueError) as info:
        resume(tmp_path / "run", quiet=True)
    message = str(info.value)
    assert "\n" not in message and "cannot be resumed exactly" in message
    assert "reset with the run's keys and given its 8 logged actions again" in message


def run_main(capsys, *args):
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return exit_info.value.code, out.out, out.err


def test_fxrl_train_eval_export_and_video_on_a_gymnasium_env(tmp_path, capsys):
    run = tmp_path / "acrobot"
    code, _, err = run_main(
        capsys, "train", "ppo", "--env", "gymnasium:Acrobot-v1", "--num-envs", "2",
        "--num-steps", "16", "--num-minibatches", "2", "--update-epochs", "1",
        "--total-steps", "64", "--seeds", "2", "--no-compile", "--quiet", "--out", run,
    )  # fmt: skip
    assert code == 0, err
    assert json.loads((run / "config.json").read_text())["config"]["env"] == "gymnasium:Acrobot-v1"
    assert len(_rows(run)) == 2 * 2 and (run / "curve.png").exists()
    code, _, err = run_main(capsys, "eval", run, "--episodes", "1", "--video", tmp_path / "a.gif",
                              "--video-steps", "20")  # fmt: skip
    assert code == 0, err
    result = json.loads((run / "eval.json").read_text())
    assert set(result) == {"checkpoint", "steps", "gymnasium"}
    assert all(r == [-500.0] or -500 < r[0] <= 0 for r in result["gymnasium"].values())
    assert (tmp_path / "a.gif").stat().st_size > 0
    code, _, err = run_main(capsys, "export", run, "--format", "onnx")
    assert code == 0, err
    from fxrl.export import load_onnx

    path = run / "policy.onnx"
    record = json.loads(path.with_name("policy.onnx.json").read_text())
    _, algo, state, _ = load_run(run, record["checkpoint"])
    obs = torch.randn(5, 6)
    want = algo.policy(seed_params(state, record["seed"]), obs, mode="mode")
    assert np.array_equal(np.asarray(load_onnx(path)(obs.numpy())), want.numpy())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["train", "ppo", "--env", "gymnasium:CartPol-v1"],
         "gymnasium has no env 'CartPol-v1'. Did you mean 'CartPole-v1'?"),
        (["train", "ppo", "--env", "ale:Breakou"], "unknown ALE game 'Breakou'. Did you mean"),
        (["train", "sac", "--env", "gymnasium:CartPole-v1", "--no-compile"],
         "expected an env with bounded Box [A] actions; it has Discrete(n=2"),
        (["train", "recurrent_ppo", "--env", "ale:Pong", "--no-mask-velocity", "--no-compile"],
         "has observations Box(low=0, high=255, shape=(4, 84, 84), dtype=uint8); needs a flat"),
        (["train", "ppo", "--env", "gymnasium:Blackjack-v1", "--no-compile"],
         "PPO's MLP needs a Box"),
        (["train", "ppo", "--env", "gymnasium:CartPole-v1", "--sweep", "lr=1e-3,3e-3"],
         "sweeps vmap the update over settings"),
        (["train", "ppo", "--env", "gymnasium:CartPole-v1", "--tasks", "2", "--no-compile"],
         "has no env params to vary"),
    ],
)  # fmt: skip
def test_bad_host_envs_are_one_line_errors(capsys, tmp_path, args, message):
    code, _, err = run_main(capsys, *args, "--out", tmp_path / "run")
    assert code == 2 and err.count("\n") == 1, err
    assert message in err, err
    assert not (tmp_path / "run" / "config.json").exists()


# ------------------------------------------------------------------------------ Atari


def test_ppo_on_atari_from_pixels_trains_and_exports_a_raw_screen_policy(tmp_path):
    config = ppo.Config.tuned("ale:Breakout", num_envs=2, num_steps=8, total_steps=32)
    assert (config.num_minibatches, config.update_epochs, config.clip_eps) == (4, 4, 0.1)
    algo = ppo.make(config)
    assert tuple(algo.env.observation_spec.shape) == (4, 84, 84)
    assert set(algo.init(random.key(0)).params["net"]) == {"torso", "dense", "actor", "critic"}
    train("ppo", config, tmp_path / "run", compile=False, quiet=True)
    from fxrl.envs import atari_screen
    from fxrl.export import load_onnx
    from fxrl.run.export_run import export_run

    path = export_run(tmp_path / "run", "onnx")
    record = json.loads(path.with_name(path.name + ".json").read_text())
    assert record["input"].startswith("the last 4 raw screens")
    assert "never taught to press FIRE" in record["game"]  # how the game must be driven
    _, algo, state, _ = load_run(tmp_path / "run", record["checkpoint"])
    params = seed_params(state, 0)
    # raw screens of the game (the training dynamics), the last 4 stacked
    env = host.make_env("ale:Breakout", 1, preprocess=None)
    env_state, ts = env.reset(random.key(3))
    screens = [ts.obs[0]]
    for a in (1, 2, 3, 0, 2, 3):
        env_state, ts = env.step(env_state, torch.tensor([a]))
        screens.append(ts.obs[0])
    env.close()
    stacks = torch.stack([torch.stack(screens[i : i + 4]) for i in range(4)])  # [4, 4, 210, ...]
    want = algo.policy(params, atari_screen()(stacks).squeeze(-3), mode="mode")
    assert np.array_equal(np.asarray(load_onnx(path)(stacks.numpy())), want.numpy())
    returns = evaluate_ale(algo, params, "ale:Breakout", random.key(0), 2, max_steps=50)
    assert len(returns) == 2 and all(r >= 0 for r in returns)


def test_the_learner_sees_ales_frames_and_clipped_rewards_and_lives_end_its_episodes():
    config = ppo.Config.tuned("ale:Breakout", num_envs=2, num_steps=8, total_steps=64)
    algo = ppo.make(config)
    init, update = host.batched(algo, 1, compile=False)
    state = init(random.key(0))
    state, _ = update(state)
    reference = host.make_env("ale:Breakout", 2)  # the same envs, stepped by hand
    ref_state, ts = reference.reset(state.env_state.keys)
    for t in range(8):
        ref_state, ts = reference.step(ref_state, state.env_state.actions[t].long())
    assert state.obs.dtype == torch.uint8 and tuple(state.obs.shape) == (2, 4, 84, 84)
    assert torch.equal(ts.info["next_obs"], state.obs)
    reference.close()
    # rewards: sign(raw); a lost life (lives drop) is `terminated` for learning
    d = host._Driver(algo, 1, False)
    d.env = host.make_env("ale:Breakout", 2)
    d.host_state, _ = d.env.reset(random.key(5))
    d._return = torch.zeros(2, dtype=torch.float64)
    d._length = torch.zeros(2, dtype=torch.int64)
    d._lives = torch.full((2,), -1, dtype=torch.int64)
    ended = False
    for t in range(400):  # FIRE, then NOOPs: the ball gets past the paddle
        ts, game = d._step(torch.full((1, 2), 1 if t == 0 else 0))
        assert set(ts.reward.unique().tolist()) <= {-1.0, 0.0, 1.0}
        if bool(ts.terminated.any()):
            ended = True
            assert not bool(game["over"].any())  # a life, not the game
            break
    d.env.close()
    assert ended
