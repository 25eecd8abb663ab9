"""PPO on MinAtar: fxrl against PureJaxRL (JAX, jit + vmap) in the same run, same settings.

    .venv/bin/python bench/record.py minatar_ppo -- --threads 1 --total-steps 2000000
    .venv/bin/python bench/minatar_ppo.py --quick --impl fxrl          # seconds, eager

For each game: ``--seeds`` vmapped seeds of fxrl's PPO (``ppo.Config.tuned(game)``:
PureJaxRL's MinAtar notebook settings, 64 envs x 128 steps, 4 epochs x 8 minibatches, lr
5e-3 annealed, relu 64-64), one compiled program per update, on fxrl's env with
``sticky_action_prob=0`` and ``minimal_action_set=True`` (what gymnax's MinAtar envs are);
then PureJaxRL's ``ppo.py`` ``make_train`` unchanged on gymnax's env of the same name, the
seeds vmapped, in the JAX venv (``--jax-python``) from a subprocess. Both at
``--total-steps`` env steps per seed. Then a greedy evaluation of every seed's final
params, ``--eval-episodes`` episodes each (fxrl: ``policy(mode="mode")`` in fxrl's env;
PureJaxRL: argmax of the logits in gymnax's env), episodes cut at 1000 steps (both envs'
time limit).

Prints JSON lines (``bench/record.py`` keeps them):
  * ``{"game", "impl", "compile_s", "run_s", "steps_per_s", "train_return_last10",
    "greedy_mean", "greedy_std", "greedy_per_seed", ...}`` per game and library:
    ``compile_s`` is fxrl's first update (which compiles every piece, and runs once) and
    PureJaxRL's ``jit(...).lower().compile()``; ``run_s`` the rest of the training;
  * ``{"game", "ratio": "greedy fxrl/purejaxrl" | "time per step fxrl/purejaxrl",
    "value"}`` (the second: training wall time per env step, compile apart).
Writes ``--out-dir``/minatar_ppo_curves.json (per update, per seed: mean return of the
episodes that ended in it; ``null`` where none did) and one PNG per game,
``minatar_ppo_<game>.png``: both curves, mean +- std over seeds, against env steps per seed.
A per-update log goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import torch
from _common import cpu_model, one_core_jax  # bench/_common.py

ROOT = Path(__file__).resolve().parents[1]
GAMES = ("Breakout-MinAtar", "SpaceInvaders-MinAtar")
# gymnax's MinAtar envs: no sticky actions, the game's minimal action set
GYMNAX = {"sticky_action_prob": 0.0, "minimal_action_set": True}
EVAL_MAX_STEPS = 1000  # both envs' time limit (gymnax's max_steps_in_episode)
# quick: a smoke run of the whole path in seconds (not PureJaxRL's settings)
QUICK = {"num_envs": 8, "num_steps": 16, "update_epochs": 2, "num_minibatches": 2}


def _emit(**row: object) -> None:
    print(json.dumps(row), flush=True)


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _nanmean(values: list[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return sum(finite) / len(finite) if finite else float("nan")


def _stats(values: list[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


# ------------------------------------------------------------------------------ fxrl


def fxrl_config(game: str, total_steps: int, quick: bool) -> object:
    from fxrl.algorithms import ppo

    extra = QUICK if quick else {}
    return ppo.Config.tuned(game, total_steps=total_steps, env_params=GYMNAX, **extra)


@torch.no_grad()
def fxrl_greedy(algo: object, params: object, seeds: int, episodes: int, seed: int,
                max_steps: int) -> list[list[float]]:  # fmt: skip
    """Returns ``[seeds][episodes]`` of greedy episodes, every seed's params on its own
    ``episodes`` envs, all stepped as one batch of fxrl's env."""
    from fxrl import envs, random

    env = envs.batch(algo.env, seeds * episodes)
    act = torch.func.vmap(lambda p, o: algo.policy(p, o, mode="mode"))
    state, ts = env.reset(random.key(seed))
    total = torch.zeros(seeds * episodes, dtype=torch.float64)
    finished = torch.zeros(seeds * episodes, dtype=torch.bool)
    for _ in range(max_steps):
        obs = ts.obs.reshape(seeds, episodes, *ts.obs.shape[1:])
        state, ts = env.step(state, act(params, obs).reshape(-1))
        total += torch.where(finished, 0.0, ts.reward.double())
        finished |= ts.terminated | ts.truncated
        if bool(finished.all()):
            break
    return total.reshape(seeds, episodes).tolist()


