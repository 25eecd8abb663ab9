"""fxrl.envs.atari(game, num_envs=N, driver="fxrl"): fxrl's own loop of ALE games,
checked against ale-py's C++ vector env, fxrl's atari_screen and CleanRL's game starts."""

import subprocess
import sys

import ale_py
import numpy as np
import pytest
import torch

from fxrl import envs, random
from fxrl.envs.atari import atari_screen
from fxrl.envs.host import HostEnvError

FRAMES = {"repeat_action_probability": 0.0, "frameskip": 4, "maxpool": False}


def test_without_noops_or_fire_the_games_are_ale_pys_vector_envs_step_for_step():
    # ale-py's raw screens through atari_screen (what an exported policy computes) must be
    # the driver's newest frame; rewards, ends, lives and the first frames of new games
    # must be ale-py's. Where a game ends inside a step, ale-py reports the screen of the
    # step before (its frame grab comes after the end check); the driver reports the
    # screen at the end.
    kw = {**FRAMES, "max_num_frames_per_episode": 640}  # truncations as well as game overs
    cpp = envs.atari("Breakout", num_envs=2, **kw)
    ours = envs.atari("Breakout", num_envs=2, driver="fxrl", preprocess="ale", **kw)
    screen = atari_screen()
    (s1, t1), (s2, t2) = cpp.reset(random.key(0)), ours.reset(random.key(0))
    assert torch.equal(screen(t1.obs)[:, 0], t2.obs[:, 3])
    assert (t2.obs[:, :3] == 0).all()  # a new game's stack is padded with zeros, as ale-py's
    ended = {"terminated": 0, "truncated": 0}
    for a in random.randint(random.key(1), (500, 2), 0, 4):
        before = t2.info.get("next_obs", t2.obs)
        (s1, t1), (s2, t2) = cpp.step(s1, a), ours.step(s2, a)
        for field in ("reward", "terminated", "truncated"):
            assert torch.equal(getattr(t1, field), getattr(t2, field)), field
        assert torch.equal(t1.info["lives"], t2.info["lives"])
        assert torch.equal(screen(t1.info["next_obs"])[:, 0], t2.info["next_obs"][:, 3])
        new = t1.terminated | t1.truncated
        assert torch.equal(screen(t1.obs)[~new, 0], t2.obs[~new, 3])
        assert torch.equal(screen(t1.obs)[new, 0], before[new, 3])  # ale-py: the step before
        assert (t2.info["next_obs"][new, :3] == 0).all()
        for field in ended:
            ended[field] += int(getattr(t1, field).sum())
    assert ended["terminated"] > 0 and ended["truncated"] > 0  # both kinds of end were seen
    cpp.close(), ours.close()


def _start_frames(seed: int, noops: int, fire: bool) -> int:
    """Emulator frames a game of the driver took before its first observation."""
    env = envs.atari("Breakout", num_envs=1, driver="fxrl", preprocess="ale",
                     noop_reset=noops, fire_reset=fire, **FRAMES)  # fmt: skip
    env.reset(random.key(seed))
    ale = env.gymnasium_env.games[0]
    frames = ale.getEpisodeFrameNumber()
    env.close()
    return frames


def test_games_start_as_cleanrls_wrappers_start_them():
    # NoopResetEnv: 1..30 NOOP frames; FireResetEnv: a FIRE step, then a step of action 2
    # (4 frames each); the count comes from the seed, so a reset key replays its start.
    base = _start_frames(0, 0, False)
    counts = [_start_frames(s, 30, True) - base - 8 for s in range(12)]
    assert all(1 <= c <= 30 for c in counts)
    assert len(set(counts)) >= 6  # the starts vary
    assert _start_frames(3, 30, True) - base - 8 == counts[3]


def test_fire_reset_serves_the_ball_before_the_agent_acts():
    # Breakout's ball appears once FIRE is pressed: with fire_reset the first frames
    # differ from those of a game where nothing was pressed
    frames = {}
    for fire in (False, True):
        env = envs.atari("Breakout", num_envs=1, driver="fxrl", preprocess="ale",
                         fire_reset=fire, **FRAMES)  # fmt: skip
        state, ts = env.reset(random.key(0))
        for _ in range(6):
            state, ts = env.step(state, torch.zeros(1, dtype=torch.int64))
        frames[fire] = ts.obs
        env.close()
    assert not torch.equal(frames[False], frames[True])


