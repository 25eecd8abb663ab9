"""Every env of the suite (MinAtar, bsuite, misc) exports as ``fxrl.envs.make`` builds it
(time limit, auto-reset, episode stats): its step and render through ``torch.export``,
then ONNX run in ONNX Runtime, give the eager step's state, TimeStep and frame, bit for bit,
over steps that cross episode ends (a 3-step time limit, so auto-reset's selects run).

One exported program per env, shared by the tests below (module-scoped)."""

from __future__ import annotations

import pytest
import torch

from fxrl import envs, random, tree
from fxrl.envs import minatar
from fxrl.export import export, load_onnx, to_onnx
from fxrl.testing import assert_trees_close

pytest.importorskip("onnxruntime")

BSUITE = ["Catch-bsuite", "DeepSea-bsuite", "DiscountingChain-bsuite", "MemoryChain-bsuite",
          "UmbrellaChain-bsuite"]  # fmt: skip
MISC = ["BernoulliBandit-misc", "GaussianBandit-misc", "FourRooms-misc", "MetaMaze-misc",
        "PointRobot-misc"]  # fmt: skip
IDS = sorted(minatar.registered()) + BSUITE + MISC
MAX_STEPS = 3
STEPS = 8  # two episode ends at least (more where the env terminates by itself)


class Exported:
    """``make(id, max_steps=3)``'s step and render, eager, exported and in ONNX Runtime."""

    def __init__(self, id: str, folder) -> None:
        self.env = env = envs.make(id, max_steps=MAX_STEPS)
        self.start, _ = env.reset(random.key(0))

        def step(params, state, action):
            new, ts = env.step(state, action)
            return new, ts, env.render(new)

        self.step = step
        self.program = export(step, {}, self.start, self.actions()[0])
        self.onnx = load_onnx(to_onnx(self.program, folder / f"{id}.onnx"), threads=1)

    def actions(self) -> list[torch.Tensor]:
        return [self.env.action_spec.sample(random.key(100 + t)) for t in range(STEPS)]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("onnx")
    cache: dict[str, Exported] = {}

    def get(id: str) -> Exported:
        if id not in cache:
            cache[id] = Exported(id, folder)
        return cache[id]

    return get


def test_every_registered_suite_env_is_covered():
    suite = {i for i in envs.registered() if i.endswith(("-MinAtar", "-bsuite", "-misc"))}
    assert suite == set(IDS)


@pytest.mark.parametrize("id", IDS)
def test_the_exported_step_and_render_equal_the_eager_ones(id, exported):
    e = exported(id)
    state, ends = e.start, 0
    for action in e.actions():
        expected = e.step({}, state, action)
        assert_trees_close(e.program(state, action), expected, rtol=0, atol=0)
        state, ends = expected[0], ends + int(expected[1].done)
    assert ends >= 2


@pytest.mark.parametrize("id", IDS)
def test_the_step_and_render_run_in_onnx_runtime_as_in_torch(id, exported):
    e = exported(id)
    state = e.start
    for action in e.actions():
        expected = e.step({}, state, action)
        got = e.onnx(tree.map(lambda x: x.numpy(), state), action.numpy())
        got, want = tree.leaves(got), tree.leaves(expected)
        assert len(got) == len(want)
        for x, y in zip(got, want, strict=True):
            x = torch.as_tensor(x)
            assert x.dtype == y.dtype and torch.equal(x, y)
        state = expected[0]
