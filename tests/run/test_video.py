"""Videos of an agent: read back with imageio and compared with renders replayed by hand."""

import os
import resource

import numpy as np
import pytest
import torch

from fxrl import envs, random
from fxrl.algorithms import ppo
from fxrl.cli import main
from fxrl.run import video
from fxrl.run.checkpoint import WriteError
from fxrl.run.evaluate import load_run, seed_params
from fxrl.run.loop import train

iio = pytest.importorskip("imageio.v3")
from PIL import Image  # noqa: E402  (Pillow comes with matplotlib)

FPS = 25  # 40 ms: a whole number of the GIF format's 10 ms ticks


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """One PPO update on CartPole (eager, seconds): an agent whose greedy episodes are
    short, which is all a video test needs."""
    d = tmp_path_factory.mktemp("video") / "run"
    train("ppo", ppo.Config(env="CartPole-v1", total_steps=512), d, quiet=True, compile=False)
    return d


def replay(run_dir, episodes, max_steps):
    """The greedy agent's frames, played by hand: render the state, act, step; an episode
    cut at ``max_steps`` is followed by a reset from ``fold_in(key, episode)``."""
    info, algo, state, _ = load_run(run_dir)
    params = seed_params(state, 0)
    env = envs.make(info["config"].env)
    key = random.key(0)
    state, ts = env.reset(key)
    obs, frames, lengths = ts.obs, [], []
    for episode in range(episodes):
        length, done = 0, False
        while not done and length < max_steps:
            frames.append(env.render(state).numpy())
            with torch.no_grad():
                action = algo.policy(params, obs[None], mode="mode")[0]
            state, ts = env.step(state, action)
            length += 1
            done = bool(ts.done)
            obs = ts.info["next_obs"]
        if not done:
            state, ts = env.reset(random.fold_in(key, episode + 1))
            obs = ts.obs
        lengths.append(length)
    return np.stack(frames), lengths


def gif_frames(path):
    """The GIF's frames, each repeated as often as its duration says (Pillow's writer
    stores a run of identical frames once, shown longer)."""
    frames = iio.imread(path, index=None)[..., :3]
    counts = []
    with Image.open(path) as im:
        for i in range(im.n_frames):
            im.seek(i)
            counts.append(round(im.info["duration"] / (1000 / FPS)))
    return np.repeat(frames, counts, axis=0)


def test_gif_of_a_run_holds_exactly_the_rendered_states_of_its_episodes(run_dir, tmp_path):
    rec = video.record_run(run_dir, tmp_path / "agent.gif", episodes=2, max_steps=15, fps=FPS)
    expected, lengths = replay(run_dir, 2, max_steps=15)
    assert rec.lengths == lengths and rec.seed == 0
    assert rec.returns == [float(n) for n in lengths]  # CartPole: reward 1 per step
    got = gif_frames(rec.path)
    assert got.shape == expected.shape == (sum(lengths), 400, 600, 3)
    assert np.array_equal(got, expected)


def test_mp4_of_a_run_has_one_frame_per_step_close_to_the_renders(run_dir, tmp_path):
    pytest.importorskip("imageio_ffmpeg")
    rec = video.record_run(run_dir, tmp_path / "agent.mp4", episodes=1, max_steps=20, fps=FPS)
    expected, lengths = replay(run_dir, 1, max_steps=20)
    got = np.stack(list(iio.imiter(rec.path, plugin="FFMPEG")))
    assert got.shape == expected.shape and len(got) == lengths[0] == rec.lengths[0]
    # H.264 is lossy: each decoded frame is within a few levels of its render on
    # average, and nearer to its own render than to the next one (right order).
    err = np.abs(got.astype(int) - expected.astype(int)).mean(axis=(1, 2, 3))
    assert err.max() < 1.0, err
    shifted = np.abs(got[:-1].astype(int) - expected[1:].astype(int)).mean(axis=(1, 2, 3))
    assert (err[:-1] < shifted).all()


def test_cli_eval_writes_the_video_and_names_it(run_dir, tmp_path, capsys):
    path = tmp_path / "cli.gif"
    with pytest.raises(SystemExit) as exit:
        main(["eval", str(run_dir), "--episodes", "1", "--video", str(path), "--threads", "1"])
    assert exit.value.code == 0
    out = capsys.readouterr().out
    frames = gif_frames(path)
    assert f"{path}: seed 0, 1 episode(s) of [{len(frames)}] steps" in out
    first, _ = envs.make("CartPole-v1").reset(random.key(0))  # the video's default key
    assert np.array_equal(frames[0], envs.make("CartPole-v1").render(first).numpy())


