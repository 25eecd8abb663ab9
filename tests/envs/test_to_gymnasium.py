"""fxrl envs out, as gymnasium envs: checked with gymnasium's own checker, against
gymnasium's SyncVectorEnv layout, and with Stable-Baselines3 as a real client."""

import sys
import warnings

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env, data_equivalence
from gymnasium.vector import AutoresetMode
from hypothesis import given, settings
from hypothesis import strategies as st

from fxrl import envs, random
from fxrl.envs.cartpole import CartPoleParams
from fxrl.envs.sb3 import to_sb3
from fxrl.envs.to_gym import to_gymnasium


def quiet_check_env(env):
    with warnings.catch_warnings():
        # fxrl's Box specs say +-inf where gymnasium's CartPole says float32 max
        warnings.filterwarnings("ignore", message=".*infinity.*")
        check_env(env, skip_render_check=True)


@pytest.mark.parametrize("id", ["CartPole-v1", "Pendulum-v1", "MountainCarContinuous-v0"])
def test_single_adapter_passes_gymnasiums_check_env(id):
    quiet_check_env(to_gymnasium(envs.make(id)))


def test_single_adapter_passes_stable_baselines3s_check_env():
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*infinity.*|.*symmetric.*|.*normaliz.*")
        sb3_check_env(to_gymnasium(envs.make("CartPole-v1")))


def test_single_adapter_with_seed_plays_the_episode_of_fxrl_key_seed():
    env, fx = to_gymnasium(envs.make("CartPole-v1")), envs.make("CartPole-v1")
    obs, info = env.reset(seed=7)
    state, ts = fx.reset(random.key(7))
    assert isinstance(obs, np.ndarray) and obs.dtype == np.float32
    assert np.array_equal(obs, ts.obs.numpy()) and "next_obs" not in info
    for a in [1, 0, 0, 1, 1, 1, 0, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]:
        obs, reward, terminated, truncated, info = env.step(np.int64(a))
        state, ts = fx.step(state, torch.tensor(a))
        assert np.array_equal(obs, ts.obs.numpy())
        assert (reward, terminated, truncated) == (1.0, bool(ts.terminated), False)
        assert info["episode_length"] == int(ts.info["episode_length"])
        if terminated:
            break
    assert terminated  # the pole fell under this action sequence
    again, _ = env.reset()  # a new episode from the env's np_random, not the auto-reset
    assert again in env.observation_space and not np.array_equal(again, obs)


def test_single_adapter_in_torch_mode_returns_tensors_of_the_same_values():
    env = to_gymnasium(envs.make("Pendulum-v1"), numpy=False)
    ref = to_gymnasium(envs.make("Pendulum-v1"))
    obs, _ = env.reset(seed=3)
    assert torch.equal(obs, torch.from_numpy(ref.reset(seed=3)[0]))
    for a in [0.5, -2.0, 1.5]:
        obs, reward, *_ = env.step(torch.tensor([a]))
        ref_obs, ref_reward, *_ = ref.step(np.array([a], dtype=np.float32))
        assert torch.equal(obs, torch.from_numpy(ref_obs)) and float(reward) == ref_reward
    assert isinstance(reward, torch.Tensor) and reward.dtype == torch.float32


def step_many(venv, num_steps, key):
    actions = random.randint(key, (num_steps, venv.num_envs), 0, 2).numpy()
    return [venv.step(a) for a in actions]


def test_vector_adapter_has_gymnasium_sync_vector_envs_same_step_layout():
    n = 4
    ours = to_gymnasium(envs.batch(envs.make("CartPole-v1"), n))
    theirs = gymnasium.make_vec(
        "CartPole-v1", n, vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )  # fmt: skip
    assert ours.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert ours.single_action_space == theirs.single_action_space
    assert ours.action_space == theirs.action_space
    assert ours.observation_space.shape == theirs.observation_space.shape
    (obs, _), (their_obs, _) = ours.reset(seed=0), theirs.reset(seed=0)
    assert obs.shape == their_obs.shape and obs.dtype == their_obs.dtype
    seen_final = False
    for step, their_step in zip(
        step_many(ours, 60, random.key(1)), step_many(theirs, 60, random.key(1)), strict=True
    ):
        for x, y in zip(step[:4], their_step[:4], strict=True):
            assert (x.shape, x.dtype) == (y.shape, y.dtype)
        obs, _, terminated, truncated, info = step
        assert obs in ours.observation_space
        done = terminated | truncated
        if done.any():
            seen_final = True
            assert info["final_obs"].dtype == object and info["_final_obs"].dtype == np.bool_
            assert np.array_equal(info["_final_obs"], done)
            assert np.array_equal(info["_final_info"], done)
            for i in range(n):
                final = info["final_obs"][i]
                assert (final is None) == (not done[i])
                if done[i]:
                    # the last observation of a fallen pole, then a fresh start in obs
                    assert abs(final[0]) > 2.4 or abs(final[2]) > 0.2094
                    assert np.all(np.abs(obs[i]) <= 0.05)
                    assert (
                        info["final_info"]["episode_length"][i]
                        == (info["final_info"]["episode_length"][i])
                    )
        elif "final_obs" in info:
            pytest.fail("final_obs reported on a step where no episode ended")
    assert seen_final


