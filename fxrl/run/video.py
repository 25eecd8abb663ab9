"""Videos of an agent: play greedy episodes, keep one frame per step, write MP4 or GIF.

    from fxrl import envs
    from fxrl.run import video
    video.record_run("runs/cartpole", "cartpole.gif")              # a trained run's agent
    env = envs.make("CartPole-v1")
    rec = video.record(env, lambda obs: (obs[2] > 0).long(), "cartpole.mp4")
    rec.lengths, rec.returns                                       # per recorded episode

Pure envs are drawn by their pure ``env.render(state)``; host envs (``fxrl.envs.gym``,
``fxrl.envs.atari``, also under fxrl transforms) by their own gymnasium / ALE
``render()``, so build them with ``render_mode="rgb_array"``. Each episode gives one frame
per action: the picture of the state the agent acted on, so an episode of length ``T``
has ``T`` frames. GIFs need Pillow (a dependency of matplotlib, so always there); MP4
needs the ``video`` extra (imageio, imageio-ffmpeg): ``pip install 'fxrl[video]'``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from fxrl import random, tree
from fxrl._optional import require
from fxrl.envs.core import Env, Wrapper
from fxrl.envs.host import HostEnv
from fxrl.envs.registry import is_host_id
from fxrl.run.checkpoint import written_atomically

__all__ = [
    "Recording",
    "check_path",
    "greedy_policy",
    "onnx_policy",
    "play",
    "record",
    "record_run",
    "video_extensions",
    "write_video",
]

# Extensions ffmpeg writes with libx264 (yuv420p: plays in browsers and standard players).
FFMPEG_EXTENSIONS = (".mp4", ".mkv", ".mov")


def video_extensions() -> list[str]:
    """The file extensions that installed writers support: ``.gif`` with Pillow,
    ``.mp4``/``.mkv``/``.mov`` with imageio and imageio-ffmpeg (the ``video`` extra)."""
    found = []
    if importlib.util.find_spec("PIL") is not None:
        found.append(".gif")
    if all(importlib.util.find_spec(m) is not None for m in ("imageio", "imageio_ffmpeg")):
        found += FFMPEG_EXTENSIONS
    return found


def check_path(path: str | Path) -> Path:
    """``path`` as a Path if some installed writer supports its extension, else a
    one-line ValueError listing the extensions that are supported."""
    path = Path(path)
    ext = path.suffix.lower()
    have = video_extensions()
    if ext not in have:
        if not have:
            raise ValueError(
                f"video: cannot write {str(path)!r}: no video writer is installed. "
                "pip install 'fxrl[video]' (imageio, imageio-ffmpeg)."
            )
        wanted = " (pip install 'fxrl[video]')" if ext in FFMPEG_EXTENSIONS else ""
        raise ValueError(
            f"video: cannot write {str(path)!r}: no installed writer for "
            f"{ext or 'a path without an extension'!r}{wanted}; supported: {', '.join(have)}."
        )
    return path


def write_video(path: str | Path, frames: Iterable[np.ndarray], fps: int = 25) -> Path:
    """Write uint8 RGB ``frames`` (an array [N, H, W, 3] or any iterable of [H, W, 3]
    frames, consumed as it goes) to ``path`` at ``fps`` frames per second; the extension
    picks the format. Returns the path.

    GIFs hold each distinct frame exactly (few colors, as classic-control pictures have;
    Pillow's writer merges a frame identical to the one before it into a longer one).
    MP4s are H.264 in yuv420p, lossy, in frames of even width and height (an odd side
    is padded by one pixel of the edge color). The file is written next to its target and
    renamed into place, so a crash leaves no partial video under ``path``.
    """
    path = check_path(path)
    if not isinstance(fps, int) or fps < 1:
        raise ValueError(f"write_video: fps must be a positive int, got {fps!r}.")
    path.parent.mkdir(parents=True, exist_ok=True)
    # written beside `path` and renamed over it: a crash leaves no partial video under
    # `path`, and a write that fails (a full disk) raises WriteError leaving it as it was
    with written_atomically(path) as partial:
        writer = _Gif(partial, fps) if path.suffix.lower() == ".gif" else _Ffmpeg(partial, fps)
        try:
            count = 0
            for frame in frames:
                writer.append(_checked_frame(frame, count))
                count += 1
            if not count:
                raise ValueError("write_video: no frames to write.")
            writer.close()
        finally:
            writer.abort()
    return path


def _checked_frame(frame: Any, index: int) -> np.ndarray:
    frame = np.asarray(frame)
    if frame.ndim != 3 or frame.shape[-1] != 3 or frame.dtype != np.uint8:
        raise ValueError(
            f"write_video: frame {index} has shape {list(frame.shape)} {frame.dtype}; "
            "expected uint8 [H, W, 3] RGB."
        )
    return frame


class _Gif:
    """Pillow's GIF writer: one palette per frame from its own colors (exact for <= 256
    colors), looping forever. Pillow writes all frames at the end, so they are kept."""

    def __init__(self, path: Path, fps: int) -> None:
        self.path, self.fps, self.images = path, fps, []

    def append(self, frame: np.ndarray) -> None:
        self.images.append(_paletted(frame))

    def close(self) -> None:
        first, *rest = self.images
        first.save(
            self.path,
            save_all=True,
            append_images=rest,
            duration=round(1000 / self.fps),
            loop=0,
            optimize=False,
        )
        self.images = []

    def abort(self) -> None:
        self.images = []


def _paletted(frame: np.ndarray) -> Any:
    """A Pillow image of ``frame`` with a palette of exactly its colors when it has at
    most 256 (lossless, and much faster than Pillow's quantiser), else quantised."""
    from PIL import Image

    packed = frame.astype(np.int32)
    packed = (packed[..., 0] << 16) | (packed[..., 1] << 8) | packed[..., 2]
    colors, index = np.unique(packed, return_inverse=True)
    if len(colors) > 256:
        return Image.fromarray(frame).quantize(256)
    image = Image.fromarray(index.reshape(frame.shape[:2]).astype(np.uint8), mode="P")
    rgb = np.stack([(colors >> 16) & 255, (colors >> 8) & 255, colors & 255], -1)
    image.putpalette(rgb.astype(np.uint8).tobytes())
    return image


class _Ffmpeg:
    """H.264 in yuv420p by ffmpeg (imageio-ffmpeg's binary, the command imageio's writer
    runs), frames streamed to its stdin. Run directly so that its exit status is seen: a
    video ffmpeg could not finish (a full disk) raises instead of passing for a video."""

    def __init__(self, path: Path, fps: int) -> None:
        self.path, self.fps, self.proc, self.log = path, fps, None, None
        self.ffmpeg = require("imageio_ffmpeg", f"writing {path.suffix} videos")

    def append(self, frame: np.ndarray) -> None:
        pad = ((0, frame.shape[0] % 2), (0, frame.shape[1] % 2), (0, 0))
        frame = np.ascontiguousarray(np.pad(frame, pad, mode="edge"))
        if self.proc is None:
            self._start(frame.shape[1], frame.shape[0])
        try:
            self.proc.stdin.write(frame.tobytes())
        except BrokenPipeError:  # ffmpeg stopped: its own message says why
            self._finish()
            raise

    def _start(self, width: int, height: int) -> None:
        import subprocess
        import tempfile

        cmd = [self.ffmpeg.get_ffmpeg_exe(), "-y", "-f", "rawvideo", "-vcodec", "rawvideo",
               "-s", f"{width}x{height}", "-pix_fmt", "rgb24", "-r", str(self.fps), "-i", "-",
               "-an", "-vcodec", "libx264", "-pix_fmt", "yuv420p", "-v", "error",
               str(self.path)]  # fmt: skip
        self.log = tempfile.TemporaryFile()  # noqa: SIM115  # not a pipe: ffmpeg never blocks on it
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self.log
        )

    def close(self) -> None:
        if self.proc is not None:
            self._finish()

    def _finish(self) -> None:
        proc, log, self.proc, self.log = self.proc, self.log, None, None
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.close()
        code = proc.wait()
        log.seek(0)
        text = log.read().decode(errors="replace")
        log.close()
        if code != 0:
            raise _ffmpeg_error(self.path, code, text)

    def abort(self) -> None:
        if self.proc is not None:  # what ffmpeg wrote is removed with the partial file
            self.proc.kill()
            self.proc.wait()
            self.log.close()
            self.proc = self.log = None


