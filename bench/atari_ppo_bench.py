"""PPO on Atari Breakout from pixels: fxrl (``env="ale:Breakout"``: fxrl's loop of ALE
games, ``fxrl.envs.atari(..., driver="fxrl")``) against CleanRL's ``ppo_atari.py``
(gymnasium's SyncVectorEnv of Python-wrapped games), the same settings, measured
alternately in one run.

    .venv/bin/python bench/record.py atari_ppo_bench -- --threads 1 \\
        --cleanrl /tmp/cleanrl/cleanrl/ppo_atari.py
    .venv/bin/python bench/atari_ppo_bench.py --quick --cleanrl .../ppo_atari.py
    .venv/bin/python bench/atari_ppo_bench.py --curve --cleanrl .../ppo_atari.py \\
        --out docs/results                   # 2 seeds x 2M frames per side: CPU hours

Settings: ``ppo.Config.tuned("ale:Breakout")``, which is CleanRL's ``ppo_atari.py``: 8
envs x 128 steps per update, 4 epochs x 4 minibatches, lr 2.5e-4 annealed, clip 0.1,
Nature CNN, 4 emulator frames per env step, frames 84x84 grey stacked by 4. CleanRL gets
the same values on its command line, taken from that Config (``cleanrl_flags``).

Units: ``steps_per_s`` counts env steps (agent decisions, CleanRL's ``global_step`` and
its ``SPS``); each env step is 4 emulator frames, so ``frames_per_s`` = 4 x steps_per_s.

Throughput (the default): fxrl's first update (which compiles its pieces) is timed apart
(``compile_s``); then ``--repeats`` rounds alternate (the order reversed each round)
between fxrl, ``--updates`` more updates of the same run per round, and one CleanRL
process per round, ``--updates + 1`` iterations, timed from its first iteration's ``SPS:``
line to its last (the same window: after the first update; the shim time-stamps the
lines). Rows: per contender the median env steps/s over rounds with min and max
(``steps_per_s``, ``steps_per_s_min``, ``steps_per_s_max``, each round's in
``per_round``); CleanRL's also its own last printed SPS per round (``sps_printed``: from
its start, env reset and first iteration included); ratios ``fxrl_<n>seed(s)/cleanrl``:
median, min and max of the per-round ratios. fxrl's seeds (``--seeds 1,8``) run vmapped,
``n x 8`` envs; its rate counts the env steps of all seeds. fxrl steps its games one
after another in Python, as CleanRL's SyncVectorEnv does, but in two processes (``ale:``
ids split the games over two where torch's threads leave a core free, as ``--threads 1``
does on two cores, ``processes=2``: a worker
steps half while the main process steps the rest); torch runs on ``--threads`` on both
sides.

CleanRL is not a dependency: give its ``cleanrl/ppo_atari.py`` from a checkout (with
``cleanrl_utils/`` beside ``cleanrl/``). It was written for gymnasium 0.29 and runs here
unmodified through ``bench/cleanrl_gym1.py``, which lists every adaptation. Needs
OpenCV (``opencv-python-headless``, in fxrl's dev extra) for gymnasium's resize.

``--curve``: training curves to ``--frames`` (2M) frames per seed, ``--curve-seeds``
(1,2) on each side, one run after another: ``atari_ppo_curve.jsonl`` (a header, then per
update of each run the mean whole-game return of the games that ended in it, unclipped,
and one summary row per run) and ``atari_ppo_curve.png`` in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from _common import cpu_model, measure  # bench/_common.py

BENCH = Path(__file__).resolve().parent
SHIM = BENCH / "cleanrl_gym1.py"
ENV = "ale:Breakout"
CLEANRL_ENV = "BreakoutNoFrameskip-v4"
FRAMESKIP = 4  # emulator frames per env step, both sides
QUICK = {"repeats": 3, "updates": 3}  # about 8 minutes on a quiet 2-core machine
FULL = {"repeats": 5, "updates": 10}
STAMPED_SPS = re.compile(r"^(\d+\.\d+) SPS: (\d+)\s*$")
EPISODE = re.compile(r"global_step=(\d+), episodic_return=\[?(-?[\d.]+)")


def _emit(**row: object) -> None:
    print(json.dumps(row), flush=True)


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------ settings


def fxrl_config(total_steps: int) -> Any:
    """fxrl's PPO on ``ale:Breakout``: ``ppo.Config.tuned``, ``total_steps`` env steps."""
    from fxrl.algorithms import ppo

    return ppo.Config.tuned(ENV, total_steps=total_steps)