def test_the_same_key_gives_the_same_games():
    def run() -> list[torch.Tensor]:
        env = envs.atari("Breakout", num_envs=2, driver="fxrl", preprocess="ale",
                         noop_reset=30, fire_reset=True, **FRAMES)  # fmt: skip
        state, ts = env.reset(random.key(7))
        out = [ts.obs]
        for a in random.randint(random.key(8), (40, 2), 0, 4):
            state, ts = env.step(state, a)
            out.append(ts.obs)
        env.close()
        return out

    first, second = run(), run()
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))


def test_maxpool_takes_the_brighter_of_the_last_two_frames():
    env = envs.atari("Breakout", num_envs=1, driver="fxrl", preprocess="ale",
                     **{**FRAMES, "maxpool": True})  # fmt: skip
    games = env.gymnasium_env
    state, ts = env.reset(random.key(0))
    state, ts = env.step(state, torch.ones(1, dtype=torch.int64))
    last, before = games.screens[0, 1], games.screens[0, 0]
    pooled = torch.from_numpy(np.maximum(last, before))
    expected = atari_screen()(pooled.unsqueeze(-1).expand(-1, -1, 3).contiguous())
    assert torch.equal(ts.obs[0, 3], expected[0])
    env.close()


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"driver": "cpp"}, "driver must be 'ale'"),
        ({"driver": "fxrl", "asynchronous": True}, "no asynchronous"),
        ({"driver": "fxrl", "stack_num": 2}, "with raw screens"),
        ({"driver": "fxrl", "preprocess": "ale", "num_envs": 0}, "num_envs must be a positive"),
        ({"driver": "fxrl", "preprocess": "ale", "episodic_life": True}, "no episodic_life"),
        ({"driver": "fxrl", "preprocess": "ale", "grayscale": False}, "unknown arguments"),
        ({"driver": "fxrl", "preprocess": "ale", "stack_pad": "first"}, "stack_pad must be"),
        ({"driver": "fxrl", "preprocess": "ale", "life_reset": 1}, "life_reset must be True"),
        ({"preprocess": "ale", "life_reset": True}, "life_reset is a setting of fxrl's loop"),
        ({"driver": "fxrl", "stack_pad": "repeat"}, "with raw screens"),
        ({"driver": "fxrl", "preprocess": "ale", "processes": 0}, "processes must be an int"),
        ({"processes": 2}, "processes is a setting of fxrl's loop"),
    ],
)
def test_bad_driver_arguments_say_what_to_give(kwargs, words):
    with pytest.raises((ValueError, TypeError), match=words) as info:
        envs.atari("Breakout", **{"num_envs": 2, **kwargs})
    assert "\n" not in str(info.value)


def test_raw_screens_are_ale_pys_raw_screens_and_atari_screen_makes_the_frames():
    kw = {**FRAMES, "max_num_frames_per_episode": 400}
    raw = envs.atari("Breakout", num_envs=2, driver="fxrl", **kw)
    pre = envs.atari("Breakout", num_envs=2, driver="fxrl", preprocess="ale", **kw)
    cpp = envs.atari("Breakout", num_envs=2, **kw)
    assert tuple(raw.observation_spec.shape) == (210, 160, 3)
    (s1, t1), (s2, t2), (s3, t3) = (
        raw.reset(random.key(0)),
        pre.reset(random.key(0)),
        cpp.reset(random.key(0)),
    )
    for a in random.randint(random.key(2), (120, 2), 0, 4):
        (s1, t1), (s2, t2), (s3, t3) = raw.step(s1, a), pre.step(s2, a), cpp.step(s3, a)
        assert torch.equal(atari_screen()(t1.info["next_obs"])[:, 0], t2.info["next_obs"][:, 3])
        new = t3.terminated | t3.truncated
        assert torch.equal(t1.info["next_obs"], t3.info["next_obs"])
        assert torch.equal(t1.obs[~new], t3.obs[~new])
    raw.close(), pre.close(), cpp.close()


