"""``check_env``: hypothesis-driven checks that a pure env keeps the env contract.

    from fxrl.testing import check_env
    check_env(my_env)              # raises AssertionError naming the broken rule

What it checks, for keys and action sequences drawn by hypothesis (actions through
``fxrl.envs.checked``, so an action spec the env cannot take fails loudly):

- ``reset`` and ``step`` give TimeSteps inside the specs: ``obs`` in
  ``observation_spec``, reward a float and flags bool of shape ``batch_shape``, and the
  same tree (same ``info`` keys, shapes, dtypes) from ``reset`` as from ``step``;
- ``observe(state)`` is the observation the last TimeStep told the policy to act on;
- ``step`` is pure: the same inputs give the same outputs, and inputs are not modified;
- a different key gives a different first observation (unless ``random_reset=False``);
- ``vmap(step)`` equals a Python loop of steps;
- an auto-resetting env never hands back the finished episode's state: where an
  episode ends, the returned state is a fresh one (a new observation, and a step count no
  higher than a reset gives, where the env keeps one) and ``info["next_obs"]`` is its
  observation.
"""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import Phase, assume, given, settings
from hypothesis import strategies as st

from fxrl import random, tree
from fxrl.envs.core import Env, TimeStep
from fxrl.envs.wrappers import CheckedState, batch, checked
from fxrl.testing.checks import assert_trees_close, check_vmap
from fxrl.testing.strategies import from_spec, keys

__all__ = ["check_env"]


def check_env(
    env: Env,
    *,
    max_examples: int | None = None,
    max_steps: int = 8,
    random_reset: bool = True,
    auto_reset_steps: int = 1200,
    derandomize: bool = False,
    shrink: bool = True,
) -> None:
    """Check that ``env`` keeps the pure env contract; raise AssertionError if not.

    Args:
      env: any fxrl env (one env or a batch).
      max_examples: hypothesis examples per property (default: the active profile's).
      max_steps: the longest action sequence drawn per example.
      random_reset: whether different keys must give different first observations.
      auto_reset_steps: for an auto-resetting env, how many steps (of 16 envs with random
        actions) to run at most while waiting for episodes to end.
      derandomize: draw the same examples on every call and keep no example database
        (``fxrl.envs.register`` checks so: the same env gets the same verdict).
      shrink: look for the simplest failing example (hypothesis's shrinking); ``False``
        reports the first one found, sooner.
    Raises:
      AssertionError: ``"check_env: <property>: <what broke>"`` (an exception the env
        raised while checked: its type and message), the property one of
        "step is pure and inside the specs", "different keys give different resets",
        "vmap equals a loop", "auto-reset starts fresh episodes".
    """
    if not isinstance(env, Env):
        raise TypeError(f"check_env: expected an fxrl env, got {type(env).__name__}.")
    limit: dict[str, Any] = {} if max_examples is None else {"max_examples": max_examples}
    if derandomize:
        limit.update(derandomize=True, database=None)
    if not shrink:
        limit["phases"] = [p for p in Phase if p not in (Phase.shrink, Phase.explain)]
    actions = st.lists(from_spec(env.action_spec, env.batch_shape), min_size=1, max_size=max_steps)

    @settings(deadline=None, **limit)
    @given(key=keys(), actions=actions)
    def pure_and_inside_the_specs(key: torch.Tensor, actions: list[Any]) -> None:
        safe = checked(env)
        state, first = env.reset(key)
        _check_timestep(env, "reset", first, first)
        _check_observe(env, "reset", state, first)
        for action in actions:
            state_copy, action_copy = _clone(state), _clone(action)
            new, ts = safe.step(CheckedState(state), action)
            again, ts_again = env.step(state, action)
            _same(
                f"{env!r}.step called twice on the same (state, action)",
                (new.inner, ts),
                (again, ts_again),
            )
            _same(f"{env!r}.step's input state after the call", state, state_copy)
            _same(f"{env!r}.step's input action after the call", action, action_copy)
            _check_timestep(env, "step", ts, first)
            _check_observe(env, "step", again, ts)
            state = again

    @settings(deadline=None, **limit)
    @given(key_a=keys(), key_b=keys())
    def different_keys_give_different_resets(key_a: torch.Tensor, key_b: torch.Tensor) -> None:
        assume(not torch.equal(key_a, key_b))
        obs_a, obs_b = env.reset(key_a)[1].obs, env.reset(key_b)[1].obs
        if all(
            torch.equal(a, b) for a, b in zip(tree.leaves(obs_a), tree.leaves(obs_b), strict=True)
        ):
            raise AssertionError(
                f"{env!r}.reset gave the same observation for keys {key_a.tolist()} and "
                f"{key_b.tolist()}: is the key used? (check_env(env, random_reset=False) for "
                "an env whose start is deterministic.)"
            )

    @settings(deadline=None, **limit)
    @given(key=keys(), n=st.integers(1, 4), data=st.data())
    def vmap_equals_loop(key: torch.Tensor, n: int, data: st.DataObject) -> None:
        states, _ = torch.func.vmap(env.reset)(random.split(key, n))
        action = data.draw(from_spec(env.action_spec, (n, *env.batch_shape)), label="actions")
        check_vmap(env.step, states, action)

    _named("step is pure and inside the specs", pure_and_inside_the_specs)
    if random_reset:
        _named("different keys give different resets", different_keys_give_different_resets)
    _named("vmap equals a loop", vmap_equals_loop)
    if env.auto_resets:
        fresh = lambda: _check_auto_reset(env, auto_reset_steps)
        _named("auto-reset starts fresh episodes", fresh)


