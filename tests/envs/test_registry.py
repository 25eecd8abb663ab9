"""fxrl.envs.register and its entry points: a user's env becomes an id like the built-in
ones, checked first; every fxrl env is gymnasium.make("fxrl/<id>") the other way round."""

import os
import subprocess
import sys
import textwrap
import warnings
from importlib.metadata import EntryPoint
from pathlib import Path

import gymnasium
import pytest
import torch
from gymnasium.utils.env_checker import check_env as gymnasium_check_env

from fxrl import envs, random, specs, tree
from fxrl.algorithms import ppo
from fxrl.envs import Env, TimeStep, params_as_tensors, registry
from fxrl.testing import assert_trees_close

ROOT = Path(__file__).resolve().parents[2]


@tree.dataclass
class LineParams:
    goal: int = 4


@tree.dataclass
class LineState:
    x: torch.Tensor  # [] int64
    t: torch.Tensor  # [] int64
    key: torch.Tensor
    params: LineParams


class Line(Env):
    """Start at a random cell of [0, goal); action 1 moves right, 0 left; goal ends it."""

    observation_spec = specs.Box(0.0, 16.0, shape=(1,))
    action_spec = specs.Discrete(2)
    default_params = LineParams()

    def reset(self, key, params=None):
        params = params_as_tensors(self.default_params if params is None else params, self.dtype)
        x = random.randint(key, (), 0, params.goal)
        state = LineState(x, torch.zeros_like(x), key, params)
        flag = torch.zeros((), dtype=torch.bool)
        return state, TimeStep(self.observe(state), torch.zeros(()), flag, flag, {})

    def step(self, state, action):
        x = (state.x + torch.where(action == 1, 1, -1)).clamp(min=0)
        moved = state.replace(x=x, t=state.t + 1)
        done = x >= state.params.goal
        reward = torch.where(done, 1.0, 0.0)
        return moved, TimeStep(self.observe(moved), reward, done, torch.zeros_like(done), {})

    def observe(self, state):
        return state.x.to(self.dtype)[None]


class WritesItsInput(Line):
    def step(self, state, action):
        state.t.add_(0)  # harmless value, but an in-place write into the input
        state.key.zero_()
        return super().step(state, action)


class OutsideItsSpec(Line):
    observation_spec = specs.Box(0.0, 1.0, shape=(1,))


class BranchesInPython(Line):
    def step(self, state, action):
        if bool(action == 1):  # a Python `if` on a tensor: fine eager, impossible under vmap
            return super().step(state, action)
        return super().step(state, torch.zeros_like(action))


def test_a_registered_env_is_an_id_of_make_wrapped_as_the_built_in_ones():
    envs.register("Line-v0", Line, max_steps=20)
    assert "Line-v0" in envs.registered()
    env = envs.make("Line-v0")
    assert repr(env) == "episode_stats(auto_reset(time_limit(Line(), 20)))"
    by_hand = envs.episode_stats(envs.auto_reset(envs.time_limit(Line(), 20)))
    state, ts = env.reset(random.key(3))
    state_ref, ts_ref = by_hand.reset(random.key(3))
    for _ in range(25):
        state, ts = env.step(state, torch.tensor(1))
        state_ref, ts_ref = by_hand.step(state_ref, torch.tensor(1))
        assert_trees_close((state, ts), (state_ref, ts_ref), rtol=0, atol=0)
    # make's own options apply as for a built-in id
    assert envs.make("Line-v0", goal=6).default_params.goal == 6
    assert repr(envs.make("Line-v0", max_steps=None, auto_reset=False)) == "episode_stats(Line())"
    assert envs.make("Line-v0").default_params == LineParams()
    with pytest.raises(TypeError, match=r"unknown Line param 'gaol'\. Did you mean 'goal'\?"):
        envs.make("Line-v0", gaol=3)
    with pytest.raises(ValueError, match=r"takes no dtype argument; it builds float32 envs"):
        envs.make("Line-v0", dtype=torch.float64)