def _ffmpeg_error(path: Path, code: int, text: str) -> Exception:
    """ffmpeg's failure as an OSError with the errno its message names (a full disk, a
    file-size limit, permissions), else a RuntimeError quoting its last line."""
    import errno
    import os
    import signal

    if code == -signal.SIGXFSZ:  # a file-size limit (subprocesses restore its default action)
        text += os.strerror(errno.EFBIG)
    for number in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EACCES, errno.EROFS):
        if os.strerror(number) in text:
            return OSError(number, os.strerror(number), str(path))
    last = text.strip().splitlines()[-1] if text.strip() else "no message"
    return RuntimeError(f"video: ffmpeg failed writing {path} (exit status {code}): {last}")


# ------------------------------------------------------------------------------ playing


@dataclasses.dataclass
class Recording:
    """What ``record`` or ``play`` did.

    Attributes:
      frames: uint8 [sum(lengths), H, W, 3], one per step (``None`` once written by
        ``record``, unless ``keep_frames=True``).
      lengths: steps of each episode played.
      returns: undiscounted return of each episode.
      path: the video written (``None`` from ``play``).
      seed: the run's agent that played (``record_run`` only).
    """

    frames: np.ndarray | None
    lengths: list[int]
    returns: list[float]
    path: Path | None = None
    seed: int | None = None


