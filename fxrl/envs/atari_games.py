"""fxrl's own loop over ALE games: ``fxrl.envs.atari(game, num_envs=N, driver="fxrl")``.

ale-py's C++ vector env steps all its games in one call but starts each game its own way:
with ``noop_max`` and ``use_fire_reset`` it presses FIRE for one frame and then takes
0..noop_max - 2 NOOP frames. PPO on Breakout learnt badly from those starts, and from
starts without no-ops (every game then begins at the same frame) it levelled off early
(``docs/results/atari_env_bisect.jsonl``). CleanRL's wrappers start a game otherwise:
1..30 NOOP frames (``NoopResetEnv`` on the unskipped game), then a FIRE step and a step
of action 2 (``FireResetEnv``), neither seen by the agent.

``_Games`` is a vector env of ``ale_py.ALEInterface`` games stepped one after another in
Python (about 80 us an emulator frame, so 8 games x 4 frames cost a few ms a step). It
starts games as CleanRL's wrappers do and otherwise gives what ale-py's vector env gives:
raw RGB screens, or with ``preprocess="ale"`` ALE's grey screens area-resized to 84x84
(``atari_screen``'s arithmetic) and stacked by 4 with zeros before a game's first frame;
the step's own ``lives``, and ``final_obs`` where a game ended. With ``noop_reset=0`` and
``fire_reset=False`` its rewards, lives and ends are ale-py's vector env's and its frames
are ``atari_screen`` of ale-py's screens, except the last frame of a game that ends
inside a step, where ale-py shows the step before's (tested).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import weakref
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
import torch

from fxrl._optional import require
from fxrl.envs.atari_vector import AreaResize

__all__: list[str] = []

_SETTINGS = {
    "img_height", "img_width", "stack_num", "maxpool", "life_reset", "stack_pad", "processes",
}  # fmt: skip
_RAW_SETTINGS = {"maxpool", "life_reset", "processes"}
_PADS = ("zeros", "repeat")


class _Games:
    """``num_envs`` ALE games with a gymnasium vector env's reset/step (SAME_STEP
    auto-reset: an ended game's last stack is in ``info["final_obs"]``)."""

    def __init__(
        self,
        rom: str,
        num_envs: int,
        *,
        frameskip: int,
        repeat_action_probability: float,
        full_action_space: bool,
        max_num_frames_per_episode: int,
        noop_max: int,
        fire_reset: bool,
        raw: bool = False,
        img_height: int = 84,
        img_width: int = 84,
        stack_num: int = 4,
        maxpool: bool = False,
        life_reset: bool = False,
        stack_pad: str = "zeros",
        first: int = 0,
    ) -> None:
        ale_py = require("ale_py", "fxrl.envs.atari(driver='fxrl')")
        spaces = require("gymnasium.spaces", "fxrl.envs.atari(driver='fxrl')")
        self.path = str(ale_py.roms.get_rom_path(rom))
        self.num_envs, self.frameskip, self.noop_max = num_envs, frameskip, noop_max
        self.max_frames, self.maxpool = max_num_frames_per_episode, maxpool
        self.life_reset, self.stack_pad = life_reset, stack_pad
        self.games = []
        for _ in range(num_envs):
            ale = ale_py.ALEInterface()
            ale.setLoggerMode(ale_py.LoggerMode.Error)
            ale.setFloat("repeat_action_probability", repeat_action_probability)
            ale.loadROM(self.path)
            self.games.append(ale)
        ale = self.games[0]
        actions = ale.getLegalActionSet() if full_action_space else ale.getMinimalActionSet()
        self.actions = list(actions)
        # CleanRL's FireResetEnv: games whose action 1 is FIRE and that have an action 2
        fire = fire_reset and len(actions) >= 3 and actions[1] == ale_py.Action.FIRE
        self.fire_steps = (actions[1], actions[2]) if fire else ()  # FireResetEnv's steps
        self.noop = ale_py.Action.NOOP
        height, width = ale.getScreenDims()
        self.raw = raw  # raw RGB screens [N, H, W, 3], else stacks of grey 84x84 frames
        self.resize = AreaResize((height, width), (img_height, img_width))
        self.screens = np.zeros((num_envs, 2, height, width, *((3,) if raw else ())), np.uint8)
        shape = (height, width, 3) if raw else (stack_num, img_height, img_width)
        self.stack = torch.zeros((num_envs, *shape), dtype=torch.uint8)
        self.frames = np.zeros(num_envs, dtype=np.int64)  # emulator frames since the start
        self.lives = np.zeros(num_envs, dtype=np.int32)  # after the last step
        self.fresh = np.ones(num_envs, dtype=bool)  # stacks (re)started, no frame on them yet
        # `first`: the index of game 0 among all games (a part of a _SplitGames)
        self.rngs = [np.random.default_rng(first + i) for i in range(num_envs)]
        self.single_observation_space = spaces.Box(0, 255, shape, dtype=np.uint8)
        self.single_action_space = spaces.Discrete(len(actions))

    # ---------------------------------------------------------------------------- games

    def _act(self, i: int, action: Any, frames: int) -> tuple[int, bool]:
        """``frames`` emulator frames of ``action`` in game ``i`` (fewer where the game
        ends); the reward and whether it ended. The screens of the last two frames go to
        ``self.screens[i]`` ([1] the last) where ``maxpool`` needs them."""
        ale, reward, over = self.games[i], 0, False
        for f in range(frames):
            reward += ale.act(action)
            self.frames[i] += 1
            over = ale.game_over(with_truncation=False)
            if over or self.frames[i] >= self.max_frames:
                break
            if self.maxpool and f == frames - 2:
                self._grab(i, 0)
        self._grab(i, 1)
        return reward, over

    def _grab(self, i: int, slot: int) -> None:
        if self.raw:
            self.games[i].getScreenRGB(self.screens[i, slot])
        else:
            self.games[i].getScreenGrayscale(self.screens[i, slot])

    def _start(self, i: int) -> None:
        """A new game in slot ``i``: CleanRL's NoopResetEnv, then its FireResetEnv."""
        ale = self.games[i]
        ale.reset_game()
        if self.noop_max:
            for _ in range(int(self.rngs[i].integers(1, self.noop_max + 1))):
                ale.act(self.noop)
                if ale.game_over(with_truncation=False):
                    ale.reset_game()
        ended = True
        for action in self.fire_steps:  # a step's screens: maxpool's two, or the last
            self.frames[i] = 0
            ended = self._act(i, action, self.frameskip)[1]
            if ended:
                ale.reset_game()
        if ended:  # a reset or a NOOP frame: one screen
            self._grab(i, 1)
            self.screens[i, 0] = self.screens[i, 1]
        self.frames[i] = 0
        self.stack[i], self.fresh[i] = 0, True
        self.lives[i] = ale.lives()

    def _after_life(self, i: int) -> None:
        """Game ``i`` lost a life but goes on: CleanRL's EpisodicLifeEnv steps on with a
        NOOP step, then its FireResetEnv takes a FIRE step and a step of action 2, none
        seen by the agent (their rewards are not counted); the stack starts again. A game
        that ends in them stays over, and the next step reports it."""
        for action in (self.noop, *self.fire_steps):
            if self._act(i, action, self.frameskip)[1] or self.frames[i] >= self.max_frames:
                break
        self.stack[i], self.fresh[i] = 0, True

    def _push(self, which: np.ndarray) -> None:
        """The current screens of games ``which`` resized onto their stacks (or, raw,
        as they are); a stack just (re)started gets zeros or, ``stack_pad="repeat"``, its
        first frame behind the new one."""
        every = bool(which.all())  # each step pushes every game: no gathers then
        index = torch.from_numpy(np.flatnonzero(which))
        shown = self.screens if every else self.screens[which]
        screen = torch.from_numpy(shown.max(1) if self.maxpool else shown[:, 1])
        fresh = self.fresh[which]
        self.fresh[which] = False
        if self.raw:
            self.stack[index] = screen
            return
        small = self.resize.gathered(screen).unsqueeze(1)  # [k, 1, h, w]
        if every:
            self.stack = torch.cat([self.stack[:, 1:], small], 1)
        else:
            self.stack[index] = torch.cat([self.stack[index, 1:], small], 1)
        if self.stack_pad == "repeat" and fresh.any():
            rows = torch.from_numpy(np.flatnonzero(fresh))
            self.stack[index[rows]] = small[rows].expand(-1, self.stack.shape[1], -1, -1)

    # ------------------------------------------------------------------- vector env API

    def reset(self, *, seed: Any = None, options: Any = None) -> tuple[Any, dict[str, Any]]:
        """Every game started again; ``seed`` (an int or one per game) reseeds ALE and the
        no-op counts, as gymnasium's ``AtariEnv`` does."""
        if seed is not None:
            seeds = _per_game(seed, self.num_envs)
            for i, (ale, s) in enumerate(zip(self.games, seeds, strict=True)):
                ale.setInt("random_seed", int(s) % 2**31)
                ale.loadROM(self.path)
                self.rngs[i] = np.random.default_rng(int(s))
        for i in range(self.num_envs):
            self._start(i)
        self._push(np.ones(self.num_envs, dtype=bool))
        lives = np.array([ale.lives() for ale in self.games], dtype=np.int32)
        return self.stack.numpy().copy(), {"lives": lives}

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        actions = np.asarray(actions).reshape(self.num_envs)
        n = self.num_envs
        reward = np.zeros(n, dtype=np.float32)
        terminated = np.zeros(n, dtype=bool)
        for i in range(n):
            reward[i], terminated[i] = self._act(i, self.actions[int(actions[i])], self.frameskip)
        truncated = (self.frames >= self.max_frames) & ~terminated
        lives = np.array([ale.lives() for ale in self.games], dtype=np.int32)
        done = terminated | truncated
        lost = (lives < self.lives) & ~done
        self.lives = lives.copy()
        if self.life_reset:
            for i in np.flatnonzero(lost):
                self._after_life(int(i))
        self._push(np.ones(n, dtype=bool))
        info: dict[str, Any] = {"lives": lives}
        if done.any():
            info = {**info, "final_obs": self.stack.numpy().copy(), "_final_obs": done}
            for i in np.flatnonzero(done):
                self._start(int(i))
            self._push(done)
        return self.stack.numpy().copy(), reward, terminated, truncated, info

    def close(self) -> None:
        self.games = []


