"""ale-py's C++ vector env behind fxrl's host-env call shape, and its screen preprocessing
as an fxrl transform.

``fxrl.envs.atari(game, num_envs=N)`` builds an ``AtariVector``: N games stepped by
``ale_py.vector_env.AtariVectorEnv`` (threads in C++, one call per step for the whole
batch), raw RGB screens by default so that fxrl's transforms (the same objects as in the
exported policy) preprocess them. ``preprocess="ale"`` turns on ale-py's own C++
preprocessing instead; ``atari_screen()`` reproduces it frame by frame for the policy side.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from fxrl import specs
from fxrl._optional import require
from fxrl.envs.host import HostEnv
from fxrl.transforms import Transform

__all__ = ["AreaResize", "AtariScreen", "AtariVector", "atari_screen", "vector_settings"]

_RAW = {"img_height": 210, "img_width": 160, "grayscale": False, "stack_num": 1, "maxpool": False}
_ALE_PREPROCESSING = {"img_height": 84, "img_width": 84, "grayscale": True, "stack_num": 4,
                      "maxpool": True}  # fmt: skip


class _SameStep:
    """ale-py's ``AtariVectorEnv`` with fxrl's host-env conventions: seeds from keys as an
    int32 array, raw screens without the stack dim, and SAME_STEP auto-reset that keeps
    the step's own info. ale-py's SAME_STEP reports the new game's lives where a game
    ended, so it runs in NEXT_STEP mode and resets ended games at once (``reset_mask``):
    one extra C++ call per episode end."""

    def __init__(self, game: str, num_envs: int, raw: bool, settings: dict[str, Any]) -> None:
        vector_env = require("ale_py.vector_env", "fxrl.envs.atari(num_envs=...)")
        self.env = vector_env.AtariVectorEnv(game, num_envs, autoreset_mode="NextStep", **settings)
        self.raw, self.num_envs = raw, num_envs
        space = self.env.single_observation_space
        if raw:  # drop the stack dim of 1: [210, 160, 3] screens, as the single env's
            shape = space.shape[1:]
            space = require("gymnasium.spaces", "fxrl.envs.atari").Box(
                0, 255, shape, dtype=space.dtype
            )
        self.single_observation_space = space
        self.single_action_space = self.env.single_action_space

    def _obs(self, obs: Any) -> Any:
        return obs.reshape(obs.shape[0], *obs.shape[2:]) if self.raw else obs

    def reset(self, *, seed: Any = None, options: Any = None) -> tuple[Any, dict[str, Any]]:
        import numpy as np

        if isinstance(seed, list):  # uint32 words from the key; ALE takes int32 seeds
            seed = np.asarray([s % 2**31 for s in seed], dtype=np.int32)
        obs, info = self.env.reset(seed=seed, options=options)
        return self._obs(obs), info

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        import numpy as np

        obs, reward, terminated, truncated, info = self.env.step(actions)
        done = terminated | truncated
        if done.any():
            final = self._obs(obs)
            seeds = np.full(int(done.sum()), -1, dtype=np.int32)  # the game's stream goes on
            obs, _ = self.env.reset(seed=seeds, options={"reset_mask": done})
            info = {**info, "final_obs": final, "_final_obs": done}
        return self._obs(obs), reward, terminated, truncated, info

    def close(self) -> None:
        self.env.close()


class AtariVector(HostEnv):
    """``num_envs`` games stepped by ale-py's C++ vector env (threads in C++, one call per
    step), or by fxrl's loop of ALE games (``driver="fxrl"``); built by
    ``atari(game, num_envs=N)``."""

    def __init__(self, num_envs: int, call: str, engine: Callable[[], Any]) -> None:
        # HostEnv's own __init__ builds gymnasium vector envs of single envs; this one is
        # one object stepping all games, built by `engine` once num_envs is checked:
        # ale-py's (_SameStep) or fxrl's own loop of ALE games (fxrl.envs.atari_games)
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"{call}): num_envs must be a positive int, got {num_envs!r}.")
        self.call, self.alternative = call, ""
        self.num_envs, self.asynchronous, self.dtype = num_envs, False, torch.float32
        self._auto_reset, self.info_keys = True, ("lives",)
        self.gymnasium_env = engine()
        self.batch_shape = (num_envs,)
        self.observation_spec = specs.from_gymnasium(self.gymnasium_env.single_observation_space)
        self.action_spec = specs.from_gymnasium(self.gymnasium_env.single_action_space)
        self._discrete = False
        self._latest = None

    def _step_vector(self, state: Any, raw: Any) -> Any:
        # an action outside the game's set makes ale-py's C++ vector env throw on one of
        # its threads, which hangs the process: checked here first
        import numpy as np

        actions, n = np.asarray(raw), self.action_spec.n
        if (
            actions.shape != (self.num_envs,)
            or actions.dtype.kind not in "iu"
            or (actions < 0).any()
            or (actions >= n).any()
        ):
            shown = np.unique(actions).tolist()[:8] if actions.dtype.kind in "iuf" else "?"
            raise ValueError(
                f"{self.call}).step: actions must be {self.num_envs} ints in 0..{n - 1} (one "
                f"per game, the game's action set), got shape {list(actions.shape)} "
                f"{actions.dtype} with values {shown}."
            )
        return super()._step_vector(state, raw)


def _area_weights(n_in: int, n_out: int) -> torch.Tensor:
    """[n_out, n_in]: the share of each source pixel in each output pixel when ``n_in``
    pixels are averaged down to ``n_out`` by area (OpenCV's INTER_AREA)."""
    scale = n_in / n_out
    cpu = torch.device("cpu")  # constants, moved to the frames' device where used
    lo = torch.arange(n_out, dtype=torch.float64, device=cpu)[:, None] * scale
    j = torch.arange(n_in, dtype=torch.float64, device=cpu)[None, :]
    overlap = torch.minimum(lo + scale, j + 1) - torch.maximum(lo, j)
    return overlap.clamp(min=0) / scale


def _taps(weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[n_out, n_in] weights as ``(index [n_out * k], weight [n_out, k])``: the ``k``
    source pixels each output pixel reads (zero weights pad rows that read fewer)."""
    k = int((weights != 0).sum(1).max())
    weight, index = weights.topk(k, dim=1, sorted=False)
    return index.flatten(), weight


class AreaResize:
    """uint8 grey frames ``[..., H, W]`` -> ``[..., height, width]`` averaged by area and
    rounded half to even, in exact arithmetic: each share of
    ``_area_weights(H, h)`` is an integer over ``H`` (``h`` x the overlap), so an output
    pixel is an integer sum over ``H * W``, computed exactly (float32 while
    ``255 * H * W < 2**24``, float64 beyond) and then rounded. Equal to ale-py's C++
    resize (OpenCV's INTER_AREA) on every pixel of the frames tested, ties included."""

    def __init__(self, in_size: tuple[int, int], size: tuple[int, int]) -> None:
        (in_h, in_w), (h, w) = in_size, size
        self.size, self.denominator = size, in_h * in_w
        dtype = torch.float32 if 255 * self.denominator < 2**24 else torch.float64
        self.rows = (_area_weights(in_h, h) * in_h).round().to(dtype)
        self.cols = (_area_weights(in_w, w) * in_w).round().T.contiguous().to(dtype)
        self._taps = _taps(self.rows)  # for gathered()

    def gathered(self, frames: torch.Tensor) -> torch.Tensor:
        """``self(frames)``, the same numbers, for eager frames [N, H, W] on the host: each
        output row as the weighted sum of the few source rows it overlaps (``taps``
        gathered rows, not a dense matmul that is mostly zeros), then the columns by one
        matmul of all N frames' rows."""
        index, weight = self._taps
        h, w = self.size
        taps = weight.shape[1]
        x = frames.index_select(-2, index).to(weight.dtype).unflatten(-2, (h, taps))
        rows = x[..., 0, :] * weight[:, :1]
        for k in range(1, taps):
            rows = rows + x[..., k, :] * weight[:, k : k + 1]
        return self._rounded((rows.flatten(0, -2) @ self.cols).view(*frames.shape[:-2], h, w))

    def __call__(self, frames: torch.Tensor) -> torch.Tensor:
        rows, cols = self.rows.to(frames.device), self.cols.to(frames.device)
        total = rows @ frames.to(rows.dtype) @ cols  # exact integers
        return self._rounded(total)

    def _rounded(self, total: torch.Tensor) -> torch.Tensor:
        # total / H*W in float64 is the nearest double to the true quotient, so a tie
        # (k + 1/2, exact in binary) comes out exact and nothing else lands on one:
        # torch.round then rounds ties half to even, as OpenCV does
        return torch.round(total.double() / self.denominator).to(torch.uint8)


class AtariScreen(Transform):
    """See ``atari_screen``."""

    def __init__(self, height: int, width: int) -> None:
        self.size = (height, width)
        self._resize: dict[tuple[int, int], AreaResize] = {}  # per screen size

    def __call__(self, obs: torch.Tensor, state: Any = None) -> torch.Tensor:
        if obs.ndim < 3 or obs.shape[-1] != 3 or obs.dtype != torch.uint8:
            raise ValueError(
                f"atari_screen: expects raw [..., H, W, 3] uint8 screens, got shape "
                f"{list(obs.shape)} {str(obs.dtype).removeprefix('torch.')}."
            )
        x = obs.to(torch.float64)
        gray = (0.299 * x[..., 0] + 0.587 * x[..., 1] + 0.114 * x[..., 2]).round()
        screen = (int(obs.shape[-3]), int(obs.shape[-2]))
        if screen not in self._resize:
            self._resize[screen] = AreaResize(screen, self.size)
        return self._resize[screen](gray.to(torch.uint8)).unsqueeze(-3)

    def observation_spec(self, spec: Any) -> specs.Box:
        return specs.Box(0, 255, (*spec.shape[:-3], 1, *self.size), dtype=torch.uint8)

    def __repr__(self) -> str:
        return f"atari_screen({self.size[0]}, {self.size[1]})"


def atari_screen(height: int = 84, width: int = 84) -> AtariScreen:
    """ale-py's C++ screen preprocessing of one frame as an fxrl transform: raw RGB
    ``[..., 210, 160, 3]`` uint8 -> luma ``[..., 1, height, width]`` uint8 (ALE's
    grayscale, round(0.299 R + 0.587 G + 0.114 B), then an area resize as OpenCV's
    INTER_AREA, in exact integer arithmetic: ``AreaResize``), equal to
    ``atari(game, num_envs=N, preprocess="ale", maxpool=False)``'s frames (tested on Pong
    and Breakout) and to ``driver="fxrl"``'s. Put it in front of a policy trained on that
    preprocessing."""
    return AtariScreen(height, width)


def vector_settings(
    game: str, preprocess: str | None, frameskip: Any, obs_type: str, kwargs: dict[str, Any]
) -> tuple[bool, dict[str, Any]]:
    if preprocess not in (None, "ale"):
        raise ValueError(
            f"fxrl.envs.atari: preprocess must be None (raw RGB screens, preprocessed by "
            f"fxrl.transforms) or 'ale' (ale-py's C++ preprocessing), got {preprocess!r}."
        )
    if not isinstance(frameskip, int) or obs_type != "rgb":
        raise ValueError(
            f"fxrl.envs.atari({game!r}, num_envs=...): ale-py's vector env takes an int "
            f"frameskip and RGB screens (got frameskip={frameskip!r}, obs_type={obs_type!r}); "
            "for these, use gymnasium's vector env: asynchronous=True."
        )
    base = dict(_ALE_PREPROCESSING if preprocess == "ale" else _RAW)
    unknown = set(kwargs) - set(_ALE_PREPROCESSING) - {"num_threads", "thread_affinity_offset"}
    if unknown:
        raise TypeError(
            f"fxrl.envs.atari({game!r}, num_envs=...): unknown arguments {sorted(unknown)} "
            f"for ale-py's vector env; it takes {sorted(_ALE_PREPROCESSING)}, num_threads."
        )
    base.update(kwargs)
    raw = preprocess is None and base == _RAW
    return raw, base
