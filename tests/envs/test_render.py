"""env.render(state): shapes, wrappers, batches, vmap/compile/export, and gymnasium's frames."""

import math
import os

import numpy as np
import pytest
import torch

import fxrl
from fxrl import envs, random, tree
from fxrl.envs import draw
from fxrl.transforms import EpisodeStats

IDS = ["CartPole-v1", "Pendulum-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Acrobot-v1"]
SIZES = {
    "CartPole-v1": (400, 600),
    "Pendulum-v1": (500, 500),
    "MountainCar-v0": (400, 600),
    "MountainCarContinuous-v0": (400, 600),
    "Acrobot-v1": (500, 500),
}


def bare(id):
    return envs.make(id, max_steps=None, auto_reset=False, episode_stats=False)


def played(env, key, steps):
    """A state after ``steps`` random actions (so the picture is not the reset's)."""
    state, _ = env.reset(key)
    for k in random.split(random.fold_in(key, 1), steps):
        state, _ = env.step(state, env.action_spec.sample(k, env.batch_shape))
    return state


@pytest.mark.parametrize("id", IDS)
def test_render_is_uint8_rgb_of_gymnasiums_size_and_make_forwards_it(id):
    env = envs.make(id)
    state = played(env, random.key(0), 5)
    image = env.render(state)
    assert image.dtype == torch.uint8
    assert image.shape == (*SIZES[id], 3)
    # make's wrappers (episode stats, auto-reset, time limit) render the inner state
    inner = state.inner.inner  # transform(episode_stats) -> auto_reset -> the bare state
    assert torch.equal(image, bare(id).render(inner))
    # something other than the background is drawn
    assert (image != 255).any(-1).sum() > 500


@pytest.mark.parametrize("id", IDS)
def test_batched_render_is_the_render_of_each_env(id):
    env = envs.batch(envs.make(id), 3)
    state = played(env, random.key(1), 4)
    images = env.render(state)
    assert images.shape == (3, *SIZES[id], 3) and images.dtype == torch.uint8
    single = envs.make(id)
    for i in range(3):
        assert torch.equal(images[i], single.render(tree.index(state, i)))
    assert not torch.equal(images[0], images[1])  # different envs, different pictures


@pytest.mark.parametrize("id", envs.registered())
def test_every_registered_env_renders_rgb_frames_and_a_batch_of_them(id):
    """Every pure env of make(), not only classic control: uint8 [H, W, 3] from make's
    wrappers, a batch [B, H, W, 3] equal to the frames of its envs one by one."""
    env = envs.batch(envs.make(id), 3)
    state = played(env, random.key(6), 3)
    frames = env.render(state)
    assert frames.dtype == torch.uint8 and frames.ndim == 4 and frames.shape[-1] == 3
    assert frames.shape[0] == 3 and min(frames.shape[1:3]) >= 8
    single = envs.make(id)
    for i in range(3):
        assert torch.equal(frames[i], single.render(tree.index(state, i)))


def test_checked_and_transformed_envs_forward_render():
    env = envs.checked(envs.transform(bare("CartPole-v1"), EpisodeStats()))
    state, _ = env.reset(random.key(2))
    assert torch.equal(env.render(state), bare("CartPole-v1").render(state.inner.inner))


def test_env_without_a_renderer_says_which_env_and_what_to_define():
    class Blank(envs.Env):
        observation_spec = action_spec = fxrl.specs.Discrete(2)

    with pytest.raises(NotImplementedError, match=r"Blank\(\) does not define render\(state\)"):
        envs.time_limit(Blank(), 5).render(None)


def test_elementwise_renders_accept_batched_states_without_vmap():
    env = bare("CartPole-v1")
    state = envs.batch(env, 2).reset(random.key(3))[0]
    direct = env.render(state)  # draw helpers broadcast over leading dims
    assert torch.equal(direct, torch.func.vmap(env.render)(state))


# ---------------------------------------------------------------- compile and export


@pytest.fixture(scope="module")
def batched_states():
    return {id: played(envs.batch(bare(id), 2), random.key(4), 3) for id in IDS}


# Compiling renders costs tens of seconds per env on a busy 2-core machine. CartPole and
# MountainCar (between them every fxrl.envs.draw helper) compile in every run, in one
# program; the other three under -m slow.
COMPILED = ("CartPole-v1", "MountainCar-v0")