@pytest.mark.parametrize("driver", ["ale", "fxrl"])
@pytest.mark.parametrize("actions", [[5, 0], [-1, 0], [0, 1, 2], [0.0, 1.0]])
def test_an_action_outside_the_games_set_is_refused_in_one_line(driver, actions):
    # ale-py's C++ vector env hangs on one (its worker thread throws): checked before
    env = envs.atari("Breakout", num_envs=2, driver=driver, preprocess="ale")
    state, _ = env.reset(random.key(0))
    with pytest.raises(ValueError, match=r"actions must be 2 ints in 0\.\.3") as info:
        env.step(state, torch.tensor(actions))
    assert "\n" not in str(info.value)
    state, ts = env.step(state, torch.tensor([1, 3]))  # the env is usable after
    assert ts.obs.shape == (2, 4, 84, 84)
    env.close()


def test_the_driver_is_an_ale_py_loop_of_the_games_minimal_action_set():
    env = envs.atari("Breakout", num_envs=3, driver="fxrl", preprocess="ale")
    games = env.gymnasium_env
    assert len(games.games) == 3 and all(isinstance(g, ale_py.ALEInterface) for g in games.games)
    assert env.action_spec.n == 4 and tuple(env.observation_spec.shape) == (4, 84, 84)
    assert "driver='fxrl'" in repr(env)
    env.close()


def test_life_reset_and_repeat_padding_are_cleanrls_wrappers_step_for_step():
    # CleanRL's ppo_atari.py takes these wrappers from Stable-Baselines3: MaxAndSkipEnv(4),
    # EpisodicLifeEnv (a lost life ends the agent's episode; its reset takes a NOOP step),
    # FireResetEnv (a FIRE step and an action-2 step at each reset), then a stack of 4
    # that starts with its first frame repeated. The driver with maxpool, life_reset and
    # stack_pad="repeat" must give the same rewards, ends (a game over, or a lost life as
    # the agent sees it), emulator frame counts and frames (ALE's grey screen, resized as
    # ale-py resizes) on every step.
    import gymnasium
    from stable_baselines3.common.atari_wrappers import (
        EpisodicLifeEnv,
        FireResetEnv,
        MaxAndSkipEnv,
    )

    from fxrl.envs.atari_vector import AreaResize

    gymnasium.register_envs(ale_py)
    ref = gymnasium.make("ALE/Breakout-v5", frameskip=1, repeat_action_probability=0.0,
                         obs_type="grayscale")  # fmt: skip
    ref = FireResetEnv(EpisodicLifeEnv(MaxAndSkipEnv(ref, skip=4)))
    resize = AreaResize((210, 160), (84, 84))
    frames: list[torch.Tensor] = []

    def ref_stack(screen: np.ndarray, fresh: bool) -> torch.Tensor:
        small = resize(torch.from_numpy(screen)[None])[0]
        frames[:] = [small] * 4 if fresh else [*frames[1:], small]
        return torch.stack(frames)

    ours = envs.atari("Breakout", num_envs=1, driver="fxrl", preprocess="ale", fire_reset=True,
                      repeat_action_probability=0.0, maxpool=True, life_reset=True,
                      stack_pad="repeat")  # fmt: skip
    ale = ours.gymnasium_env.games[0]
    obs, _ = ref.reset(seed=0)
    state, ts = ours.reset(random.key(0))
    assert torch.equal(ts.obs[0], ref_stack(obs, True))
    lives, seen = 5, {"lost": 0, "over": 0}
    for a in random.randint(random.key(3), (3000,), 0, 4).tolist():
        obs, reward, term, trunc, _ = ref.step(a)
        state, ts = ours.step(state, torch.tensor([a]))
        over = bool(ts.terminated[0] | ts.truncated[0])
        lost = int(ts.info["lives"][0]) < lives and not over
        lives = 5 if over else int(ts.info["lives"][0])
        assert float(ts.reward[0]) == reward
        assert (over or lost) == (term or trunc)
        if not (term or trunc):
            assert torch.equal(ts.obs[0], ref_stack(obs, False))
        else:
            seen["over" if over else "lost"] += 1
            obs, _ = ref.reset()
            assert torch.equal(ts.info["next_obs"][0], ref_stack(obs, True))
        assert ale.getEpisodeFrameNumber() == ref.unwrapped.ale.getEpisodeFrameNumber()
    assert seen["lost"] >= 8 and seen["over"] >= 2  # both kinds of reset were replayed
    ours.close(), ref.close()


