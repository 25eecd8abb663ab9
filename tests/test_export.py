"""fxrl.export: four policies exported to torch.export, ONNX Runtime and AOTInductor agree
with eager code; deployed ONNX files run without torch; bad input gets clear errors.

Each exported artifact is built once per module (AOTInductor compiles C++ for 5-30 s), so
the policies live in module-scoped fixtures built by ``check_export``, which already checks
agreement on hypothesis-drawn inputs; the tests then check what is special to each.
"""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from fxrl import distributions as D
from fxrl import exploration, nn, random, specs
from fxrl import transforms as T
from fxrl._errors import unknown
from fxrl.envs.atari import screen_preprocess
from fxrl.export import ExportError, export, load, load_onnx, to_aoti, to_onnx
from fxrl.testing import assert_trees_close, check_export

pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[1]

# ----------------------------------------------------------------------------- policies

# 1. The Atari DQN policy of TorchRL's export tutorial: raw screen in, action out.
PREPROCESS = T.compose(T.to_tensor_image(), T.resize(84, 84, "nearest"), T.grayscale())
DQN = nn.atari_dqn(num_actions=6, in_channels=1)
ACTIONS = specs.Discrete(6)
SCREEN = specs.Box(0, 255, shape=(210, 160, 3), dtype=torch.uint8)


def atari_policy(params, pixels, key=None, mode="mode"):
    action, _ = exploration.q_value(DQN.apply(params, PREPROCESS(pixels)))
    if mode == "random":  # a Python string, fixed when traced
        action = exploration.egreedy(key, action, ACTIONS, 0.5)
    return action


# 2. A SAC-style actor: MLP -> tanh_normal on a Box [-2, 2]^3.
ACTOR = nn.mlp(8, 2 * 3, hidden=(64, 64), activation="relu")


def sac_policy(params, obs, key=None, mode="mode"):
    loc, scale = D.normal_param_extractor(ACTOR.apply(params, obs))
    return D.draw(D.tanh_normal(loc, scale, low=-2.0, high=2.0), key, mode)


# 3. Recurrent policies: 2-layer LSTM (hidden 256) + MLP, and a GRU one.
OBS = 32
LSTM = nn.lstm(OBS, 256, num_layers=2)
GRU = nn.gru(OBS, 256, num_layers=2)
HEAD = nn.mlp(256, 5, hidden=(64, 64), activation="relu")


def recurrent_policy(core):
    def policy(params, obs, carry, is_init):
        y, carry = core.step(params["core"], obs, carry, is_init)
        return HEAD.apply(params["head"], y), carry

    def sequence(params, obs_seq, is_init_seq):
        ys, carry = core.apply(params["core"], obs_seq, None, is_init_seq)
        return HEAD.apply(params["head"], ys), carry

    policy.__name__ = sequence.__name__ = "lstm_policy" if core is LSTM else "gru_policy"
    return policy, sequence


# 4. Dict observations: nested paths name the inputs.
DICT_NET = nn.mlp(4 + 2 + 3, 3)
DICT_SPEC = specs.Composite(
    {
        "agent": specs.Composite(
            {"obs": specs.Box(-1.0, 1.0, shape=(4,)), "vel": specs.Box(-5.0, 5.0, shape=(2,))}
        ),
        "goal": specs.Box(-10.0, 10.0, shape=(3,)),
    }
)


def dict_policy(params, obs):
    x = torch.cat([obs["agent"]["obs"], obs["agent"]["vel"], obs["goal"]], -1)
    logits = DICT_NET.apply(params, x)
    return {"action": logits.argmax(-1), "logits": logits}


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("export")


@pytest.fixture(scope="module")
def dqn_params():
    return DQN.init(random.key(0))


@pytest.fixture(scope="module")
def screens():
    return SCREEN.sample(random.key(1), batch_shape=(4,))


# The random-mode policies draw with Threefry, whose 20 rounds inductor's default options
# inline into every consumer (fxrl/compile.py's docstring): their AOTI builds take
# fxrl.compile's realize_reads_threshold=1, which keeps the check (AOTI's draws equal
# eager's) and halves the C++ build.
THREEFRY_AOTI = {"realize_reads_threshold": 1}


