"""rollout: one env, a batch, vmap over seeds, fxrl.compile (one rolled loop), torch.compile,
policy extras."""

import pytest
import torch

import fxrl
from fxrl import envs, random, tree
from fxrl.rollout import rollout
from fxrl.testing import assert_trees_close


def random_policy(params, obs, key):
    return random.randint(key, obs.shape[:-1], 0, 2)


def test_rollout_records_what_stepping_by_hand_records():
    env = envs.batch(envs.make("CartPole-v1"), 4)
    state, _ = env.reset(random.key(0))
    final, traj = rollout(env, random_policy, None, state, random.key(1), 30)
    obs = env.observe(state)
    for t, key in enumerate(random.split(random.key(1), 30)):
        action = random_policy(None, obs, key)
        state, ts = env.step(state, action)
        assert_trees_close(
            tree.index(traj, t),
            {
                "obs": obs,
                "action": action,
                "reward": ts.reward,
                "terminated": ts.terminated,
                "truncated": ts.truncated,
                "next_obs": ts.obs,
                "info": ts.info,
            },
        )
        obs = ts.info["next_obs"]
    assert_trees_close(final, state)
    assert traj["obs"].shape == (30, 4, 4) and bool(traj["terminated"].any())


def test_after_an_episode_ends_the_policy_sees_the_new_episode():
    env = envs.make("Pendulum-v1", max_steps=3)
    state, _ = env.reset(random.key(0))
    _, traj = rollout(env, lambda p, o, k: torch.zeros(1), None, state, random.key(1), 7)
    assert traj["truncated"].tolist() == [False, False, True, False, False, True, False]
    # next_obs where truncated is the episode's last observation; the policy then acts on
    # the next episode's first one
    assert not torch.equal(traj["next_obs"][2], traj["obs"][3])
    assert torch.equal(traj["info"]["next_obs"][2], traj["obs"][3])
    assert torch.equal(traj["next_obs"][3], traj["obs"][4])


def test_policy_extras_are_recorded_and_may_not_shadow_the_trajectory():
    env = envs.make("CartPole-v1")
    state, _ = env.reset(random.key(0))

    def policy(params, obs, key):
        return random_policy(params, obs, key), {"log_prob": torch.tensor(-0.69), "v": obs.sum()}

    _, traj = rollout(env, policy, None, state, random.key(1), 5)
    assert traj["log_prob"].shape == (5,) and traj["v"].shape == (5,)
    with pytest.raises(ValueError, match=r"reserved names \['reward'\]"):
        rollout(
            env,
            lambda p, o, k: (random_policy(p, o, k), {"reward": o}),
            None,
            state,
            random.key(1),
            2,
        )


def test_vmap_over_seeds_equals_separate_rollouts():
    env = envs.make("Acrobot-v1")

    def run(key):
        state, _ = env.reset(key)
        return rollout(env, lambda p, o, k: random.randint(k, (), 0, 3), None, state, key, 6)

    keys = random.split(random.key(3), 3)
    batched = torch.func.vmap(run)(keys)
    assert_trees_close(batched, tree.stack([run(k) for k in keys]))


def test_compiled_rollout_of_a_batch_with_auto_reset_equals_eager():
    # every step ends an episode (max_steps=1), so the compiled auto-reset path runs
    env = envs.batch(envs.make("Pendulum-v1", max_steps=1), 4)
    policy = lambda params, obs, key: params * obs[..., 2:]
    run = lambda state, key: rollout(env, policy, torch.tensor(0.5), state, key, 2)
    # fxrl.compile's realize_reads_threshold=1 (fxrl/compile.py): with inductor's default,
    # the reset's Threefry rounds are inlined into each consumer and compile for seconds
    compiled = torch.compile(run, options={"realize_reads_threshold": 1})
    state, _ = env.reset(random.key(0))
    for i in range(2):
        out, eager = compiled(state, random.key(i)), run(state, random.key(i))
        assert_trees_close(out, eager)
        state = eager[0]
    assert bool(eager[1]["truncated"].all())


def test_rollout_under_fxrl_compile_is_one_rolled_loop_equal_to_eager():
    # the steps are fxrl.scan: one loop in the traced program whatever num_steps, and the
    # compiled program (auto-resets inside the loop) computes what the eager loop does
    env = envs.batch(envs.make("Pendulum-v1", max_steps=1), 4)
    policy = lambda params, obs, key: params * obs[..., 2:]
    state, _ = env.reset(random.key(0))
    for num_steps in (2, 64):
        run = lambda s, k, n=num_steps: rollout(env, policy, torch.tensor(0.5), s, k, n)
        graph = fxrl.trace(run, state, random.key(1))
        loops = [n for n in graph.graph.nodes if n.target is torch.ops.higher_order.scan]
        assert len(loops) == 1
    run = lambda s, k: rollout(env, policy, torch.tensor(0.5), s, k, 3)
    out, eager = fxrl.compile(run)(state, random.key(1)), run(state, random.key(1))
    assert_trees_close(out, eager)
    assert bool(eager[1]["truncated"].all())