def _per_game(seed: Any, num_envs: int) -> Any:
    """``seed`` as one seed per game: as given (a list, tuple or array), or an int ``s``
    as ``s, s + 1, ...``."""
    if isinstance(seed, list | tuple | np.ndarray):
        return seed
    return [seed + i for i in range(num_envs)]


class _SplitGames:
    """``num_envs`` games split over ``processes`` processes, each stepping its share with
    a ``_Games`` (this process keeps the first share): a step sends each worker its
    games' actions, steps this process's games meanwhile, and joins the results. Every
    game is the one an unsplit ``_Games`` would step (its seed, its no-op draws, its
    frames), so the results are the same, bit for bit (tested)."""

    def __init__(self, rom: str, num_envs: int, processes: int, **settings: Any) -> None:
        sizes = [len(p) for p in np.array_split(np.arange(num_envs), processes)]
        self.num_envs, self.sizes = num_envs, sizes
        self.workers: list[_Worker] = []
        self._closer = weakref.finalize(self, _stop, self.workers)
        first = sizes[0]
        for size in sizes[1:]:
            self.workers.append(_Worker(f"fxrl-ale-games-{first}", (rom, size, first, settings)))
            first += size
        self.local = _Games(rom, sizes[0], **settings)  # built while the workers start
        for worker in self.workers:
            worker.receive()  # its "ready"
        self.games = self.local.games  # this process's share
        self.single_observation_space = self.local.single_observation_space
        self.single_action_space = self.local.single_action_space

    def _parts(self, values: Any) -> list[Any]:
        return np.split(np.asarray(values), np.cumsum(self.sizes)[:-1])

    def reset(self, *, seed: Any = None, options: Any = None) -> tuple[Any, dict[str, Any]]:
        seeds = (
            [None] * len(self.sizes)
            if seed is None
            else self._parts(_per_game(seed, self.num_envs))
        )
        for worker, part in zip(self.workers, seeds[1:], strict=True):
            worker.send(("reset", None if part is None else list(part)))
        results = [self.local.reset(seed=None if seeds[0] is None else list(seeds[0]))]
        results += [worker.receive() for worker in self.workers]
        obs = np.concatenate([r[0] for r in results])
        return obs, {"lives": np.concatenate([r[1]["lives"] for r in results])}

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        parts = self._parts(np.asarray(actions).reshape(self.num_envs))
        for worker, part in zip(self.workers, parts[1:], strict=True):
            worker.send(("step", part))
        results = [self.local.step(parts[0])]
        results += [worker.receive() for worker in self.workers]
        obs, reward, terminated, truncated = (
            np.concatenate([r[k] for r in results]) for k in range(4)
        )
        info: dict[str, Any] = {"lives": np.concatenate([r[4]["lives"] for r in results])}
        if any("final_obs" in r[4] for r in results):  # a share without one: its stacks
            info["final_obs"] = np.concatenate([r[4].get("final_obs", r[0]) for r in results])
            info["_final_obs"] = np.concatenate(
                [r[4].get("_final_obs", np.zeros(len(r[1]), dtype=bool)) for r in results]
            )
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        self._closer()
        self.local.close()
        self.games = []


