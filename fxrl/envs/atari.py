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
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

import torch

from fxrl.envs.atari_vector import AtariVector, atari_screen, vector_settings
from fxrl.envs.host import HostEnv

__all__ = ["AtariVector", "atari", "atari_screen", "games"]


def _roms_dir() -> Path:
    import ale_py.roms

    return Path(os.environ.get("ALE_ROMS_DIR") or Path(ale_py.roms.__file__).parent)


def games() -> list[str]:
    """The games whose ROM is installed (ale-py ships them), in ale-py's snake_case."""
    import ale_py.roms

    where = _roms_dir()
    return sorted(g for g in ale_py.roms.get_all_rom_ids() if (where / f"{g}.bin").exists())


def _squash(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


def _rom(game: str) -> str:
    """ale-py's ROM id of ``game``: "Pong", "pong", "ALE/Pong-v5", "SpaceInvaders" and
    "space_invaders" all work."""
    import ale_py.roms

    name = game.removeprefix("ALE/").split("-v")[0].removesuffix("NoFrameskip")
    known = {_squash(g): g for g in ale_py.roms.get_all_rom_ids()}
    installed = games()
    rom = known.get(_squash(name))
    if rom is None:
        close = difflib.get_close_matches(name.lower(), list(known.values()), 3, cutoff=0.6)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise ValueError(
            f"fxrl.envs.atari: unknown game {game!r}.{hint} Known games: "
            f"{', '.join(installed) or 'none (no ROMs installed)'}."
        )
    if rom not in installed:
        raise FileNotFoundError(
            f"fxrl.envs.atari: no ROM for {game!r} ({rom}.bin) in {_roms_dir()}"
            f"{' (ALE_ROMS_DIR)' if os.environ.get('ALE_ROMS_DIR') else ''}. ale-py >= 0.9 "
            "ships the ROMs: reinstall it (pip install fxrl[atari]) or unset ALE_ROMS_DIR. "
            f"Games with a ROM here: {', '.join(installed) or 'none'}."
        )
    return rom


def _noop_reset_wrapper(env: Any, noops: int) -> Any:
    import gymnasium

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
    import gymnasium

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
        from ale_py.env import AtariEnv

        env = AtariEnv(self.rom, **self.kwargs)
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
    max_num_frames_per_episode: int | None = 108_000,
    obs_type: str = "rgb",
    auto_reset: bool = True,
    preprocess: str | None = None,
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
      noop_reset: when > 0, each new game starts with 1..noop_reset NOOP steps drawn from
        the env's seeded generator.
      episodic_life: a lost life ends the episode (``terminated``); the game itself
        resets only when it is over.
      max_num_frames_per_episode: truncate after this many emulator frames.
      obs_type: "rgb" ([210, 160, 3] uint8), "grayscale" ([210, 160]) or "ram" ([128]).
      auto_reset: begin the next episode inside ``step`` (``info["next_obs"]``).
      preprocess: ale-py's vector env only: ``"ale"`` for its C++ preprocessing
        (grayscale, resize to 84x84 by area, a stack of 4, max over the last two frames)
        giving [N, 4, 84, 84] uint8. An exported policy must then see the same: put
        ``atari_screen()`` and ``frame_stack(4, dim=-3)`` in front of it (exact with
        ``maxpool=False``). ``None``: raw screens, for ``fxrl.transforms``.
      kwargs: more ``ale_py.env.AtariEnv`` arguments (``mode``, ``difficulty``...); with
        ale-py's vector env: ``img_height``, ``img_width``, ``grayscale``, ``stack_num``,
        ``maxpool``, ``num_threads``.
    Returns:
      A ``HostEnv``; its TimeSteps report ``info["lives"]``.
    """
    rom = _rom(game)
    if not isinstance(noop_reset, int) or noop_reset < 0:
        raise ValueError(f"fxrl.envs.atari: noop_reset must be an int >= 0, got {noop_reset!r}.")
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
    if preprocess is not None and (num_envs is None or asynchronous):
        raise ValueError(
            f"fxrl.envs.atari({game!r}): preprocess={preprocess!r} is ale-py's vector env's "
            "C++ preprocessing: give num_envs (and no asynchronous). For one env, preprocess "
            "with fxrl.transforms (atari_screen(), frame_stack(4, dim=-3))."
        )
    if num_envs is not None and not asynchronous:
        if not auto_reset:
            raise ValueError(
                f"fxrl.envs.atari({game!r}, num_envs={num_envs}): ale-py's vector env resets "
                "ended games itself; auto_reset=False needs asynchronous=True."
            )
        raw, vector = vector_settings(game, preprocess, frameskip, obs_type, kwargs)
        vector.update(
            frameskip=frameskip,
            repeat_action_probability=repeat_action_probability,
            full_action_space=full_action_space,
            max_num_frames_per_episode=max_num_frames_per_episode or 0,
            noop_max=noop_reset,
            episodic_life=episodic_life,
            use_fire_reset=False,
            reward_clipping=False,
        )
        if preprocess:
            shown.append(f"preprocess={preprocess!r}")
        return AtariVector(rom, num_envs, raw, vector, f"fxrl.envs.atari({', '.join(shown)}")
    return HostEnv(
        _AtariMaker(rom, noop_reset, episodic_life, settings),
        num_envs=num_envs,
        asynchronous=asynchronous,
        auto_reset=auto_reset,
        dtype=torch.float32,
        info_keys=("lives",),
        call=f"fxrl.envs.atari({', '.join(shown)}",
    )
