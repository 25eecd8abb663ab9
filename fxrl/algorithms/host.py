"""Every algorithm on host envs: ``env="gymnasium:<id>"`` or ``env="ale:<Game>"``.

    algo = ppo.make(ppo.Config(env="gymnasium:Acrobot-v1"))
    init, update = core.batched(algo, num_seeds=8)     # what fxrl train runs
    state = init(key)
    state, metrics = update(state)     # gymnasium steps the envs, torch does the rest

A host env (gymnasium's vector env, ALE's C++ vector env) runs outside torch, so it cannot
live in a pure update. Each algorithm's update is cut at the env's step
(``core.Collect``: ``begin``, ``act``, ``observe``, ``finish``); here the host env steps
between those pieces. ``act`` and ``observe`` are vmapped over seeds and compiled as two
small programs; ``finish`` (the advantages, the epochs, the replay and its gradient steps:
the learning) is one compiled program, as in a pure run. The seeds' envs are one vector
env of ``num_seeds * num_envs`` envs.

In ``make``, a host id gives the algorithm a stand-in env (``HostSpec``) with the host
env's specs, so networks, optimizers and the TrainState are built as for a pure env.

The TrainState's ``env_state`` holds the run's ``HostLog``: the keys its envs were reset
with and every action taken since. A host env's state cannot be saved, but it can be
rebuilt: reset with the same keys, replay the actions. So a checkpoint of a host run
resumes exactly: the first update after a load (``fxrl resume``) replays the log and
checks that the envs show the observation the checkpoint holds; an env that does not
replay to the same state (not deterministic given its seed and actions) is refused in
one line.

``ale:<Game>`` is the Atari setting of CleanRL's ``ppo_atari.py`` (and the Nature DQN's):
``NoFrameskip`` dynamics (no sticky actions), 4 frames per step, a game started as
CleanRL's wrappers start it (1..30 NOOP frames, then a FIRE step and a step of action 2
for games that need FIRE, unseen by the agent), a lost life ends the learning episode
(episodic life: ``terminated`` for learning, the game goes on after a NOOP step and, for
those games, a FIRE step and a step of action 2, unseen, as CleanRL's ``EpisodicLifeEnv``
and ``FireResetEnv`` take them), rewards clipped to their sign for learning, 84x84 grey
frames stacked by 4, the stack starting with its first frame repeated at a game start
and after a lost life: observations uint8 [4, 84, 84]. The games run in fxrl's own loop
of ALE games (``fxrl.envs.atari(..., driver="fxrl", life_reset=True,
stack_pad="repeat")``), not in ale-py's C++ vector env, whose game starts (FIRE for one
frame, then up to 28 NOOP frames; or no no-ops at all) PPO learnt Breakout badly from
(``docs/results/atari_env_bisect.jsonl``). One difference from CleanRL: no max over the
last two frames of a step, so that an exported policy that takes raw screens and
preprocesses them itself (``atari_screen``) sees the frames training saw.
Reported returns are those of whole games, unclipped.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from fxrl import random, specs, tree
from fxrl._errors import closest, unknown
from fxrl._optional import require
from fxrl.envs.core import Env, TimeStep
from fxrl.envs.registry import is_host_id

__all__ = [
    "ALE_SETTINGS",
    "HOST_STREAM",
    "HostLog",
    "HostSpec",
    "ale_processes",
    "batched",
    "check_id",
    "is_host_id",
    "make_env",
    "spec_env",
]

HOST_STREAM = 0x4057  # fold_in(seed's key, HOST_STREAM): the keys its host envs reset with

# CleanRL ppo_atari.py's wrappers as fxrl.envs.atari settings (maxpool and the driver:
# see the docstring)
ALE_SETTINGS: dict[str, Any] = {
    "preprocess": "ale",
    "maxpool": False,
    "repeat_action_probability": 0.0,
    "frameskip": 4,
    "noop_reset": 30,
    "fire_reset": True,
    "driver": "fxrl",
    "life_reset": True,
    "stack_pad": "repeat",
}


def ale_processes() -> int:
    """2 where torch's threads leave a core free, else 1: the processes ``ale:`` games are
    split over. A worker process steps half of the games (the same games) while this one
    steps the rest; on a core torch also runs on, it slowed PPO's Breakout update (2.15
    -> 2.75 s a steady update with torch on both of 2 cores, informal), where on a free
    core it sped it up (3.51 -> 3.33 s with torch on one)."""
    return 2 if (os.cpu_count() or 1) > torch.get_num_threads() else 1


def _split(env_id: str) -> tuple[str, str]:
    prefix, _, name = env_id.partition(":")
    return prefix, name


def check_id(env_id: str) -> str:
    """``""`` if gymnasium knows the id (``gymnasium:<id>``) or ale-py has the game's ROM
    (``ale:<Game>``), else the one-line reason, naming the closest known id."""
    prefix, name = _split(env_id)
    if prefix == "ale":
        from fxrl.envs.atari import games

        found = {g.replace("_", "").lower(): g for g in games()}
        if name.replace("_", "").lower() in found:
            return ""
        shown = sorted("".join(w.capitalize() for w in g.split("_")) for g in found.values())
        return unknown(name, shown, "ALE game", where=f"{env_id!r}").rstrip(".")
    gymnasium = require("gymnasium", f"env {env_id!r}")
    _register_ale_ids()
    if name in gymnasium.registry:
        return ""
    close = closest(name, gymnasium.registry, cutoff=0.5)
    guess = f" Did you mean {close!r}?" if close else ""
    return (
        f"{env_id!r}: gymnasium has no env {name!r}.{guess} (gymnasium.pprint_registry() "
        "lists its ids)"
    )


def _register_ale_ids() -> None:
    """gymnasium's ``ALE/<Game>-v5`` ids exist once ale-py is imported (where installed)."""
    with contextlib.suppress(ImportError):
        require("ale_py", "gymnasium's ALE/<Game>-v5 ids")


