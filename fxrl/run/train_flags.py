"""``fxrl train ALGO``'s flags: the algorithm's Config fields plus the run's own, via tyro.

    config, run = parse(ppo_module, "ppo", ["--env", "CartPole-v1", "--lr", "3e-4"])

Config fields keep their names (``--lr``, ``--num-envs``) and the help tyro reads from the
Config's field docstrings; run flags (``--seeds``, ``--out``...) are added where the Config
has no field of that name. Unknown flags and unparsable values become one-line errors
naming the closest flag.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
from types import ModuleType
from typing import Annotated, Any

from fxrl._errors import closest

__all__ = ["RUN_FLAGS", "FlagError", "parse"]


class FlagError(ValueError):
    """An unknown flag or a value that does not parse (one line)."""


# name -> (type, default, help)
RUN_FLAGS: dict[str, tuple[Any, Any, str]] = {
    "seeds": (int, 1, "agents trained together, one vmapped update (seeds of one run key)"),
    "seed": (int, 0, "the run's key is fxrl.random.key(seed), split into one key per agent"),
    "total_steps": (int, 100_000, "env steps per agent"),
    "out": (str | None, None, "the run directory; None: runs/ALGO-ENV-TIME"),
    "quiet": (bool, False, "log a line every 10 s instead of drawing a progress bar"),
    "tensorboard": (bool, False, "also write TensorBoard events to OUT/tensorboard"),
    "wandb": (
        bool,
        False,
        "also log to Weights & Biases (the wandb extra): project WANDB_PROJECT (default "
        "fxrl), files under OUT/wandb; WANDB_MODE=offline keeps them local",
    ),
    "compile": (
        bool,
        True,
        "compile the batched update into one fxrl.compile program (the default); "
        "--no-compile or --compile false runs it eager (debugging, short runs)",
    ),
    "checkpoint_every": (float, 60.0, "seconds between checkpoints (and one at the end)"),
    "device": (
        str,
        "cpu",
        "where the agents train: cpu, cuda, cuda:N or mps (recorded in config.json; "
        "checkpoints load on any device)",
    ),
    "threads": (int | None, None, "torch threads (default: the cores, at most 4)"),
    "sweep": (
        tuple[str, ...],
        (),
        "FIELD=V1,V2,...: train every combination of the swept values x --seeds as one "
        "vmapped update; repeat the flag for more fields (fxrl.run.sweep)",
    ),
    "tasks": (
        int | None,
        None,
        "train a task ensemble: N env variants x --seeds as one vmapped update "
        "(fxrl.run.tasks); the tasks come from --task-param, else the env's sample_params",
    ),
    "task_param": (
        tuple[str, ...],
        (),
        "NAME=LOW:HIGH: with --tasks, each task's env param NAME drawn uniform in "
        "[LOW, HIGH]; repeat the flag for more params",
    ),
}
# flags given more than once, collected before tyro parses the rest
_REPEATED = {"--sweep": "FIELD=V1,V2,... (e.g. --sweep lr=1e-4,3e-4)",
             "--task-param": "NAME=LOW:HIGH (e.g. --task-param length=0.25:1.0)"}  # fmt: skip
_BOOL_WORDS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _classes(module: ModuleType) -> tuple[type, type]:
    import tyro

    config_cls = module.Config
    own = {f.name for f in dataclasses.fields(config_cls)}
    run_fields = [
        (n, Annotated[t, tyro.conf.arg(help=h)], dataclasses.field(default=d))
        for n, (t, d, h) in RUN_FLAGS.items()
        if n not in own
    ]
    run_cls = dataclasses.make_dataclass("RunFlags", run_fields)
    omit = tyro.conf.OmitArgPrefixes
    args_cls = dataclasses.make_dataclass(
        "TrainFlags",
        [
            ("config", Annotated[config_cls, omit], dataclasses.field(default_factory=config_cls)),
            ("run", Annotated[run_cls, omit], dataclasses.field(default_factory=run_cls)),
        ],
    )
    return args_cls, run_cls


def _known_flags(module: ModuleType, run_cls: type) -> list[str]:
    flags = ["--help", "-h"]
    for cls in (module.Config, run_cls):
        for f in dataclasses.fields(cls):
            name = f.name.replace("_", "-")
            flags += [f"--{name}", f"--{f.name}"]
            if f.type in (bool, "bool") or isinstance(f.default, bool):
                flags += [f"--no-{name}", f"--no_{f.name}"]
    return flags


def _check_flags(prog: str, argv: list[str], known: list[str]) -> None:
    for token in argv:
        if not token.startswith("--"):
            continue
        flag = token.split("=", 1)[0]
        if flag in known or any(flag.startswith(k + ".") for k in known):
            continue
        close = closest(flag, [k for k in known if k.startswith("--")])
        hint = f" Did you mean {close}?" if close else ""
        raise FlagError(f"unknown flag {flag}.{hint} See {prog} --help.")


def _tyro_message(text: str) -> str:
    """The text of the first section of tyro's error panel, as one line."""
    body = []
    for raw in text.splitlines()[1:]:  # the first line is the panel's title
        line = raw.strip().strip("│").strip()
        if line and set(line) <= set("─╰╯"):
            break
        if line and not line.lower().startswith(("usage", "argument helptext")):
            body.append(line)
    message = " ".join(body) or "invalid arguments"
    # A Config's own check (raised in __post_init__) reads better without tyro's prefix.
    return re.sub(r"^Error parsing config: ", "", message)


