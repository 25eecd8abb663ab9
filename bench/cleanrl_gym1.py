"""Run a CleanRL script written for gymnasium 0.29 (``cleanrl/ppo_atari.py``), unmodified
on disk, under the gymnasium 1.x installed here.

    python bench/cleanrl_gym1.py --threads 1 /path/to/cleanrl/ppo_atari.py --seed 1 ...

Everything after the script's path is the script's own command line (tyro's flags). The
shim patches what the script needs onto gymnasium's modules, then runs the file as
``__main__`` (``runpy``). The script stays CleanRL's; this file is fxrl's. What it changes,
and whether that can change what CleanRL computes:

1. ``import ale_py`` and ``gymnasium.register_envs(ale_py)``: ale-py >= 0.9 registers
   ``BreakoutNoFrameskip-v4`` and the other ids only when imported; gymnasium 0.29 loaded
   them from an entry point. Does not change what is computed. (The emulator is the
   installed ale-py's and OpenCV the installed one, not the ale-py 0.8.1 and OpenCV < 5
   CleanRL's pyproject pins: version differences, not adaptations.)
2. ``sys.path`` starts with the CleanRL checkout's root (the script's folder's parent), so
   ``cleanrl_utils.atari_wrappers`` imports, as when run from the checkout. No change.
3. ``gymnasium.wrappers.GrayScaleObservation`` (removed in 1.0): gymnasium 0.29's
   behaviour, ``cv2.cvtColor(obs, COLOR_RGB2GRAY)``, keep_dim as there. Gymnasium 1.x's
   ``GrayscaleObservation`` is not used: it weighs the channels 0.2125/0.7154/0.0721 and
   truncates, a grey that differs from OpenCV's by a level here and there. No change: the
   same pixels as under 0.29.
4. ``gymnasium.wrappers.FrameStack(env, num_stack)`` (removed in 1.0):
   ``FrameStackObservation(env, num_stack, padding_type="reset")``, which, like 0.29's,
   fills the stack with the reset frame. It returns a numpy array where 0.29 returned
   ``LazyFrames``; the script converts either with ``torch.Tensor``, to the same numbers.
   ``lz4_compress=True`` is refused (the script does not use it). No change.
5. ``gymnasium.vector.SyncVectorEnv``: 0.29's autoreset and info layout. Gymnasium 1.x's
   default (``NEXT_STEP``) resets an ended env on the *next* ``step`` call, ignoring that
   call's action and returning reward 0: under it, the script would store a transition
   per ended episode that 0.29 never produced, a change in what is learnt. The shim's
   vector env uses ``autoreset_mode=SAME_STEP``, 0.29's rule (the env resets within the
   step that ended it; the returned observation is the new episode's first). Its infos
   are 0.29's layout: ``final_info`` and ``final_observation`` as object arrays with one
   entry per env (the ended env's info dict or last observation, ``None`` elsewhere) and
   masks ``_final_info``, ``_final_observation``; 1.x gives ``final_info`` as a dict of
   arrays, over which the script's ``for info in infos["final_info"]`` would loop over
   key names and print no episode. No change to learning; the episode prints come back.
6. ``torch.set_num_threads(threads)`` before the script runs (it sets none); the bench
   also sets ``OMP_NUM_THREADS``. Changes the speed only.
7. With ``--stamp``, each line the script prints to stdout starts with the time it was
   written (``time.perf_counter()``, seconds), so that a bench can time a window of
   iterations from the ``SPS:`` lines exactly (CleanRL's SPS is an int and counts from
   the script's start). The output only.

Unchanged and used as they are: ``ResizeObservation`` (1.x's is 0.29's,
``cv2.resize(..., INTER_AREA)``; both need OpenCV, ``opencv-python-headless``),
``RecordEpisodeStatistics`` (its ``episode["r"]`` is a float in 1.x, a 1-element array
in 0.29: the script prints ``episodic_return=12.0`` instead of ``[12.]``) and
``cleanrl_utils.atari_wrappers`` (written against gymnasium's public API: ``unwrapped``,
``np_random``).
"""

from __future__ import annotations

import argparse
import runpy
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np

ADAPTATIONS = (
    "ale_py imported and registered (BreakoutNoFrameskip-v4 and the other ids)",
    "sys.path: the CleanRL checkout's root first (cleanrl_utils)",
    "gymnasium.wrappers.GrayScaleObservation: 0.29's cv2.cvtColor(RGB2GRAY)",
    "gymnasium.wrappers.FrameStack: FrameStackObservation(padding_type='reset'), ndarray",
    "gymnasium.vector.SyncVectorEnv: autoreset SAME_STEP (0.29's) and 0.29's final_info layout",
    "torch.set_num_threads(--threads)",
    "--stamp: stdout lines start with time.perf_counter()",
)


class GrayScaleObservation(gymnasium.ObservationWrapper):
    """Gymnasium 0.29's grey conversion: OpenCV's RGB to grey, ``[H, W]`` (or ``[H, W,
    1]`` with ``keep_dim``) uint8."""

    def __init__(self, env: gymnasium.Env, keep_dim: bool = False) -> None:
        super().__init__(env)
        space = env.observation_space
        if not (isinstance(space, gymnasium.spaces.Box) and space.shape[-1:] == (3,)):
            raise ValueError(f"GrayScaleObservation: an RGB Box [H, W, 3] expected, got {space}")
        self.keep_dim = keep_dim
        shape = space.shape[:2] + ((1,) if keep_dim else ())
        self.observation_space = gymnasium.spaces.Box(0, 255, shape, np.uint8)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        import cv2

        grey = cv2.cvtColor(observation, cv2.COLOR_RGB2GRAY)
        return grey[..., None] if self.keep_dim else grey