def test_cli_video_with_an_unsupported_extension_is_a_one_line_error(run_dir, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit:
        main(["eval", str(run_dir), "--video", str(tmp_path / "agent.avi")])
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    supported = ", ".join(video.video_extensions())
    assert f"no installed writer for '.avi'; supported: {supported}." in err
    assert not (tmp_path / "agent.avi").exists()


def test_host_env_frames_are_gymnasiums_own_renders(tmp_path):
    gymnasium = pytest.importorskip("gymnasium")
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    pytest.importorskip("pygame")
    from fxrl.envs.host import seeds_from_key

    policy = lambda obs: (obs[2] + 0.5 * obs[3] > 0).long()
    key = random.key(3)
    env = envs.gym("CartPole-v1", render_mode="rgb_array")
    rec = video.play(env, policy, key=key, max_steps=40)
    env.close()
    reference = gymnasium.make("CartPole-v1", render_mode="rgb_array")
    obs, _ = reference.reset(seed=seeds_from_key(key))
    expected = []
    for _ in range(40):
        expected.append(reference.render())
        obs, _, terminated, truncated, _ = reference.step(int(policy(torch.as_tensor(obs))))
        if terminated or truncated:
            break
    reference.close()
    assert rec.lengths == [len(expected)]
    assert np.array_equal(rec.frames, np.stack(expected))


def test_pong_frames_are_the_screens_the_agent_saw(tmp_path):
    pytest.importorskip("ale_py")
    env = envs.atari("Pong", render_mode="rgb_array")
    seen = []

    def policy(obs):
        seen.append(obs.numpy().copy())
        return torch.tensor(2)  # UP

    rec = video.record(env, policy, tmp_path / "pong.gif", max_steps=12, fps=FPS, keep_frames=True)
    env.close()
    assert rec.lengths == [12] and rec.frames.shape == (12, 210, 160, 3)
    assert np.array_equal(rec.frames, np.stack(seen))
    assert np.array_equal(gif_frames(rec.path), rec.frames)


def test_episodes_of_an_env_without_auto_reset_start_from_folded_keys():
    env = envs.make("CartPole-v1", auto_reset=False)
    rec = video.play(env, lambda obs: torch.tensor(1), key=random.key(7), episodes=2)
    first, _ = env.reset(random.fold_in(random.key(7), 1))
    start = sum(rec.lengths[:1])
    assert torch.equal(torch.from_numpy(rec.frames[start]), env.render(first))
    assert len(rec.frames) == sum(rec.lengths) and all(n < 20 for n in rec.lengths)


def test_bad_inputs_are_named():
    env = envs.make("CartPole-v1")
    with pytest.raises(ValueError, match=r"is a batch of \(2,\) envs; record one env"):
        video.play(envs.batch(env, 2), lambda obs: obs)
    host = envs.gym("CartPole-v1")
    with pytest.raises(ValueError, match="render_mode='rgb_array'"):
        video.play(host, lambda obs: torch.tensor(0))
    host.close()
    with pytest.raises(ValueError, match=r"frame 0 has shape \[4, 4\] uint8"):
        video.write_video("x.gif", [np.zeros((4, 4), np.uint8)])
    with pytest.raises(ValueError, match="episodes must be a positive int, got 0"):
        video.play(env, lambda obs: torch.tensor(0), episodes=0)


def test_episodes_of_an_auto_resetting_env_follow_on_from_its_own_reset():
    env = envs.make("CartPole-v1")
    push = lambda obs: torch.tensor(1)  # falls over in ~10 steps
    rec = video.play(env, push, key=random.key(8), episodes=2)
    state, ts = env.reset(random.key(8))
    while not bool(ts.done):  # the first episode by hand; step returns the next one's state
        state, ts = env.step(state, torch.tensor(1))
    assert torch.equal(torch.from_numpy(rec.frames[rec.lengths[0]]), env.render(state))
    assert rec.lengths[0] == int(ts.info["episode_length"]) and len(rec.lengths) == 2


def test_greedy_policy_feeds_a_recurrent_carry_back_and_resets_it_each_episode():
    from fxrl.algorithms import recurrent_ppo

    algo = recurrent_ppo.make(recurrent_ppo.Config(num_envs=2, num_steps=8, num_minibatches=1))
    params = algo.init(random.key(0)).params
    rec = video.play(algo.env, video.greedy_policy(algo, params), episodes=2, max_steps=12)
    # by hand: one batch of one env, the carry fed back, is_init on each episode's first step
    env = algo.env
    state, ts = env.reset(random.key(0))
    frames, obs = [], ts.obs
    for episode in range(2):
        carry, first, done, length = algo.initial_carry((1,)), True, False, 0
        while not done and length < 12:
            frames.append(env.render(state).numpy())
            with torch.no_grad():
                action, carry = algo.policy(params, obs[None], carry, torch.tensor([first]))
            state, ts = env.step(state, action[0])
            first, done, length = False, bool(ts.done), length + 1
            obs = ts.info["next_obs"]
        if not done:
            state, ts = env.reset(random.fold_in(random.key(0), episode + 1))
            obs = ts.obs
    assert np.array_equal(rec.frames, np.stack(frames))


def test_onnx_policy_of_a_batched_export_plays_as_the_torch_policy(tmp_path):
    # fxrl export writes programs over a batch of observations: batched=True feeds one
    # observation as a batch of one and takes the action out of it
    pytest.importorskip("onnxruntime")
    from fxrl.export import export, to_onnx

    def lean(params, obs):  # [B, 4] -> [B]
        return (obs[..., 2] + params * obs[..., 3] > 0).long()

    gain = torch.tensor(0.5)
    program = to_onnx(export(lean, gain, torch.zeros(1, 4)), tmp_path / "lean.onnx")
    env = envs.make("CartPole-v1")
    onnx = Logged(video.onnx_policy(program, batched=True))
    eager = Logged(lambda obs: lean(gain, obs[None])[0])
    recs = [video.play(env, p, key=random.key(0), max_steps=12) for p in (onnx, eager)]
    assert onnx.actions == eager.actions and set(onnx.actions) == {0, 1}
    assert np.array_equal(recs[0].frames, recs[1].frames)


def test_pong_from_a_checkpoint_and_from_its_onnx_export_gives_the_same_video(tmp_path):
    # What examples/dqn_pong_video.py does after training, on an untrained Nature DQN: the
    # params saved and read back, the greedy policy (preprocessing inside) exported; both
    # play the same key's ALE Pong, and must act alike and record the same screens.
    pytest.importorskip("ale_py")
    pytest.importorskip("onnxruntime")
    from fxrl import exploration, nn
    from fxrl import transforms as T
    from fxrl.export import export, to_onnx
    from fxrl.run import checkpoint

    preprocess = T.compose(T.to_tensor_image(), T.resize(84, "nearest"), T.grayscale())
    q = nn.atari_dqn(6, in_channels=1)

    def greedy(params, pixels):
        return exploration.q_value(q.apply(params, preprocess(pixels)))[0]

    saved = checkpoint.save(tmp_path / "pong.safetensors", q.init(random.key(1)))
    params, _ = checkpoint.load(saved, q.init(random.key(0)))
    screen = torch.zeros(210, 160, 3, dtype=torch.uint8)
    program = to_onnx(export(greedy, params, screen), tmp_path / "pong.onnx")
    recs, actions = [], []
    for name, policy in (("torch", lambda obs: greedy(params, obs)),
                         ("onnx", video.onnx_policy(program))):  # fmt: skip
        logged = Logged(policy)
        pong = envs.atari("Pong", render_mode="rgb_array")
        recs.append(video.record(pong, logged, tmp_path / f"{name}.gif", key=random.key(2),
                                 max_steps=30, fps=FPS, keep_frames=True))  # fmt: skip
        pong.close()
        actions.append(logged.actions)
    assert actions[0] == actions[1] and len(actions[0]) == 30
    assert np.array_equal(recs[0].frames, recs[1].frames)
    assert np.array_equal(gif_frames(recs[1].path), recs[1].frames)


def test_onnx_policy_refuses_a_program_that_takes_a_carry():
    class Recurrent:
        input_names = ("obs", "carry", "is_init")

    match = r"takes inputs \['obs', 'carry', 'is_init'\]; a policy of one"
    with pytest.raises(ValueError, match=match):
        video.onnx_policy(Recurrent())


class Logged:
    """``policy(obs)`` that keeps the actions it returned."""

    def __init__(self, policy):
        self.policy, self.actions = policy, []

    def __call__(self, obs):
        action = self.policy(obs)
        self.actions.append(int(action))
        return action


@pytest.mark.parametrize("ext", [".gif", ".mp4"])
def test_a_video_that_does_not_fit_leaves_the_one_there_was(tmp_path, ext):
    if ext == ".mp4":
        pytest.importorskip("imageio_ffmpeg")
    path = tmp_path / f"agent{ext}"
    video.write_video(path, np.zeros((2, 16, 16, 3), dtype=np.uint8))
    before = path.read_bytes()
    noise = np.random.default_rng(0).integers(0, 256, (40, 64, 64, 3), dtype=np.uint8)
    # a file-size limit (ulimit -f) for this process and ffmpeg, which inherits it
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) + 4096, hard))
    try:
        with pytest.raises(WriteError) as raised:
            video.write_video(path, noise)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert str(raised.value).startswith(f"could not write {path}: File too large. agent{ext} ")
    assert path.read_bytes() == before and os.listdir(tmp_path) == [path.name]
