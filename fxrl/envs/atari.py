"""Atari 2600 games through the Arcade Learning Environment (ale-py), as host envs.

    env = fxrl.envs.atari("Pong")                 # raw RGB screens [210, 160, 3] uint8
    state, ts = env.reset(fxrl.random.key(0))
    state, ts = env.step(state, env.action_spec.sample(key))

Defaults are ale-py's ``ALE/<Game>-v5`` (Machado et al. 2018, "Revisiting the Arcade
Learning Environment"): frameskip 4, sticky actions with probability 0.25, the minimal
action set, episodes cut at 108,000 frames. ``noop_reset`` and ``episodic_life`` are the
two DQN-era resets (Mnih et al. 2015), off by default. ROMs ship with ale-py. Host envs
are not pure (see ``fxrl.envs.host``); the screen pipeline is ``fxrl.transforms``:

    pre = T.compose(T.to_tensor_image(), T.resize(84, 84, "nearest"), T.grayscale())
    env = fxrl.envs.transform(fxrl.envs.atari("Pong"), pre, T.step_counter())

``screen_preprocess(84)`` gives that pipeline's float observations bit for bit, with the
nearest resize done on the uint8 screen first (4.8x fewer pixels to convert to float), for
policies exported with their preprocessing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from fxrl import specs
from fxrl._errors import unknown
from fxrl._optional import require
from fxrl.envs.atari_games import games_settings, make_games
from fxrl.envs.atari_vector import AtariVector, _SameStep, atari_screen, vector_settings
from fxrl.envs.host import HostEnv
from fxrl.transforms.base import Transform

__all__ = ["AtariVector", "atari", "atari_screen", "games", "screen_preprocess"]


def _roms_dir() -> Path:
    roms = require("ale_py.roms", "fxrl.envs.atari")
    return Path(os.environ.get("ALE_ROMS_DIR") or Path(roms.__file__).parent)


def games() -> list[str]:
    """The games whose ROM is installed (ale-py ships them), in ale-py's snake_case."""
    roms = require("ale_py.roms", "fxrl.envs.atari")
    where = _roms_dir()
    return sorted(g for g in roms.get_all_rom_ids() if (where / f"{g}.bin").exists())


