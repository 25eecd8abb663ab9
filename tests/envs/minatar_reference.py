"""The minatar package as the reference of fxrl's MinAtar games: step parity with resyncs,
random-policy episode statistics, and a two-sample test of their distributions."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from scipy import stats

from fxrl import envs, random, tree
from fxrl.envs import minatar as fx_minatar

minatar = pytest.importorskip("minatar")

GAMES = {
    "Asterix-MinAtar": "asterix",
    "Breakout-MinAtar": "breakout",
    "Freeway-MinAtar": "freeway",
    "Seaquest-MinAtar": "seaquest",
    "SpaceInvaders-MinAtar": "space_invaders",
}


class CountingRandom:
    """A numpy RandomState that counts the calls made to it (a game's draws)."""

    def __init__(self, seed: int) -> None:
        self.state = np.random.RandomState(seed)
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.state, name)
        if not callable(attr):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return attr(*args, **kwargs)

        return counted


def package_env(id: str, seed: int, **kwargs: Any) -> Any:
    """A ``minatar.Environment`` whose game draws from a counting RandomState (``seed``)
    and whose sticky actions draw from another."""
    env = minatar.Environment(GAMES[id], **kwargs)
    env.random = np.random.RandomState(seed + 1_000_000)
    env.env.random = CountingRandom(seed)
    env.reset()
    return env


def bare(id: str, **params: Any) -> envs.Env:
    """The env ``from_minatar`` builds states for."""
    return envs.make(id, max_steps=None, auto_reset=False, episode_stats=False, **params)


def stepped_in_parity(
    id: str,
    *,
    num_envs: int,
    steps: int,
    seed: int,
    sticky_action_prob: float = 0.0,
    action_p: list[float] | None = None,
    drawn_channels: tuple[int, ...] = (),
    drawn_reward: bool = False,
    **package_kwargs: Any,
) -> dict[str, int]:
    """Step ``num_envs`` package games and a batch of fxrl states built from them with the
    same random actions; where the package's step drew no random number, assert that
    observation, reward and terminal are identical. After a step that drew, or after the
    game ended (the package then resets, which draws), rebuild that env's fxrl state
    from the package's game. Returns counts of what was compared.

    Args:
      action_p: probabilities of the 6 actions (uniform if None).
      drawn_channels: observation channels that must agree even after a step where the
        package drew (what its draws cannot change), with reward and terminal too if
        ``drawn_reward``.
      package_kwargs: more ``minatar.Environment`` arguments (``difficulty_ramping``).
    """
    env = bare(id)
    games = [
        package_env(id, seed + i, sticky_action_prob=sticky_action_prob, **package_kwargs)
        for i in range(num_envs)
    ]
    key = random.key(seed)
    state = tree.stack(
        [fx_minatar.from_minatar(g, random.fold_in(key, i)) for i, g in enumerate(games)]
    )
    actions = np.random.RandomState(seed).choice(6, size=(steps, num_envs), p=action_p)
    counts = {"compared": 0, "resynced": 0, "rewards": 0, "terminals": 0, "drawn_rewards": 0}
    for t in range(steps):
        drawn_before = [g.env.random.calls for g in games]
        results = [g.act(int(a)) for g, a in zip(games, actions[t], strict=True)]
        state, ts = env.step(state, torch.from_numpy(actions[t]))
        resync = []
        for i, g in enumerate(games):
            reward, terminal = results[i]
            if g.env.random.calls == drawn_before[i]:
                where = f"{id} env {i} step {t} (action {actions[t, i]})"
                expected = torch.from_numpy(g.state().astype(np.float32))
                if not torch.equal(ts.obs[i], expected):
                    cells = torch.nonzero(ts.obs[i] != expected).tolist()
                    raise AssertionError(f"{where}: observations differ at [y, x, c] {cells}")
                assert float(ts.reward[i]) == reward, f"{where}: reward {ts.reward[i]} != {reward}"
                assert bool(ts.terminated[i]) == terminal, f"{where}: terminal differs"
                counts["compared"] += 1
                counts["rewards"] += int(reward != 0)
                counts["terminals"] += int(terminal)
            else:
                where = f"{id} env {i} step {t} (action {actions[t, i]}, the package drew)"
                expected = torch.from_numpy(g.state().astype(np.float32))
                for c in drawn_channels:
                    assert torch.equal(ts.obs[i, :, :, c], expected[:, :, c]), f"{where}: ch {c}"
                if drawn_reward:
                    assert float(ts.reward[i]) == reward, f"{where}: reward differs"
                    assert bool(ts.terminated[i]) == terminal, f"{where}: terminal differs"
                    counts["drawn_rewards"] += int(reward != 0)
                counts["resynced"] += 1
                resync.append(i)
            if terminal:
                g.reset()
                resync.append(i)
        for i in set(resync):
            fresh = fx_minatar.from_minatar(games[i], random.fold_in(key, steps * i + t + 1))
            state = tree.map(
                lambda b, f, i=i: b.index_copy(0, torch.tensor([i]), f[None]), state, fresh
            )
    return counts


def package_episodes(id: str, episodes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Returns and lengths of ``episodes`` uniformly random-policy episodes of the package's
    game with its default params (sticky actions 0.1, difficulty ramping)."""
    game = minatar.Environment(GAMES[id])
    game.seed(seed)
    rng = np.random.RandomState(seed + 1)
    returns, lengths = [], []
    for _ in range(episodes):
        game.reset()
        total, length, terminal = 0.0, 0, False
        while not terminal:
            reward, terminal = game.act(int(rng.randint(6)))
            total, length = total + reward, length + 1
        returns.append(total)
        lengths.append(length)
    return np.array(returns), np.array(lengths)


def fxrl_episodes(id: str, episodes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The same for fxrl's game: a batch of ``episodes`` envs (default params, no time
    limit), each played until it ends (a finished game stays put and gives reward 0)."""
    env = envs.batch(bare(id), episodes)
    state, _ = env.reset(random.key(seed))
    total = torch.zeros(episodes, dtype=torch.float64)
    length = torch.zeros(episodes, dtype=torch.int64)
    done = torch.zeros(episodes, dtype=torch.bool)
    key = random.key(seed + 1)
    t = 0
    while not bool(done.all()):
        action = random.randint(random.fold_in(key, t), (episodes,), 0, 6)
        state, ts = env.step(state, action)
        total += ts.reward.double()
        length += (~done).long()
        done = done | ts.terminated
        t += 1
    return total.numpy(), length.numpy()


def assert_same_distribution(name: str, ours: np.ndarray, theirs: np.ndarray) -> None:
    """Two-sample tests at level 1e-3 (fixed seeds, so the outcome is reproducible):
    Kolmogorov-Smirnov (shape) and Mann-Whitney U (location)."""
    ks = stats.ks_2samp(ours, theirs)
    mw = stats.mannwhitneyu(ours, theirs) if np.ptp(np.r_[ours, theirs]) > 0 else None
    summary = (
        f"{name}: fxrl mean {ours.mean():.3f} sd {ours.std():.3f}, minatar mean "
        f"{theirs.mean():.3f} sd {theirs.std():.3f}; KS p={ks.pvalue:.2g}"
        + (f", Mann-Whitney p={mw.pvalue:.2g}" if mw is not None else "")
    )
    assert ks.pvalue > 1e-3, summary
    assert mw is None or mw.pvalue > 1e-3, summary