def _host(env: Env) -> HostEnv | None:
    base = env.unwrapped() if isinstance(env, Wrapper) else env
    return base if isinstance(base, HostEnv) else None


def _frame_source(env: Env) -> Callable[[Any], np.ndarray]:
    """``frame(state) -> uint8 [H, W, 3]`` for ``env``: its pure render, or the host
    env's own."""
    if env.batch_shape != ():
        raise ValueError(
            f"video: {env!r} is a batch of {env.batch_shape} envs; record one env "
            "(fxrl.envs.make(id), or a host env without num_envs)."
        )
    host = _host(env)
    if host is None:

        @torch.no_grad()
        def pure(state: Any) -> np.ndarray:
            return env.render(state).numpy()

        return pure
    mode = getattr(host.gymnasium_env, "render_mode", None)
    if mode != "rgb_array":
        raise ValueError(
            f"video: {host!r} was built with render_mode={mode!r}, so it gives no frames; "
            f"build it with render_mode='rgb_array': {host.call}, render_mode='rgb_array')."
        )
    return lambda state: np.ascontiguousarray(host.gymnasium_env.render(), dtype=np.uint8)


def _episodes(
    env: Env, policy: Callable[[Any], Any], key: Tensor, episodes: int, max_steps: int
) -> Iterator[tuple[np.ndarray, int, float]]:
    """Yield ``(frame, episode, reward)`` for every step of ``episodes`` episodes."""
    frame = _frame_source(env)
    state, ts = env.reset(key)
    obs = ts.obs
    for episode in range(episodes):
        if callable(getattr(policy, "reset", None)):
            policy.reset()  # e.g. a recurrent policy's carry starts over
        for _ in range(max_steps):
            picture = frame(state)
            with torch.no_grad():
                action = policy(obs)
            state, ts = env.step(state, action)
            obs = ts.obs
            done = bool(ts.terminated | ts.truncated)
            yield picture, episode, float(ts.reward)
            if done:
                break
        if episode + 1 == episodes:
            return
        if done and env.auto_resets:
            obs = ts.info["next_obs"]
        else:  # the env does not reset itself, or the episode was cut at max_steps
            state, ts = env.reset(random.fold_in(key, episode + 1))
            obs = ts.obs


def _check_counts(episodes: Any, max_steps: Any) -> None:
    if not isinstance(episodes, int) or episodes < 1:
        raise ValueError(f"video: episodes must be a positive int, got {episodes!r}.")
    if not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"video: max_steps must be a positive int, got {max_steps!r}.")


def play(
    env: Env,
    policy: Callable[[Any], Any],
    *,
    key: Tensor | None = None,
    episodes: int = 1,
    max_steps: int = 10_000,
) -> Recording:
    """Play ``episodes`` episodes of ``policy`` in ``env`` and keep one frame per step.

    Args:
      env: a pure env with a ``render`` (``fxrl.envs.make(id)``) or a host env built with
        ``render_mode="rgb_array"``; one env, not a batch.
      policy: ``policy(obs) -> action`` for one observation (no batch dim); if it has a
        ``reset()`` method it is called at the start of each episode.
      key: the env's reset key (default ``fxrl.random.key(0)``). Later episodes begin
        where the env resets itself; where it does not (or an episode was cut at
        ``max_steps``) episode ``i`` starts from ``env.reset(fold_in(key, i))``.
      episodes: episodes to play, one after the other.
      max_steps: steps after which an episode is cut (envs from ``make`` have their own
        time limit too).
    Returns:
      ``Recording(frames, lengths, returns)``.
    """
    _check_counts(episodes, max_steps)
    key = random.key(0) if key is None else key
    frames, lengths, returns = [], [0] * episodes, [0.0] * episodes
    for picture, episode, reward in _episodes(env, policy, key, episodes, max_steps):
        frames.append(picture)
        lengths[episode] += 1
        returns[episode] += reward
    return Recording(np.stack(frames), lengths, returns)