def make_env(env_id: str, num_envs: int, **kwargs: Any) -> Any:
    """The host vector env of ``env_id`` with ``num_envs`` envs (not started):
    ``fxrl.envs.gym(id, num_envs)`` or ``fxrl.envs.atari(game, num_envs, **ALE_SETTINGS)``
    with ``processes=ale_processes()``."""
    from fxrl import envs

    problem = check_id(env_id)
    if problem:
        raise ValueError(problem)
    prefix, name = _split(env_id)
    if prefix == "ale":
        settings = {"processes": ale_processes(), **ALE_SETTINGS, **kwargs}
        if settings["preprocess"] is None:  # raw screens: no frame stack to pad
            settings.pop("stack_pad", None)
        return envs.atari(name, num_envs, **settings)
    _register_ale_ids()
    return envs.gym(name, num_envs, **kwargs)


class HostSpec(Env):
    """A host env's specs standing in for it in an algorithm's ``make``: networks, the
    optimizer and the TrainState are built from it as from a pure env. ``reset`` gives
    zero observations (what ``init`` stores until the host env starts); ``step`` is the
    host env's, between the pieces of the update (``fxrl.algorithms.host``)."""

    def __init__(self, env_id: str, observation_spec: Any, action_spec: Any) -> None:
        self.env_id = env_id
        self.observation_spec, self.action_spec = observation_spec, action_spec
        self.default_params = ()

    def reset(self, key: Tensor, params: Any = None) -> tuple[Any, TimeStep]:
        obs = self.observation_spec.zeros()
        zero = torch.zeros((), dtype=self.dtype)
        flag = torch.zeros((), dtype=torch.bool)
        info = {"next_obs": obs, "episode_return": torch.zeros((), dtype=torch.float64),
                "episode_length": torch.zeros((), dtype=torch.int64)}  # fmt: skip
        return (), TimeStep(obs, zero, flag, flag, info)

    def step(self, state: Any, action: Any) -> tuple[Any, TimeStep]:
        raise TypeError(
            f"{self.env_id!r} is a host env: its steps are gymnasium's or ALE's, taken between "
            "the pieces of the update (fxrl.algorithms.host), not inside a pure function. "
            "Train with core.batched(algo, ...) or fxrl train."
        )

    @property
    def auto_resets(self) -> bool:  # type: ignore[override]
        return True

    def __repr__(self) -> str:
        return f"HostSpec({self.env_id!r})"


@functools.cache
def spec_env(env_id: str) -> HostSpec:
    """The stand-in of ``env_id``: its specs read from one host env (built and closed)."""
    env = make_env(env_id, 1)
    try:
        return HostSpec(env_id, env.observation_spec, env.action_spec)
    finally:
        env.close()


@tree.dataclass
class HostLog:
    """A host run's env state as data: the keys its envs were reset with and the actions
    taken since (a replay of them rebuilds the envs' state)."""

    keys: Tensor  # [num_envs, 2] int64
    actions: Tensor  # [max_steps, num_envs, *action_shape] (uint8 for Discrete(n <= 256))
    length: Tensor  # [] int64 steps taken


def _log_dtype(spec: Any) -> torch.dtype:
    if isinstance(spec, specs.Discrete):
        return torch.uint8 if spec.n <= 256 else torch.int64
    return spec.dtype