def test_registering_again_replaces_and_the_same_call_again_is_free():
    envs.register("LineTwice-v0", Line, max_steps=10)
    envs.register("LineTwice-v0", Line, max_steps=10)  # a module imported again
    assert envs.registered().count("LineTwice-v0") == 1
    envs.register("LineTwice-v0", Line, max_steps=30)
    assert repr(envs.make("LineTwice-v0")) == "episode_stats(auto_reset(time_limit(Line(), 30)))"


@pytest.mark.parametrize(
    ("factory", "property_name"),
    [
        (WritesItsInput, "step is pure and inside the specs"),
        (OutsideItsSpec, "step is pure and inside the specs"),
        (BranchesInPython, "vmap equals a loop"),
    ],
)
def test_a_broken_env_is_refused_in_one_line_naming_the_property(factory, property_name):
    name = f"Broken{factory.__name__}-v0"
    with pytest.raises(ValueError) as info:
        envs.register(name, factory, max_steps=20)
    message = str(info.value)
    assert "\n" not in message and len(message) < 700
    assert message.startswith(f"fxrl.envs.register('{name}'): the env breaks the env contract")
    assert f"check_env: {property_name}:" in message
    assert name not in envs.registered()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("CartPole-v1", Line), r"one of fxrl's own envs and cannot be replaced"),
        (("my:Line-v0", Line), r"contains :; ':' separates a module"),
        (("", Line), r"non-empty string"),
        (("Line-v9", Line, 0), r"max_steps must be a positive int or None, got 0"),
        (("Line-v9", Line()), r"factory must build the env"),
        (("Line-v9", lambda: envs.auto_reset(Line())), r"must build one bare env"),
        (("Line-v9", lambda: "not an env"), r"the factory returned str, not an fxrl.envs.Env"),
    ],
)
def test_bad_registrations_are_one_line_errors(args, message):
    with pytest.raises((ValueError, TypeError), match=message):
        envs.register(*args[:2], max_steps=args[2] if len(args) > 2 else None)


def test_an_unknown_id_names_the_closest_one_and_how_to_register_an_env():
    with pytest.raises(ValueError) as info:
        envs.make("Lien-v0")
    message = str(info.value)
    assert "\n" not in message
    assert "Did you mean" in message and "fxrl.envs.register(id, factory)" in message
    with pytest.raises(ValueError, match=r"env='Lien-v0' is not allowed; expected a registered"):
        ppo.Config(env="Lien-v0")
    with pytest.raises(ValueError, match=r"is a host env, not a pure one; .*fxrl.envs.gym"):
        envs.make("gymnasium:CartPole-v1")


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))