def cleanrl_flags(config: Any, total_steps: int, seed: int) -> list[str]:
    """``ppo_atari.py``'s flags giving it ``config``'s settings (each equal to its
    default today; named so that a change on either side cannot go unseen)."""

    def flag(name: str, on: bool) -> str:
        return f"--{name}" if on else f"--no-{name}"

    return [
        "--env-id", CLEANRL_ENV, "--seed", str(seed), "--total-timesteps", str(total_steps),
        "--num-envs", str(config.num_envs), "--num-steps", str(config.num_steps),
        "--num-minibatches", str(config.num_minibatches),
        "--update-epochs", str(config.update_epochs), "--learning-rate", repr(config.lr),
        flag("anneal-lr", config.anneal_lr), "--gamma", repr(config.gamma),
        "--gae-lambda", repr(config.gae_lambda), "--clip-coef", repr(config.clip_eps),
        flag("clip-vloss", config.clip_value), flag("norm-adv", config.normalize_advantages),
        "--ent-coef", repr(config.ent_coef), "--vf-coef", repr(config.vf_coef),
        "--max-grad-norm", repr(config.max_grad_norm),
        "--no-track", "--no-capture-video", "--no-cuda",
    ]  # fmt: skip


def cleanrl_command(script: str, config: Any, total_steps: int, seed: int, threads: int) -> list:
    """The CleanRL process: the shim (threads, time-stamped lines), then the script."""
    shim = [sys.executable, str(SHIM), "--threads", str(threads), "--stamp", script]
    return [*shim, *cleanrl_flags(config, total_steps, seed)]


def _cleanrl_env(threads: int) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


def parse_cleanrl(text: str) -> tuple[list[tuple[float, int]], list[tuple[int, float]]]:
    """CleanRL's stamped stdout: the ``(time_s, SPS)`` of each ``SPS:`` line (one per
    iteration) and the ``(global_step, return)`` of each ``episodic_return`` line."""
    sps, episodes = [], []
    for line in text.splitlines():
        if m := STAMPED_SPS.match(line):
            sps.append((float(m[1]), int(m[2])))
        elif m := EPISODE.search(line):
            episodes.append((int(m[1]), float(m[2])))
    return sps, episodes


def window(sps: list[tuple[float, int]], steps_per_update: int) -> tuple[float, int]:
    """Seconds and env steps from the first iteration's ``SPS:`` line to the last one's."""
    if len(sps) < 2:
        raise ValueError(f"CleanRL printed {len(sps)} SPS line(s); 2 or more needed")
    return sps[-1][0] - sps[0][0], (len(sps) - 1) * steps_per_update


def _run_cleanrl(cmd: list[str], threads: int) -> str:
    with tempfile.TemporaryDirectory(prefix="cleanrl_") as cwd:  # its runs/ (tensorboard)
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd,
                              env=_cleanrl_env(threads))  # fmt: skip
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        raise SystemExit(f"atari_ppo_bench: CleanRL exited {done.returncode}: {tail}")
    return done.stdout


# ------------------------------------------------------------------------------ throughput


class FxrlRun:
    """One fxrl training run of ``seeds`` vmapped seeds, stepped ``updates`` at a time."""

    def __init__(self, seeds: int, total_steps: int, seed: int = 0) -> None:
        from fxrl import random
        from fxrl.algorithms import core, ppo

        self.algo = ppo.make(fxrl_config(total_steps))
        init, self.update = core.batched(self.algo, seeds, compile=True)
        self.seeds = seeds
        self.state = init(random.key(seed))
        self.metrics: list[dict] = []

    def run(self, updates: int) -> float:
        """Seconds for ``updates`` updates."""
        t0 = time.perf_counter()
        for _ in range(updates):
            self.state, metrics = self.update(self.state)
            self.metrics.append(metrics)
        return time.perf_counter() - t0


def _name(seeds: int) -> str:
    return f"fxrl_{seeds}seed{'s' if seeds > 1 else ''}"


