"""TD3: config errors, exploration noise, target policy smoothing (reproduced by hand from
the update's own keys), delayed actor and target updates, vmapped seeds = separate runs,
and learning Pendulum on a small budget."""

import math

import pytest
import torch
from _offpolicy import LEARN, compiled_and_eager, learn_and_judge

from fxrl import buffers, nn, random, tree
from fxrl.algorithms import core, td3
from fxrl.testing import assert_trees_close

# Tiny but complete: the first update is random actions only, learning starts at the second.
SMALL = {"num_envs": 2, "num_steps": 2, "gradient_steps": 1, "buffer_size": 64,
         "batch_size": 8, "learning_starts": 8, "hidden": (16, 16)}  # fmt: skip


def _run(update, state, n):
    history = []
    for _ in range(n):
        state, m = update(state)
        history.append(m)
    return state, tree.stack(history)


def test_config_defaults_suit_pendulum():
    c = td3.Config()
    assert (c.env, c.total_steps, c.batch_size, c.hidden, c.tau, c.policy_delay) == (
        "Pendulum-v1", 20_000, 256, (256, 256), 0.005, 2)  # fmt: skip
    assert (c.exploration_noise, c.policy_noise, c.noise_clip) == (0.1, 0.2, 0.5)


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [("policy_delay", 0, "positive int"), ("exploration_noise", -0.1, ">= 0"),
     ("policy_noise", -1.0, ">= 0"), ("noise_clip", -0.5, ">= 0"), ("tau", 1.5, r"\(0, 1\]"),
     ("gamma", -0.1, r"\[0, 1\]"), ("critic_lr", 0.0, "positive number"),
     ("learning_starts", 1.5, "int >= 0"), ("hidden", (64, 0), "non-empty tuple"),
     ("noise_type", "pink", r"one of \('gaussian', 'ou'\)"), ("ou_theta", 0.0, r"\(0, 1\]")],
)  # fmt: skip
def test_config_rejects_bad_values_naming_field_value_and_what_is_allowed(field, value, allowed):
    with pytest.raises(
        ValueError, match=rf"td3.Config: {field}=.* not allowed; expected .*{allowed}"
    ):
        td3.Config(**{field: value})


def test_make_rejects_a_discrete_action_env_and_a_foreign_config():
    with pytest.raises(ValueError, match=r"td3.Config: env='Acrobot-v1'.*Box.*dqn or ppo"):
        td3.make(td3.Config(env="Acrobot-v1"))
    with pytest.raises(TypeError, match=r"expected a td3\.Config, got Config"):
        from fxrl.algorithms import sac

        td3.make(sac.Config())


@pytest.fixture(scope="module")
def small():
    algo = td3.make(td3.Config(**SMALL))
    return algo, algo.init(random.key(0))


def test_params_hold_twin_critics_and_targets_start_equal(small):
    _, state = small
    assert all(x.shape[0] == 2 for x in tree.leaves(state.params["critic"]))
    first = state.params["critic"]["layers"][0]["w"]
    assert not torch.equal(first[0], first[1])
    assert_trees_close(state.target_params, state.params)


def test_exploration_noise_is_gaussian_in_half_widths_and_stays_in_the_box(small):
    algo, state = small
    obs = torch.zeros(1, 3).expand(20_000, 3)
    greedy = algo.policy(state.params, obs)
    noisy = algo.policy(state.params, obs, random.key(1), mode="random")
    assert bool((noisy.abs() <= 2.0).all())
    assert torch.equal(algo.policy(state.params, obs, mode="mean"), greedy)
    # a fresh actor acts near 0, far from the bounds: the noise is N(0, (0.1 * 2)^2)
    assert float(greedy.abs().max()) < 1.0
    noise = noisy - greedy
    assert float(noise.mean()) == pytest.approx(0.0, abs=0.01)
    assert float(noise.std()) == pytest.approx(0.1 * 2.0, rel=0.03)
    with pytest.raises(ValueError, match=r"mode='random' with key=None; expected"):
        algo.policy(state.params, obs, mode="random")