def record(
    env: Env,
    policy: Callable[[Any], Any],
    path: str | Path,
    *,
    key: Tensor | None = None,
    episodes: int = 1,
    max_steps: int = 10_000,
    fps: int = 25,
    keep_frames: bool = False,
) -> Recording:
    """Play ``episodes`` episodes (see ``play``) and write them to ``path`` as one video
    (``.gif``, ``.mp4``...: ``video_extensions()``), frames streamed to the writer as
    they are drawn. An unsupported extension fails before anything is played. Returns
    the ``Recording`` with its ``path`` (and its frames with ``keep_frames=True``)."""
    path = check_path(path)
    _check_counts(episodes, max_steps)
    key = random.key(0) if key is None else key
    lengths, returns = [0] * episodes, [0.0] * episodes
    kept: list[np.ndarray] = []

    def frames() -> Iterator[np.ndarray]:
        for picture, episode, reward in _episodes(env, policy, key, episodes, max_steps):
            lengths[episode] += 1
            returns[episode] += reward
            if keep_frames:
                kept.append(picture)
            yield picture

    written = write_video(path, frames(), fps)
    return Recording(np.stack(kept) if keep_frames else None, lengths, returns, written)


class greedy_policy:
    """``policy(obs) -> action`` for one observation from an algorithm's greedy policy
    (``mode="mode"``), keeping a recurrent policy's carry between calls (``reset()``
    starts an episode)."""

    def __init__(self, algo: Any, params: Any) -> None:
        from fxrl.run.evaluate import is_recurrent

        self.algo, self.params = algo, params
        self.recurrent = is_recurrent(algo)
        self.reset()

    def reset(self) -> None:
        """The next observation is an episode's first."""
        self.first = True
        self.carry = self.algo.initial_carry((1,)) if self.recurrent else None

    def __call__(self, obs: Any) -> Any:
        batched = tree.map(lambda x: x[None], obs)
        if self.recurrent:
            is_init = torch.full((1,), self.first)
            action, self.carry = self.algo.policy(
                self.params, batched, self.carry, is_init, mode="mode"
            )
        else:
            action = self.algo.policy(self.params, batched, mode="mode")
        self.first = False
        return tree.map(lambda x: x[0], action)


class onnx_policy:
    """``policy(obs) -> action`` for one observation from an exported ONNX policy, run in
    ONNX Runtime: what ``record`` and ``play`` take.

        pong = envs.atari("Pong", render_mode="rgb_array")
        video.record(pong, video.onnx_policy("pong.onnx"), "pong.gif")

    Args:
      program: a ``.onnx`` path (``fxrl.export.to_onnx``, ``fxrl export RUN --format
        onnx``) or a program from ``fxrl.export.load_onnx``. It must take one input, the
        observation (a recurrent export also takes a carry: play it by hand).
      batched: the program takes a batch of observations (``fxrl export`` writes
        such programs, with a dynamic batch dim): one observation goes in as a batch of
        one and the action comes out without it.
      threads: ONNX Runtime's threads when loading from a path (1: one observation at a
        time gains nothing from more).
    """

    def __init__(self, program: Any, *, batched: bool = False, threads: int = 1) -> None:
        if isinstance(program, (str, Path)):
            from fxrl.deploy import load_onnx

            program = load_onnx(program, threads=threads)
        names = getattr(program, "input_names", None)
        if names is None or len(names) != 1:
            names = None if names is None else list(names)
            raise ValueError(
                f"video.onnx_policy: the program takes inputs {names}; a policy of one "
                "observation takes exactly one (a recurrent policy's carry and is_init are "
                "not fed here)."
            )
        self.program, self.batched = program, batched

    def __call__(self, obs: Any) -> Tensor:
        x = np.asarray(obs.numpy() if isinstance(obs, Tensor) else obs)
        out = np.asarray(self.program(x[None] if self.batched else x))
        return torch.as_tensor(out[0] if self.batched else out)