@pytest.fixture(scope="module")
def atari_greedy(workdir, dqn_params, screens):
    return check_export(
        atari_policy, dqn_params, screens[0], spec=SCREEN, directory=workdir / "greedy"
    )


@pytest.fixture(scope="module")
def atari_egreedy(workdir, dqn_params, screens):
    return check_export(
        atari_policy,
        dqn_params,
        screens[0],
        spec=SCREEN,
        mode="random",
        directory=workdir / "egreedy",
        aoti_options=THREEFRY_AOTI,
    )


@pytest.fixture(scope="module")
def actor_params():
    return ACTOR.init(random.key(2))


@pytest.fixture(scope="module")
def sac_mode(workdir, actor_params):
    obs = torch.randn(4, 8)
    return check_export(
        sac_policy, actor_params, obs, dynamic_batch=True, directory=workdir / "sac_mode"
    )


@pytest.fixture(scope="module")
def sac_random(workdir, actor_params):
    obs = torch.randn(4, 8)
    return check_export(
        sac_policy,
        actor_params,
        obs,
        mode="random",
        directory=workdir / "sac_random",
        aoti_options=THREEFRY_AOTI,
    )


def _recurrent(core, workdir):
    policy, sequence = recurrent_policy(core)
    params = {"core": core.init(random.key(3)), "head": HEAD.init(random.key(4))}
    check = check_export(
        policy,
        params,
        torch.randn(OBS),
        core.initial_carry(()),
        torch.tensor(False),
        directory=workdir / policy.__name__,
        max_examples=5,
    )
    return check, policy, sequence, params


@pytest.fixture(scope="module")
def lstm_policy(workdir):
    return _recurrent(LSTM, workdir)


@pytest.fixture(scope="module")
def gru_policy(workdir):
    return _recurrent(GRU, workdir)


@pytest.fixture(scope="module")
def dict_obs(workdir):
    params = DICT_NET.init(random.key(5))
    example = DICT_SPEC.sample(random.key(6))
    check = check_export(dict_policy, params, example, spec=DICT_SPEC, directory=workdir / "dict")
    return check, params, example


# ----------------------------------------------------------------------------- 1. Atari


def test_atari_dqn_policy_reads_raw_screens_and_bakes_in_its_params(atari_greedy):
    exported = atari_greedy.exported
    signature = exported.program.graph_signature
    assert list(signature.user_inputs) == ["pixels"]
    assert len(signature.buffers) == 10  # 3 convs + 2 dense, w and b each
    assert exported.inputs == [{"name": "pixels", "shape": [210, 160, 3], "dtype": "uint8"}]
    assert [i.name for i in atari_greedy.onnx.session.get_inputs()] == ["pixels"]
    graph = str(exported)
    for op in ("movedim", "upsample_nearest2d", "conv2d", "argmax"):
        assert op in graph
    assert 'pixels: "u8[210, 160, 3]"' in graph


def test_greedy_atari_actions_agree_on_screens(atari_greedy, dqn_params, screens):
    for screen in screens:
        expected = atari_policy(dqn_params, screen)
        assert atari_greedy.exported(screen) == expected
        assert atari_greedy.onnx(screen.numpy()) == expected.numpy()
        assert atari_greedy.aoti(screen) == expected


def test_egreedy_takes_a_key_and_draws_what_eager_draws(atari_egreedy, dqn_params, screens):
    check = atari_egreedy
    assert check.exported.input_names == ["pixels", "key"]
    greedy = atari_policy(dqn_params, screens[0])
    actions = []
    for seed in range(24):
        key = random.key(seed)
        expected = atari_policy(dqn_params, screens[0], key, mode="random")
        assert check.exported(screens[0], key) == expected
        assert check.onnx(screens[0].numpy(), key.numpy()) == expected.numpy()
        assert check.aoti(screens[0], key=key) == expected
        actions.append(int(expected))
    assert len(set(actions)) > 1 and int(greedy) in actions  # both branches were taken


