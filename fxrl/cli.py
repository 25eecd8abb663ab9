"""``fxrl`` on the command line (also ``python -m fxrl.cli``).

    fxrl train ppo --env CartPole-v1 --seeds 8 --total-steps 200000 --lr 3e-4
    fxrl train ppo --env CartPole-v1 --tasks 8 --task-param length=0.25:1.0   # task ensemble
    fxrl resume runs/ppo-CartPole-v1-...           # continue an interrupted run
    fxrl eval DIR --episodes 10 --gymnasium        # greedy returns, also in gymnasium's env
    fxrl eval DIR --video agent.mp4                # also a video of the greedy agent (.gif)
    fxrl eval DIR --video pong.gif --onnx          # a host-env run (ALE Pong) from DIR/policy.onnx
    fxrl export DIR --format onnx                  # DIR/policy.onnx, preprocessing included
    fxrl export DIR --quantize int8                # int8 ONNX, calibrated on played frames
    fxrl export DIR --format web --out SITE        # a static page playing it in the browser
    fxrl plot DIR [DIR ...] --out compare.png      # overlay learning curves
    fxrl demo                                      # what `make demo` runs
    fxrl tour                                      # a tour of the library
    fxrl --version                                 # the installed fxrl's version

``train``'s flags are the algorithm's Config fields (``fxrl train ppo --help`` lists them
with defaults and help) plus the run's own. Errors are one line (``FXRL_TRACEBACK=1``
shows the traceback).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from fxrl._errors import ArgumentParser, UsageError, unknown
from fxrl._optional import MissingExtra

__all__ = ["main"]

COMMANDS = ("train", "resume", "eval", "export", "plot", "demo", "tour")


# A user error, printed as one line; the parser's errors name the closest known flag.
CliError = UsageError
_Parser = ArgumentParser


def _threads(n: int | None) -> None:
    import torch

    torch.set_num_threads(n if n else min(4, os.cpu_count() or 1))


# ----------------------------------------------------------------------------- train


def _train(argv: list[str]) -> int:
    from fxrl.run import train_flags
    from fxrl.run.config_io import algorithm_module
    from fxrl.run.loop import train

    if not argv or argv[0] in ("-h", "--help"):
        from fxrl.algorithms import NAMES

        print(f"usage: fxrl train ALGO [--env ID] [FLAGS]\n\nALGO: one of {', '.join(NAMES)}.")
        print("`fxrl train ALGO --help` lists that algorithm's flags.")
        return 0
    if argv[0].startswith("-"):
        raise CliError("name an algorithm first: fxrl train ppo --env CartPole-v1 ...")
    name = argv[0]
    module = algorithm_module(name)
    config, run = train_flags.parse(module, name, argv[1:])
    _threads(getattr(run, "threads", None))
    flag = lambda n: getattr(run, n) if hasattr(run, n) else getattr(config, n)
    out = flag("out") or _default_out(name, getattr(config, "env", ""))
    kwargs = {"total_steps": run.total_steps} if hasattr(run, "total_steps") else {}
    if run.sweep:  # FIELD=V1,V2 flags; bad fields and values fail before anything is written
        from fxrl.run.sweep import parse_flag

        kwargs["sweep"] = parse_flag(run.sweep)
    if getattr(run, "task_param", ()) and getattr(run, "tasks", None) is None:
        raise CliError("--task-param needs a task count: --tasks N (e.g. --tasks 8).")
    if getattr(run, "tasks", None) is not None:  # a task ensemble (fxrl.run.tasks)
        from fxrl.run import tasks

        kwargs["tasks"] = run.tasks
        kwargs["task_ranges"] = tasks.parse_flag(run.task_param) or None
    result = train(
        name,
        config,
        out,
        num_seeds=flag("seeds"),
        seed=flag("seed"),
        compile=flag("compile"),
        quiet=flag("quiet"),
        tensorboard=flag("tensorboard"),
        wandb=flag("wandb"),
        checkpoint_every=flag("checkpoint_every"),
        device=flag("device"),
        **kwargs,
    )
    return _report(result)


def _default_out(name: str, env: str) -> str:
    import time

    env = env.replace(":", "_").replace("/", "_")  # "module:id", "ale:Breakout": one name
    return f"runs/{name}-{env}-{time.strftime('%Y%m%d-%H%M%S')}".replace("--", "-")


def _report(result: Any) -> int:
    from fxrl.run.progress import return_stats

    d = result.run_dir
    print(f"{d}: {result.steps:,} steps per seed, {return_stats(result.returns)}")
    if result.interrupted:  # Ctrl-C, or a scheduler's SIGTERM/SIGUSR1: 128 + the signal
        import signal

        signum = result.signal or signal.SIGINT
        by = "" if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
        print(f"interrupted{by}; checkpoint written. Continue with: fxrl resume {d}")
        return 128 + signum
    print(f"next: fxrl eval {d} --gymnasium | fxrl export {d} --format onnx | fxrl plot {d}")
    return 0


# ----------------------------------------------------------------------------- others


def _resume(argv: list[str]) -> int:
    import warnings

    from fxrl.run.loop import InexactResumeWarning, resume

    p = _Parser(prog="fxrl resume", description="Continue a run from its latest checkpoint.")
    p.add_argument("dir", help="the run directory")
    p.add_argument("--checkpoint", default="latest", help="latest, previous or best")
    p.add_argument("--quiet", action="store_true", help="log lines instead of a progress bar")
    p.add_argument("--tensorboard", action="store_true", help="also write TensorBoard events")
    p.add_argument("--wandb", action="store_true", help="also log to Weights & Biases")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: the run's)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: the run's)")
    a = p.parse_args(argv)
    from fxrl.run.host_run import is_host_run

    if is_host_run(a.dir):
        raise CliError(
            f"{a.dir} is a host-env run (fxrl.run.host_run): it keeps the params only, not the "
            "optimizer, buffer or env state, so it cannot be resumed; train it on from Python."
        )
    _threads(a.threads if a.threads is not None else _run_threads(a.dir))
    with warnings.catch_warnings():  # InexactResumeWarning as one line
        warnings.simplefilter("always", InexactResumeWarning)
        warnings.showwarning = lambda message, *_, **__: print(
            f"fxrl resume: warning: {message}", file=sys.stderr
        )
        result = resume(
            a.dir,
            checkpoint_name=a.checkpoint,
            quiet=a.quiet,
            tensorboard=a.tensorboard,
            wandb=a.wandb,
            device=a.device,
        )
    return _report(result)


def _run_threads(run_dir: str) -> int | None:
    """The torch threads a run was trained with (its config.json), so that by default a
    resumed run computes as the uninterrupted one did; None if not recorded."""
    import json

    try:
        threads = json.loads((Path(run_dir) / "config.json").read_text()).get("threads")
    except (OSError, ValueError):
        return None  # resume() reports the missing or broken config.json
    return threads if isinstance(threads, int) and threads > 0 else None


def _eval(argv: list[str]) -> int:
    from fxrl.run.evaluate import evaluate_run, table

    p = _Parser(prog="fxrl eval", description="Greedy-policy returns of each seed of a run.")
    p.add_argument("dir", help="the run directory")
    p.add_argument("--episodes", type=int, default=10, help="episodes per seed (default: 10)")
    p.add_argument("--gymnasium", action="store_true", help="also play gymnasium's own env")
    p.add_argument("--checkpoint", default="latest", help="latest, previous or best")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: <= 4)")
    p.add_argument("--video", default=None, metavar="PATH", help="record the agent: out.mp4|.gif")
    p.add_argument("--video-episodes", type=int, default=1, help="episodes in the video")
    p.add_argument(
        "--video-steps",
        type=int,
        default=10_000,
        metavar="N",
        help="steps after which a video episode is cut (default: 10000)",
    )
    p.add_argument(
        "--onnx",
        action="store_true",
        help="with --video: play DIR/policy.onnx (fxrl export) in ONNX Runtime "
        "instead of the checkpoint (host-env runs, e.g. ALE Pong)",
    )
    p.add_argument(
        "--pick",
        default=None,
        metavar="NAME",
        help="a sweep run's combination: lr=3e-4,ent_coef=0.01, or best",
    )
    a = p.parse_args(argv)
    if a.onnx and a.video is None:
        raise CliError("--onnx records a video from DIR/policy.onnx: give --video out.gif too.")
    from fxrl.run.host_run import is_host_run

    if is_host_run(a.dir):  # trained from Python on ALE (fxrl.run.host_run)
        return _eval_host(a)
    if a.onnx:
        raise CliError(
            f"--onnx: recording from ONNX is for host-env runs (fxrl.run.host_run) for now; "
            f"record {a.dir} from its checkpoint without --onnx."
        )
    if a.video is not None:  # an unwritable extension fails before anything runs
        from fxrl.run.video import check_path

        check_path(a.video)
        seed = _picked_agent(a.dir, a.pick, a.checkpoint, None)  # a sweep: --pick is needed
    _threads(a.threads)
    result = evaluate_run(
        a.dir,
        episodes=a.episodes,
        gymnasium=a.gymnasium,
        checkpoint_name=a.checkpoint,
        pick=a.pick,
    )
    picked = f" ({result['pick']})" if "pick" in result else ""
    print(f"greedy return over {a.episodes} episodes at step {result['steps']:,}{picked}:")
    print(table(result))
    if a.video is not None:
        from fxrl.run.video import record_run

        rec = record_run(
            a.dir,
            a.video,
            episodes=a.video_episodes,
            checkpoint_name=a.checkpoint,
            seed=seed,
            max_steps=a.video_steps,
        )
        print(f"{rec.path}: seed {rec.seed}, {len(rec.lengths)} episode(s) of {rec.lengths} steps")
    return 0


def _eval_host(a: Any) -> int:
    """``fxrl eval`` of a host-env run: returns of whole ALE episodes, and its video."""
    from fxrl.run.host_run import evaluate_host_run, record_host_run

    for flag, given in (("--gymnasium", a.gymnasium), ("--pick", a.pick is not None)):
        if given:
            raise CliError(
                f"{flag}: {a.dir} is a host-env run (one agent, played in ALE itself); drop {flag}."
            )
    if a.video is not None:
        from fxrl.run.video import check_path

        check_path(a.video)
        if a.onnx and not (Path(a.dir) / "policy.onnx").is_file():
            raise CliError(
                f"--onnx: {Path(a.dir) / 'policy.onnx'} does not exist; write it first with "
                f"fxrl export {a.dir} --format onnx."
            )
    _threads(a.threads)
    result = evaluate_host_run(a.dir, episodes=a.episodes, checkpoint_name=a.checkpoint)
    returns = result["ale"][0]
    listed = ", ".join(f"{r:g}" for r in returns)
    mean = sum(returns) / len(returns)
    print(
        f"greedy return over {a.episodes} ALE episodes at step {result['steps']:,}: "
        f"mean {mean:.1f} ({listed})"
    )
    if a.video is not None:
        rec = record_host_run(
            a.dir,
            a.video,
            onnx=a.onnx,
            episodes=a.video_episodes,
            checkpoint_name=a.checkpoint,
            max_steps=a.video_steps,
        )
        source = "policy.onnx (ONNX Runtime)" if a.onnx else f"checkpoint {a.checkpoint}"
        print(
            f"{rec.path}: {source}, {len(rec.lengths)} episode(s) of {rec.lengths} steps, "
            f"returns {rec.returns}"
        )
    return 0


def _picked_agent(run_dir: str, pick: str | None, checkpoint_name: str, seed: int | None) -> Any:
    """The agent index ``--pick NAME [--seed S]`` names in a sweep run (``seed`` within the
    combination; default its best); ``seed`` as given for a run without a sweep."""
    from fxrl.run import checkpoint, sweep
    from fxrl.run.config_io import read_run_config

    info = read_run_config(run_dir)
    if pick is None:
        if info["sweep"]:
            raise CliError(
                f"{run_dir} is a sweep of {info['num_seeds'] // info['seeds']} combinations; "
                "choose one with --pick NAME (e.g. --pick best, or --pick "
                f"{sweep.combination_names(info['sweep'])[0]})."
            )
        return seed
    ckpts = Path(run_dir) / "checkpoints"
    path = ckpts / f"{checkpoint_name}.safetensors"
    meta = checkpoint.read_meta(path if path.exists() else ckpts / "latest.safetensors")
    combination = sweep.pick(info, meta, pick)
    if seed is None:
        return sweep.best_agent(info, meta, combination)
    if not 0 <= seed < info["seeds"]:
        raise CliError(f"--seed {seed} out of range; each combination has {info['seeds']} seeds.")
    return sweep.agents(info, combination)[seed]


def _export(argv: list[str]) -> int:
    import json

    from fxrl.run.export_run import FORMATS, export_run

    p = _Parser(prog="fxrl export", description="Write a run's policy for deployment.")
    p.add_argument("dir", help="the run directory")
    p.add_argument("--format", default="onnx", choices=[*FORMATS, "web"], help="default: onnx")
    p.add_argument(
        "--out", default=None, help="file to write (default: DIR/policy.EXT; web: DIR/web)"
    )
    p.add_argument("--checkpoint", default="best", help="best (default), latest or previous")
    p.add_argument("--seed", type=int, default=None, help="agent (default: best return)")
    p.add_argument(
        "--pick",
        default=None,
        metavar="NAME",
        help="a sweep run's combination: lr=3e-4,ent_coef=0.01, or best",
    )
    p.add_argument(
        "--quantize",
        default=None,
        help="int8: ONNX with int8 weights, calibrated on frames of the policy playing "
        "the run's env (--format onnx only)",
    )
    a = p.parse_args(argv)
    _threads(None)
    from fxrl.run.host_run import export_host_run, is_host_run

    if is_host_run(a.dir):  # trained from Python on ALE: one agent, raw screens in
        flags = (
            ("--format web", a.format == "web"),
            ("--quantize", a.quantize),
            ("--seed", a.seed is not None),
            ("--pick", a.pick),
        )
        given = [f for f, v in flags if v]
        if given:
            raise CliError(
                f"{given[0]}: {a.dir} is a host-env run (one agent, ALE screens); export it "
                "with --format onnx, pt2 or aoti and no --quantize, --seed or --pick."
            )
        ckpt = "latest" if a.checkpoint == "best" else a.checkpoint
        print(export_host_run(a.dir, a.format, out=a.out, checkpoint_name=ckpt))
        return 0
    if a.format == "web":  # the web's own message for an env it cannot run, read first
        from fxrl.web.site import check_run_env

        check_run_env(a.dir)
        if _run_json(a.dir).get("tasks"):
            raise CliError(
                f"--format web: {a.dir} is a task ensemble; the page plays the env's default "
                "params, not the task an agent trained on. Export it with --format onnx."
            )
    a.seed = _picked_agent(a.dir, a.pick, a.checkpoint, a.seed)  # a sweep's agent
    if a.format == "web":  # a static site: policy and env in onnxruntime-web (fxrl.web)
        if a.quantize is not None:
            raise CliError(
                f"--quantize {a.quantize} needs --format onnx; the web page runs the "
                "float32 policy (drop --quantize)."
            )
        from fxrl.web import export_site

        site = export_site(
            a.dir, a.out or Path(a.dir) / "web", checkpoint_name=a.checkpoint, seed=a.seed
        )
        print(f"{site}  (serve it: cd {site} && python -m http.server)")
        return 0
    path = export_run(
        a.dir,
        a.format,
        out=a.out,
        checkpoint_name=a.checkpoint,
        seed=a.seed,
        quantize=a.quantize,
    )
    if a.quantize is None:
        print(path)
        return 0
    check = json.loads(path.with_name(path.name + ".json").read_text())["check"]
    if "same_action" in check:
        agree = f"greedy actions equal float32's on {check['same_action']:.1%}"
    else:
        agree = f"actions within {check['max_abs_diff']:.3g} of float32's"
    print(f"{path}  ({a.quantize}: {agree} of {check['frames']} played frames)")
    return 0


def _plot(argv: list[str]) -> int:
    from fxrl.run.plots import plot_runs

    p = _Parser(prog="fxrl plot", description="Overlay the learning curves of runs in one PNG.")
    p.add_argument("dirs", nargs="+", help="run directories")
    p.add_argument("--out", default="runs.png", help="PNG to write (default: runs.png)")
    p.add_argument("--metric", default="episode_return", help="metric per seed to plot")
    p.add_argument("--title", default=None, help="figure title")
    a = p.parse_args(argv)
    if len(a.dirs) == 1 and _is_sweep(a.dirs[0]):  # one panel per combination or task
        from fxrl.run.plots import plot_sweep

        print(plot_sweep(a.dirs[0], a.out, metric=a.metric, title=a.title))
        return 0
    print(plot_runs(a.dirs, a.out, metric=a.metric, title=a.title))
    return 0


def _run_json(run_dir: str) -> dict[str, Any]:
    """A run's config.json as written, or {} (the commands report a missing one)."""
    import json

    try:
        return json.loads((Path(run_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return {}


def _is_sweep(run_dir: str) -> bool:
    info = _run_json(run_dir)
    return bool(info.get("sweep") or info.get("tasks"))  # a grid: one panel per group


def _demo(argv: list[str]) -> int:
    from fxrl.run import demo

    return demo.main(argv)


def _tour(argv: list[str]) -> int:
    from fxrl.run import tour

    p = _Parser(prog="fxrl tour", description="A short tour of fxrl.")
    p.add_argument("--threads", type=int, default=2, help="torch threads")
    tour.main(p.parse_args(argv).threads)
    return 0


_HANDLERS: dict[str, Callable[[list[str]], int]] = {
    "train": _train,
    "resume": _resume,
    "eval": _eval,
    "export": _export,
    "plot": _plot,
    "demo": _demo,
    "tour": _tour,
}


def _usage() -> str:
    return (__doc__ or "").strip()


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``fxrl`` command; exits with the command's status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        sys.exit(0)
    if argv[0] in ("-V", "--version"):
        from fxrl import __version__

        print(f"fxrl {__version__}")
        sys.exit(0)
    command, rest = argv[0], argv[1:]
    if command not in _HANDLERS:
        _fail("fxrl", unknown(command, COMMANDS, "command"))
    # A command sets torch's thread count (--threads); a caller in the same process (a
    # notebook, a test) gets its own back, whatever way the command ends.
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    try:
        code = _HANDLERS[command](rest)
    except KeyboardInterrupt:
        _fail(f"fxrl {command}", "interrupted", code=130)
    except Exception as e:
        if os.environ.get("FXRL_TRACEBACK"):
            raise
        _fail(f"fxrl {command}", str(e) if isinstance(e, CliError) else _one_line(e))
    finally:
        if threads is not None and torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
    sys.exit(code)


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    if len(text) > 500:  # torch's compile errors carry whole graphs
        text = text[:500] + " ... (FXRL_TRACEBACK=1 shows all)"
    plain = isinstance(e, ValueError | CliError | MissingExtra)  # their text says it all
    return text if plain else f"{type(e).__name__}: {text}"


def _fail(prog: str, message: str, code: int = 2) -> NoReturn:
    print(f"{prog}: error: {message}", file=sys.stderr)
    sys.exit(code)


if __name__ == "__main__":
    main()