def _critic_loss_by_hand(state, buffer, config, smoothing):
    """The critic loss of the next update's one gradient step, recomputed from the state
    before it and the replay ``buffer`` after its collection: the same keys, the same
    sampled batch, the target action built by ``smoothing``."""
    actor_net = nn.mlp(3, 1, config.hidden, "relu", output_activation="tanh")
    critic_net = nn.mlp(4, 1, config.hidden, "relu")
    _, _, k_learn = random.split(state.key, 3).unbind(-2)
    k_sample, k_loss = random.split(random.split(k_learn, 1)[0], 2).unbind(-2)
    batch, _ = buffers.sample(buffer, k_sample, config.batch_size)
    mu = 2.0 * actor_net.apply(state.target_params["actor"], batch["next_obs"])  # mid 0, half 2
    next_action = smoothing(mu, k_loss)
    assert bool((next_action.abs() <= 2.0).all())

    def q(params, obs, action):
        return critic_net.apply(params, torch.cat([obs, action], -1)).squeeze(-1)

    t = state.target_params["critic"]
    next_q = torch.minimum(*(q(tree.index(t, i), batch["next_obs"], next_action) for i in (0, 1)))
    y = batch["reward"] + config.gamma * (~batch["terminated"]).float() * next_q
    c = state.params["critic"]
    return sum(((q(tree.index(c, i), batch["obs"], batch["action"]) - y) ** 2).mean()
               for i in (0, 1))  # fmt: skip


@pytest.mark.parametrize("policy_noise", [0.2, 5.0])
def test_target_action_is_the_target_actors_plus_clipped_noise_inside_the_box(policy_noise):
    # policy_noise=5 with noise_clip=0.9 (1.8 torque): most target actions hit the clip
    # and many the box; the critic loss the update reports must be the one built on
    # clip(mu'(s') + clip(N(0, (2 policy_noise)^2), -1.8, 1.8), -2, 2)
    config = td3.Config(**{**SMALL, "policy_noise": policy_noise, "noise_clip": 0.9})
    algo = td3.make(config)
    state, _ = _run(algo.update, algo.init(random.key(4)), 3)
    state = tree.map(torch.clone, state)
    new, m = algo.update(tree.map(torch.clone, state))

    def smoothed(mu, key):
        noise = (random.normal(key, tuple(mu.shape)) * 2.0 * policy_noise).clamp(-1.8, 1.8)
        return (mu + noise).clamp(-2.0, 2.0)

    def unsmoothed(mu, key):
        return mu

    def unscaled(mu, key):  # noise in torque units instead of half-widths
        noise = (random.normal(key, tuple(mu.shape)) * policy_noise).clamp(-0.9, 0.9)
        return (mu + noise).clamp(-2.0, 2.0)

    got = float(m["critic_loss"])
    right = float(_critic_loss_by_hand(state, new.buffer, config, smoothed))
    assert got == pytest.approx(right, rel=1e-5)
    for wrong in (unsmoothed, unscaled):  # deterministic keys: these differ by >= 5e-4
        other = float(_critic_loss_by_hand(state, new.buffer, config, wrong))
        assert abs(got - other) > 1e-4 * abs(got), (got, other)


def _changed(a, b):
    return any(not torch.equal(x, y) for x, y in zip(tree.leaves(a), tree.leaves(b), strict=True))


def test_actor_and_targets_move_only_every_policy_delay_critic_steps():
    algo = td3.make(td3.Config(**{**SMALL, "policy_delay": 3}))
    state, _ = _run(algo.update, algo.init(random.key(6)), 1)  # random phase: no learning
    assert int(state.gradient_steps) == 0
    for _ in range(7):
        new, m = algo.update(state)
        count = int(new.gradient_steps)
        assert count == int(state.gradient_steps) + 1
        due = count % 3 == 0
        assert _changed(new.params["critic"], state.params["critic"])  # every step
        assert _changed(new.params["actor"], state.params["actor"]) == due
        assert _changed(new.target_params["actor"], state.target_params["actor"]) == due
        assert _changed(new.target_params["critic"], state.target_params["critic"]) == due
        # Adam's moments of the actor are kept too on critic-only steps
        assert _changed(new.opt_state["actor"], state.opt_state["actor"]) == due
        assert math.isnan(float(m["actor_loss"])) != due
        state = new


