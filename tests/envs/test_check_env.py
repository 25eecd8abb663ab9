"""check_env passes on every built-in env and catches each broken rule in a toy env."""

import pytest
import torch

from fxrl import envs, random, specs, tree
from fxrl.envs import Env, TimeStep
from fxrl.testing import check_env

# Tasks whose first observation is one of a few, whatever the key (the randomness is in a
# hidden task, in later steps, or in a handful of starts), as in bsuite, gymnax and MinAtar.
FEW_STARTS = {
    "Catch-bsuite",
    "DeepSea-bsuite",
    "DiscountingChain-bsuite",
    "MemoryChain-bsuite",
    "UmbrellaChain-bsuite",
    "BernoulliBandit-misc",
    "GaussianBandit-misc",
    "FourRooms-misc",
    "MetaMaze-misc",
    # MinAtar as the package: Asterix, Space Invaders and Seaquest always start alike,
    # Breakout from one of two sides (Freeway's car speeds are drawn, so it stays out)
    "Asterix-MinAtar",
    "Breakout-MinAtar",
    "SpaceInvaders-MinAtar",
    "Seaquest-MinAtar",
}


# More auto-reset steps than the default 1200 where a suite's own test file checked
# make(id) with more before its check moved here (tests/envs/test_bsuite.py: 3000;
# test_minatar_seaquest.py and test_minatar_space_invaders.py: 2000).
AUTO_RESET_STEPS = {
    "Catch-bsuite": 3000,
    "DeepSea-bsuite": 3000,
    "DiscountingChain-bsuite": 3000,
    "MemoryChain-bsuite": 3000,
    "UmbrellaChain-bsuite": 3000,
    "Seaquest-MinAtar": 2000,
    "SpaceInvaders-MinAtar": 2000,
    # Freeway's games last 2500 steps, so none of 16 ended in the 1200 steps run here
    # before (measured: 0 ends, 5 s of CPU that checked nothing); its auto-reset is checked
    # on make(id, max_steps=64) in tests/envs/test_minatar.py.
    "Freeway-MinAtar": 0,
}


# The contract of make(id) for every built-in env, checked here once (the suites' own test
# files rely on this test for it).
@pytest.mark.parametrize("env_id", envs.registered())
def test_check_env_passes_on_every_built_in_env(env_id):
    check_env(
        envs.make(env_id),
        max_examples=15,
        random_reset=env_id not in FEW_STARTS,
        auto_reset_steps=AUTO_RESET_STEPS.get(env_id, 1200),
    )


def test_check_env_passes_on_float64_batched_and_transformed_envs():
    from fxrl import transforms

    check_env(envs.make("CartPole-v1", dtype=torch.float64), max_examples=5)
    check_env(envs.batch(envs.make("Pendulum-v1"), 3), max_examples=5)
    env = envs.transform(
        envs.make("CartPole-v1"),
        transforms.frame_stack(3),
        transforms.observation_norm(running=True),
        transforms.reward_scale(0.1),
    )
    check_env(env, max_examples=5)


@tree.dataclass
class WalkState:
    x: torch.Tensor
    t: torch.Tensor
    key: torch.Tensor
    params: dict


class Walk(Env):
    """A toy env: x starts uniform in [0, 1), moves by action - 1, ends past 3."""

    observation_spec = specs.Box(-100.0, 100.0, shape=(1,))
    action_spec = specs.Discrete(3)
    default_params = None

    def reset(self, key, params=None):
        x = random.uniform(key, ())
        state = WalkState(x, torch.zeros((), dtype=torch.int64), key, {})
        return state, self._ts(state, torch.zeros(()), torch.tensor(False))

    def step(self, state, action):
        new = state.replace(x=state.x + (action - 1), t=state.t + 1)
        return new, self._ts(new, torch.ones(()), new.x > 3)

    def _ts(self, state, reward, terminated):
        return TimeStep(self.observe(state), reward, terminated, torch.tensor(False), {})

    def observe(self, state):
        return state.x[None]


def test_check_env_passes_on_a_correct_user_env():
    check_env(Walk(), max_examples=10)
    check_env(envs.auto_reset(envs.time_limit(Walk(), 20)), max_examples=10)


class Mutating(Walk):
    def step(self, state, action):
        state.key.zero_()  # writes into its input (outputs stay the same)
        return super().step(state, action)


class Impure(Walk):
    def step(self, state, action):
        new, ts = super().step(state, action)
        return new.replace(x=new.x + 1e-3 * torch.randn(())), ts  # the global RNG


class IgnoresKey(Walk):
    def reset(self, key, params=None):
        return super().reset(random.key(0), params)


class NewInfoKey(Walk):
    def _ts(self, state, reward, terminated):
        ts = super()._ts(state, reward, terminated)
        return ts.replace(info={"steps": state.t}) if bool(state.t > 0) else ts


class OutsideSpec(Walk):
    observation_spec = specs.Box(-1.0, 1.0, shape=(1,))


class WrongObserve(Walk):
    def _ts(self, state, reward, terminated):
        return TimeStep(state.x[None], reward, terminated, torch.tensor(False), {})

    def observe(self, state):
        return (state.x * 2)[None]


class NoReset(envs.AutoReset):
    def step(self, state, action):
        inner, ts = self.env.step(state.inner, action)  # forgets to start a new episode
        return state.replace(inner=inner), ts.replace(info={**ts.info, "next_obs": ts.obs})


# shrink: the first case reports as check_env does by default (hypothesis shrinks the
# failing example first); the others report the first failing example, which names the
# same broken rule without the shrinking's seconds per case.
@pytest.mark.parametrize(
    ("env", "message", "shrink"),
    [
        (Mutating(), "input state after the call", True),
        (Impure(), "called twice on the same", False),
        (IgnoresKey(), "same observation for keys", False),
        (NewInfoKey(), "differs in structure from reset", False),
        (OutsideSpec(), "is not inside", False),
        (WrongObserve(), "observe", False),
        (NoReset(envs.time_limit(Walk(), 5)), "finished episode's state", False),
    ],
)
def test_check_env_catches_a_broken_rule(env, message, shrink):
    with pytest.raises(AssertionError, match=message):
        check_env(env, max_examples=20, shrink=shrink)
