"""`fxrl train`'s flags start from the algorithm's tuned settings for the chosen env."""

import pytest

from fxrl.algorithms import ppo
from fxrl.run import train_flags
from fxrl.run.train_flags import FlagError


def test_tuned_applies_the_env_settings_then_the_overrides():
    config = ppo.Config.tuned("Pendulum-v1", lr=3e-4)
    expected = {**ppo.TUNED["Pendulum-v1"], "lr": 3e-4}
    for field, value in expected.items():
        assert getattr(config, field) == value, field
    assert ppo.Config.tuned("CartPole-v1") == ppo.Config()


@pytest.mark.parametrize("env_args", [["--env", "Pendulum-v1"], ["--env=Pendulum-v1"]])
def test_the_cli_starts_from_the_tuned_config_and_flags_override_it(env_args):
    config, run = train_flags.parse(ppo, "ppo", [*env_args, "--num-envs", "8", "--seeds", "2"])
    assert config == ppo.Config.tuned("Pendulum-v1", num_envs=8)
    assert run.seeds == 2


def test_without_env_or_tuned_settings_the_cli_keeps_the_config_defaults():
    assert train_flags.parse(ppo, "ppo", [])[0] == ppo.Config()
    config = train_flags.parse(ppo, "ppo", ["--env", "Acrobot-v1"])[0]
    assert config == ppo.Config(env="Acrobot-v1")


def test_an_unknown_env_still_names_the_closest_one():
    with pytest.raises(FlagError, match=r"Pendlum-v1.*Did you mean 'Pendulum-v1'"):
        train_flags.parse(ppo, "ppo", ["--env", "Pendlum-v1"])


@pytest.mark.parametrize(
    ("args", "compiled"),
    [
        ([], True),
        (["--compile"], True),
        (["--no-compile"], False),
        (["--compile", "false"], False),
        (["--compile=no"], False),
        (["--compile", "true"], True),
        (["--compile", "0", "--seeds", "2"], False),
    ],
)
def test_the_update_compiles_by_default_and_no_compile_or_compile_false_runs_eager(args, compiled):
    assert train_flags.parse(ppo, "ppo", args)[1].compile is compiled


def test_a_compile_value_that_is_not_a_bool_is_a_one_line_error():
    with pytest.raises(FlagError, match=r"--compile 'fast': expected true or false"):
        train_flags.parse(ppo, "ppo", ["--compile", "fast"])


def test_task_flags_collect_every_task_param():
    _, run = train_flags.parse(
        ppo, "ppo", ["--tasks", "4", "--task-param", "length=0.2:1", "--task-param=tau=0.01:0.02"]
    )
    assert run.tasks == 4 and run.task_param == ("length=0.2:1", "tau=0.01:0.02")