class WorkerError(RuntimeError):
    """A worker process of a split env failed or is gone."""

    fxrl_fix = "Build the env again; processes=1 steps every game in this process"


class _Worker:
    """A share of the games in a process of its own: a fresh Python started by
    ``subprocess`` (``multiprocessing``'s spawn would import the user's main script
    again, which fails in a script without a ``__main__`` guard), answering on one end
    of a socket pair with pickled messages; it exits when this end closes."""

    def __init__(self, name: str, args: tuple) -> None:
        self.name = name
        ours, theirs = socket.socketpair()
        # the folder fxrl is imported from (this file is fxrl/envs/atari_games.py)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (root, os.environ.get("PYTHONPATH")) if p
        )}  # fmt: skip
        code = "import sys; from fxrl.envs.atari_games import _serve; _serve(int(sys.argv[1]))"
        fd = theirs.fileno()
        self.process = subprocess.Popen(
            [sys.executable, "-c", code, str(fd)], pass_fds=(fd,), env=env
        )
        theirs.close()
        self.conn = Connection(ours.detach())
        self.send(args)

    def send(self, message: Any) -> None:
        try:
            self.conn.send(message)
        except (OSError, ValueError):  # a broken pipe: the worker is gone
            self._gone()

    def receive(self) -> Any:
        """The worker's answer; its failure (or its end) raised here, naming it."""
        _await(self.conn, SPIN_S)
        try:
            status, value = self.conn.recv()
        except (EOFError, OSError):
            self._gone()
        if status == "error":
            raise WorkerError(f"fxrl.envs.atari: worker process {self.name}: {value}")
        return value

    def _gone(self) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        raise WorkerError(
            f"fxrl.envs.atari: the worker process {self.name} stepping a share of the "
            f"games exited (exit code {self.process.returncode})"
        ) from None

    def stop(self) -> None:
        """Tell the worker to stop, and make sure it has."""
        with contextlib.suppress(OSError, ValueError):  # already gone
            self.conn.send(("close", None))
        self.conn.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# Seconds a process polls for the other's next message before it blocks. A process that