@pytest.mark.parametrize("noise_type", ["gaussian", "ou"])
def test_vmapped_seeds_equal_separate_runs(noise_type):
    algo = td3.make(td3.Config(**SMALL, noise_type=noise_type))
    init, update = core.batched(algo, 2, compile=False)  # vmap(init), vmap(update)
    key = random.key(3)
    batched, m_batched = _run(update, init(key), 4)
    for i, k in enumerate(random.split(key, 2).unbind(0)):
        single, m_single = _run(algo.update, algo.init(k), 4)
        assert_trees_close(tree.index(batched.params, i), single.params, rtol=1e-5, atol=1e-6)
        assert_trees_close(tree.index(batched.target_params, i), single.target_params,
                           rtol=1e-5, atol=1e-6)  # fmt: skip
        assert_trees_close(tree.index(m_batched, (slice(None), i)), m_single, rtol=1e-5,
                           atol=1e-6)  # fmt: skip
        assert_trees_close(tree.index(batched.noise, i), single.noise, rtol=1e-5, atol=1e-6)


def test_ou_noise_lives_in_the_state_follows_its_recursion_and_restarts_each_episode():
    # Pendulum-v1: every env is truncated at step 200, so both restarts are seen
    theta, sigma, n = 0.1, 0.3, 4
    config = td3.Config(num_envs=n, num_steps=1, gradient_steps=1, buffer_size=2048,
                        batch_size=8, learning_starts=0, hidden=(16, 16), noise_type="ou",
                        ou_theta=theta, exploration_noise=sigma)  # fmt: skip
    algo = td3.make(config)
    state = algo.init(random.key(4))
    assert torch.equal(state.noise.noise, torch.zeros(n, 1))
    assert td3.make(td3.Config(**SMALL)).init(random.key(4)).noise == {}  # Gaussian: no state
    innovations, restarts = [], 0
    for i in range(420):
        x, greedy = state.noise.noise, algo.policy(state.params, state.obs)
        state, m = algo.update(state)
        action = state.buffer.storage["action"][i * n : (i + 1) * n]
        if int(m["episodes"]) > 0:  # the episode ended on this step: the noise restarts
            assert int(m["episodes"]) == n and (i + 1) % 200 == 0
            assert torch.equal(state.noise.noise, torch.zeros(n, 1))
            restarts += 1
            continue
        new = state.noise.noise
        # the action taken is the actor's plus the new noise in half-widths (2), in the Box
        torch.testing.assert_close(action, (greedy + 2.0 * new).clamp(-2.0, 2.0))
        innovations.append((new - (1 - theta) * x) / sigma)
    assert restarts == 2
    eps = torch.cat(innovations).flatten()  # ~1670 draws that must be N(0, 1)
    assert float(eps.mean()) == pytest.approx(0.0, abs=0.12)
    assert float(eps.std()) == pytest.approx(1.0, abs=0.08)


def test_train_host_carries_ou_noise_through_the_collector_and_restarts_it_each_episode():
    from fxrl import envs

    # One batch of 100 steps per env, acted on by the fresh actor (learning follows the
    # batch): the noise is the action minus the actor's, in half-widths (2)
    theta, sigma, n, steps = 0.1, 0.1, 2, 100
    config = td3.Config(num_envs=n, num_steps=steps, gradient_steps=1, buffer_size=256,
                        batch_size=8, learning_starts=0, hidden=(16, 16), noise_type="ou",
                        ou_theta=theta, exploration_noise=sigma, total_steps=n * steps)  # fmt: skip
    algo, key = td3.make(config), random.key(5)
    fresh = algo.init(random.split(key, 3)[0])
    with envs.gym("Pendulum-v1", num_envs=n, max_episode_steps=25) as env:
        state, _ = td3.train_host(algo, env, key)
    obs = state.buffer.storage["obs"][: n * steps].reshape(steps, n, 3)
    action = state.buffer.storage["action"][: n * steps].reshape(steps, n, 1)
    with torch.no_grad():
        x = (action - algo.policy(fresh.params, obs)) / 2.0
    starts = (torch.arange(steps) % 25 == 0)[:, None, None]  # episodes of 25 steps
    before = torch.where(starts, 0.0, torch.cat([torch.zeros(1, n, 1), x[:-1]]))
    eps = (x - (1 - theta) * before) / sigma  # the innovations, if restarted at 0
    inside = action.abs() < 2.0  # not clipped by the Box
    inside[1:] &= inside[:-1].clone()
    assert int(inside.sum()) > 180
    assert float(eps[inside].mean()) == pytest.approx(0.0, abs=0.25)
    assert float(eps[inside].std()) == pytest.approx(1.0, abs=0.2)
    # without the restarts, x at an episode's start would hold the old episode's noise
    # (stationary std 0.1 / sqrt(0.1 * 1.9) = 2.3 sigma): here it is one innovation
    assert float(eps[starts.expand_as(eps) & inside].square().mean()) < 3.0
    assert torch.equal(state.noise.noise, torch.zeros(n, 1))  # the last step ended episodes