def _spread(rates: list[float]) -> dict[str, float]:
    return {"steps_per_s": round(statistics.median(rates), 1),
            "steps_per_s_min": round(min(rates), 1), "steps_per_s_max": round(max(rates), 1),
            "frames_per_s": round(FRAMESKIP * statistics.median(rates), 1)}  # fmt: skip


def per_update() -> int:
    """Env steps per update of one seed (8 envs x 128 steps)."""
    config = fxrl_config(1)
    return config.num_envs * config.num_steps


def plan(repeats: int, updates: int) -> dict:
    """The throughput run's budget: fxrl's first update, then ``repeats`` rounds of
    ``updates`` updates of one run (its ``total_steps`` holds them all); per round a
    CleanRL process of ``updates + 1`` iterations (the first is outside the window)."""
    batch = per_update()
    return {"repeats": repeats, "updates": updates, "steps_per_update": batch,
            "fxrl_total_steps": (1 + repeats * updates) * batch,
            "cleanrl_total_timesteps": (updates + 1) * batch}  # fmt: skip


def throughput(a: argparse.Namespace, common: dict) -> None:
    repeats, updates = a.repeats, a.updates
    budget = plan(repeats, updates)
    batch = budget["steps_per_update"]
    runs: dict[str, Callable[[], float]] = {}
    steps: dict[str, int] = {}
    who: dict[str, tuple[str, int]] = {}  # name: (impl, seeds)
    compiled: dict[str, float] = {}
    for n in a.seeds:
        fx = FxrlRun(n, budget["fxrl_total_steps"], seed=a.seed)
        compile_s = fx.run(1)
        _log(f"fxrl {n} seed(s): first update (compile) {compile_s:.1f} s")
        runs[_name(n)] = lambda fx=fx: fx.run(updates)
        steps[_name(n)] = n * updates * batch
        who[_name(n)] = ("fxrl", n)
        compiled[_name(n)] = round(compile_s, 1)
    printed: list[int] = []
    if a.cleanrl:
        total = budget["cleanrl_total_timesteps"]
        cmd = cleanrl_command(a.cleanrl, fxrl_config(total), total, a.seed + 1, a.threads)

        def cleanrl_round() -> float:
            sps, _ = parse_cleanrl(_run_cleanrl(cmd, a.threads))
            seconds, _ = window(sps, batch)
            printed.append(sps[-1][1])
            _log(f"cleanrl: {len(sps)} iterations, last SPS {sps[-1][1]}")
            return seconds

        runs["cleanrl"] = cleanrl_round
        steps["cleanrl"] = updates * batch
        who["cleanrl"] = ("cleanrl", 1)
    times, _ = measure(runs, iters=1, repeats=repeats, warmup=False, self_timed=True)
    rates = {name: [steps[name] / (ms / 1e3) for ms in ms_list] for name, ms_list in times.items()}
    for name, per_round in rates.items():
        impl, seeds = who[name]
        row = {"case": "throughput", "impl": impl, "seeds": seeds, **_spread(per_round),
               "per_round": [round(r, 1) for r in per_round], "rounds": repeats,
               "updates_per_round": updates, "steps_per_round": steps[name]}  # fmt: skip
        if impl == "fxrl":
            row["compile_s"] = compiled[name]
        else:
            row["sps_printed"] = printed
        _emit(bench="atari_ppo_bench", **row, **common)
    if "cleanrl" in rates:
        for name, per_round in rates.items():
            if name == "cleanrl":
                continue
            ratios = [x / y for x, y in zip(per_round, rates["cleanrl"], strict=True)]
            _emit(bench="atari_ppo_bench", case="throughput", ratio=f"{name}/cleanrl",
                  value=round(statistics.median(ratios), 3), min=round(min(ratios), 3),
                  max=round(max(ratios), 3), unit="env steps/s, per round", **common)  # fmt: skip


# ------------------------------------------------------------------------------ curves


def curve_plan(frames: int) -> dict:
    """Updates per run for ``frames`` emulator frames per seed (rounded up to whole updates)."""
    batch = per_update()
    updates = math.ceil(frames / FRAMESKIP / batch)
    return {"frames_requested": frames, "frameskip": FRAMESKIP, "updates": updates,
            "env_steps": updates * batch, "frames": updates * batch * FRAMESKIP,
            "note": f"{frames:,} frames = {frames // FRAMESKIP:,} env steps at frameskip "
                    f"{FRAMESKIP}; run as {updates} updates x {batch} env steps = "
                    f"{updates * batch:,} env steps ({updates * batch * FRAMESKIP:,} "
                    "frames) per seed and side"}  # fmt: skip