def compile_renders(ids, batched_states):
    """One fxrl.compile program rendering a batch of each env of ``ids``."""
    renders = {id: torch.func.vmap(bare(id).render) for id in ids}

    def render_all(states):
        return {id: renders[id](s) for id, s in states.items()}

    return fxrl.compile(render_all)({id: batched_states[id] for id in ids})


@pytest.fixture(scope="module")
def compiled_frames(batched_states):
    return compile_renders(COMPILED, batched_states)


def check_compiled(id, state, compiled):
    eager = torch.stack([bare(id).render(tree.index(state, i)) for i in range(2)])
    assert torch.equal(torch.func.vmap(bare(id).render)(state), eager)
    # inductor may round a blended (antialiased) pixel the other way: at most 1 level
    diff = (compiled.int() - eager.int()).abs()
    assert diff.max() <= 1 and (diff > 0).float().mean() < 1e-3


@pytest.mark.parametrize("id", COMPILED)
def test_compiled_vmapped_render_equals_eager(id, batched_states, compiled_frames):
    check_compiled(id, batched_states[id], compiled_frames[id])


@pytest.mark.slow
@pytest.mark.parametrize("id", [id for id in IDS if id not in COMPILED])
def test_compiled_vmapped_render_of_the_other_envs_equals_eager(id, batched_states):
    check_compiled(id, batched_states[id], compile_renders((id,), batched_states)[id])


@pytest.fixture(scope="module")
def exported_renders(batched_states):
    """Each env's render through ``fxrl.export.export`` (traced on the batch's first state),
    exported once for the module: the torch.export and the ONNX tests share it."""
    from fxrl.export import export

    cache = {}

    def get(id):
        if id not in cache:
            env = bare(id)
            state = tree.index(batched_states[id], 0)
            cache[id] = export(lambda params, s: env.render(s), {}, state)
        return cache[id]

    return get


@pytest.mark.parametrize("id", IDS)
def test_render_exports_with_torch_export(id, batched_states, exported_renders):
    env = bare(id)
    exported = exported_renders(id)
    other = tree.index(batched_states[id], 1)  # a different state through the same program
    assert torch.equal(exported(other), env.render(other))


@pytest.mark.parametrize("id", ["CartPole-v1", "MountainCar-v0"])  # every draw helper
def test_render_runs_in_onnx_runtime_with_the_same_pixels(
    id, batched_states, exported_renders, tmp_path
):
    pytest.importorskip("onnxruntime")
    from fxrl.export import load_onnx, to_onnx

    env = bare(id)
    exported = exported_renders(id)
    program = load_onnx(str(to_onnx(exported, tmp_path / "render.onnx")), threads=1)
    other = tree.index(batched_states[id], 1)
    (frame,) = tree.leaves(program(tree.map(lambda x: x.numpy(), other)))
    assert np.array_equal(np.asarray(frame), env.render(other).numpy())


# ---------------------------------------------------------------- gymnasium's own frames


def agreement(ours: np.ndarray, theirs: np.ndarray, tolerance: int = 64) -> float:
    """Of the pixels drawn (not white) in either frame, the fraction drawn in both in
    colors within ``tolerance`` per channel: 1 for identical pictures, the overlap of the
    shapes (an IoU that also asks for the right colors) otherwise."""
    drawn_ours, drawn_theirs = (ours != 255).any(-1), (theirs != 255).any(-1)
    close = np.abs(ours.astype(int) - theirs.astype(int)).max(-1) <= tolerance
    return float((drawn_ours & drawn_theirs & close).sum() / (drawn_ours | drawn_theirs).sum())


# Correct renders score 0.90-0.95 against gymnasium on these states (they differ only in
# the one-pixel antialiased rims pygame draws around each polygon and circle); the same
# states drawn wrongly (pole or links mirrored, car at the mirrored position) score
# 0.07-0.55. 0.8 separates the two with margin on both sides.
THRESHOLD = 0.8