@pytest.mark.parametrize("preprocess", ["ale", None])
def test_games_split_over_processes_are_the_games_of_one_process_bit_for_bit(preprocess):
    # 5 games over 3 processes (shares of 2, 2 and 1): every game keeps its seed, its
    # no-op draws and its frames, so rewards, ends, lives, frames and the final frames of
    # ended games are those of one process; game overs, truncations and lost lives occur
    kw = {**FRAMES, "max_num_frames_per_episode": 600, "noop_reset": 30, "fire_reset": True}
    if preprocess:
        kw = {**kw, "preprocess": preprocess, "life_reset": True, "stack_pad": "repeat"}
    one = envs.atari("Breakout", num_envs=5, driver="fxrl", **kw)
    split = envs.atari("Breakout", num_envs=5, driver="fxrl", processes=3, **kw)
    assert split.gymnasium_env.sizes == [2, 2, 1]
    (s1, t1), (s2, t2) = one.reset(random.key(3)), split.reset(random.key(3))
    assert torch.equal(t1.obs, t2.obs)
    seen = {"terminated": 0, "truncated": 0, "lost": 0}
    for a in random.randint(random.key(4), (400, 5), 0, 4):
        lives = t1.info["lives"]
        (s1, t1), (s2, t2) = one.step(s1, a), split.step(s2, a)
        for field in ("obs", "reward", "terminated", "truncated"):
            assert torch.equal(getattr(t1, field), getattr(t2, field)), field
        assert t1.info.keys() == t2.info.keys()
        for k in t1.info:
            assert torch.equal(t1.info[k], t2.info[k]), k
        seen["terminated"] += int(t1.terminated.sum())
        seen["truncated"] += int(t1.truncated.sum())
        seen["lost"] += int((t1.info["lives"] < lives).sum())
    assert all(seen.values()), seen
    # an int seed is one per game (seed + i) in both
    (s1, t1), (s2, t2) = one.reset(random.key(5)), split.reset(random.key(5))
    assert torch.equal(t1.obs, t2.obs)
    one.close(), split.close()
    assert split.gymnasium_env.workers == []  # the workers were stopped


def test_a_split_env_reports_a_worker_that_died_in_one_line():
    env = envs.atari("Breakout", num_envs=2, driver="fxrl", preprocess="ale", processes=2)
    state, _ = env.reset(random.key(0))
    worker = env.gymnasium_env.workers[0].process
    worker.kill()
    worker.wait()
    with pytest.raises(HostEnvError, match=r"worker process .* exited .* processes=1") as info:
        env.step(state, torch.tensor([1, 1]))
    assert "\n" not in str(info.value)
    env.close()


def test_a_split_env_works_in_a_script_without_a_main_guard(tmp_path):
    # multiprocessing's spawn would import the script again in the worker and build the
    # env there too; the worker is a fresh Python that imports only fxrl
    script = tmp_path / "play.py"
    script.write_text(
        "import torch\n"
        "from fxrl import envs, random\n"
        "env = envs.atari('Breakout', num_envs=3, driver='fxrl', preprocess='ale', processes=2)\n"
        "state, ts = env.reset(random.key(0))\n"
        "for _ in range(5):\n"
        "    state, ts = env.step(state, torch.tensor([1, 2, 3]))\n"
        "print('games', env.gymnasium_env.sizes, tuple(ts.obs.shape))\n"
        "env.close()\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "games [2, 1] (3, 4, 84, 84)" in done.stdout


@pytest.mark.parametrize(
    ("cores", "threads", "processes"), [(2, 1, 2), (2, 2, 1), (8, 4, 2), (1, 1, 1)]
)
def test_ale_ids_split_the_games_only_onto_a_core_torch_leaves_free(
    monkeypatch, cores, threads, processes
):
    from fxrl.algorithms import host
    from fxrl.envs.atari_games import _Games, _SplitGames

    monkeypatch.setattr(host.os, "cpu_count", lambda: cores)
    monkeypatch.setattr(host.torch, "get_num_threads", lambda: threads)
    assert host.ale_processes() == processes
    env = host.make_env("ale:Breakout", 2)
    assert isinstance(env.gymnasium_env, _SplitGames if processes == 2 else _Games)
    env.close()


def test_a_workers_failure_reaches_the_parent_on_one_line():
    from fxrl.envs.atari_games import _one_line

    assert _one_line(ValueError("no ROM\n  at line 3")) == "ValueError: no ROM at line 3"