# ----------------------------------------------------------------------------- 2. SAC


def test_one_dynamic_batch_file_serves_batch_1_and_64(sac_mode, actor_params):
    check = sac_mode
    assert check.exported.inputs[0]["shape"] == ["batch", 8]
    assert [d for d in check.onnx.session.get_inputs()[0].shape] == ["batch", 8]
    for b in (1, 64):
        obs = random.normal(random.key(b), (b, 8))
        expected = sac_policy(actor_params, obs)
        assert expected.shape == (b, 3)
        assert_trees_close(check.exported(obs), expected, rtol=1e-5, atol=1e-6)
        assert_trees_close(
            torch.from_numpy(check.onnx(obs.numpy())), expected, rtol=1e-5, atol=1e-6
        )
        assert_trees_close(check.aoti(obs), expected, rtol=1e-5, atol=1e-6)


def test_sac_random_actions_follow_the_key(sac_random, actor_params):
    check = sac_random
    obs = random.normal(random.key(7), (4, 8))
    a1 = check.onnx(obs.numpy(), random.key(1).numpy())
    a2 = check.onnx(obs.numpy(), random.key(2).numpy())
    assert not np.allclose(a1, a2) and np.abs(a1).max() <= 2.0
    expected = sac_policy(actor_params, obs, random.key(1), mode="random")
    assert_trees_close(torch.from_numpy(a1), expected, rtol=1e-5, atol=1e-6)
    assert_trees_close(check.aoti(obs, random.key(1)), expected, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- 3. recurrent


@pytest.mark.parametrize("name", ["lstm_policy", "gru_policy"])
def test_stepping_the_exported_policy_50_steps_equals_the_eager_sequence_call(name, request):
    check, _, sequence, params = request.getfixturevalue(name)
    T_ = 50
    obs = random.normal(random.key(8), (T_, OBS))
    is_init = torch.zeros(T_, dtype=torch.bool)
    is_init[[0, 17, 40]] = True  # three episodes in one sequence
    expected, final = sequence(params, obs, is_init)
    zero = (LSTM if name == "lstm_policy" else GRU).initial_carry(())
    for target in ("exported", "onnx", "aoti"):
        run = getattr(check, target)
        to = (lambda x: x.numpy()) if target == "onnx" else (lambda x: x)
        carry = torch.utils._pytree.tree_map(to, zero)
        actions = []
        for t in range(T_):
            action, carry = run(to(obs[t]), carry, to(is_init[t]))
            actions.append(torch.as_tensor(action))
        assert_trees_close(torch.stack(actions), expected, rtol=1e-4, atol=1e-5)
        assert_trees_close(
            [torch.as_tensor(c) for c in torch.utils._pytree.tree_leaves(carry)],
            list(torch.utils._pytree.tree_leaves(final)),
            rtol=1e-4,
            atol=1e-5,
        )


def test_recurrent_inputs_and_outputs_are_named_by_path(lstm_policy, gru_policy):
    lstm = lstm_policy[0].exported
    assert lstm.input_names == ["obs", "carry_h", "carry_c", "is_init"]
    assert lstm.output_names == ["output_0", "output_1_h", "output_1_c"]
    assert gru_policy[0].exported.input_names == ["obs", "carry", "is_init"]
    # the ONNX loader rebuilds the carry as a namedtuple with the same fields
    action, carry = lstm_policy[0].onnx(
        obs=np.zeros(OBS, np.float32),
        carry_h=np.zeros((2, 256), np.float32),
        carry_c=np.zeros((2, 256), np.float32),
        is_init=True,
    )
    assert action.shape == (5,) and carry._fields == ("h", "c") and carry.h.shape == (2, 256)


# ----------------------------------------------------------------------------- 4. dicts


def test_dict_observations_become_inputs_named_by_their_paths(dict_obs):
    check, params, example = dict_obs
    assert check.exported.input_names == ["agent_obs", "agent_vel", "goal"]
    assert check.exported.output_names == ["action", "logits"]
    expected = dict_policy(params, example)
    by_name = {
        "agent_obs": example["agent"]["obs"],
        "agent_vel": example["agent"]["vel"],
        "goal": example["goal"],
    }
    assert_trees_close(check.exported(**by_name), expected)
    assert_trees_close(check.aoti(example), expected)
    got = check.onnx(
        {
            k: {kk: vv.numpy() for kk, vv in v.items()} if isinstance(v, dict) else v.numpy()
            for k, v in example.items()
        }
    )
    assert list(got) == ["action", "logits"]
    assert int(got["action"]) == int(expected["action"])


# ----------------------------------------------------------------------------- deployment


DEPLOY_SCRIPT = """
import importlib.util, json, sys
import numpy as np
spec = importlib.util.spec_from_file_location("fxrl_deploy", sys.argv[1])
deploy = importlib.util.module_from_spec(spec)
spec.loader.exec_module(deploy)
import onnxruntime
out = {}
for name, path in json.loads(sys.argv[2]).items():
    policy = deploy.load_onnx(path, threads=1)
    with np.load(path + ".npz") as inputs:
        arrays = [inputs[f"arr_{i}"] for i in range(len(inputs.files))]
    result = policy(**dict(zip(policy.input_names, arrays)))
    results = result if isinstance(result, tuple) else [result]
    out[name] = [np.asarray(r).tolist() for r in results]
    raw = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = {i.name: a for i, a in zip(raw.get_inputs(), arrays)}
    assert np.array_equal(raw.run(None, feeds)[0], np.asarray(out[name][0]))
assert "torch" not in sys.modules, sorted(m for m in sys.modules if m.startswith("torch"))
print(json.dumps(out))
"""


def test_onnx_files_run_in_a_process_without_torch(
    atari_greedy, atari_egreedy, lstm_policy, dqn_params, screens
):
    screen, key = screens[1], random.key(11)
    check, policy, _, params = lstm_policy
    obs, carry, first = random.normal(key, (OBS,)), LSTM.initial_carry(()), torch.tensor(True)
    cases = {
        "greedy": (atari_greedy.onnx_path, [screen]),
        "egreedy": (atari_egreedy.onnx_path, [screen, key]),
        "lstm": (check.onnx_path, [obs, carry.h, carry.c, first]),
    }
    for path, inputs in cases.values():
        np.savez(f"{path}.npz", *[x.numpy() for x in inputs])
    paths = json.dumps({name: str(path) for name, (path, _) in cases.items()})
    run = subprocess.run(
        [sys.executable, "-c", DEPLOY_SCRIPT, str(ROOT / "fxrl" / "deploy.py"), paths],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["greedy"][0] == int(atari_policy(dqn_params, screen))
    assert out["egreedy"][0] == int(atari_policy(dqn_params, screen, key, mode="random"))
    action, next_carry = policy(params, obs, carry, first)
    assert_trees_close(torch.tensor(out["lstm"][0]), action, rtol=1e-4, atol=1e-5)
    h, c = torch.tensor(out["lstm"][1])  # the carry came back as a namedtuple (h, c)
    assert_trees_close([h, c], list(next_carry), rtol=1e-4, atol=1e-5)


def test_exported_policy_saves_and_loads_as_pt2(atari_greedy, screens, tmp_path):
    path = atari_greedy.exported.save(tmp_path / "policy.pt2")
    loaded = load(path)
    assert loaded.input_names == ["pixels"] and loaded.eager is None
    assert loaded(screens[2]) == atari_greedy.exported(screens[2])


def test_onnx_loader_names_the_input_and_expected_shape_on_bad_input(atari_greedy, sac_mode):
    onnx = atari_greedy.onnx
    with pytest.raises(
        TypeError,
        match=r"input 'pixels' has dtype float32; expected uint8 "
        r"\[210, 160, 3\]",
    ):
        onnx(np.zeros((210, 160, 3), np.float32))
    with pytest.raises(
        ValueError,
        match=r"input 'pixels' has shape \[160, 210, 3\]; expected "
        r"\[210, 160, 3\]",
    ):
        onnx(np.zeros((160, 210, 3), np.uint8))
    with pytest.raises(TypeError, match=r"unknown input 'pixel'.*Did you mean 'pixels'") as e:
        onnx(pixel=np.zeros((210, 160, 3), np.uint8))
    # deploy.py imports nothing of fxrl and writes fxrl._errors.unknown's message itself
    assert str(e.value) == unknown("pixel", ["pixels"], "input")
    with pytest.raises(TypeError, match=r"missing inputs \['pixels'\]"):
        onnx()
    with pytest.raises(ValueError, match=r"input 'obs' has shape \[3, 7\]; expected \[batch, 8\]"):
        sac_mode.onnx(np.zeros((3, 7), np.float32))
    with pytest.raises(ValueError, match=r"input 'pixels' has shape"):
        atari_greedy.exported(torch.zeros(84, 84, 3, dtype=torch.uint8))


# ----------------------------------------------------------------------------- bad input


def _params():
    return {"w": torch.ones(3)}


def test_python_branching_on_tensor_values_names_the_line_and_torch_where():
    def branchy(params, obs):
        if obs.sum() > 0:
            return obs * params["w"]
        return obs

    with pytest.raises(
        ExportError,
        match=r"branches in Python on a tensor's value at .*"
        r"test_export.py:\d+: if obs.sum\(\) > 0.*torch.where",
    ):
        export(branchy, _params(), torch.ones(3))


def test_global_rng_use_names_the_op_and_asks_for_an_explicit_key():
    def noisy(params, obs):
        return obs + torch.randn_like(obs)

    with pytest.raises(
        ExportError,
        match=r"global random generator \(aten.randn_like.*explicit "
        r"key.*mode='random'",
    ):
        export(noisy, _params(), torch.ones(3))


def test_missing_example_inputs_unknown_modes_and_bad_dtypes_get_clear_messages():
    def policy(params, obs, carry, is_init):
        return obs

    with pytest.raises(
        ExportError,
        match=r"missing example inputs for \['carry', 'is_init'\].*"
        r"export\(fn, params, obs, carry, is_init\)",
    ):
        export(policy, _params(), torch.ones(3))
    with pytest.raises(ExportError, match=r"missing example inputs for \['obs', 'carry', "):
        export(policy, _params())
    with pytest.raises(ValueError, match=r"unknown mode 'rnd'.*Did you mean 'random'"):
        export(sac_policy, _params(), torch.ones(3), mode="rnd")
    with pytest.raises(ExportError, match=r"input 'obs' has dtype complex64"):
        export(lambda params, obs: obs, _params(), torch.ones(3, dtype=torch.complex64))
    with pytest.raises(ExportError, match=r"example input 'obs' is a ndarray.*torch.as_tensor"):
        export(lambda params, obs: obs, _params(), np.ones(3))
    with pytest.raises(ExportError, match=r"has no `key` parameter"):
        export(lambda params, obs, mode="mode": obs, _params(), torch.ones(3), mode="random")


def test_colliding_input_names_are_an_error():
    obs = {"agent_obs": torch.ones(2), "agent": {"obs": torch.ones(2)}}
    with pytest.raises(ExportError, match=r"input names collide: \['agent_obs'\]"):
        export(lambda params, obs: obs["agent_obs"], _params(), obs)


def test_dynamic_batch_needs_a_batch_of_two_or_more():
    with pytest.raises(ExportError, match=r"example batch size is 1"):
        export(sac_policy, ACTOR.init(random.key(0)), torch.ones(1, 8), dynamic_batch=True)


def test_an_unknown_aoti_option_is_one_line_with_the_closest_setting(sac_mode, tmp_path):
    with pytest.raises(ValueError, match=r"to_aoti: unknown option 'freezin'\. Did you mean "
                       r"'freezing'\? Options are torch\._inductor\.config"):  # fmt: skip
        to_aoti(sac_mode.exported, tmp_path / "a.pt2", options={"freezin": True})
    assert not list(tmp_path.iterdir())


def test_aoti_without_a_cxx_compiler_says_so(sac_mode, tmp_path):
    from torch._inductor import config

    with (
        config.patch({"cpp.cxx": (None, "no-such-compiler++")}),
        pytest.raises(RuntimeError, match=r"no C\+\+ compiler found.*to_onnx"),
    ):
        to_aoti(sac_mode.exported, tmp_path / "x.pt2")


def test_to_onnx_and_load_onnx_round_trip_a_fresh_export(tmp_path):
    def policy(params, obs):
        return (obs * params["w"]).sum(-1)

    exported = export(policy, _params(), torch.ones(2, 3))
    path = to_onnx(exported, tmp_path / "tiny.onnx")
    assert float(load_onnx(str(path))(np.ones((2, 3), np.float32))[0]) == 3.0


def test_the_pong_examples_export_then_play_with_numpy_onnxruntime_and_ale_only(tmp_path):
    pytest.importorskip("ale_py")
    path = tmp_path / "pong_policy.onnx"
    argv = sys.argv
    try:
        sys.argv = ["export_pong_policy.py", str(path)]
        runpy.run_path(str(ROOT / "examples" / "export_pong_policy.py"), run_name="__main__")
    finally:
        sys.argv = argv
    script = ROOT / "examples" / "deploy_onnx_pong.py"
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['deploy_onnx_pong.py', {str(path)!r}, '--steps', '50']\n"
        f"runpy.run_path({str(script)!r}, run_name='__main__')\n"
        "assert 'torch' not in sys.modules\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 0, run.stderr
    assert "50 agent steps (200 frames)" in run.stdout


def test_dynamic_batch_with_random_draws_serves_every_batch_with_the_eager_actions():
    params = ACTOR.init(random.key(0))
    exported = export(sac_policy, params, torch.ones(4, 8), dynamic_batch=True, mode="random")
    for b in (2, 5, 64):
        obs = random.normal(random.key(b), (b, 8))
        key = random.key(100 + b)
        expected = sac_policy(params, obs, key, mode="random")
        assert_trees_close(exported(obs, key), expected, rtol=1e-5, atol=1e-6)


def test_screen_preprocess_on_uint8_equals_the_float_pipeline_and_the_policy_acts_alike(
    atari_greedy, dqn_params, screens, workdir
):
    """``screen_preprocess`` resizes the uint8 screen before converting it to float: the
    same numbers as ``PREPROCESS`` bit for bit, so the exported policy's actions are equal."""
    stacked = SCREEN.sample(random.key(9), batch_shape=(2, 3))  # a batch of frame stacks
    assert torch.equal(screen_preprocess(84)(stacked), PREPROCESS(stacked))
    assert torch.equal(screen_preprocess(84)(screens[0]), PREPROCESS(screens[0]))
    exact = T.compose(T.to_tensor_image(), T.resize(84, 110, "nearest-exact"))
    got = screen_preprocess(84, 110, "nearest-exact", grayscale=False)(stacked)
    assert torch.equal(got, exact(stacked))

    def u8_policy(params, pixels):
        action, _ = exploration.q_value(DQN.apply(params, screen_preprocess(84)(pixels)))
        return action

    exported = export(u8_policy, dqn_params, screens[0])
    assert "upsample_nearest2d" not in str(exported)  # no float resize in the program
    onnx_u8 = load_onnx(to_onnx(exported, workdir / "u8pre.onnx"), threads=1)
    batch = SCREEN.sample(random.key(10), batch_shape=(16,))
    for s in batch:
        want = int(atari_policy(dqn_params, s))
        assert int(onnx_u8(s.numpy())) == want == int(atari_greedy.onnx(s.numpy()))
    with pytest.raises(ValueError, match=r"expects uint8 RGB screens \[\.\.\., H, W, 3\]"):
        screen_preprocess(84)(screens[0].float())
    with pytest.raises(ValueError, match="unknown mode 'bilinear'"):
        screen_preprocess(84, mode="bilinear")