def batched(
    algo: Any, num_seeds: int, compile: bool | str = True, sweep: Any = None
) -> tuple[Callable[[Tensor], Any], Callable[[Any], tuple[Any, dict]]]:
    """``core.batched`` for an algorithm made on a host env id: ``(init, update)`` of
    ``num_seeds`` agents, states with a leading seed dim when ``num_seeds > 1``."""
    name = type(algo.config).__module__.rsplit(".", 1)[-1]
    if sweep is not None:
        raise ValueError(
            f"{name} on {algo.config.env}: sweeps vmap the update over settings, and a host "
            "env's steps are not in the update; train one run per setting."
        )
    if compile not in (True, False):
        raise ValueError(
            f"{name} on {algo.config.env}: a host run compiles its pieces with fxrl.compile "
            f"(compile=True) or runs them eager (False), not with the backend {compile!r}."
        )
    if getattr(algo.update, "collect", None) is None:
        raise TypeError(f"{name}: its update has no .collect pieces; it cannot run a host env.")
    driver = _Driver(algo, num_seeds, compile)
    return driver.init, driver.update


class _Driver:
    """Steps the host env between the vmapped, compiled pieces of the update."""

    def __init__(self, algo: Any, num_seeds: int, compile: bool) -> None:
        from fxrl.compile import compile as fxrl_compile

        self.algo, self.num_seeds = algo, num_seeds
        self.collect = algo.update.collect
        self.num_envs = algo.config.num_envs
        self.env_id = algo.config.env
        self.ale = self.env_id.startswith("ale:")
        per_update = algo.steps_per_update
        self.max_steps = math.ceil(algo.config.total_steps / per_update) * self.collect.num_steps
        vmap, hp = torch.func.vmap, algo.hyperparams  # the Config's: a host run is no sweep
        # reads the state's fields: nothing to compile
        self.begin = vmap(functools.partial(self.collect.begin, hp))
        # one call per env step: the env's half of step t, then the policy's of step t + 1
        pieces = [
            vmap(functools.partial(f, hp))
            for f in (self.collect.act, self._observe_act, self.collect.finish)
        ]
        if compile:
            pieces = [fxrl_compile(f) for f in pieces]
        self.act, self.observe_act, self.finish = pieces
        self.env: Any = None
        self.host_state: Any = None
        self.length = -1  # log length the host env is at (-1: not started)

    # -------------------------------------------------------------------------- init

    def init(self, key: Tensor) -> Any:
        keys = key.unsqueeze(0) if self.num_seeds == 1 else random.split(key, self.num_seeds)
        state = torch.func.vmap(self.algo.init)(keys)
        spec = self.algo.env.action_spec
        s, n = self.num_seeds, self.num_envs
        env_keys = torch.func.vmap(lambda k: random.split(random.fold_in(k, HOST_STREAM), n))(keys)
        log = HostLog(
            env_keys,
            torch.zeros((s, self.max_steps, n, *spec.shape), dtype=_log_dtype(spec)),
            torch.zeros(s, dtype=torch.int64),
        )
        state = tree.map(lambda x: x.clone(memory_format=torch.contiguous_format), state)
        state = state.replace(env_state=log)
        return self._out(state)

    def _out(self, tree_: Any) -> Any:
        return tree.map(lambda x: x[0], tree_) if self.num_seeds == 1 else tree_

    def _in(self, tree_: Any) -> Any:
        return tree.map(lambda x: x.unsqueeze(0), tree_) if self.num_seeds == 1 else tree_

    # -------------------------------------------------------------------------- update

    def update(self, state: Any) -> tuple[Any, dict]:
        state = self._in(state)
        log: HostLog = state.env_state
        length = int(log.length[0])
        if length != self.length:  # a fresh run, a resumed one, or another state: replay
            state = self._start(state)
        t_len = self.collect.num_steps
        if length + t_len > self.max_steps:
            raise ValueError(
                f"host run on {self.env_id}: the run's action log holds total_steps="
                f"{self.algo.config.total_steps} steps per seed; this update would go past it."
            )
        agent = state.replace(env_state=())
        ctx, c = self.begin(agent)
        records, actions, games = [], [], []
        with torch.no_grad():
            c, action, record = self.act(ctx, c)
            for _ in range(t_len):
                ts, game = self._step(action)
                # the last step's act is computed and dropped: the carry is the observed one
                c, seen, c_next, next_action, next_record = self.observe_act(ctx, c, ts)
                records.append({**record, **seen})
                actions.append(action)
                games.append(game)
                c_last, c, action, record = c, c_next, next_action, next_record
            c = c_last
        traj = tree.map(lambda *xs: torch.stack(xs, 1), *records)  # [S, T, N, ...]
        new, metrics = self.finish(agent, ctx, c, traj)
        taken = torch.stack(actions, 1).to(log.actions.dtype)  # [S, T, N, ...]
        logged = log.actions.clone()
        logged[:, length : length + t_len] = taken
        new = new.replace(env_state=log.replace(actions=logged, length=log.length + t_len))
        self.length = length + t_len
        metrics = {**metrics, **self._episodes(games)}
        return self._out(new), self._out(metrics)

    def _observe_act(self, hp: Any, ctx: Any, c: Any, ts: Any) -> tuple:
        """``observe`` of one step, then ``act`` of the next (one program, one call)."""
        c, seen = self.collect.observe(hp, ctx, c, ts)
        c_next, action, record = self.collect.act(hp, ctx, c)
        return c, seen, c_next, action, record

    def _start(self, state: Any) -> Any:
        """Start the host env from the log's keys and replay its actions; a fresh run takes
        the first observation, a resumed one must see the checkpoint's."""
        log: HostLog = state.env_state
        s, n = self.num_seeds, self.num_envs
        if self.env is None:
            self.env = make_env(self.env_id, s * n)
        self.host_state, ts = self.env.reset(log.keys.reshape(s * n, 2))
        obs = tree.map(lambda x: x.reshape(s, n, *x.shape[1:]), ts.obs)
        self._return = torch.zeros(s * n, dtype=torch.float64)
        self._length = torch.zeros(s * n, dtype=torch.int64)
        self._lives = torch.full((s * n,), -1, dtype=torch.int64)
        length = int(log.length[0])
        spec = self.algo.env.action_spec
        for t in range(length):  # [S, N, ...] actions, as the update gives them
            ts, _ = self._step(log.actions[:, t].to(spec.zeros().dtype))
            obs = ts.info["next_obs"]
        self.length = length
        if length == 0:
            return state.replace(obs=obs.to(state.obs.dtype))
        if not torch.equal(obs.to(state.obs.dtype), state.obs):
            raise ValueError(
                f"resume: {self.env_id}'s envs, reset with the run's keys and given its "
                f"{length} logged actions again, do not show the observation the checkpoint "
                "holds: the env is not deterministic given its seeds and actions, so this run "
                "cannot be resumed exactly. Start a new run."
            )
        return state

    def _step(self, action: Tensor) -> tuple[Any, dict]:
        """One host step of every env; the TimeStep as the pieces take it ([S, N, ...],
        learning rewards and ends, running whole-game return and length in ``info``) and
        the games that ended (raw returns and lengths, per seed)."""
        s, n = self.num_seeds, self.num_envs
        spec = self.algo.env.action_spec
        self.host_state, ts = self.env.step(self.host_state, action.reshape(s * n, *spec.shape))
        raw = ts.reward.double()
        self._return = self._return + raw
        self._length = self._length + 1
        over = ts.terminated | ts.truncated
        if self.ale:  # a lost life ends the learning episode; the game goes on to the last
            lives = ts.info["lives"]
            lost = (self._lives >= 0) & (lives < self._lives) & ~over
            self._lives = torch.where(over, -1, lives)  # -1: a new game, lives not seen yet
            ts = ts.replace(reward=torch.sign(ts.reward), terminated=ts.terminated | lost)
        info = {**ts.info, "episode_return": self._return, "episode_length": self._length}
        game = {"over": over.reshape(s, n), "return": self._return.reshape(s, n),
                "length": self._length.reshape(s, n)}  # fmt: skip
        self._return = torch.where(over, 0.0, self._return)
        self._length = torch.where(over, 0, self._length)
        ts = ts.replace(info={k: v for k, v in info.items() if k != "lives"})
        ts = tree.map(lambda x: x.reshape(s, n, *x.shape[1:]), ts)
        return ts, game

    def _episodes(self, games: list[dict]) -> dict[str, Tensor]:
        """``episodes``, ``episode_return``, ``episode_length`` [S] of the games (whole
        episodes, raw rewards) that ended during the update; NaN where none did."""
        over = torch.stack([g["over"] for g in games])  # [T, S, N]
        ret = torch.stack([g["return"] for g in games])
        length = torch.stack([g["length"] for g in games]).double()
        count = over.sum((0, 2))
        denom = count.double().clamp(min=1)
        nan = torch.full((self.num_seeds,), float("nan"), dtype=torch.float64)
        mean = lambda x: torch.where(count > 0, torch.where(over, x, 0.0).sum((0, 2)) / denom, nan)
        return {"episodes": count, "episode_return": mean(ret).float(),
                "episode_length": mean(length).float()}  # fmt: skip
