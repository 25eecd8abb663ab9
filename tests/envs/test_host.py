"""fxrl.envs.gym: gymnasium envs behind the env call shape, compared step by step with
gymnasium itself under the same seeds and actions."""

import contextlib
import os
import signal

import gymnasium
import numpy as np
import pytest
import torch

from fxrl import envs, random, specs, transforms
from fxrl.envs.host import HostEnvError, HostState, seeds_from_key
from fxrl.export import export


def _same(a, b):
    """torch tensor vs the numpy array gymnasium returned: same dtype-cast values."""
    assert torch.equal(a, torch.as_tensor(np.asarray(b)).to(a.dtype)), (a, b)


def test_cartpole_matches_gymnasium_for_300_steps_under_the_same_seed():
    key = random.key(7)
    env, raw = envs.gym("CartPole-v1"), gymnasium.make("CartPole-v1")
    state, ts = env.reset(key)
    obs, _ = raw.reset(seed=seeds_from_key(key))
    _same(ts.obs, obs)
    dones = 0
    for a in random.randint(random.key(1), (300,), 0, 2):
        state, ts = env.step(state, a)
        obs, reward, terminated, truncated, _ = raw.step(int(a))
        _same(ts.obs, obs)
        assert (float(ts.reward), bool(ts.terminated), bool(ts.truncated)) == (
            reward,
            terminated,
            truncated,
        )
        if terminated or truncated:
            obs, _ = raw.reset()  # fxrl resets inside step; gymnasium's stream goes on
            dones += 1
        _same(ts.info["next_obs"], obs)
        assert ts.obs.dtype == torch.float32 and ts.reward.dtype == torch.float32
    assert dones >= 5


def test_pendulum_matches_gymnasium_for_200_random_torques():
    key = random.key(3)
    env, raw = envs.gym("Pendulum-v1"), gymnasium.make("Pendulum-v1")
    state, ts = env.reset(key)
    obs, _ = raw.reset(seed=seeds_from_key(key))
    _same(ts.obs, obs)
    for torque in random.uniform(random.key(4), (200, 1), minval=-2.0, maxval=2.0):
        state, ts = env.step(state, torque)
        obs, reward, _, truncated, _ = raw.step(torque.numpy())
        _same(ts.obs, obs)
        assert ts.reward == torch.tensor(reward, dtype=torch.float32)
    assert bool(ts.truncated) and truncated  # gymnasium's 200-step limit


def test_vector_env_matches_one_gymnasium_env_per_seed_with_final_obs_at_boundaries():
    key, n = random.key(0), 3
    env = envs.gym("CartPole-v1", num_envs=n)
    raws = [gymnasium.make("CartPole-v1") for _ in range(n)]
    state, ts = env.reset(key)
    for raw, seed, row in zip(raws, seeds_from_key(key, n), ts.obs, strict=True):
        _same(row, raw.reset(seed=seed)[0])
    boundaries = 0
    for actions in random.randint(random.key(5), (120, n), 0, 2):
        state, ts = env.step(state, actions)
        assert ts.obs.shape == (n, 4) and ts.reward.shape == (n,)
        for i, raw in enumerate(raws):
            obs, reward, terminated, truncated, _ = raw.step(int(actions[i]))
            _same(ts.obs[i], obs)  # the finished episode's last observation
            assert (bool(ts.terminated[i]), float(ts.reward[i])) == (terminated, reward)
            if terminated or truncated:
                obs, _ = raw.reset()
                boundaries += 1
            _same(ts.info["next_obs"][i], obs)
    assert boundaries >= 3


def test_async_vector_env_gives_the_same_run_as_the_sync_one():
    key = random.key(11)
    actions = random.randint(random.key(2), (40, 2), 0, 2)
    runs = []
    for asynchronous in (False, True):
        with envs.gym("CartPole-v1", num_envs=2, asynchronous=asynchronous) as env:
            state, ts = env.reset(key)
            obs = [ts.obs]
            for a in actions:
                state, ts = env.step(state, a)
                obs += [ts.obs, ts.info["next_obs"]]
            runs.append(torch.stack(obs))
    assert torch.equal(runs[0], runs[1])


def test_the_same_key_replays_a_run_and_another_key_does_not():
    env = envs.gym("CartPole-v1")

    def run(seed):
        state, ts = env.reset(random.key(seed))
        obs = [ts.obs]
        for _ in range(20):
            state, ts = env.step(state, torch.tensor(1))
            obs.append(ts.obs)
        return torch.stack(obs)

    assert torch.equal(run(0), run(0))
    assert not torch.equal(run(0), run(1))


