"""What every algorithm returns, what its ``update`` reports, and the helpers they share.

An algorithm is optax's ``(init, update)`` shape applied to a whole agent:

    algo = ppo.make(ppo.Config(env="CartPole-v1"))
    state = algo.init(key)                     # a TrainState pytree (fxrl.tree.dataclass)
    state, metrics = algo.update(state)        # one iteration: collect, then learn; pure
    action = algo.policy(state.params, obs, key, mode="mode")

``init`` and ``update`` are pure, so ``torch.func.vmap`` over a leading seed/task dim of
keys and TrainStates trains many agents in one call, and saving the TrainState is all a
checkpoint needs. ``batched(algo, num_seeds)`` gives that vmapped (and compiled) pair;
``train`` runs it for the whole budget. Beside this module: ``fxrl.algorithms.sweeps``
(what a sweep is: its checks, combinations, names and per-agent values) and
``fxrl.algorithms.evaluation`` (``evaluate`` plays a greedy policy in gymnasium,
re-exported here as ``core.evaluate``); the loop primitive is ``fxrl.scan``.

Hyperparameters are data: the numbers ``update`` reads of the Config only as values
(learning rates, loss weights, discounts: ``algo.hyperparams``) are also an argument,
``update(state, {"lr": tensor})``, the Config's own numbers standing for those not given.
A sweep is ``vmap(algo.update)(states, {"lr": lrs})``: no Config holds a tensor.

The metrics contract (every algorithm, one value per seed; the run loop in ``fxrl.run``
logs exactly these without looking inside the state):
  ``steps``           [] int64   env steps taken so far by this seed, this iteration included
  ``episodes``        [] int64   episodes that ended during this iteration
  ``episode_return``  [] float32 mean return of those episodes; NaN when none ended
  ``episode_length``  [] float32 mean length of those episodes; NaN when none ended
  ``*loss*``          [] float32 the iteration's losses (names contain "loss")
  anything else       [] tensors (entropy, KL, learning rate, epsilon, q...)
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

import torch
from torch import Tensor

from fxrl import envs, random, tree
from fxrl._errors import closest
from fxrl.algorithms import host as host_envs
from fxrl.algorithms import sweeps
from fxrl.algorithms.evaluation import evaluate
from fxrl.algorithms.sweeps import check_sweep, config_name
from fxrl.compile import compile as fxrl_compile
from fxrl.envs import registry
from fxrl.envs.core import Env
from fxrl.scan import scan

__all__ = [
    "Algorithm",
    "Collect",
    "batched",
    "check_config",
    "check_env_id",
    "check_positive",
    "compiled_update",
    "config_fields",
    "episode_metrics",
    "evaluate",
    "hyperparams",
    "make_env",
    "train",
    "trainer",
    "whole_training",
]


class Collect(NamedTuple):
    """An update cut at the env's step, so that a host env (gymnasium, ALE: stepped outside
    torch) can step between its pieces while the rest stays pure and compiled
    (``fxrl.algorithms.host``). With a pure env the update is these pieces in a scan:

        hp = hyperparams(config, HYPERPARAMS, given)  # the update's hyperparameters
        ctx, c = begin(hp, state)
        for t in range(num_steps):
            c, action, record = act(hp, ctx, c)
            env_state, ts = env.step(env_state, action)
            c, seen = observe(hp, ctx, c, ts)        # traj[t] = {**record, **seen}
        state, metrics = finish(hp, state, ctx, c, traj)  # traj: [num_steps, num_envs, ...]

    ``hp`` are the update's hyperparameters, passed to every piece as an argument (not
    vmapped over: a host run is no sweep, and gives the Config's, ``algo.hyperparams``);
    ``ctx`` is what the rollout reads and does not change (the params, tensors only);
    ``c`` what it carries (observations, keys, a policy's state); ``finish`` learns and
    reports, keeping ``state.env_state`` as it is given.
    """

    begin: Callable[[Any, Any], tuple[Any, Any]]
    act: Callable[[Any, Any, Any], tuple[Any, Any, dict]]
    observe: Callable[[Any, Any, Any, Any], tuple[Any, dict]]
    finish: Callable[[Any, Any, Any, Any, dict], tuple[Any, dict]]
    num_steps: int


class Algorithm(NamedTuple):
    """``make(config)``'s result.

    Attributes:
      init: ``init(key [2]) -> TrainState``.
      update: ``update(state, hyperparams=None) -> (state, metrics)``; pure; metrics per
        the module docstring. ``hyperparams``: ``{name: value}`` for some of
        ``hyperparams``' names (tensors: a sweep's, batched under vmap), used instead of
        the Config's numbers.
      policy: ``policy(params, obs, key=None, mode="mode") -> action`` (a recurrent
        policy also takes and returns its carry: ``initial_carry``); exportable with
        ``fxrl.export`` (preprocessing included: it takes raw env observations).
      config: the Config the algorithm was made from.
      env: the pure env (one, unbatched, as ``fxrl.envs.make`` builds it) the agent acts
        in; evaluation and export take observation and action specs from it.
      steps_per_update: env steps one ``update`` takes per seed.
      hyperparams: ``{field: the Config's value}``: the numbers ``update`` reads only as
        values, which a sweep may vary (none: the update takes no ``hyperparams``).
      initial_carry: None for a feed-forward policy. A recurrent one (recurrent PPO's) has
        ``initial_carry(batch_shape=(), device=None) -> carry`` (zeros), and its policy
        takes and returns the carry: ``policy(params, obs, carry, is_init, key=None,
        mode="mode") -> (action, carry)``, ``is_init [*B]`` bool marking an episode's
        first observation. Evaluation, export and the run code feed the carry back when
        this is set.
    """

    init: Callable[..., Any]
    update: Callable[..., tuple[Any, dict[str, Any]]]
    policy: Callable[..., Any]
    config: Any
    env: Env
    steps_per_update: int
    hyperparams: Mapping[str, float] = MappingProxyType({})
    initial_carry: Callable[..., Any] | None = None


# ------------------------------------------------------------------------------ configs


def check_config(config: Any, field: str, ok: bool, allowed: str, fix: str = "") -> None:
    """Raise ``ValueError`` naming ``Config.field``, its value and what is allowed.

    ``ppo.Config: num_minibatches=3 is not allowed; expected a divisor of num_envs *
    num_steps = 512 (1, 2, 4, 8...). Fix: ...``
    """
    if ok:
        return
    name = f"{type(config).__module__.rsplit('.', 1)[-1]}.{type(config).__name__}"
    value = getattr(config, field)
    hint = f" {fix}" if fix else ""
    raise ValueError(f"{name}: {field}={value!r} is not allowed; expected {allowed}.{hint}")


def check_env_id(config: Any, field: str = "env", *, host: bool = False) -> None:
    """An env id an algorithm can build: a registered pure env id (fxrl's own, one given to
    ``fxrl.envs.register`` or by an ``fxrl.envs`` entry point), ``"module:id"`` (the
    module is imported: it registers the id), or a host env, ``"gymnasium:<id>"`` or
    ``"ale:<Game>"`` (where ``host``: the algorithm trains on host envs). An unknown id
    fails with the closest known id and the full list."""

    env_id = getattr(config, field)
    check_config(config, field, isinstance(env_id, str), "an env id (a string)")
    if registry.is_host_id(env_id):
        check_config(config, field, host, "a pure env id: this algorithm trains on pure envs")
        problem = host_envs.check_id(env_id)
        check_config(config, field, not problem, f"a host env that exists: {problem}")
        return
    module, name = registry.split_id(env_id)
    if module is not None:
        try:
            registry.import_env_module(module, f"{field}={env_id!r}")
        except ValueError as e:
            check_config(config, field, False, f"'module:id' with an importable module ({e})")
    known = registry.registered()
    close = closest(name, known, cutoff=0.3)
    # the suggestion first: the list of ids is long, and a CLI may shorten the message
    guess = f" Did you mean {close!r}?" if close else ""
    check_config(
        config,
        field,
        name in known,
        f"a registered env id.{guess} Known ids: {', '.join(known)}. Your own env: "
        "fxrl.envs.register(id, factory) in this process, 'module:id' to import the module "
        "that registers it, or an 'fxrl.envs' entry point; host envs: 'gymnasium:<id>', "
        "'ale:<Game>'",
    )


def check_positive(config: Any, *fields: str) -> None:
    """Each named int field is a positive int."""
    for f in fields:
        v = getattr(config, f)
        ok = isinstance(v, int) and not isinstance(v, bool) and v > 0
        check_config(config, f, ok, "a positive int")


# ------------------------------------------------------------------------------ hyperparameters


def hyperparams(
    config: Any, dtypes: Mapping[str, torch.dtype], given: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The numbers an ``update`` reads of ``config`` only as values, as it uses them.

    Args:
      config: the algorithm's Config; its fields named in ``dtypes`` are the defaults.
      dtypes: ``{field: dtype}``, the algorithm's ``HYPERPARAMS``: a tensor given for a
        field is cast to its dtype, the one the Config's Python float is computed in
        (float64 where it meets float64 math, such as PPO's annealed lr; float32 where it
        meets float32 tensors). A float64 tensor cast here rounds as that float does.
      given: ``{field: value}`` for some of them: tensors (a sweep's, one per agent under
        vmap) or numbers.
    Returns:
      ``{field: value}`` for every field of ``dtypes``: the given one, else the Config's.
    Raises:
      ValueError: a given name that is not one of ``dtypes`` (one line, the closest name).
    """
    out = {field: getattr(config, field) for field in dtypes}
    for field, value in (given or {}).items():
        if field not in dtypes:
            close = closest(field, list(dtypes), cutoff=0.5)
            guess = f" Did you mean {close!r}?" if close else ""
            raise ValueError(
                f"update: {field!r} is not a hyperparameter of {config_name(config)}.{guess} "
                f"Its hyperparameters: {', '.join(dtypes)}."
            )
        out[field] = value.to(dtypes[field]) if isinstance(value, Tensor) else value
    return out


def make_env(env_id: str, check: Callable[[Env], None] | None = None, **params: Any) -> Env:
    """``fxrl.envs.make(env_id, **params)`` then ``check(env)`` (an algorithm's checks that the env
    suits it), as an algorithm's ``make`` calls it. A host id (``"gymnasium:<id>"``,
    ``"ale:<Game>"``) gives its stand-in, ``fxrl.algorithms.host.HostSpec``: the host env's
    specs; the host env itself steps between the pieces of the update."""

    if host_envs.is_host_id(env_id):
        if params:
            raise ValueError(
                f"{env_id} is a host env: its settings are gymnasium's or ALE's, not env "
                f"params ({sorted(params)}); drop env_params."
            )
        env: Env = host_envs.spec_env(env_id)
    else:
        env = envs.make(env_id, **params)
    if check is not None:
        check(env)
    return env


# ------------------------------------------------------------------------------ metrics


def episode_metrics(done: Tensor, episode_return: Tensor, episode_length: Tensor) -> dict:
    """Statistics of the episodes that ended in a rollout, as masked sums and counts.

    No boolean indexing, so it runs under vmap and compile; with no finished episode the
    means are NaN (not 0, which would read as a real return).

    Args:
      done: [T, *B] bool, ``terminated | truncated``.
      episode_return: [T, *B] the running return, final where ``done``.
      episode_length: [T, *B] the running length, final where ``done``.
    Returns:
      ``{"episodes": [] int64, "episode_return": [] float32, "episode_length": [] float32}``.
    """
    count = done.sum()
    ret = torch.where(done, episode_return.double(), 0.0).sum()
    length = torch.where(done, episode_length.double(), 0.0).sum()
    denom = count.double()
    nan = torch.full_like(denom, float("nan"))
    return {
        "episodes": count,
        "episode_return": torch.where(count > 0, ret / denom.clamp(min=1), nan).float(),
        "episode_length": torch.where(count > 0, length / denom.clamp(min=1), nan).float(),
    }


# ------------------------------------------------------------------------------ batched


def _device_of(tree_: Any) -> torch.device | None:
    """The device of the first tensor in ``tree_`` (None: it holds none)."""
    leaves = [x for x in tree.leaves(tree_) if isinstance(x, Tensor)]
    return leaves[0].device if leaves else None


def _contiguous(tree_: Any) -> Any:
    # vmapped inits make stride-0 leaves; the compiled update returns dense ones. Dense
    # from the start, so the second call does not recompile.
    return tree.map(lambda x: x.clone(memory_format=torch.contiguous_format), tree_)


def batched(
    algo: Algorithm,
    num_seeds: int = 1,
    compile: bool | str = True,
    *,
    sweep: Mapping[str, Sequence[float]] | None = None,
) -> tuple[Callable[[Tensor], Any], Callable[[Any], tuple[Any, dict]]]:
    """The fast ``(init, update)`` for ``num_seeds`` agents trained together.

    ``init(key [2])`` splits the key into one per seed; states and metrics have a leading
    [num_seeds] dim when ``num_seeds > 1`` (none for 1). ``update`` is
    ``vmap(algo.update)`` for all seeds at once, compiled as one ``fxrl.compile``
    program (its ``fxrl.scan`` loops rolled, so compile time does not grow with the loop
    lengths; the Config's hyperparameters inputs of it, not constants, so a Config with
    another ``lr`` loads the same program from inductor's cache: ``compiled_update``).
    ``compile`` is True (inductor), a backend name ("aot_eager", "eager": a
    ``torch.compile``, the Config's numbers constants) or False (eager, vmapped).
    The run loop (progress bars, checkpoints) calls these instead of ``algo.init/update``.

    ``sweep={"lr": [1e-4, 3e-4], "ent_coef": [0.0, 0.01]}`` trains every combination of
    the values (``combinations``) x ``num_seeds`` seeds as one vmapped update over
    ``C * num_seeds`` agents (a leading dim, also for one agent): agent ``c * num_seeds +
    s`` is seed ``s`` (the key a run without the sweep gives seed ``s``) of combination
    ``c``. The swept fields (some of ``algo.hyperparams``) are tensors of one value per
    agent, passed to ``vmap(algo.update)(states, values)``: PureJaxRL's way, numbers as
    arguments vmapped over. They are float64, which each update casts to the dtype its
    Config's float is computed in (``hyperparams``), so every agent computes what a run
    of its own Config computes. ``compile=True`` compiles the whole vmapped sweep update
    as one ``fxrl.compile`` program (loops rolled; the values are its inputs, not
    constants baked in); ``compile=False`` runs it eager; a ``torch.compile`` backend
    name is refused.
    """
    if not isinstance(num_seeds, int) or num_seeds < 1:
        raise ValueError(f"batched: num_seeds must be a positive int, got {num_seeds!r}.")

    if host_envs.is_host_id(getattr(algo.config, "env", None)):  # gymnasium or ALE steps
        return host_envs.batched(algo, num_seeds, compile, sweep)
    if sweep is not None:
        return _swept(algo, num_seeds, compile, sweep)
    if num_seeds == 1:
        init, update = algo.init, algo.update
    else:

        def init(key: Tensor) -> Any:
            return _contiguous(torch.func.vmap(algo.init)(random.split(key, num_seeds)))

        update = torch.func.vmap(algo.update)
    if compile is True:
        return init, compiled_update(algo, vmapped=num_seeds > 1)
    if compile:  # a torch.compile backend name ("aot_eager", "eager")
        update = torch.compile(update, backend=compile, fullgraph=True, dynamic=False)
    return init, update


class _HyperparamsAsInputs:
    """``program(state, hyperparams)`` called as ``update(state)``: the hyperparameters (the
    Config's, or a sweep's per agent) handed to the program as tensors on each call, on
    the state's device (its other attributes are the program's: ``_programs``, ``fn``)."""

    def __init__(self, program: Any, values: dict[str, Tensor]) -> None:
        self.program, self.values = program, values
        self._on: dict[Any, dict[str, Tensor]] = {}  # the values per device, copied once
        functools.update_wrapper(self, program, updated=())

    def __call__(self, state: Any) -> tuple[Any, dict]:
        device = _device_of(state)  # the values go where the agents are
        if device not in self._on:
            on = {k: v if device is None else v.to(device) for k, v in self.values.items()}
            self._on[device] = on
        return self.program(state, self._on[device])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.program, name)


def compiled_update(algo: Algorithm, vmapped: bool = False) -> Callable[[Any], tuple[Any, dict]]:
    """``algo.update`` (``vmap``-ped over the state's leading dim where ``vmapped``) as one
    ``fxrl.compile`` program, called ``update(state)``.

    The Config's hyperparameters (``algo.hyperparams``) are inputs of the program, float64
    0-d tensors (not vmapped over) that the update casts as it casts a sweep's
    (``hyperparams``), not constants baked into it: two Configs that differ only in such
    numbers (``lr``, ``gamma``...) trace the same graph, so the second loads the first's
    program from inductor's on-disk cache instead of compiling its own. A tensor rounds
    as the Config's float does except in a few kernels (a ``scalar / tensor``, a lerp
    weight), where the last bit may differ from the eager update's.
    """
    if not algo.hyperparams:  # an update that takes none (a user's own algorithm)
        return fxrl_compile(torch.func.vmap(algo.update) if vmapped else algo.update)
    return _HyperparamsAsInputs(fxrl_compile(_taking_hyperparams(algo, vmapped)), _values(algo))


def _values(algo: Algorithm) -> dict[str, Tensor]:
    """The Config's hyperparameters as float64 0-d tensors on the CPU (moved by each call)."""
    return {
        k: torch.tensor(float(v), dtype=torch.float64, device="cpu")
        for k, v in algo.hyperparams.items()
    }


def _taking_hyperparams(algo: Algorithm, vmapped: bool) -> Callable[[Any, dict], Any]:
    """``update(state, hyperparams)``, vmapped over the state only where ``vmapped``."""
    return torch.func.vmap(algo.update, in_dims=(0, None)) if vmapped else algo.update


def _swept(
    algo: Algorithm, num_seeds: int, compile: bool | str, sweep: Mapping[str, Sequence[float]]
) -> tuple[Callable[[Tensor], Any], Callable[[Any], tuple[Any, dict]]]:
    combos = sweeps.combinations(check_sweep(algo, sweep))
    values = sweeps.values(combos, num_seeds)  # on the CPU; moved where the agents are on each call

    def init(key: Tensor) -> Any:
        keys = key.unsqueeze(0) if num_seeds == 1 else random.split(key, num_seeds)
        return _contiguous(torch.func.vmap(algo.init)(keys.repeat(len(combos), 1)))

    all_agents = torch.func.vmap(algo.update)
    if compile is True:
        # the values are an input (not constants baked in): one program per sweep shape
        all_agents = fxrl_compile(all_agents)
    elif compile:
        raise ValueError(
            f"batched: a sweep compiles with compile=True (fxrl.compile), not with the "
            f"torch.compile backend {compile!r}. Pass compile=True, or compile=False (eager)."
        )

    return init, _HyperparamsAsInputs(all_agents, values)


def train(
    algo: Algorithm,
    key: Tensor,
    num_seeds: int = 1,
    *,
    compile: bool | str = True,
    num_updates: int | None = None,
    callback: Callable[[int, dict], None] | None = None,
    sweep: Mapping[str, Sequence[float]] | None = None,
    updates_per_call: int = 1,
) -> tuple[Any, dict]:
    """Run ``num_updates`` iterations (default: the config's ``total_steps`` budget).

    Returns ``(state, metrics)``: the final TrainState (leading seed dim when
    ``num_seeds > 1``) and the metrics stacked per iteration ([iterations, (seeds)]).
    ``callback(i, metrics_i)`` sees each iteration's metrics as they come. ``sweep``: see
    ``batched`` (the leading dim is then combinations x seeds).

    ``updates_per_call=K`` runs K updates per call of one program (``whole_training``:
    PureJaxRL's ``make_train`` shape, no Python between them), then hands the K
    iterations' metrics to ``callback`` one by one; ``num_updates`` must be a multiple
    of K. Updates that write a replay buffer in place (DQN, SAC, TD3) cannot run inside a
    rolled loop yet: for them K must be 1.
    """
    if num_updates is None:
        num_updates = max(1, algo.config.total_steps // algo.steps_per_update)
    if not isinstance(updates_per_call, int) or updates_per_call < 1:
        raise ValueError(
            f"train: updates_per_call must be a positive int, got {updates_per_call!r}."
        )
    if num_updates % updates_per_call:
        raise ValueError(
            f"train: num_updates={num_updates} is not a multiple of "
            f"updates_per_call={updates_per_call}. Pick num_updates (or total_steps) so "
            "that it is."
        )
    init, update = (
        batched(algo, num_seeds, compile, sweep=sweep)
        if updates_per_call == 1
        else whole_training(algo, updates_per_call, num_seeds, compile, sweep=sweep)
    )
    state = init(key)
    history = []
    for _ in range(num_updates // updates_per_call):
        state, metrics = update(state)
        chunk = [metrics] if updates_per_call == 1 else tree.unstack(metrics)
        for m in chunk:
            history.append(m)
            if callback is not None:
                callback(len(history) - 1, m)
    return state, tree.stack(history)


def trainer(make: Callable[[Any], Any]) -> Callable[..., tuple[Any, dict]]:
    """The ``train`` of the algorithm that ``make`` builds: every algorithm module's
    ``train`` is ``core.trainer(make)``, one function for all of them.

    Returns:
      ``train(config, key, num_seeds=1, *, compile=True, callback=None) -> (state,
      metrics)``: ``core.train(make(config), ...)`` for ``config.total_steps`` env steps
      per seed, seeds vmapped in one program; the final TrainState (leading [num_seeds]
      dim when ``num_seeds > 1``) and each metric stacked per iteration ``[iterations,
      (seeds)]``. ``compile``: True (the whole update one ``fxrl.compile`` program, its
      loops rolled), a ``torch.compile`` backend name, or False (eager).
    """

    def train_(
        config: Any,
        key: Tensor,
        num_seeds: int = 1,
        *,
        compile: bool | str = True,
        callback: Callable[[int, dict], None] | None = None,
    ) -> tuple[Any, dict]:
        return train(make(config), key, num_seeds, compile=compile, callback=callback)

    train_.__module__, train_.__name__, train_.__qualname__ = make.__module__, "train", "train"
    train_.__doc__ = (
        "``train(config, key, num_seeds=1, *, compile=True, callback=None) -> (state, "
        f"metrics)``: train ``{make.__module__}.make(config)`` for ``config.total_steps`` env "
        "steps per seed, seeds vmapped in one program (``fxrl.algorithms.core.trainer``, the "
        "one ``train`` of every algorithm)."
    )
    return train_


def whole_training(
    algo: Algorithm,
    num_updates: int,
    num_seeds: int = 1,
    compile: bool | str = True,
    *,
    sweep: Mapping[str, Sequence[float]] | None = None,
) -> tuple[Callable[[Tensor], Any], Callable[[Any], tuple[Any, dict]]]:
    """``(init, train_k)``: ``train_k(state) -> (state, metrics)`` runs ``num_updates``
    updates of all ``num_seeds`` agents in one program, the loop over updates rolled
    (``scan``), the metrics stacked ``[num_updates, (seeds), ...]``: PureJaxRL's
    ``make_train`` (``jax.jit`` of a ``lax.scan`` over updates). Compiled with
    ``fxrl.compile`` for ``compile=True`` (the Config's hyperparameters inputs of the
    program, as in ``compiled_update``); eager (the same Python loop) for False.

    An update that writes its replay buffer in place (DQN, SAC, TD3: ``update.in_place``)
    is refused with a one-line error; call ``batched``'s update once per update for
    those. In torch 2.13 a rolled loop's body may not write its carry or inputs in place
    (``scan`` refuses; ``while_loop`` takes such a write only when dynamo traces it and
    crashes in fake-tensor auto-functionalization when called directly), and the
    out-of-place write a loop does take copies the whole buffer every iteration (about
    17 ms per iteration for a 1M x 9 float32 buffer on one core): slower than the Python
    loop it would replace.
    """

    if host_envs.is_host_id(getattr(algo.config, "env", None)):
        raise ValueError(
            f"whole_training: {algo.config.env} is a host env, stepped in Python between "
            "the pieces of each update; train it one update per call (updates_per_call=1)."
        )
    if getattr(algo.update, "in_place", False):
        name = type(algo.config).__module__.rsplit(".", 1)[-1]
        raise ValueError(
            f"whole_training: {name}'s update writes its replay buffer in place, which "
            "cannot run inside a rolled loop over updates yet; train it one update per "
            "call (updates_per_call=1, the default)."
        )
    if not isinstance(num_updates, int) or num_updates < 1:
        raise ValueError(
            f"whole_training: num_updates must be a positive int, got {num_updates!r}."
        )
    if compile not in (True, False):
        raise ValueError(
            f"whole_training: compile must be True (fxrl.compile) or False (eager), got "
            f"{compile!r}."
        )
    init, update = batched(algo, num_seeds, False, sweep=sweep)
    if compile and sweep is None and algo.hyperparams:
        # the Config's hyperparameters inputs of the program, as in compiled_update
        step = _taking_hyperparams(algo, num_seeds > 1)

        def train_k_of(state: Any, hp: dict) -> tuple[Any, dict]:
            return scan(lambda s, _: step(s, hp), state, num_updates)

        train_k_of.__name__ = "train_k"  # the program's name in watch() and the progress
        return init, _HyperparamsAsInputs(fxrl_compile(train_k_of), _values(algo))

    def train_k(state: Any) -> tuple[Any, dict]:
        return scan(lambda s, _: update(s), state, num_updates)

    if compile:
        return init, fxrl_compile(train_k)
    return init, train_k


def config_fields(config: Any) -> dict:
    """A Config as a plain dict (for logs and run directories)."""
    return dataclasses.asdict(config)