@pytest.fixture(scope="module")
def ou_program():
    """``(algo, (init, update))``: LEARN with OU noise, two seeds, one compiled program
    that the compiled-vs-eager test checks and the learning test trains through."""
    algo = td3.make(td3.Config(**LEARN, noise_type="ou"))
    return algo, core.batched(algo, 2, compile=True)


@pytest.mark.slow  # compiles the whole update: ~45 s cold on a quiet 2-core machine
def test_the_compiled_update_is_one_program_equal_to_the_eager_update_with_ou_noise(ou_program):
    # two seeds vmapped, OU noise carried in the state: the whole update, delayed actor
    # steps and all, compiled as one program, against the same update run eagerly
    algo, program = ou_program
    update, (compiled, m_compiled), (eager, m_eager) = compiled_and_eager(algo, 2, program)
    assert len(update._programs) == 1  # one program: no staged pieces around it
    assert (compiled.gradient_steps == 16).all()
    assert_trees_close(compiled.params, eager.params, rtol=1e-4, atol=1e-5)
    assert_trees_close(compiled.target_params, eager.target_params, rtol=1e-4, atol=1e-5)
    assert_trees_close(compiled.noise, eager.noise, rtol=1e-4, atol=1e-5)
    assert_trees_close(compiled.buffer, eager.buffer, rtol=1e-4, atol=1e-5)
    assert_trees_close(m_compiled, m_eager, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_learns_pendulum_on_a_small_budget(ou_program):
    # two seeds with OU noise, 6400 env steps each through the compiled update above (4
    # envs x 2 steps, then 8 gradient steps, per update), 6000 gradient steps after 400
    # random steps: far from solved, but each seed's greedy policy in gymnasium's
    # Pendulum-v1 must beat the random policy's ~-1200 and its own fresh actor's (the
    # recorded runs in docs/results are the real learning claims)
    algo, program = ou_program
    fresh, returns = learn_and_judge(algo, program, 2)
    for before, after in zip(fresh, returns, strict=True):
        assert float(after.mean()) > -900, (returns, fresh)
        assert float(after.mean()) > float(before.mean()) + 200, (returns, fresh)


def test_train_host_takes_delayed_actor_steps_on_gymnasiums_pendulum():
    from fxrl import envs

    algo = td3.make(td3.Config(**{**SMALL, "gradient_steps": 3, "total_steps": 24}))
    fresh = algo.init(random.split(random.key(9), 3)[0])
    state, history = td3.train_host(algo, envs.gym("Pendulum-v1", num_envs=2), random.key(9))
    # 6 batches of 4 frames, learning from frame 8: 5 x 3 critic steps, 7 of them actor steps
    assert int(state.steps) == 24 and int(state.gradient_steps) == 15
    assert [int(m["gradient_steps"]) for m in history] == [0, 3, 6, 9, 12, 15]
    assert math.isfinite(float(history[-1]["critic_loss"]))
    assert _changed(state.params["actor"], fresh.params["actor"])
    assert _changed(state.target_params["actor"], fresh.target_params["actor"])
    obs, next_obs = state.buffer.storage["obs"], state.buffer.storage["next_obs"]
    assert torch.equal(obs[2:24], next_obs[0:22])


@pytest.mark.parametrize("mode, key", [("random", None), ("sample", random.key(0))])
def test_policy_refuses_a_random_action_without_a_key_and_an_unknown_mode(small, mode, key):
    algo, state = small
    obs = algo.env.observation_spec.zeros((3,))
    with pytest.raises(ValueError, match=rf"td3 policy: mode='{mode}'.*'random' with a key") as e:
        algo.policy(state.params, obs, key, mode=mode)
    assert "\n" not in str(e.value)