class _Counter(gymnasium.Env):
    """A tiny env with a float64 Box inside a Dict, to check conversions."""

    observation_space = gymnasium.spaces.Dict(
        {
            "pos": gymnasium.spaces.Box(-10, 10, (2,), np.float64),
            "count": gymnasium.spaces.Box(0, 100, (), np.int64),
        }
    )
    action_space = gymnasium.spaces.Box(-1, 1, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos, self.count = self.np_random.uniform(-1, 1, 2), 0
        return self._obs(), {}

    def step(self, action):
        self.pos, self.count = self.pos + action, self.count + 1
        return self._obs(), 1.5, False, self.count >= 3, {}

    def _obs(self):
        self.last = {"pos": self.pos.copy(), "count": np.asarray(self.count, dtype=np.int64)}
        return self.last


def test_specs_come_from_the_gymnasium_spaces_with_float_observations_in_dtype():
    env = envs.gym(_Counter)
    assert env.observation_spec["pos"].dtype == torch.float32  # float64 space, dtype float32
    assert env.observation_spec["count"].dtype == torch.int64
    assert isinstance(env.action_spec, specs.Box) and env.action_spec.shape == (2,)
    cartpole = envs.gym("CartPole-v1")
    raw = gymnasium.make("CartPole-v1")
    assert repr(cartpole.observation_spec) == repr(specs.from_gymnasium(raw.observation_space))
    assert repr(cartpole.action_spec) == repr(specs.from_gymnasium(raw.action_space))


def test_dict_observations_convert_and_auto_reset_at_truncation():
    env = envs.gym(_Counter)
    state, ts = env.reset(random.key(0))
    assert ts.obs["pos"].dtype == torch.float32 and ts.obs["count"].shape == ()
    for _ in range(3):
        state, ts = env.step(state, torch.full((2,), 0.5))
    assert bool(ts.truncated) and int(ts.obs["count"]) == 3
    assert int(ts.info["next_obs"]["count"]) == 0
    assert env.observe(state) is ts.info["next_obs"]


def test_observations_share_memory_with_gymnasium_arrays():
    env = envs.gym(_Counter)
    state, ts = env.reset(random.key(0))
    state, ts = env.step(state, torch.zeros(2))
    last = env.gymnasium_env.unwrapped.last
    assert np.shares_memory(ts.obs["count"].numpy(), last["count"])  # int64: no copy
    assert not np.shares_memory(ts.obs["pos"].numpy(), last["pos"])  # float64 -> float32


def test_vmapping_a_host_env_says_host_env_and_what_to_use_instead():
    env = envs.gym("CartPole-v1")
    state, _ = env.reset(random.key(0))
    actions = torch.zeros(4, dtype=torch.int64)
    expected = (
        r'cannot vmap fxrl.envs.gym\("CartPole-v1"\): host envs run outside torch. '
        r'Use fxrl.envs.gym\("CartPole-v1", num_envs=4\), or a pure env from '
        r'fxrl.envs.make\("CartPole-v1"\)'
    )
    with pytest.raises(TypeError, match=expected):
        torch.func.vmap(env.step, in_dims=(None, 0))(state, actions)
    with pytest.raises(TypeError, match=r"num_envs=8\)"):
        envs.batch(env, 8).reset(random.key(0))
    with pytest.raises(TypeError, match=r"under torch\.func \(grad\)"):
        torch.func.grad(lambda x: env.step(state, x.long())[1].reward)(torch.tensor(1.0))


def test_exporting_a_host_env_says_host_env_and_to_export_the_policy():
    env = envs.gym("CartPole-v1")
    env.reset(random.key(0))

    latest = [env.reset(random.key(0))[0]]  # export runs the function eagerly first

    def step_obs(params, action):
        latest[0], ts = env.step(latest[0], action)
        return ts.obs

    expected = (
        r'cannot export fxrl.envs.gym\("CartPole-v1"\).step: host envs run outside '
        r"torch, so torch.export cannot trace them. Export the policy alone"
    )
    with pytest.raises(TypeError, match=expected):
        export(step_obs, {}, torch.tensor(1))


def test_a_stale_state_cannot_be_stepped():
    env = envs.gym("CartPole-v1")
    state, _ = env.reset(random.key(0))
    newer, _ = env.step(state, torch.tensor(0))
    with pytest.raises(ValueError, match="Host envs are not pure"):
        env.step(state, torch.tensor(0))
    env.step(newer, torch.tensor(0))
    assert isinstance(newer, HostState)


def test_host_env_transforms_and_repr():
    env = envs.transform(
        envs.gym("Pendulum-v1"), transforms.step_counter(), transforms.reward_scale(0.1)
    )
    state, ts = env.reset(random.key(0))
    state, ts = env.step(state, torch.zeros(1))
    assert int(ts.info["step_count"]) == 1 and ts.reward > -2.0
    assert repr(envs.gym("CartPole-v1", num_envs=2)) == 'gym("CartPole-v1", num_envs=2)'
    with pytest.raises(ValueError, match="give num_envs"):
        envs.gym("CartPole-v1", asynchronous=True)
    with pytest.raises(TypeError, match="host envs take no params"):
        envs.gym("CartPole-v1").reset(random.key(0), {"gravity": 1.0})


def test_auto_reset_cannot_wrap_a_host_env():
    env = envs.auto_reset(envs.gym("CartPole-v1", auto_reset=False))
    state, _ = env.reset(random.key(0))
    with pytest.raises(TypeError, match=r"fxrl\.envs\.auto_reset cannot wrap it"):
        env.step(state, torch.tensor(0))
    with pytest.raises(ValueError, match="already resets itself"):
        envs.auto_reset(envs.gym("CartPole-v1"))


def test_compiling_a_host_env_runs_it_eagerly_and_fullgraph_names_host_envs():
    env = envs.gym("CartPole-v1")

    def reward_of_one_step(key):
        state, _ = env.reset(key)
        return env.step(state, torch.tensor(1))[1].reward * 2

    eager = torch.compile(reward_of_one_step, backend="eager")(random.key(0))
    assert torch.equal(eager, torch.tensor(2.0))

    def again(key):  # a fresh code object: torch.compile caches by code object
        state, _ = env.reset(key)
        return env.step(state, torch.tensor(1))[1].reward

    with pytest.raises(Exception, match="host envs run outside torch"):
        torch.compile(again, backend="eager", fullgraph=True)(random.key(0))


class _Crashing(gymnasium.Env):
    """An env whose simulator fails: at reset (``at=0``) or at step ``at``."""

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self, at: int = 3):
        self.at, self.t = at, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if self.at == 0:
            raise OSError("libsim.so: cannot open shared object file")
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        if self.t >= self.at:
            raise ValueError("the simulator diverged at t=3")
        return np.zeros(2, np.float32), 1.0, False, False, {}