def cleanrl_curve(episodes: list[tuple[int, float]], updates: int, batch: int) -> list:
    """Per update ``(games ended, mean return)`` of CleanRL's episodes (``None`` where none
    ended): an episode printed at ``global_step`` ended in update ``ceil(step / batch)``."""
    bins: list[list[float]] = [[] for _ in range(updates)]
    for step, ret in episodes:
        bins[min(updates, math.ceil(step / batch)) - 1].append(ret)
    return [(len(b), sum(b) / len(b) if b else None) for b in bins]


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.replace(tmp, path)


def games_mean(updates: list[dict]) -> tuple[int, float | None]:
    """The games that ended in ``updates`` (rows or metrics with ``episodes`` and
    ``episode_return``) and their mean return; None where none ended."""
    ended = [m for m in updates if int(m["episodes"])]
    games = sum(int(m["episodes"]) for m in ended)
    points = sum(int(m["episodes"]) * float(m["episode_return"]) for m in ended)
    return games, points / games if games else None


def plot_curves(rows: list[dict], path: Path, title: str) -> None:
    """Each run's return against frames, a running mean over the last 20 updates'
    games; fxrl blue, CleanRL orange, one line style per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fxrl.run.plots import _save

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    runs = sorted({(r["impl"], r["seed"]) for r in rows if "update" in r})
    styles = ["-", "--", ":", "-."]
    for impl, seed in runs:
        mine = [r for r in rows if "update" in r and (r["impl"], r["seed"]) == (impl, seed)]
        xs, ys = [], []
        for i, r in enumerate(mine):
            games, mean = games_mean(mine[max(0, i - 19) : i + 1])
            if games:
                xs.append(r["frames"])
                ys.append(mean)
        color = {"fxrl": "tab:blue", "cleanrl": "tab:orange"}[impl]
        label = {"fxrl": "fxrl (ale:Breakout)", "cleanrl": "CleanRL ppo_atari.py"}[impl]
        seeds = sorted({s for i, s in runs if i == impl})
        ax.plot(xs, ys, color=color, linestyle=styles[seeds.index(seed) % len(styles)],
                label=f"{label}, seed {seed}")  # fmt: skip
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("emulator frames per seed (4 per env step)")
    ax.set_ylabel("game return (unclipped), last 20 updates")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def curves(a: argparse.Namespace, common: dict) -> None:
    batch = per_update()
    plan = curve_plan(a.frames)
    updates, total = plan["updates"], plan["env_steps"]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    jsonl, png = out / "atari_ppo_curve.jsonl", out / "atari_ppo_curve.png"
    config = fxrl_config(total)
    settings = {k: getattr(config, k) for k in ("num_envs", "num_steps", "update_epochs",
                "num_minibatches", "lr", "anneal_lr", "clip_eps", "ent_coef")}  # fmt: skip
    header = {"curve": "atari_ppo", "game": "Breakout", "seeds": a.curve_seeds, **plan,
              "settings": settings, "cleanrl_env": CLEANRL_ENV, "fxrl_env": ENV,
              **common}  # fmt: skip
    _emit(**header)
    rows: list[dict] = [header]
    title = (f"PPO on Breakout, {plan['frames']:,} frames per seed "
             f"({plan['env_steps']:,} env steps)")  # fmt: skip
    impls = [i for i in ("fxrl", "cleanrl") if a.impl in (i, "both")]
    for impl in impls:
        for seed in a.curve_seeds:
            t0 = time.perf_counter()
            summary: dict[str, Any] = {"impl": impl, "seed": seed, "done": True}
            if impl == "fxrl":
                fx = FxrlRun(1, total, seed=seed)
                summary["compile_s"] = round(fx.run(1), 1)
                t1 = time.perf_counter()
                for u in range(1, updates):
                    fx.run(1)
                    if u % a.log_every == 0:
                        games, mean = games_mean(fx.metrics[-a.log_every :])
                        shown = "-" if mean is None else f"{mean:.2f}"
                        _log(
                            f"fxrl seed {seed}: update {u + 1}/{updates}; the last "
                            f"{a.log_every} updates: {games} games, mean return {shown}"
                        )
                run_s = time.perf_counter() - t1
                summary["steps_per_s"] = round((updates - 1) * batch / run_s, 1)
                per = [(int(m["episodes"]), float(m["episode_return"])) for m in fx.metrics]
                per = [(n, r if n else None) for n, r in per]
            else:
                cmd = cleanrl_command(a.cleanrl, config, total, seed, a.threads)
                sps, episodes = parse_cleanrl(_run_cleanrl(cmd, a.threads))
                seconds, steps = window(sps, batch)
                summary["steps_per_s"] = round(steps / seconds, 1)
                per = cleanrl_curve(episodes, updates, batch)
            summary["wall_s"] = round(time.perf_counter() - t0, 1)
            for u, (n, ret) in enumerate(per, 1):
                rows.append({"impl": impl, "seed": seed, "update": u, "env_steps": u * batch,
                             "frames": u * batch * FRAMESKIP, "episodes": n,
                             "episode_return": ret})  # fmt: skip
            rows.append(summary)
            _emit(**summary)
            _write_jsonl(jsonl, rows)  # after each run: a crash keeps the runs done
            plot_curves(rows, png, title)
    _log(f"atari_ppo_bench: wrote {jsonl} and {png}")


# ------------------------------------------------------------------------------ main


def check_args(a: argparse.Namespace) -> str:
    """``""``, or what is wrong with the flags, in one line."""
    if a.impl != "fxrl" and not a.cleanrl:
        return "--cleanrl PATH (CleanRL's cleanrl/ppo_atari.py) is needed, or --impl fxrl"
    if a.impl != "fxrl" and not Path(a.cleanrl).is_file():
        return f"--cleanrl {a.cleanrl}: no such file (expected CleanRL's cleanrl/ppo_atari.py)"
    if a.impl == "cleanrl" and not a.curve:
        return "--impl cleanrl: the throughput run needs fxrl (--curve runs CleanRL alone)"
    if min(a.repeats, a.updates, a.frames) < 1:
        return "--repeats, --updates and --frames must be positive"
    return ""


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",")]
    except ValueError:
        seeds = []
    if not seeds or min(seeds) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected positive ints, e.g. 1 or 1,8")
    return seeds


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cleanrl", default=None, help="path of CleanRL's cleanrl/ppo_atari.py")
    p.add_argument("--threads", type=int, default=1, help="torch threads, both sides")
    p.add_argument("--seeds", type=_seeds, default=[1], help="fxrl's vmapped seeds: 1 or 1,8")
    p.add_argument("--seed", type=int, default=0, help="fxrl's run key (CleanRL: seed + 1)")
    p.add_argument("--repeats", type=int, default=None, help=f"rounds ({FULL['repeats']})")
    p.add_argument("--updates", type=int, default=None, help=f"per round ({FULL['updates']})")
    p.add_argument("--quick", action="store_true", help=f"{QUICK}: about 8 min, 2 cores")
    p.add_argument("--impl", choices=("both", "fxrl", "cleanrl"), default="both")
    p.add_argument("--curve", action="store_true", help="learning curves instead of speed")
    p.add_argument("--frames", type=int, default=2_000_000, help="curve: frames per seed")
    p.add_argument("--curve-seeds", type=_seeds, default=[1, 2], help="curve: seeds per side")
    p.add_argument("--out", default="docs/results", help="curve: folder of the JSONL and PNG")
    p.add_argument("--log-every", type=int, default=25, help="curve: updates between logs")
    a = p.parse_args(argv)
    preset = QUICK if a.quick else FULL
    a.repeats = preset["repeats"] if a.repeats is None else a.repeats
    a.updates = preset["updates"] if a.updates is None else a.updates
    problem = check_args(a)
    if problem:
        raise SystemExit(f"atari_ppo_bench: {problem}")
    if a.impl == "fxrl":
        a.cleanrl = None
    torch.set_num_threads(a.threads)
    import ale_py
    import gymnasium

    common = {"threads": torch.get_num_threads(), "cpu": cpu_model(), "cpus": os.cpu_count(),
              "torch": torch.__version__, "gymnasium": gymnasium.__version__,
              "ale_py": ale_py.__version__, "quick": a.quick}  # fmt: skip
    (curves if a.curve else throughput)(a, common)


if __name__ == "__main__":
    main()