def test_vector_adapter_with_seed_reproduces_fxrl_batch_and_gymnasium_record_episode_stats():
    n = 3
    venv = gymnasium.wrappers.vector.RecordEpisodeStatistics(
        to_gymnasium(envs.batch(envs.make("CartPole-v1"), n))
    )
    fx = envs.batch(envs.make("CartPole-v1"), n)
    obs, _ = venv.reset(seed=11)
    state, ts = fx.reset(random.key(11))
    assert np.array_equal(obs, ts.obs.numpy())
    episodes = 0
    for a in random.randint(random.key(2), (80, n), 0, 2):
        obs, _, terminated, _, info = venv.step(a.numpy())
        state, ts = fx.step(state, a)
        assert np.array_equal(obs, ts.info["next_obs"].numpy())
        assert np.array_equal(terminated, ts.terminated.numpy())
        if "episode" in info:  # gymnasium's own episode bookkeeping agrees with fxrl's
            ended = info["_episode"]
            episodes += int(ended.sum())
            assert np.array_equal(info["episode"]["l"][ended], ts.info["episode_length"][ended])
            assert np.allclose(info["episode"]["r"][ended], ts.info["episode_return"][ended])
    assert episodes >= 3


@settings(max_examples=10, deadline=None)
@given(
    id=st.sampled_from(["CartPole-v1", "Pendulum-v1", "Acrobot-v1"]),
    seed=st.integers(0, 2**63 - 1),
    n=st.integers(1, 5),
)
def test_any_seed_and_batch_adapters_step_as_fxrl_itself(id, seed, n):
    venv, sb3 = to_gymnasium(envs.batch(envs.make(id), n)), to_sb3(envs.batch(envs.make(id), n))
    fx = envs.batch(envs.make(id), n)
    obs, _ = venv.reset(seed=seed)
    sb3.seed(seed)
    state, ts = fx.reset(random.key(seed))
    assert np.array_equal(obs, ts.obs.numpy()) and np.array_equal(sb3.reset(), obs)
    for a in fx.action_spec.sample(random.key(seed % 1000), (8, n)):
        obs, reward, terminated, truncated, _ = venv.step(a.numpy())
        sb3_obs, sb3_reward, done, _ = sb3.step(a.numpy())
        state, ts = fx.step(state, a)
        assert np.array_equal(obs, ts.info["next_obs"].numpy()) and np.array_equal(sb3_obs, obs)
        assert np.array_equal(reward, ts.reward.numpy().astype(np.float64))
        assert np.array_equal(sb3_reward, ts.reward.numpy())
        assert np.array_equal(done, terminated | truncated)


def deterministic_policy(obs):
    # balances env 0 (its episodes hit the time limit), pushes the others over
    good = obs[:, 2] + 0.3 * obs[:, 3] > 0
    return np.where(np.arange(len(obs)) == 0, good, ~good).astype(np.int64)


def test_next_step_mode_is_same_step_with_a_reset_step_inserted_after_each_episode():
    n, steps = 3, 120
    same = to_gymnasium(envs.batch(envs.make("CartPole-v1", max_steps=40), n))
    nxt = to_gymnasium(
        envs.batch(envs.make("CartPole-v1", max_steps=40), n), autoreset_mode="NextStep"
    )
    assert nxt.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    per_env_same = [[] for _ in range(n)]
    obs, _ = same.reset(seed=4)
    for _ in range(steps):
        obs, reward, terminated, truncated, info = same.step(deterministic_policy(obs))
        for i in range(n):
            last = info["final_obs"][i] if terminated[i] or truncated[i] else obs[i]
            per_env_same[i].append((last, reward[i], terminated[i], truncated[i]))
            if terminated[i] or truncated[i]:
                per_env_same[i].append(("first", obs[i]))
    per_env_next = [[] for _ in range(n)]
    obs, _ = nxt.reset(seed=4)
    ended = np.zeros(n, dtype=bool)
    for _ in range(steps + 20):
        obs, reward, terminated, truncated, info = nxt.step(deterministic_policy(obs))
        assert "final_obs" not in info
        for i in range(n):
            if ended[i]:  # the reset step: the new episode's first obs, nothing else
                assert (reward[i], terminated[i], truncated[i]) == (0.0, False, False)
                per_env_next[i].append(("first", obs[i]))
            else:
                per_env_next[i].append((obs[i], reward[i], terminated[i], truncated[i]))
        ended = terminated | truncated
    kinds = set()
    for i in range(n):
        k = len(per_env_same[i])
        assert data_equivalence(per_env_next[i][:k], per_env_same[i], exact=True)
        ends = [x for x in per_env_same[i] if len(x) == 4 and (x[2] or x[3])]
        assert len(ends) >= 2
        kinds |= {("terminated" if x[2] else "truncated") for x in ends}
    assert kinds == {"terminated", "truncated"}