def _named(name: str, check: Any) -> None:
    """Run one property; its failure (a broken rule, or an error the env raised while it
    was checked) is an AssertionError that says which property it was."""
    try:
        check()
    except Exception as e:
        what = str(e) if isinstance(e, AssertionError) else f"{type(e).__name__}: {e}"
        named = AssertionError(f"check_env: {name}: {what}")
        if hasattr(e, "__notes__"):  # hypothesis's falsifying example
            named.__notes__ = list(e.__notes__)
        raise named from (None if isinstance(e, AssertionError) else e)


def _clone(x: Any) -> Any:
    return tree.map(lambda v: v.clone() if isinstance(v, torch.Tensor) else v, x)


def _same(what: str, a: Any, b: Any) -> None:
    try:
        assert_trees_close(a, b, rtol=0, atol=0)
    except AssertionError as e:
        raise AssertionError(
            f"{what} differs (a pure env gives identical results and leaves its inputs alone): {e}"
        ) from None


def _check_timestep(env: Env, where: str, ts: Any, first: TimeStep) -> None:
    name = f"{env!r}.{where}"
    if not isinstance(ts, TimeStep):
        raise AssertionError(f"{name} returned {type(ts).__name__}, not (state, TimeStep).")
    if not bool(env.observation_spec.contains(ts.obs)):
        raise AssertionError(f"{name}: obs {ts.obs!r} is not inside {env.observation_spec!r}.")
    shape = env.batch_shape
    if tuple(ts.reward.shape) != shape or not ts.reward.dtype.is_floating_point:
        raise AssertionError(
            f"{name}: reward has shape {list(ts.reward.shape)} "
            f"{ts.reward.dtype}; expected a float tensor of shape {list(shape)}."
        )
    for flag in ("terminated", "truncated"):
        x = getattr(ts, flag)
        if tuple(x.shape) != shape or x.dtype != torch.bool:
            raise AssertionError(
                f"{name}: {flag} has shape {list(x.shape)} {x.dtype}; expected "
                f"bool of shape {list(shape)}."
            )
    if not bool(torch.isfinite(ts.reward).all()):
        raise AssertionError(f"{name}: reward {ts.reward!r} is not finite.")
    if tree.structure(ts) != tree.structure(first) or any(
        a.shape != b.shape or a.dtype != b.dtype
        for a, b in zip(tree.leaves(ts), tree.leaves(first), strict=True)
    ):
        raise AssertionError(
            f"{name}: its TimeStep differs in structure from reset's ({tree.summary(ts)} vs "
            f"{tree.summary(first)}); reset and step must report the same info keys, shapes "
            "and dtypes, or auto-reset, vmap and rollouts cannot combine them."
        )


def _check_observe(env: Env, where: str, state: Any, ts: TimeStep) -> None:
    expected = ts.info.get("next_obs", ts.obs) if env.auto_resets else ts.obs
    field = 'info["next_obs"]' if env.auto_resets else "obs"
    try:
        assert_trees_close(env.observe(state), expected, rtol=0, atol=0)
    except AssertionError as e:
        raise AssertionError(
            f"{env!r}.observe(state) after {where} is not the observation the TimeStep gave "
            f"the policy ({field}): {e}"
        ) from None


def _check_auto_reset(env: Env, max_steps: int) -> None:
    """Run 16 envs with random actions until episodes end; check each fresh state."""
    envs = batch(env, 16)
    state, _ = envs.reset(random.key(0))
    try:  # what a reset starts from: 0, or more after no-op steps (noop_reset)
        start_count = int(envs.step_count(state).max())
    except (TypeError, AttributeError):
        start_count = None
    ended = 0
    for t in range(max_steps):
        action = envs.action_spec.sample(random.key(t + 1), envs.batch_shape)
        state, ts = envs.step(state, action)
        done = ts.terminated | ts.truncated
        if not bool(done.any()):
            continue
        ended += int(done.sum())
        fresh_obs = tree.index(envs.observe(state), done)
        final_obs = tree.index(ts.obs, done)
        if not bool(env.observation_spec.contains(fresh_obs)):
            raise AssertionError(
                f"{env!r}: after an episode ended at step {t}, the new "
                f"episode's observation is outside {env.observation_spec!r}."
            )
        if all(
            torch.equal(a, b)
            for a, b in zip(tree.leaves(fresh_obs), tree.leaves(final_obs), strict=True)
        ):
            raise AssertionError(
                f"{env!r}: an episode ended at step {t} and the returned state still shows the "
                "final observation: auto_reset returned the finished episode's state."
            )
        if start_count is not None:
            counts = envs.step_count(state)[done]
            if bool((counts > start_count).any()):
                raise AssertionError(
                    f"{env!r}: an episode ended at step {t} but the returned state has step "
                    f"count {counts.tolist()}, more than a reset gives ({start_count}): it is "
                    "not a fresh episode."
                )
        if ended >= 16 and t >= 10:
            return
