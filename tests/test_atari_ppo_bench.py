"""bench/atari_ppo_bench.py and its gymnasium 1.x shim for CleanRL (bench/cleanrl_gym1.py),
without CleanRL and without training: the shim's 0.29 names and vector env against
references, its command line on a stand-in script, the parsing of CleanRL's lines, and
the plans (settings, budgets) against what the docs say."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("cv2")  # gymnasium's resize and 0.29's grey (opencv-python-headless)
gymnasium = pytest.importorskip("gymnasium")
pytest.importorskip("ale_py")

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
sys.path.insert(0, str(BENCH))
import atari_ppo_bench as bench  # noqa: E402
import cleanrl_gym1 as shim  # noqa: E402


class Screens(gymnasium.Env):
    """RGB screens [6, 5, 3] from a seeded generator; the episode ends after ``length``
    steps; reward = the action; obs[0, 0, 0] counts steps since the reset."""

    def __init__(self, length: int = 3) -> None:
        self.observation_space = gymnasium.spaces.Box(0, 255, (6, 5, 3), np.uint8)
        self.action_space = gymnasium.spaces.Discrete(4)
        self.length = length

    def _obs(self) -> np.ndarray:
        obs = self.np_random.integers(0, 256, (6, 5, 3), dtype=np.uint8)
        obs[0, 0, 0] = self.t
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), float(action), self.t == self.length, False, {"t": self.t}


def test_grey_is_opencvs_rgb_to_grey_as_in_gymnasium_029():
    env = shim.GrayScaleObservation(Screens())
    obs, _ = env.reset(seed=0)
    rgb, _ = Screens().reset(seed=0)
    # ITU-R BT.601 luma, as OpenCV's COLOR_RGB2GRAY rounds it (fixed point: within 1)
    want = np.rint(rgb @ np.array([0.299, 0.587, 0.114]))
    assert obs.shape == (6, 5) and obs.dtype == np.uint8
    assert np.abs(obs.astype(int) - want).max() <= 1
    assert env.observation_space.shape == (6, 5)
    kept = shim.GrayScaleObservation(Screens(), keep_dim=True)
    assert kept.reset(seed=0)[0].shape == kept.observation_space.shape == (6, 5, 1)
    # gymnasium 1.x's GrayscaleObservation is another grey: why the shim has its own
    other = gymnasium.wrappers.GrayscaleObservation(Screens()).reset(seed=0)[0]
    assert not np.array_equal(other, obs)


def test_frame_stack_repeats_the_reset_frame_then_rolls_as_in_gymnasium_029():
    env = shim.FrameStack(shim.GrayScaleObservation(Screens(length=10)), 4)
    frames = [env.reset(seed=1)[0]]
    for _ in range(5):
        frames.append(env.step(0)[0])
    single = shim.GrayScaleObservation(Screens(length=10))
    raw = [single.reset(seed=1)[0]] + [single.step(0)[0] for _ in range(5)]
    assert frames[0].shape == env.observation_space.shape == (4, 6, 5)
    assert all(np.array_equal(f, raw[0]) for f in frames[0])  # the reset frame, 4 times
    for t in range(1, 6):  # oldest first: raw[t-3..t], the reset frame before the start
        want = [raw[max(0, s)] for s in range(t - 3, t + 1)]
        assert np.array_equal(frames[t], np.stack(want))
    with pytest.raises(ValueError, match="lz4"):
        shim.FrameStack(Screens(), 4, lz4_compress=True)


def test_vector_env_resets_in_the_step_that_ended_and_reports_final_info_per_env():
    # two envs with episodes of 2 and 3 steps, against the same envs stepped one by one
    vec = shim.SyncVectorEnv([lambda: Screens(2), lambda: Screens(3)])
    refs = [Screens(2), Screens(3)]
    obs, _ = vec.reset(seed=5)
    want = [r.reset(seed=5 + i)[0] for i, r in enumerate(refs)]
    assert np.array_equal(obs, np.stack(want))
    for t in range(1, 7):
        actions = np.array([t % 4, (t + 1) % 4])
        obs, reward, terminated, _, infos = vec.step(actions)
        for i, r in enumerate(refs):
            o, rew, term, _, info = r.step(int(actions[i]))
            assert reward[i] == rew and terminated[i] == term  # no action is ignored
            if term:
                assert infos["_final_info"][i] and infos["final_info"][i] == info
                assert np.array_equal(infos["final_observation"][i], o)
                o, _ = r.reset()  # SAME_STEP: the returned obs is the new episode's first
                assert obs[i, 0, 0, 0] == 0
            elif "final_info" in infos:
                assert infos["final_info"][i] is None and not infos["_final_info"][i]
            assert np.array_equal(obs[i], o)


def test_episode_statistics_reach_cleanrls_loop_in_final_info():
    env = shim.SyncVectorEnv([lambda: gymnasium.wrappers.RecordEpisodeStatistics(Screens(2))])
    env.reset(seed=0)
    env.step(np.array([3]))
    _, _, _, _, infos = env.step(np.array([2]))
    # ppo_atari.py: for info in infos["final_info"]: if info and "episode" in info: ...
    episodes = [info["episode"] for info in infos["final_info"] if info and "episode" in info]
    assert [(float(e["r"]), int(e["l"])) for e in episodes] == [(5.0, 2)]


def test_the_shim_runs_a_script_with_the_patched_names_threads_and_stamps(tmp_path):
    # a stand-in for a CleanRL checkout: cleanrl/script.py importing cleanrl_utils
    (tmp_path / "cleanrl_utils").mkdir()
    (tmp_path / "cleanrl_utils" / "__init__.py").write_text("MARK = 'utils found'\n")
    (tmp_path / "cleanrl").mkdir()
    script = tmp_path / "cleanrl" / "script.py"
    script.write_text(
        "import sys, gymnasium as gym, torch\n"
        "from cleanrl_utils import MARK\n"
        "env = gym.make('BreakoutNoFrameskip-v4')\n"
        "env = gym.wrappers.FrameStack(gym.wrappers.GrayScaleObservation(\n"
        "    gym.wrappers.ResizeObservation(env, (84, 84))), 4)\n"
        "print(MARK, env.observation_space.shape, gym.vector.SyncVectorEnv.__mro__[1].__module__)\n"
        "print('argv', sys.argv[1:], 'threads', torch.get_num_threads())\n"
    )
    done = subprocess.run(
        [sys.executable, str(BENCH / "cleanrl_gym1.py"), "--threads", "1", "--stamp",
         str(script), "--seed", "3"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    first, second = done.stdout.splitlines()
    stamp, text = first.split(" ", 1)
    assert float(stamp) > 0 and text == "utils found (4, 84, 84) gymnasium.vector.sync_vector_env"
    assert second.split(" ", 1)[1] == "argv ['--seed', '3'] threads 1"
    assert "adaptations:" in done.stderr


def test_a_missing_script_is_one_line():
    done = subprocess.run([sys.executable, str(BENCH / "cleanrl_gym1.py"), "/no/such.py"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0
    assert "no file '/no/such.py'" in done.stderr


# Lines as ppo_atari.py prints them through the shim's --stamp (gymnasium 1.x's
# RecordEpisodeStatistics gives a float; 0.29's a 1-element array, printed "[3.]")
CAPTURED = """\
A.L.E: Arcade Learning Environment (version 0.12.1+8a8fafb)
1052.118000 global_step=904, episodic_return=0.0
1052.119000 global_step=904, episodic_return=[3.]
1054.250000 SPS: 83
1055.100000 global_step=1256, episodic_return=1.0
1066.550000 SPS: 86
1078.950000 SPS: 85
"""


def test_cleanrl_lines_parse_and_the_window_starts_after_the_first_iteration():
    sps, episodes = bench.parse_cleanrl(CAPTURED)
    assert sps == [(1054.25, 83), (1066.55, 86), (1078.95, 85)]
    assert episodes == [(904, 0.0), (904, 3.0), (1256, 1.0)]
    seconds, steps = bench.window(sps, 1024)
    assert seconds == pytest.approx(1078.95 - 1054.25) and steps == 2 * 1024
    with pytest.raises(ValueError, match="1 SPS line"):
        bench.window(sps[:1], 1024)


def test_cleanrl_episodes_fall_in_the_update_they_ended_in():
    episodes = [(8, 1.0), (1024, 3.0), (1025, 5.0), (3000, 2.0), (3072, 4.0)]
    assert bench.cleanrl_curve(episodes, 3, 1024) == [(2, 2.0), (1, 5.0), (2, 3.0)]
    assert bench.cleanrl_curve([], 2, 1024) == [(0, None), (0, None)]


def _flags(argv: list[str]) -> dict[str, str]:
    out, i = {}, 0
    while i < len(argv):
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            out[argv[i]], i = argv[i + 1], i + 2
        else:
            out[argv[i]], i = "", i + 1
    return out


def test_both_sides_get_the_documented_ppo_atari_settings():
    # docs/guide/host-envs.md: CleanRL's ppo_atari.py, 8 envs x 128 steps, 4 epochs x 4
    # minibatches, lr 2.5e-4 annealed, clip 0.1 (entropy 0.01, value 0.5, grad norm 0.5)
    page = (ROOT / "docs" / "guide" / "host-envs.md").read_text()
    assert "8 envs x 128 steps, 4 epochs x 4\nminibatches, lr 2.5e-4 annealed, clip 0.1" in page
    config = bench.fxrl_config(4096)
    assert (config.env, config.total_steps, config.num_envs, config.num_steps) == (
        "ale:Breakout", 4096, 8, 128)  # fmt: skip
    assert (config.update_epochs, config.num_minibatches, config.lr, config.anneal_lr) == (
        4, 4, 2.5e-4, True)  # fmt: skip
    assert (config.clip_eps, config.ent_coef, config.vf_coef, config.max_grad_norm) == (
        0.1, 0.01, 0.5, 0.5)  # fmt: skip
    cmd = bench.cleanrl_command("/x/cleanrl/ppo_atari.py", config, 4096, 1, threads=1)
    assert cmd[1:6] == [str(BENCH / "cleanrl_gym1.py"), "--threads", "1", "--stamp",
                        "/x/cleanrl/ppo_atari.py"]  # fmt: skip
    flags = _flags(cmd[6:])
    assert flags == {
        "--env-id": "BreakoutNoFrameskip-v4", "--seed": "1", "--total-timesteps": "4096",
        "--num-envs": "8", "--num-steps": "128", "--num-minibatches": "4",
        "--update-epochs": "4", "--learning-rate": "0.00025", "--anneal-lr": "",
        "--gamma": "0.99", "--gae-lambda": "0.95", "--clip-coef": "0.1", "--clip-vloss": "",
        "--norm-adv": "", "--ent-coef": "0.01", "--vf-coef": "0.5", "--max-grad-norm": "0.5",
        "--no-track": "", "--no-capture-video": "", "--no-cuda": "",
    }  # fmt: skip


def test_the_quick_and_full_plans():
    # --quick: 3 rounds x 3 updates; fxrl's one run holds the first update and 9 more,
    # each CleanRL process 4 iterations (its first outside the timed window)
    assert bench.plan(**bench.QUICK) == {
        "repeats": 3, "updates": 3, "steps_per_update": 1024,
        "fxrl_total_steps": 10 * 1024, "cleanrl_total_timesteps": 4 * 1024}  # fmt: skip
    assert bench.plan(**bench.FULL)["fxrl_total_steps"] == 51 * 1024
    # 2M frames = 500k env steps at 4 frames a step, rounded up to whole updates
    plan = bench.curve_plan(2_000_000)
    assert (plan["updates"], plan["env_steps"], plan["frames"]) == (489, 500_736, 2_002_944)
    assert "2,000,000 frames = 500,000 env steps at frameskip 4" in plan["note"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "--cleanrl PATH"),
        (["--cleanrl", "/no/ppo_atari.py"], "--cleanrl /no/ppo_atari.py: no such file"),
        (["--impl", "cleanrl", "--cleanrl", __file__], "needs fxrl"),
        (["--impl", "fxrl", "--updates", "0"], "must be positive"),
    ],
)
def test_bad_flags_are_one_line_before_anything_runs(argv, message):
    with pytest.raises(SystemExit) as e:
        bench.main(argv)
    text = str(e.value.code)
    assert text.startswith("atari_ppo_bench: ") and message in text and "\n" not in text


def test_the_docs_command_names_the_bench_and_its_quick_preset():
    page = (ROOT / "docs" / "benchmarks" / "training.md").read_text()
    section = page[page.index("## PPO on Atari: Breakout from pixels") :]
    assert "bench/atari_ppo_bench.py --quick" in section
    assert "bench/record.py atari_ppo_bench -- --threads 1 --cleanrl" in section