def test_disabled_mode_resets_only_the_masked_envs():
    n = 4
    venv = to_gymnasium(envs.batch(envs.make("CartPole-v1", auto_reset=False), n))
    assert venv.metadata["autoreset_mode"] == AutoresetMode.DISABLED
    obs, _ = venv.reset(seed=0)
    done = np.zeros(n, dtype=bool)
    while not done.any():
        obs, _, terminated, truncated, info = venv.step(np.ones(n, dtype=np.int64))
        done = terminated | truncated
        assert "final_obs" not in info
    before = obs.copy()
    obs, _ = venv.reset(options={"reset_mask": done})
    assert np.array_equal(obs[~done], before[~done])
    assert np.all(np.abs(obs[done]) <= 0.05) and not np.array_equal(obs[done], before[done])
    obs, _, terminated, *_ = venv.step(np.zeros(n, dtype=np.int64))
    assert not terminated[done].any()


def test_per_env_params_reach_the_envs_and_change_at_the_next_reset():
    n = 2
    gravity = torch.tensor([9.8, 200.0])
    venv = to_gymnasium(
        envs.batch(envs.make("CartPole-v1"), n), params=CartPoleParams(gravity=gravity)
    )
    fx = envs.batch(envs.make("CartPole-v1"), n)
    obs, _ = venv.reset(seed=5)
    state, _ = fx.reset(random.key(5), CartPoleParams(gravity=gravity))
    for _ in range(30):
        obs, *_ = venv.step(np.zeros(n, dtype=np.int64))
        state, ts = fx.step(state, torch.zeros(n, dtype=torch.int64))
        assert np.array_equal(obs, ts.info["next_obs"].numpy())
    lengths = []
    for params in (CartPoleParams(), CartPoleParams(gravity=torch.tensor([200.0, 200.0]))):
        venv.set_params(params)
        venv.reset(seed=5)
        length = np.zeros(n, dtype=int)
        for t in range(1, 200):  # left, right, left...: gravity decides when it falls
            _, _, terminated, *_ = venv.step(np.full(n, t % 2, dtype=np.int64))
            length = np.where((length == 0) & terminated, t, length)
        lengths.append(length)
    assert np.all(lengths[1] < lengths[0])  # stronger gravity: the pole falls sooner


def test_fxrl_compiled_step_gives_the_eager_steps_to_float_rounding():
    eager = to_gymnasium(envs.batch(envs.make("CartPole-v1"), 8))
    compiled = to_gymnasium(envs.batch(envs.make("CartPole-v1"), 8), compile=True)
    eager.reset(seed=2), compiled.reset(seed=2)
    episodes = 0
    for a in random.randint(random.key(4), (60, 8), 0, 2).numpy():
        (obs, r, term, trunc, info), (c_obs, c_r, c_term, c_trunc, c_info) = (
            eager.step(a),
            compiled.step(a),
        )
        # inductor fuses float ops: observations agree to an ulp or so, flags exactly
        np.testing.assert_allclose(c_obs, obs, rtol=1e-6, atol=1e-6)
        assert np.array_equal(c_r, r) and np.array_equal(c_term, term)
        assert np.array_equal(c_trunc, trunc) and ("final_obs" in c_info) == ("final_obs" in info)
        episodes += int(term.sum())
    assert episodes > 0


def test_torch_compiled_step_gives_the_eager_steps():
    eager = to_gymnasium(envs.batch(envs.make("CartPole-v1"), 4))
    compiled = to_gymnasium(
        envs.batch(envs.make("CartPole-v1"), 4), compile={"backend": "aot_eager", "fullgraph": True}
    )
    eager.reset(seed=1), compiled.reset(seed=1)
    for a in random.randint(random.key(3), (40, 4), 0, 2).numpy():
        assert data_equivalence(eager.step(a), compiled.step(a), exact=True)