# (our state fields, gymnasium's state array, the same state drawn wrong)
CASES = {
    "CartPole-v1": [
        ({"x": 0.0, "theta": 0.2}, [0.0, 0.0, 0.2, 0.0], {"theta": -0.2}),
        ({"x": -1.5, "theta": -0.35}, [-1.5, 0.0, -0.35, 0.0], {"theta": 0.35}),
        ({"x": 1.9, "theta": 0.1}, [1.9, 0.0, 0.1, 0.0], {"x": -1.9}),
    ],
    "Pendulum-v1": [
        ({"angle": 0.7}, [0.7, 0.0], {"angle": -0.7}),
        ({"angle": -2.5}, [-2.5, 0.0], {"angle": 2.5}),
        ({"angle": 1.6}, [1.6, 0.0], {"angle": -1.6}),
    ],
    "MountainCar-v0": [
        ({"position": -0.5}, [-0.5, 0.0], {"position": -0.1}),
        ({"position": 0.4}, [0.4, 0.0], {"position": -1.0}),
        ({"position": -1.1}, [-1.1, 0.0], {"position": 0.5}),
    ],
    "MountainCarContinuous-v0": [
        ({"position": -0.2}, [-0.2, 0.0], {"position": -0.8}),
        ({"position": 0.3}, [0.3, 0.0], {"position": -0.9}),
    ],
    "Acrobot-v1": [
        ({"theta1": 0.5, "theta2": 1.0}, [0.5, 1.0, 0.0, 0.0], {"theta1": -0.5, "theta2": -1.0}),
        ({"theta1": 2.5, "theta2": -0.8}, [2.5, -0.8, 0.0, 0.0], {"theta1": -2.5, "theta2": 0.8}),
        ({"theta1": -1.2, "theta2": 0.0}, [-1.2, 0.0, 0.0, 0.0], {"theta1": 1.2}),
    ],
}


@pytest.fixture(scope="module")
def gymnasium():
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame draws off-screen
    pytest.importorskip("pygame")
    return pytest.importorskip("gymnasium")


@pytest.mark.parametrize("id", IDS)
def test_render_looks_like_gymnasiums_rgb_array_frame(id, gymnasium):
    reference = gymnasium.make(id, render_mode="rgb_array")
    reference.reset(seed=0)
    env = bare(id)
    state, _ = env.reset(random.key(5))

    def with_fields(fields):
        return state.replace(**{k: torch.tensor(v, dtype=env.dtype) for k, v in fields.items()})

    for fields, theirs, wrong in CASES[id]:
        reference.unwrapped.state = np.array(theirs)
        if id == "Pendulum-v1":
            reference.unwrapped.last_u = None  # no torque arrow: our state has no last action
        frame = reference.render()
        ours = with_fields(fields)
        assert env.render(ours).shape == frame.shape
        score = agreement(env.render(ours).numpy(), frame)
        assert score > THRESHOLD, f"{id} {fields}: agreement {score:.3f}"
        # the same check rejects a picture that is wrong (so it can fail)
        bad = agreement(env.render(with_fields({**fields, **wrong})).numpy(), frame)
        assert bad < THRESHOLD, f"{id} {fields} drawn as {wrong}: agreement {bad:.3f}"
    reference.close()


# ---------------------------------------------------------------- draw helpers


def test_polygon_fills_exactly_the_pixels_inside_a_square_either_winding():
    x, y = draw.grid(10, 10)
    square = [(2.0, 3.0), (2.0, 6.0), (5.0, 6.0), (5.0, 3.0)]
    naive = torch.tensor([[2 <= c <= 5 and 3 <= 9 - r <= 6 for c in range(10)] for r in range(10)])
    assert torch.equal(draw.polygon(x, y, square), naive)
    assert torch.equal(draw.polygon(x, y, square[::-1]), naive)


def test_circle_and_segment_match_distance_loops():
    x, y = draw.grid(12, 15)
    disc = draw.circle(x, y, 7.0, 5.0, 3.0)
    line = draw.segment(x, y, 1.0, 1.0, 12.0, 8.0, 2.0)
    for r in range(12):
        for c in range(15):
            py = 11 - r
            assert bool(disc[r, c]) == ((c - 7) ** 2 + (py - 5) ** 2 <= 3.5**2)
            # distance to the segment, clamped to its ends
            t = max(0.0, min(1.0, ((c - 1) * 11 + (py - 1) * 7) / (11**2 + 7**2)))
            d = math.hypot(c - 1 - 11 * t, py - 1 - 7 * t)
            assert bool(line[r, c]) == (d <= 1.0)


def test_rotate_turns_counterclockwise_with_y_up():
    rx, ry = draw.rotate(1.0, 0.0, torch.tensor(math.pi / 2))
    assert abs(float(rx)) < 1e-6 and abs(float(ry) - 1.0) < 1e-6


def test_bad_colors_and_sizes_are_named():
    with pytest.raises(ValueError, match=r"three ints in \[0, 255\], got \(300, 0, 0\)"):
        draw.canvas(2, 2, (300, 0, 0))
    with pytest.raises(ValueError, match="positive ints, got 0, 3"):
        draw.grid(0, 3)