# sleeps between the steps (a few ms while the policy runs) wakes up slowly: on a 2-core
# cloud machine a step of 4 games took about 1 ms more at the worker than when it polled.
SPIN_S = 0.01


def _await(conn: Connection, seconds: float) -> None:
    """Poll ``conn`` for up to ``seconds``: return once a message is there (or not)."""
    end = time.perf_counter() + seconds
    while not conn.poll(0) and time.perf_counter() < end:
        pass


def _stop(workers: list[_Worker]) -> None:
    for worker in workers:
        worker.stop()
    workers.clear()


def _one_line(e: BaseException) -> str:
    """A worker's failure as the parent raises it: its type and message on one line."""
    return f"{type(e).__name__}: {' '.join(str(e).split())}"


def _serve(fd: int) -> None:
    """A ``_Worker``'s process: builds its games from the first message, then steps them
    on each ``("reset", seeds)`` or ``("step", actions)``; a failure goes back as its
    one-line message."""
    torch.set_num_threads(1)  # the frames' resize is small: no thread pool
    conn = Connection(fd)
    try:
        rom, num_envs, first, settings = conn.recv()
        games = _Games(rom, num_envs, first=first, **settings)
        conn.send(("ok", None))
    except Exception as e:  # reported to the parent, which raises it
        conn.send(("error", _one_line(e)))
        return
    while True:
        _await(conn, SPIN_S)
        try:
            what, value = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if what == "close":
            return
        try:
            result = games.reset(seed=value) if what == "reset" else games.step(value)
        except Exception as e:  # reported to the parent, which raises it
            conn.send(("error", _one_line(e)))
            continue
        conn.send(("ok", result))


def make_games(rom: str, num_envs: int, *, processes: int = 1, **settings: Any) -> Any:
    """``_Games``, or with ``processes > 1`` the games split over up to that many
    processes (``_SplitGames``, at least one game each)."""
    processes = min(processes, num_envs)
    if processes == 1:
        return _Games(rom, num_envs, **settings)
    return _SplitGames(rom, num_envs, processes, **settings)


def games_settings(kwargs: dict[str, Any], raw: bool, call: str) -> dict[str, Any]:
    """``kwargs`` of ``atari(..., driver="fxrl")`` checked: the frame settings it takes
    (raw screens: ``maxpool`` only)."""
    takes = _RAW_SETTINGS if raw else _SETTINGS
    unknown = set(kwargs) - takes
    if unknown:
        raise TypeError(
            f"{call}): unknown arguments {sorted(unknown)} for driver='fxrl'"
            f"{' with raw screens' if raw else ''}; it takes {sorted(takes)}."
        )
    pad = kwargs.get("stack_pad", "zeros")
    if pad not in _PADS:
        raise ValueError(
            f"{call}): stack_pad must be 'zeros' (zeros before a stack's first frame, as "
            f"ale-py's vector env) or 'repeat' (its first frame repeated, as "
            f"fxrl.transforms.frame_stack and gymnasium's FrameStackObservation), got {pad!r}."
        )
    processes = kwargs.get("processes", 1)
    if not isinstance(processes, int) or isinstance(processes, bool) or processes < 1:
        raise ValueError(
            f"{call}): processes must be an int >= 1 (the games are split over up to that "
            f"many processes), got {processes!r}."
        )
    if not isinstance(kwargs.get("life_reset", False), bool):
        shown = kwargs["life_reset"]
        raise ValueError(f"{call}): life_reset must be True or False, got {shown!r}.")
    return {**kwargs, "raw": raw}