if "Crashing-v0" not in gymnasium.registry:
    gymnasium.register("Crashing-v0", entry_point=_Crashing)


@pytest.fixture(params=["fork", "spawn"])
def start_method(request):
    """Worker processes started by fork, then by spawn (macOS's default; importing
    TorchRL sets it), whose fresh registry lacks the ids registered here at run time."""
    import multiprocessing

    before = multiprocessing.get_start_method(allow_none=True)
    multiprocessing.set_start_method(request.param, force=True)
    yield request.param
    multiprocessing.set_start_method(before, force=True)


@pytest.mark.filterwarnings("ignore::UserWarning")  # gymnasium's async workers log the error
@pytest.mark.parametrize(
    "kw", [{}, {"num_envs": 2}, {"num_envs": 2, "asynchronous": True}], ids=str
)
def test_an_env_raising_in_step_is_a_one_line_error_naming_the_env(kw, start_method):
    if start_method == "spawn" and not kw.get("asynchronous"):
        pytest.skip("no worker process")
    env = envs.gym("Crashing-v0", **kw)
    shown = repr(env)
    try:
        state, _ = env.reset(random.key(0))
        action = torch.zeros(env.batch_shape, dtype=torch.int64)
        state, _ = env.step(state, action)
        state, _ = env.step(state, action)
        with pytest.raises(HostEnvError) as raised:
            env.step(state, action)
    finally:
        env.close()
    message = str(raised.value)
    assert message.startswith(
        f"host env {shown} raised in step: ValueError: the simulator diverged at t=3. "
    )
    assert "The env's own code failed, not fxrl's" in message and "\n" not in message
    assert isinstance(raised.value.__cause__, ValueError)


def test_an_env_raising_in_reset_names_the_env_and_the_cause():
    env = envs.gym("Crashing-v0", at=0)
    with pytest.raises(HostEnvError, match=r'gym\("Crashing-v0"\) raised in reset: OSError: '):
        env.reset(random.key(0))


def test_a_dead_worker_process_says_the_worker_died():
    env = envs.gym("CartPole-v1", num_envs=2, asynchronous=True)
    try:
        state, _ = env.reset(random.key(0))
        os.kill(env.gymnasium_env.processes[0].pid, signal.SIGKILL)
        env.gymnasium_env.processes[0].join(30)
        with pytest.raises(HostEnvError, match=r"raised in step: .*worker process .* died"):
            env.step(state, torch.zeros(2, dtype=torch.int64))
    finally:
        with contextlib.suppress(Exception):
            env.gymnasium_env.close(terminate=True)