def _squash(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


def _game_name(game: str) -> str:
    """The game in an id: "Pong" for "ALE/Pong-v5" or "PongNoFrameskip-v4"."""
    return game.removeprefix("ALE/").split("-v")[0].removesuffix("NoFrameskip")


def _squash_id(game: str) -> str:
    return _squash(_game_name(game))


def _rom(game: str) -> str:
    """ale-py's ROM id of ``game``: "Pong", "pong", "ALE/Pong-v5", "SpaceInvaders" and
    "space_invaders" all work."""
    roms = require("ale_py.roms", "fxrl.envs.atari")
    known = {_squash(g): g for g in roms.get_all_rom_ids()}
    installed = games()
    rom = known.get(_squash(_game_name(game)))
    if rom is None:
        # The games that would work; with no ROMs here, the ones ale-py knows of.
        valid = installed or sorted(known.values())
        message = unknown(game, valid, "game", where="fxrl.envs.atari", key=_squash_id)
        raise ValueError(message + ("" if installed else " (No ROMs are installed.)"))
    if rom not in installed:
        raise FileNotFoundError(
            f"fxrl.envs.atari: no ROM for {game!r} ({rom}.bin) in {_roms_dir()}"
            f"{' (ALE_ROMS_DIR)' if os.environ.get('ALE_ROMS_DIR') else ''}. ale-py >= 0.9 "
            "ships the ROMs: reinstall it (pip install 'fxrl[atari]') or unset ALE_ROMS_DIR. "
            f"Games with a ROM here: {', '.join(installed) or 'none'}."
        )
    return rom


def _noop_reset_wrapper(env: Any, noops: int) -> Any:
    gymnasium = require("gymnasium", "fxrl.envs.atari")

    class NoopReset(gymnasium.Wrapper):
        """Reset, then 1..noops NOOP steps drawn from the env's seeded generator."""

        def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
            obs, info = self.env.reset(**kwargs)
            for _ in range(int(self.unwrapped.np_random.integers(1, noops + 1))):
                obs, _, terminated, truncated, info = self.env.step(0)
                if terminated or truncated:
                    obs, info = self.env.reset()
            return obs, info

    return NoopReset(env)


def _episodic_life_wrapper(env: Any) -> Any:
    gymnasium = require("gymnasium", "fxrl.envs.atari")

    class EpisodicLife(gymnasium.Wrapper):
        """A lost life ends the episode; only game over (or a seeded reset) resets the
        game, other resets carry on with a NOOP step (Mnih et al. 2015)."""

        def __init__(self, env: Any) -> None:
            super().__init__(env)
            self.lives, self.game_over = 0, True

        def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
            obs, reward, terminated, truncated, info = self.env.step(action)
            self.game_over = terminated or truncated
            lives = self.unwrapped.ale.lives()
            terminated = terminated or 0 < lives < self.lives
            self.lives = lives
            return obs, reward, terminated, truncated, info

        def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
            if self.game_over or kwargs.get("seed") is not None:
                obs, info = self.env.reset(**kwargs)
            else:
                obs, _, terminated, truncated, info = self.env.step(0)
                if terminated or truncated:
                    obs, info = self.env.reset(**kwargs)
            self.lives, self.game_over = self.unwrapped.ale.lives(), False
            return obs, info

    return EpisodicLife(env)


class _AtariMaker:
    """Builds one ALE env; a class rather than a closure so worker processes can pickle it."""

    def __init__(
        self, rom: str, noop_reset: int, episodic_life: bool, kwargs: dict[str, Any]
    ) -> None:
        self.rom, self.noop_reset, self.episodic_life, self.kwargs = (
            rom,
            noop_reset,
            episodic_life,
            kwargs,
        )

    def __call__(self) -> Any:
        env = require("ale_py.env", "fxrl.envs.atari").AtariEnv(self.rom, **self.kwargs)
        if self.noop_reset:
            if env.get_action_meanings()[0] != "NOOP":
                raise ValueError(
                    f"fxrl.envs.atari: {self.rom}'s action 0 is not NOOP; noop_reset needs it."
                )
            env = _noop_reset_wrapper(env, self.noop_reset)
        if self.episodic_life:
            env = _episodic_life_wrapper(env)
        return env


def atari(
    game: str,
    num_envs: int | None = None,
    asynchronous: bool = False,
    *,
    frameskip: int | tuple[int, int] = 4,
    repeat_action_probability: float = 0.25,
    full_action_space: bool = False,
    noop_reset: int = 0,
    episodic_life: bool = False,
    fire_reset: bool = False,
    max_num_frames_per_episode: int | None = 108_000,
    obs_type: str = "rgb",
    auto_reset: bool = True,
    preprocess: str | None = None,
    driver: str = "ale",
    **kwargs: Any,
) -> HostEnv:
    """An Atari game through ale-py as a host env (not pure), defaults as ``ALE/<Game>-v5``.

    Args:
      game: "Pong", "Breakout", "SpaceInvaders" (or ale-py's "space_invaders"); see
        ``games()``.
      num_envs: ``num_envs`` games stepped by ale-py's C++ vector env
        (``ale_py.vector_env.AtariVectorEnv``: threads in C++, one call per step), raw
        RGB screens [N, 210, 160, 3] unless ``preprocess="ale"``.
      asynchronous: with ``num_envs``, gymnasium's ``AsyncVectorEnv`` of single games
        (one process each) instead of ale-py's vector env.
      frameskip: emulator frames per step (the action repeats; rewards add up).
      repeat_action_probability: sticky actions: the emulator keeps the previous action
        with this probability, per frame.
      full_action_space: all 18 joystick actions instead of the game's minimal set.
      noop_reset: when > 0, each new game starts with NOOPs drawn from the env's seeded
        generator: 1..noop_reset NOOP steps for single games, 1..noop_reset NOOP frames
        with ``driver="fxrl"`` (CleanRL's ``NoopResetEnv``), 0..noop_reset - 1 frames
        (after FIRE's one frame with ``fire_reset``) in ale-py's vector env.
      episodic_life: a lost life ends the episode (``terminated``); the game itself
        resets only when it is over.
      fire_reset: with ``num_envs`` only: press FIRE at each game start for games whose
        action 1 is FIRE (Breakout's ball is served so): one frame in ale-py's vector env,
        a FIRE step and a step of action 2 with ``driver="fxrl"`` (CleanRL's
        ``FireResetEnv``).
      max_num_frames_per_episode: truncate after this many emulator frames.
      obs_type: "rgb" ([210, 160, 3] uint8), "grayscale" ([210, 160]) or "ram" ([128]).
      auto_reset: begin the next episode inside ``step`` (``info["next_obs"]``).
      preprocess: ale-py's vector env only: ``"ale"`` for its C++ preprocessing
        (grayscale, resize to 84x84 by area, a stack of 4, max over the last two frames)
        giving [N, 4, 84, 84] uint8. An exported policy must then see the same: put
        ``atari_screen()`` and ``frame_stack(4, dim=-3)`` in front of it (exact with
        ``maxpool=False``). ``None``: raw screens, for ``fxrl.transforms``.
      driver: with ``num_envs``: ``"ale"`` steps the games in ale-py's C++ vector env;
        ``"fxrl"`` in fxrl's own loop of ALE games (``fxrl.envs.atari_games``), the same
        screens and frames, but a game starts as CleanRL's
        wrappers start it: 1..``noop_reset`` NOOP frames, then (``fire_reset``) a FIRE step
        and a step of action 2, unseen by the agent. ale-py's vector env instead presses
        FIRE for one frame and then takes 0..``noop_reset`` - 2 NOOP frames.
      kwargs: more ``ale_py.env.AtariEnv`` arguments (``mode``, ``difficulty``...); with
        ale-py's vector env: ``img_height``, ``img_width``, ``grayscale``, ``stack_num``,
        ``maxpool``, ``num_threads``; with ``driver="fxrl"``: ``img_height``,
        ``img_width``, ``stack_num``, ``maxpool`` and three of its own:
        ``life_reset=True`` steps on after a lost life as CleanRL's ``EpisodicLifeEnv``
        and ``FireResetEnv`` do (a NOOP step, then with ``fire_reset`` a FIRE step and
        a step of action 2, unseen by the agent) and starts the frame stack again;
        ``stack_pad`` is what a stack holds before its first frame: ``"zeros"`` (as
        ale-py's vector env) or ``"repeat"`` (the first frame, as CleanRL's and
        ``fxrl.transforms.frame_stack``); ``processes=k`` splits the games over up to
        ``k`` processes (this one and ``k - 1`` spawned workers, which step and resize
        their share while this one steps its own): the same games and results, bit for
        bit, in less time where a core would otherwise sit idle.
    Returns:
      A ``HostEnv``; its TimeSteps report ``info["lives"]``.
    """
    rom = _rom(game)
    if not isinstance(noop_reset, int) or noop_reset < 0:
        raise ValueError(f"fxrl.envs.atari: noop_reset must be an int >= 0, got {noop_reset!r}.")
    # settings of fxrl's own loop of games only (fxrl.envs.atari_games)
    fxrl_only = {k: kwargs.pop(k) for k in ("life_reset", "stack_pad", "processes") if k in kwargs}
    settings = {
        "frameskip": frameskip,
        "repeat_action_probability": repeat_action_probability,
        "full_action_space": full_action_space,
        "obs_type": obs_type,
        "max_num_frames_per_episode": max_num_frames_per_episode,
        **kwargs,
    }
    shown = [f'"{game}"']
    if noop_reset:
        shown.append(f"noop_reset={noop_reset}")
    if episodic_life:
        shown.append("episodic_life=True")
    if fire_reset and (num_envs is None or asynchronous):
        raise ValueError(
            f"fxrl.envs.atari({game!r}): fire_reset=True is for ale-py's vector env and "
            "driver='fxrl': give num_envs (and no asynchronous)."
        )
    if fire_reset:
        shown.append("fire_reset=True")
    if preprocess is not None and (num_envs is None or asynchronous):
        raise ValueError(
            f"fxrl.envs.atari({game!r}): preprocess={preprocess!r} is ale-py's vector env's "
            "C++ preprocessing: give num_envs (and no asynchronous). For one env, preprocess "
            "with fxrl.transforms (atari_screen(), frame_stack(4, dim=-3))."
        )
    if driver not in ("ale", "fxrl"):
        raise ValueError(
            f"fxrl.envs.atari({game!r}): driver must be 'ale' (ale-py's C++ vector env) or "
            f"'fxrl' (fxrl's loop of ALE games), got {driver!r}."
        )
    if driver == "fxrl" and (num_envs is None or asynchronous):
        raise ValueError(
            f"fxrl.envs.atari({game!r}): driver='fxrl' steps num_envs games in one loop: "
            "give num_envs and no asynchronous."
        )
    if fxrl_only and driver != "fxrl":
        raise ValueError(
            f"fxrl.envs.atari({game!r}): {', '.join(sorted(fxrl_only))} "
            f"{'is a setting' if len(fxrl_only) == 1 else 'are settings'} of fxrl's loop of "
            "ALE games: give driver='fxrl' and num_envs."
        )
    if driver == "fxrl" and episodic_life:
        raise ValueError(
            f"fxrl.envs.atari({game!r}): driver='fxrl' has no episodic_life: count lives "
            "from info['lives'] (as fxrl.algorithms.host does)."
        )
    if num_envs is not None and not asynchronous:
        if not auto_reset:
            raise ValueError(
                f"fxrl.envs.atari({game!r}, num_envs={num_envs}): ale-py's vector env resets "
                "ended games itself; auto_reset=False needs asynchronous=True."
            )
        # checks preprocess, frameskip, obs_type and the frame settings for both drivers
        raw, vector = vector_settings(game, preprocess, frameskip, obs_type, kwargs)
        if preprocess:
            shown.append(f"preprocess={preprocess!r}")
        if driver == "fxrl":
            shown.append("driver='fxrl'")
        call = f"fxrl.envs.atari({', '.join(shown)}"
        if driver == "fxrl":
            frames = games_settings({**kwargs, **fxrl_only}, preprocess is None, call)
            return AtariVector(num_envs, call, lambda: make_games(
                rom,
                num_envs,
                frameskip=frameskip,
                repeat_action_probability=repeat_action_probability,
                full_action_space=full_action_space,
                max_num_frames_per_episode=max_num_frames_per_episode or 2**62,
                noop_max=noop_reset,
                fire_reset=fire_reset,
                **frames,
            ))  # fmt: skip
        vector.update(
            frameskip=frameskip,
            repeat_action_probability=repeat_action_probability,
            full_action_space=full_action_space,
            max_num_frames_per_episode=max_num_frames_per_episode or 0,
            noop_max=noop_reset,
            episodic_life=episodic_life,
            use_fire_reset=fire_reset,
            reward_clipping=False,
        )
        return AtariVector(num_envs, call, lambda: _SameStep(rom, num_envs, raw, vector))
    return HostEnv(
        _AtariMaker(rom, noop_reset, episodic_life, settings),
        num_envs=num_envs,
        asynchronous=asynchronous,
        auto_reset=auto_reset,
        dtype=torch.float32,
        info_keys=("lives",),
        call=f"fxrl.envs.atari({', '.join(shown)}",
    )


class ScreenPreprocess(Transform):
    """uint8 screens ``[..., H, W, 3]`` -> float ``[..., C, height, width]`` in [0, 1]:
    nearest-resize by indexing the uint8 screen, then to float, / 255, and (optionally)
    luma. The same numbers as ``compose(to_tensor_image(), resize(h, w, mode),
    grayscale())``: nearest resize only picks pixels, so picking them before the
    conversion changes nothing but how many get converted."""

    def __init__(self, height: int, width: int, mode: str, gray: bool) -> None:
        modes = ("nearest", "nearest-exact")
        if mode not in modes:
            raise ValueError(unknown(mode, modes, "mode", where="screen_preprocess"))
        self.size, self.mode, self.gray = (height, width), mode, gray
        self._index: dict[tuple[int, int], tuple[Tensor, Tensor]] = {}

    def _rows_cols(self, in_h: int, in_w: int) -> tuple[Tensor, Tensor]:
        """The source row and column of each output pixel, as F.interpolate picks them."""
        if (in_h, in_w) not in self._index:
            # interpolate the coordinates themselves: exactly torch's rounding of the scale
            grid = torch.arange(max(in_h, in_w), dtype=torch.float32)
            rows = F.interpolate(grid[:in_h].view(1, 1, in_h), self.size[0], mode=self.mode)
            cols = F.interpolate(grid[:in_w].view(1, 1, in_w), self.size[1], mode=self.mode)
            self._index[in_h, in_w] = (rows.view(-1).long(), cols.view(-1).long())
        return self._index[in_h, in_w]

    def __call__(self, obs: Tensor, state: Any = None) -> Tensor:
        if obs.dtype != torch.uint8 or obs.ndim < 3 or obs.shape[-1] != 3:
            raise ValueError(
                "screen_preprocess: expects uint8 RGB screens [..., H, W, 3], got "
                f"{obs.dtype} of shape {list(obs.shape)}."
            )
        rows, cols = self._rows_cols(obs.shape[-3], obs.shape[-2])
        small = obs.index_select(-3, rows).index_select(-2, cols)  # uint8 [..., h, w, 3]
        x = small.movedim(-1, -3).float() / 255.0
        if not self.gray:
            return x
        r, g, b = x.unbind(-3)
        return (0.2989 * r + 0.587 * g + 0.114 * b).unsqueeze(-3)

    def observation_spec(self, spec: Any) -> specs.Box:
        shape = (*spec.shape[:-3], 1 if self.gray else 3, *self.size)
        return specs.Box(0.0, 1.0, shape, dtype=torch.float32)

    def __repr__(self) -> str:
        h, w = self.size
        return f"screen_preprocess({h}, {w}, {self.mode!r}, grayscale={self.gray})"


def screen_preprocess(
    height: int = 84, width: int | None = None, mode: str = "nearest", grayscale: bool = True
) -> Transform:
    """Raw uint8 screens ``[..., H, W, 3]`` to float ``[..., 1, height, width]`` (or 3
    channels without ``grayscale``), equal bit for bit to ``T.compose(T.to_tensor_image(),
    T.resize(height, width, mode), T.grayscale())``, cheaper: the nearest resize picks
    pixels of the uint8 screen before anything becomes float. Leading dims (a batch, a
    stack of frames) are kept. ``mode``: "nearest" or "nearest-exact"."""
    return ScreenPreprocess(height, height if width is None else width, mode, grayscale)