def _tuned_config(module: ModuleType, argv: list[str]) -> Any:
    """The Config the flags start from: ``Config.tuned(env)`` for the ``--env`` in ``argv``
    (settings behind the recorded runs, e.g. PPO on Pendulum-v1) where the algorithm has
    them, else ``Config()``. A bad env id is left to the flags' own check."""
    config_cls = module.Config
    env = None
    for i, token in enumerate(argv):
        if token.startswith("--env="):
            env = token.split("=", 1)[1]
        elif token == "--env" and i + 1 < len(argv):
            env = argv[i + 1]
    if env is None or not hasattr(config_cls, "tuned"):
        return config_cls()
    try:
        return config_cls.tuned(env)
    except ValueError:
        return config_cls()


def parse(module: ModuleType, name: str, argv: list[str]) -> tuple[Any, Any]:
    """``(config, run_flags)`` from ``argv`` (everything after ``fxrl train ALGO``).

    Raises:
      FlagError: unknown flag (with the closest known one) or a value tyro cannot parse.
      SystemExit(0): ``--help`` (printed by tyro).
    """
    import tyro

    prog = f"fxrl train {name}"
    args_cls, run_cls = _classes(module)
    _check_flags(prog, argv, _known_flags(module, run_cls))
    argv, repeated = _repeated_flags(prog, _compile_flag(prog, argv))
    err = io.StringIO()
    doc = (module.__doc__ or "").strip().splitlines()
    default = args_cls(config=_tuned_config(module, argv), run=run_cls())
    try:
        with contextlib.redirect_stderr(err):
            args = tyro.cli(
                args_cls,
                args=argv,
                prog=prog,
                description=doc[0] if doc else None,
                default=default,
            )
    except SystemExit as e:
        if e.code in (0, None):
            raise
        message = _tyro_message(err.getvalue())
        message += "" if message.endswith((".", "?")) else "."
        raise FlagError(f"{message} See {prog} --help.") from None
    args.run.sweep = tuple(repeated["--sweep"])
    if hasattr(args.run, "task_param"):
        args.run.task_param = tuple(repeated["--task-param"])
    return args.config, args.run


def _compile_flag(prog: str, argv: list[str]) -> list[str]:
    """``argv`` with ``--compile false`` / ``--compile=no`` / ``--compile true`` as tyro's
    ``--no-compile`` / ``--compile`` (a bare ``--compile`` stays as it is)."""
    out, i = [], 0
    while i < len(argv):
        token = argv[i]
        word = None
        if token.startswith("--compile="):
            word = token.split("=", 1)[1]
        elif token == "--compile" and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            word = argv[i + 1]
            i += 1
        if word is None:
            out.append(token)
        elif word.lower() in _BOOL_WORDS:
            out.append("--compile" if _BOOL_WORDS[word.lower()] else "--no-compile")
        else:
            raise FlagError(f"--compile {word!r}: expected true or false (or --no-compile). "
                            f"See {prog} --help.")  # fmt: skip
        i += 1
    return out


def _repeated_flags(prog: str, argv: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """``argv`` without its ``--sweep VALUE`` and ``--task-param VALUE`` flags, and their
    values (flags given more than once, which tyro's tuple flags do not collect)."""
    rest, i = [], 0
    values: dict[str, list[str]] = {flag: [] for flag in _REPEATED}
    while i < len(argv):
        token = argv[i]
        flag = token.split("=", 1)[0]
        if token in _REPEATED:
            if i + 1 >= len(argv) or argv[i + 1].startswith("--"):
                raise FlagError(f"{token} needs {_REPEATED[token]}. See {prog} --help.")
            values[token].append(argv[i + 1])
            i += 2
            continue
        if flag in _REPEATED and "=" in token:
            values[flag].append(token.split("=", 1)[1])
        else:
            rest.append(token)
        i += 1
    return rest, values