def _record_host(
    algo: Any,
    params: Any,
    env_id: str,
    path: Path,
    key: Tensor | None,
    episodes: int,
    max_steps: int,
    fps: int,
) -> Recording:
    """A host run's agent in its env: gymnasium's ``rgb_array`` frames (``gymnasium:``),
    or ALE's raw screens, the policy fed the last 4 of them as the exported program is
    (``ale:``, the training dynamics; an episode is a whole game)."""
    from fxrl import envs

    key = random.key(0) if key is None else key
    prefix, _, name = env_id.partition(":")
    if prefix == "gymnasium":
        env = envs.gym(name, render_mode="rgb_array")
        try:
            return record(env, greedy_policy(algo, params), path, key=key, episodes=episodes,
                          max_steps=max_steps, fps=fps)  # fmt: skip
        finally:
            env.close()
    _check_counts(episodes, max_steps)
    lengths, returns = [0] * episodes, [0.0] * episodes
    frames = _ale_games(algo, params, env_id, key, episodes, max_steps, lengths, returns)
    return Recording(None, lengths, returns, write_video(path, frames, fps))


def _ale_games(
    algo: Any,
    params: Any,
    env_id: str,
    key: Tensor,
    episodes: int,
    max_steps: int,
    lengths: list[int],
    returns: list[float],
) -> Iterator[np.ndarray]:
    """Yield the raw screens of ``episodes`` greedy games (filling ``lengths``, ``returns``)."""
    from fxrl.algorithms.host import make_env
    from fxrl.run.export_run import _raw_screen_policy, raw_screens

    policy = _raw_screen_policy(algo.policy)
    env = make_env(env_id, 1, preprocess=None)  # raw screens, the training dynamics
    try:
        state, ts = env.reset(key)
        screen, stack = ts.obs[0], raw_screens(1)
        for game in range(episodes):
            for _ in range(max_steps):
                stack = torch.cat([stack[:, 1:], screen[None, None]], 1)  # oldest first
                with torch.no_grad():
                    action = policy(params, stack)
                state, ts = env.step(state, action)
                yield screen.numpy()
                lengths[game] += 1
                returns[game] += float(ts.reward[0])
                screen = ts.info["next_obs"][0]
                if bool(ts.terminated[0] | ts.truncated[0]):  # a new game: as ALE's, the
                    stack = raw_screens(1)  # stack starts padded with zeros
                    break
    finally:
        env.close()


class _TaskEnv:
    """``env`` whose ``reset`` runs one task's params (a task run's agent); the rest is
    ``env``'s own."""

    def __init__(self, env: Any, params: Any) -> None:
        self._env, self._params = env, params

    def reset(self, key: Tensor, params: Any = None) -> Any:
        return self._env.reset(key, self._params if params is None else params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)


def record_run(
    run_dir: str | Path,
    path: str | Path,
    *,
    episodes: int = 1,
    seed: int | None = None,
    checkpoint_name: str = "latest",
    key: Tensor | None = None,
    max_steps: int = 10_000,
    fps: int = 25,
) -> Recording:
    """Record a run's greedy agent in its pure env (what ``fxrl eval RUN --video`` does).

    Args:
      run_dir: the run directory.
      path: the video to write; its extension picks the format.
      episodes: episodes in the video, one after the other.
      seed: which agent of the run; default the one with the best latest training return.
      checkpoint_name: ``latest``, ``previous`` or ``best``.
      key: the env's reset key (default ``fxrl.random.key(0)``).
      max_steps: steps after which an episode is cut (see ``play``).
      fps: frames per second.
    """
    from fxrl.run.evaluate import load_run, seed_params
    from fxrl.run.export_run import best_seed

    path = check_path(path)
    info, algo, state, meta = load_run(run_dir, checkpoint_name)
    seed = best_seed(meta) if seed is None else seed
    if not 0 <= seed < info["num_seeds"]:
        raise ValueError(f"video: seed {seed} out of range; the run has {info['num_seeds']}.")
    env_id = getattr(info["config"], "env", "")
    if is_host_id(env_id):  # the host env's own frames
        rec = _record_host(algo, seed_params(state, seed), env_id, path, key, episodes,
                           max_steps, fps)  # fmt: skip
        rec.seed = seed
        return rec
    policy = greedy_policy(algo, seed_params(state, seed))
    env = algo.env
    if info["tasks"]:  # a task run's agent plays its own task
        from fxrl.run.tasks import agent_params

        env = _TaskEnv(env, tree.index(agent_params(env, info), seed))
    rec = record(env, policy, path, key=key, episodes=episodes, max_steps=max_steps, fps=fps)
    rec.seed = seed
    return rec