def FrameStack(env: gymnasium.Env, num_stack: int, lz4_compress: bool = False) -> gymnasium.Env:
    """Gymnasium 0.29's ``FrameStack`` (a class there, hence the name) as 1.x's
    ``FrameStackObservation``: the last ``num_stack`` observations, the reset frame
    repeated at a reset."""
    if lz4_compress:
        raise ValueError("FrameStack(lz4_compress=True): not supported by the gymnasium 1.x shim")
    return gymnasium.wrappers.FrameStackObservation(env, num_stack, padding_type="reset")


def one_env_info(info: dict[str, Any], i: int) -> dict[str, Any]:
    """Env ``i``'s own info dict out of a vector env's batched infos (1.x's layout: each
    key an array over envs with a mask ``_key``; nested dicts batched alike)."""
    out = {}
    for key, value in info.items():
        if key.startswith("_"):
            continue
        mask = info.get(f"_{key}")
        if mask is not None and not mask[i]:
            continue
        out[key] = one_env_info(value, i) if isinstance(value, dict) else value[i]
    return out


def infos_029(infos: dict[str, Any], num_envs: int) -> dict[str, Any]:
    """1.x ``SAME_STEP`` infos in 0.29's layout: ``final_info`` and ``final_observation``
    as object arrays over envs (``None`` where the env did not end), with their masks."""
    if "final_info" not in infos and "final_obs" not in infos:
        return infos
    out = {k: v for k, v in infos.items() if k not in ("final_info", "_final_info",
                                                      "final_obs", "_final_obs")}  # fmt: skip
    ended = np.zeros(num_envs, dtype=bool)
    for key in ("_final_info", "_final_obs"):
        if key in infos:
            ended |= np.asarray(infos[key], dtype=bool)
    final_info = np.full(num_envs, None, dtype=object)
    final_obs = np.full(num_envs, None, dtype=object)
    for i in np.flatnonzero(ended):
        final_info[i] = one_env_info(infos.get("final_info", {}), int(i))
        final_obs[i] = infos["final_obs"][i] if "final_obs" in infos else None
    out.update(final_info=final_info, _final_info=ended, final_observation=final_obs,
               _final_observation=ended.copy())  # fmt: skip
    return out


class SyncVectorEnv(gymnasium.vector.SyncVectorEnv):
    """Gymnasium 1.x's ``SyncVectorEnv`` with 0.29's autoreset (``SAME_STEP``) and
    0.29's ``final_info`` / ``final_observation`` layout in its infos."""

    def __init__(self, env_fns: Any, **kwargs: Any) -> None:
        kwargs.setdefault("autoreset_mode", gymnasium.vector.AutoresetMode.SAME_STEP)
        super().__init__(env_fns, **kwargs)

    def step(self, actions: Any) -> tuple:
        obs, reward, terminated, truncated, infos = super().step(actions)
        return obs, reward, terminated, truncated, infos_029(infos, self.num_envs)


class StampedLines:
    """A text stream that starts each line written to it with ``time.perf_counter()``."""

    def __init__(self, out: Any) -> None:
        self.out, self.at_line_start = out, True

    def write(self, text: str) -> int:
        for piece in text.splitlines(keepends=True):
            if self.at_line_start:
                self.out.write(f"{time.perf_counter():.6f} ")
            self.out.write(piece)
            self.at_line_start = piece.endswith("\n")
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty...: the stream's
        return getattr(self.out, name)


def patch(script: str | Path | None = None) -> None:
    """Apply the adaptations (1-5 of the module's docstring) to this process."""
    import ale_py

    gymnasium.register_envs(ale_py)
    if script is not None:
        root = str(Path(script).resolve().parent.parent)
        if root not in sys.path:
            sys.path.insert(0, root)
    gymnasium.wrappers.GrayScaleObservation = GrayScaleObservation
    gymnasium.wrappers.FrameStack = FrameStack
    gymnasium.vector.SyncVectorEnv = SyncVectorEnv


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--stamp", action="store_true", help="time-stamp the script's stdout lines")
    p.add_argument("script", help="the CleanRL script, e.g. cleanrl/ppo_atari.py")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's own flags")
    a = p.parse_args(argv)
    if not Path(a.script).is_file():
        p.exit(2, f"cleanrl_gym1: no file {a.script!r} (give the path of cleanrl/ppo_atari.py)\n")
    import torch

    if a.threads is not None:
        torch.set_num_threads(a.threads)
    patch(a.script)
    print(f"cleanrl_gym1: gymnasium {gymnasium.__version__}, torch threads "
          f"{torch.get_num_threads()}, adaptations: {'; '.join(ADAPTATIONS)}",
          file=sys.stderr, flush=True)  # fmt: skip
    sys.argv = [a.script, *a.args]
    if a.stamp:
        sys.stdout = StampedLines(sys.stdout)
    runpy.run_path(a.script, run_name="__main__")


if __name__ == "__main__":
    main()