# A module of the user's: a copy of Line registered when imported.
LINE_MODULE = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from test_registry import Line
from fxrl import envs
envs.register("{{id}}", Line, max_steps=12)
"""


def test_module_colon_id_imports_the_module_that_registers_the_env(tmp_path, monkeypatch):
    _write(tmp_path, {"line_module_a.py": LINE_MODULE.format(id="LineFromModule-v0")})
    monkeypatch.syspath_prepend(str(tmp_path))
    env = envs.make("line_module_a:LineFromModule-v0")
    assert repr(env) == "episode_stats(auto_reset(time_limit(Line(), 12)))"
    config = ppo.Config(env="line_module_a:LineFromModule-v0")  # a Config takes it as it is
    assert config.env == "line_module_a:LineFromModule-v0"
    assert registry.env_module("LineFromModule-v0") == "line_module_a"  # for config.json
    with pytest.raises(ValueError, match=r"importing 'no_such_module' .* failed"):
        envs.make("no_such_module:Line-v0")


def test_installed_packages_register_envs_through_the_entry_point_group(tmp_path, monkeypatch):
    # an installed distribution: its metadata names three entry points of group fxrl.envs
    _write(tmp_path, {
        "line_plugin.py": f"""
            import sys
            sys.path.insert(0, {str(Path(__file__).parent)!r})
            from test_registry import Line, OutsideItsSpec
            from fxrl import envs

            def register_envs():
                envs.register("PluginLineLong-v0", Line, max_steps=40)
        """,
        "line_plugin-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: line-plugin\n"
                                              "Version: 1.0\n",
        "line_plugin-1.0.dist-info/entry_points.txt": """
            [fxrl.envs]
            PluginLine-v0 = line_plugin:Line
            line_plugin = line_plugin:register_envs
            PluginBroken-v0 = line_plugin:OutsideItsSpec
        """,
    })  # fmt: skip
    monkeypatch.syspath_prepend(str(tmp_path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = envs.make("PluginLine-v0")  # not known yet: the entry points are read again
    assert repr(env) == "episode_stats(auto_reset(Line()))"
    assert {"PluginLine-v0", "PluginLineLong-v0"} <= set(envs.registered())
    assert repr(envs.make("PluginLineLong-v0")) == (
        "episode_stats(auto_reset(time_limit(Line(), 40)))"
    )
    # the broken one is refused with a warning, and the unknown id says why
    assert any("entry point PluginBroken-v0" in str(w.message) for w in caught)
    assert "PluginBroken-v0" not in envs.registered()
    with pytest.raises(ValueError, match=r"The entry point PluginBroken-v0 failed: ValueError: "):
        envs.make("PluginBroken-v0")
    # and a new process sees them too, on fxrl train's command line
    out = subprocess.run(
        [sys.executable, "-m", "fxrl.cli", "train", "ppo", "--env", "PluginLineLong-v0",
         "--num-envs", "2", "--num-steps", "8", "--num-minibatches", "2", "--update-epochs",
         "1", "--total-steps", "32", "--no-compile", "--quiet", "--threads", "1",
         "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
             "PYTHONWARNINGS": "ignore"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "32 steps per seed" in out.stdout


# ------------------------------------------------------------------------------ gymnasium


def test_every_fxrl_env_passes_gymnasium_s_env_checker_through_gymnasium_make():
    import fxrl.envs.to_gym  # noqa: F401  (registers fxrl/<id> with gymnasium)

    envs.register("LineForGym-v0", Line, max_steps=9)  # registered after the import: follows
    for env_id in envs.registered():
        env = gymnasium.make(f"fxrl/{env_id}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # gymnasium's advice on unbounded Boxes
            gymnasium_check_env(env.unwrapped, skip_render_check=True)
        limit = registry._lookup(env_id, "test")[2]
        assert env.spec.max_episode_steps == limit, env_id
        env.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gymnasium_check_env(gymnasium.make("fxrl/CartPole-v1", render_mode="rgb_array").unwrapped)


def test_gymnasium_make_plays_the_same_episode_as_the_fxrl_env():
    import fxrl.envs.to_gym  # noqa: F401

    env = gymnasium.make("fxrl/CartPole-v1", length=0.75)
    pure = envs.make("CartPole-v1", length=0.75, max_steps=None, auto_reset=False)
    obs, _ = env.reset(seed=7)
    state, ts = pure.reset(random.key(7))
    assert (obs == ts.obs.numpy()).all()
    done, steps = False, 0
    while not done:
        obs, _, terminated, truncated, _ = env.step(steps % 2)
        state, ts = pure.step(state, torch.tensor(steps % 2))
        assert (obs == ts.obs.numpy()).all() and bool(ts.terminated) == terminated
        done, steps = terminated or truncated, steps + 1
    assert 5 < steps < 500


def test_sb3_and_gymnasium_name_fxrl_envs_without_importing_fxrl_first(tmp_path):
    code = (
        "import gymnasium\n"
        "from stable_baselines3 import PPO\n"
        "env_id = 'fxrl.envs.to_gym:fxrl/Acrobot-v1'\n"  # gymnasium's 'module:id'
        "model = PPO('MlpPolicy', env_id, n_steps=32, batch_size=32, n_epochs=1, device='cpu')\n"
        "model.learn(64)\n"
        "print(model.env.envs[0].spec.id, gymnasium.make('fxrl/Acrobot-v1').spec.id)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore",
             "SB3_LOGDIR": str(tmp_path)},  # else SB3 logs to /tmp/SB3-<date>
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["fxrl/Acrobot-v1", "fxrl/Acrobot-v1"]


def test_pyproject_names_the_gymnasium_plugin_entry_point():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    value = project["entry-points"]["gymnasium.envs"]["fxrl"]
    register = EntryPoint("fxrl", value, "gymnasium.envs").load()
    register()
    assert "fxrl/MountainCar-v0" in gymnasium.registry