def run_fxrl(args: argparse.Namespace, game: str) -> tuple[dict, dict]:
    from fxrl import random
    from fxrl.algorithms import core, ppo

    config = fxrl_config(game, args.total_steps, args.quick)
    algo = ppo.make(config)
    init, update = core.batched(algo, args.seeds, compile=not args.quick)
    updates = max(1, config.total_steps // algo.steps_per_update)
    state = init(random.key(args.seed))
    curve: list[list[float]] = []
    t0 = time.perf_counter()
    state, m = update(state)  # compiles every piece (and runs the first update)
    compile_s = time.perf_counter() - t0
    curve.append(m["episode_return"].tolist())
    t0 = time.perf_counter()
    for i in range(1, updates):
        state, m = update(state)
        curve.append(m["episode_return"].tolist())
        if i % args.log_every == 0 or i == updates - 1:
            _log(f"fxrl {game} update {i + 1}/{updates} steps/seed "
                 f"{(i + 1) * algo.steps_per_update} return {_nanmean(curve[-1]):.2f} "
                 f"({time.perf_counter() - t0:.0f} s)")  # fmt: skip
    run_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    greedy = fxrl_greedy(algo, state.params, args.seeds, args.eval_episodes, args.seed + 1000,
                         args.eval_max_steps)  # fmt: skip
    eval_s = time.perf_counter() - t0
    steps = [(i + 1) * algo.steps_per_update for i in range(updates)]
    per_seed = [list(col) for col in zip(*curve, strict=True)]  # [seeds][updates]
    row = _row(game, "fxrl", args, steps, per_seed, greedy, compile_s, run_s, eval_s,
               updates - 1, algo.steps_per_update)  # fmt: skip
    return row, {"steps": steps, "returns": per_seed}


def _row(
    game: str,
    impl: str,
    args: argparse.Namespace,
    steps: list[int],
    per_seed: list[list[float]],
    greedy: list[list[float]],
    compile_s: float,
    run_s: float,
    eval_s: float,
    timed_updates: int,
    steps_per_update: int,
) -> dict:
    last = [_nanmean(s[-10:]) for s in per_seed]
    seed_means = [sum(g) / len(g) for g in greedy]
    mean, std = _stats(seed_means)
    return {
        "game": game, "impl": impl, "seeds": args.seeds, "total_steps": steps[-1],
        "updates": len(steps), "compile_s": round(compile_s, 2), "run_s": round(run_s, 2),
        "steps_per_s": round(args.seeds * timed_updates * steps_per_update / run_s)
        if run_s > 0 else None,
        "train_return_last10": round(_nanmean(last), 3),
        "greedy_mean": round(mean, 3), "greedy_std_over_seeds": round(std, 3),
        "greedy_per_seed": [round(v, 2) for v in seed_means],
        "eval_episodes": args.eval_episodes, "eval_s": round(eval_s, 2), "quick": args.quick,
    }  # fmt: skip


# ------------------------------------------------------------------------------ PureJaxRL

PUREJAXRL = """
import importlib.metadata, json, math, sys, time, types
import jax, jax.numpy as jnp
sys.path[:0] = [{dir!r} + "/purejaxrl"]  # its ppo.py imports `wrappers` as a top-level module
# wrappers.py imports brax and navix at the top but uses them only for their own envs:
# empty stand-ins, so gymnax's envs run without installing them (as bench/train_bench.py)
for name in ("brax", "brax.envs", "brax.envs.wrappers", "brax.envs.wrappers.training", "navix"):
    sys.modules[name] = types.ModuleType(name)
sys.modules["brax"].envs = sys.modules["brax.envs"]
sys.modules["brax.envs.wrappers.training"].EpisodeWrapper = None
sys.modules["brax.envs.wrappers.training"].AutoResetWrapper = None
import gymnax
from ppo import ActorCritic, make_train
from wrappers import FlattenObservationWrapper

# PureJaxRL's MinAtar settings (examples/brax_minatar.ipynb), or the quick smoke run's
config = {{"LR": 5e-3, "NUM_ENVS": {num_envs}, "NUM_STEPS": {num_steps},
    "TOTAL_TIMESTEPS": {steps}, "UPDATE_EPOCHS": {epochs}, "NUM_MINIBATCHES": {minibatches},
    "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01, "VF_COEF": 0.5,
    "MAX_GRAD_NORM": 0.5, "ACTIVATION": "relu", "ENV_NAME": {game!r}, "ANNEAL_LR": True,
    "DEBUG": False}}
rngs = jax.random.split(jax.random.PRNGKey({seed}), {seeds})
fn = jax.jit(jax.vmap(make_train(config)))
t0 = time.perf_counter(); compiled = fn.lower(rngs).compile(); compile_s = time.perf_counter() - t0
t0 = time.perf_counter(); out = jax.block_until_ready(compiled(rngs))
run_s = time.perf_counter() - t0
info = out["metrics"]  # leaves [seeds, updates, num_steps, num_envs]
done = info["returned_episode"]
ended = done.sum((2, 3))
per_update = jnp.where(ended > 0, (info["returned_episode_returns"] * done).sum((2, 3))
                       / jnp.maximum(ended, 1), jnp.nan)  # [seeds, updates]

env, env_params = gymnax.make({game!r})
env = FlattenObservationWrapper(env)
network = ActorCritic(env.action_space(env_params).n, activation="relu")
E, T = {episodes}, {max_steps}

def greedy(params, key):
    key, k_reset = jax.random.split(key)
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(k_reset, E), env_params)
    def body(carry, _):
        obs, state, key, total, finished = carry
        key, k_step = jax.random.split(key)
        pi, _ = network.apply(params, obs)
        action = jnp.argmax(pi.logits, axis=-1)
        obs, state, reward, done, _ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
            jax.random.split(k_step, E), state, action, env_params)
        total = total + jnp.where(finished, 0.0, reward)
        return (obs, state, key, total, finished | done), None
    init = (obs, state, key, jnp.zeros(E), jnp.zeros(E, bool))
    (_, _, _, total, _), _ = jax.lax.scan(body, init, None, T)
    return total

params = out["runner_state"][0].params
t0 = time.perf_counter()
returns = jax.block_until_ready(jax.jit(jax.vmap(greedy))(
    params, jax.random.split(jax.random.PRNGKey({seed} + 1000), {seeds})))
eval_s = time.perf_counter() - t0
nan_to_none = lambda xs: [None if math.isnan(x) else x for x in xs]
print(json.dumps({{"compile_s": compile_s, "run_s": run_s, "eval_s": eval_s,
    "updates": int(per_update.shape[1]), "steps_per_update": {num_envs} * {num_steps},
    "returns": [nan_to_none(r) for r in per_update.tolist()], "greedy": returns.tolist(),
    "jax": jax.__version__, "gymnax": importlib.metadata.version("gymnax")}}))
"""


def run_purejaxrl(args: argparse.Namespace, game: str) -> tuple[dict, dict]:
    config = fxrl_config(game, args.total_steps, args.quick)
    code = PUREJAXRL.format(
        dir=args.purejaxrl, game=game, steps=args.total_steps, seed=args.seed,
        seeds=args.seeds, num_envs=config.num_envs, num_steps=config.num_steps,
        epochs=config.update_epochs, minibatches=config.num_minibatches,
        episodes=args.eval_episodes, max_steps=args.eval_max_steps,
    )  # fmt: skip
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    one_core = one_core_jax(env, args.threads)  # XLA on one thread and core, as torch
    _log(f"purejaxrl {game}: compiling and training {args.seeds} seeds x {args.total_steps}")
    proc = subprocess.run([args.jax_python, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, preexec_fn=one_core)  # fmt: skip
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["(no output)"]
        raise SystemExit(f"minatar_ppo: PureJaxRL on {game} exited with {proc.returncode}: "
                         f"{tail[0]}")  # fmt: skip
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    per_update = out["steps_per_update"]
    steps = [(i + 1) * per_update for i in range(out["updates"])]
    per_seed = [[float("nan") if v is None else v for v in r] for r in out["returns"]]
    row = _row(game, "purejaxrl", args, steps, per_seed, out["greedy"], out["compile_s"],
               out["run_s"], out["eval_s"], out["updates"], per_update)  # fmt: skip
    # PureJaxRL's run_s covers every update (its compile runs none), fxrl's all but the first
    row["steps_per_s"] = round(args.seeds * out["updates"] * per_update / out["run_s"])
    row.update(jax=out["jax"], gymnax=out["gymnax"])
    return row, {"steps": steps, "returns": per_seed}


# ------------------------------------------------------------------------------ plot


def plot(game: str, curves: dict, path: Path, total_steps: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fxrl.run.plots import _save

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for impl, color in (("fxrl", "tab:blue"), ("purejaxrl", "tab:orange")):
        if impl not in curves:
            continue
        steps = curves[impl]["steps"]
        per_update = list(zip(*curves[impl]["returns"], strict=True))  # [updates][seeds]
        mean, std = [], []
        for values in per_update:
            finite = [v for v in values if not math.isnan(v)]
            m, s = _stats(finite) if finite else (float("nan"), float("nan"))
            mean.append(m)
            std.append(s)
        label = {"fxrl": "fxrl (torch)", "purejaxrl": "PureJaxRL (JAX, gymnax env)"}[impl]
        ax.plot(steps, mean, color=color, label=label)
        lo = [m - s for m, s in zip(mean, std, strict=True)]
        hi = [m + s for m, s in zip(mean, std, strict=True)]
        ax.fill_between(steps, lo, hi, color=color, alpha=0.2, linewidth=0)
    seeds = len(next(iter(curves.values()))["returns"])
    ax.set_title(f"PPO on {game}: {seeds} seeds, mean +- std, {total_steps:,} steps/seed")
    ax.set_xlabel("env steps per seed")
    ax.set_ylabel("training episode return")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left")
    fig.tight_layout()
    _save(fig, path)


def read_curves(path: Path) -> dict:
    """``minatar_ppo_curves.json`` as written, ``null`` returns back to NaN; {} if absent."""
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    for entry in data.values():
        for impl in ("fxrl", "purejaxrl"):
            if impl in entry:
                entry[impl]["returns"] = [[float("nan") if v is None else v for v in r]
                                          for r in entry[impl]["returns"]]  # fmt: skip
    return data


def _write_json(path: Path, data: dict) -> None:
    def clean(x: object) -> object:
        if isinstance(x, float) and math.isnan(x):
            return None
        if isinstance(x, list):
            return [clean(v) for v in x]
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        return x

    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(clean(data)))
    os.replace(tmp, path)


# ------------------------------------------------------------------------------ main


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--games", default=",".join(GAMES), help="comma-separated MinAtar ids")
    p.add_argument("--total-steps", type=int, default=10_000_000, help="env steps per seed")
    p.add_argument("--seeds", type=int, default=8, help="vmapped seeds per library")
    p.add_argument("--seed", type=int, default=0, help="the run's key")
    p.add_argument("--threads", type=int, default=1, help="torch (and XLA) threads")
    p.add_argument("--impl", choices=("both", "fxrl", "purejaxrl"), default="both")
    p.add_argument("--eval-episodes", type=int, default=32, help="greedy episodes per seed")
    p.add_argument("--eval-max-steps", type=int, default=EVAL_MAX_STEPS, help=argparse.SUPPRESS)
    p.add_argument("--purejaxrl", default="/tmp/purejaxrl", help="a purejaxrl checkout")
    p.add_argument("--jax-python", default="/tmp/jaxvenv/bin/python", help="python with jax")
    p.add_argument("--out-dir", default=str(ROOT / "docs" / "results"), help="curves and PNGs")
    p.add_argument("--log-every", type=int, default=10, help="updates between stderr lines")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: tiny batches, 2 seeds, 2 updates, eager fxrl")  # fmt: skip
    args = p.parse_args()
    from fxrl.envs import registered

    games = [g.strip() for g in args.games.split(",") if g.strip()]
    bad = [g for g in games if g not in registered() or not g.endswith("-MinAtar")]
    if bad or not games:
        known = [g for g in registered() if g.endswith("-MinAtar")]
        raise SystemExit(f"minatar_ppo: unknown game(s) {bad}; expected some of {known}")
    if args.quick:
        args.seeds = min(args.seeds, 2)
        args.total_steps = min(args.total_steps, 2 * QUICK["num_envs"] * QUICK["num_steps"])
        args.eval_episodes, args.eval_max_steps = min(args.eval_episodes, 2), 20
    torch.set_num_threads(args.threads)
    _emit(bench="minatar_ppo", cpu=cpu_model(), torch=torch.__version__,
          threads=torch.get_num_threads(), seeds=args.seeds, total_steps=args.total_steps,
          env_params=GYMNAX, quick=args.quick)  # fmt: skip
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    curves_path = out_dir / "minatar_ppo_curves.json"
    failed = False
    for game in games:
        rows, curves = {}, {}
        for impl, run in (("fxrl", run_fxrl), ("purejaxrl", run_purejaxrl)):
            if args.impl not in ("both", impl):
                continue
            try:
                rows[impl], curves[impl] = run(args, game)
            except (Exception, SystemExit) as e:  # one failed run leaves the others' rows
                lines = [line.strip() for line in str(e).splitlines() if line.strip()]
                _emit(game=game, impl=impl, error=f"{type(e).__name__}: {(lines or [''])[0]}")
                failed = True
                continue
            _emit(**rows[impl])
        if len(rows) == 2:
            fx, pj = rows["fxrl"], rows["purejaxrl"]
            _emit(game=game, ratio="greedy fxrl/purejaxrl",
                  value=round(fx["greedy_mean"] / pj["greedy_mean"], 3)
                  if pj["greedy_mean"] else None)  # fmt: skip
            # wall time per env step (fxrl's run_s leaves out its first update)
            _emit(game=game, ratio="time per step fxrl/purejaxrl",
                  value=round(pj["steps_per_s"] / fx["steps_per_s"], 3))  # fmt: skip
        # curves of every game so far, kept as each game ends; a library run alone
        # (--impl) joins the other's curves from an earlier run at the same budget
        saved = read_curves(curves_path)
        entry = saved.get(game, {})
        if (entry.get("total_steps"), entry.get("seeds")) != (args.total_steps, args.seeds):
            entry = {}
        entry.update(total_steps=args.total_steps, seeds=args.seeds, **curves)
        saved[game] = entry
        _write_json(curves_path, saved)
        both = {k: entry[k] for k in ("fxrl", "purejaxrl") if k in entry}
        if both:
            plot(game, both, out_dir / f"minatar_ppo_{game}.png", args.total_steps)
    if failed:  # exit 0 all the same: bench/record.py keeps the rows, error rows included
        _log("minatar_ppo: a run failed (its error row says why); the others ran")


if __name__ == "__main__":
    main()