def test_bad_inputs_say_what_was_wrong():
    with pytest.raises(ValueError, match=r"batch shape \[2, 3\]"):
        to_gymnasium(envs.batch(envs.batch(envs.make("CartPole-v1"), 3), 2))
    with pytest.raises(ValueError, match="autoreset_mode is for vector envs"):
        to_gymnasium(envs.make("CartPole-v1"), autoreset_mode="SameStep")
    with pytest.raises(ValueError, match="autoreset_mode=SAME_STEP needs an env that starts"):
        to_gymnasium(
            envs.batch(envs.make("CartPole-v1", auto_reset=False), 2), autoreset_mode="SameStep"
        )
    with pytest.raises(TypeError, match="expected an fxrl env"):
        to_gymnasium(gymnasium.make("CartPole-v1"))
    with pytest.raises(TypeError, match="compile must be a bool"):
        to_gymnasium(envs.make("CartPole-v1"), compile="inductor")
    venv = to_gymnasium(envs.batch(envs.make("CartPole-v1"), 4))
    with pytest.raises(RuntimeError, match="call reset"):
        venv.step(np.zeros(4, dtype=np.int64))
    venv.reset(seed=0)
    with pytest.raises(ValueError, match=r"action has shape \[3\]; expected \[4\]"):
        venv.step(np.zeros(3, dtype=np.int64))
    with pytest.raises(ValueError, match=r"reset_mask'\] has shape \[4\] int64"):
        venv.reset(options={"reset_mask": np.zeros(4, dtype=np.int64)})
    with pytest.raises(ValueError, match="does not start new episodes"):
        to_sb3(envs.batch(envs.make("CartPole-v1", auto_reset=False), 2))


# ----------------------------------------------------------------------- Stable-Baselines3


def test_sb3_vec_env_reports_terminal_observations_truncation_and_episodes_as_sb3_does():
    n = 4
    venv = to_sb3(envs.batch(envs.make("CartPole-v1", max_steps=25), n))
    fx = envs.batch(envs.make("CartPole-v1", max_steps=25), n)
    venv.seed(3)
    obs = venv.reset()
    state, ts = fx.reset(random.key(3))
    assert np.array_equal(obs, ts.obs.numpy())
    kinds = set()
    for a in random.randint(random.key(4), (60, n), 0, 2):
        obs, reward, done, infos = venv.step(a.numpy())
        state, ts = fx.step(state, a)
        assert np.array_equal(obs, ts.info["next_obs"].numpy()) and reward.dtype == np.float32
        for i in range(n):
            assert ("terminal_observation" in infos[i]) == bool(done[i])
            if done[i]:
                assert np.array_equal(infos[i]["terminal_observation"], ts.obs[i].numpy())
                truncated = bool(ts.truncated[i] and not ts.terminated[i])
                assert infos[i]["TimeLimit.truncated"] == truncated
                assert infos[i]["episode"]["l"] == int(ts.info["episode_length"][i])
                kinds.add(truncated)
    assert kinds == {True, False}  # both time limits and falls were seen


def test_sb3_ppo_trains_on_the_single_adapter_wrapped_by_sb3(tmp_path, monkeypatch):
    monkeypatch.setenv("SB3_LOGDIR", str(tmp_path))  # else SB3 logs to /tmp/SB3-<date>
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    model = PPO("MlpPolicy", to_gymnasium(envs.make("CartPole-v1")), n_steps=64, batch_size=64,
                n_epochs=1, seed=0, device="cpu")  # fmt: skip
    assert isinstance(model.get_env(), DummyVecEnv)
    model.learn(128)
    assert model.num_timesteps == 128 and len(model.ep_info_buffer) > 0


def load_example(name):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[2] / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    example = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = example  # its dataclass looks itself up there
    spec.loader.exec_module(example)
    return example


def test_cleanrl_style_ppo_loop_runs_unchanged_on_fxrl_and_on_gymnasiums_vector_env():
    example = load_example("cleanrl_ppo_fxrl_cartpole")
    logs = {}
    for backend in ("fxrl", "gymnasium"):
        args = example.Args(backend=backend, total_timesteps=2 * 8 * 64, num_steps=64)
        logs[backend] = example.train(args)
    for log in logs.values():  # episodes were seen and logged through the same code
        assert len(log) > 5 and all(e["return"] >= 8 for e in log)


def test_sb3_ppo_learns_fxrl_cartpole_through_to_sb3_judged_in_gymnasiums_cartpole(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("SB3_LOGDIR", str(tmp_path))  # else SB3 logs to /tmp/SB3-<date>
    example = load_example("sb3_ppo_fxrl_cartpole")
    result = example.main(example.Args(total_timesteps=30_000, seed=0))
    # a random policy scores ~22; 30k steps took 16 s when measured
    assert result["eval_mean_return"] > 150
