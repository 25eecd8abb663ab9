"""MinAtar steps per second: fxrl's pure games, batched and compiled, against gymnax's
(JAX, jit of a vmapped step, in a subprocess) and the minatar package stepping one game in
a Python loop, same run.

Prints JSON lines: a header (torch, threads, CPU model), then per game

- ``fxrl_compiled``: ``fxrl.compile`` of one step of ``envs.batch(envs.make(id,
  episode_stats=False), N)`` (sticky actions, time limit and auto-reset on, as
  ``make`` gives them), a uniformly random action per env drawn inside the program from
  a per-step key; ``compile_s`` is the first call's time (cold unless the inductor cache
  in ``TORCHINDUCTOR_CACHE_DIR`` is warm);
- ``gymnax`` (unless ``--no-gymnax``): ``jax.jit`` of ``vmap(env.step)`` over N envs of
  ``gymnax.make(id)`` (its defaults: minimal action set, no sticky actions, auto-reset),
  a uniformly random action per env drawn inside the program, run by
  ``--jax-python`` (JAX on CPU; with ``--threads 1`` XLA is kept to one thread);
  ``compile_s`` is its ``lower().compile()`` time;
- ``fxrl_compiled_options`` (only with ``--compile-options JSON``): the same program
  compiled with those inductor options over fxrl.compile's defaults (e.g.
  ``'{"cpp.simdlen": 1}'``: scalar C++ loops, which gcc vectorises itself; inductor's
  explicit vectorisation of bool tensors is slow on this torch, see docs/envs/minatar.md);
- ``minatar``: ``minatar.Environment(game)`` (sticky actions 0.1) stepped with
  ``act(numpy random action)``, ``reset()`` when the game ends;
- ``ratio`` lines ``fxrl_compiled/minatar`` and ``fxrl_compiled/gymnax`` (env steps per
  second over the other's).

Each figure is the median of ``--repeats`` timed rounds, the contenders alternating
within each round (``bench/_common.measure``; gymnax's process runs one round per line
it is sent), so drift on a shared machine hits all alike. Before timing, the compiled
step is checked against the eager step (identical states).

Usage: ``python bench/minatar_bench.py [--quick] [--threads 1] [--batch 4096]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from typing import Any

import numpy as np
import torch
from _common import cpu_model, measure, one_core_jax  # bench/_common.py

from fxrl import envs, random
from fxrl.compile import compile as fxrl_compile
from fxrl.testing import assert_trees_close

GAMES = {
    "Asterix-MinAtar": "asterix",
    "Breakout-MinAtar": "breakout",
    "Freeway-MinAtar": "freeway",
    "Seaquest-MinAtar": "seaquest",
    "SpaceInvaders-MinAtar": "space_invaders",
}


def fxrl_runner(
    env_id: str, num_envs: int, steps: int, options: dict | None = None
) -> tuple[Any, float]:
    """A function running ``steps`` compiled batched steps, and its compile time."""
    env = envs.batch(envs.make(env_id, episode_stats=False), num_envs)

    def step(state: Any, key: torch.Tensor) -> tuple[Any, Any]:
        action = (random.bits(key, env.batch_shape) * 6) >> 32  # uniform over 6
        return env.step(state, action)

    compiled = fxrl_compile(step, options=options)
    keys = random.split(random.key(1), 1024)
    state = env.reset(random.key(0))[0]
    start = time.perf_counter()
    compiled(state, keys[0])
    compile_s = time.perf_counter() - start
    eager = state
    for i in range(3):  # check the program against eager code on a few steps
        state, ts = compiled(state, keys[i])
        eager, eager_ts = step(eager, keys[i])
        assert_trees_close((state, ts), (eager, eager_ts), rtol=0, atol=0)
    box = [state]

    def run() -> None:
        s = box[0]
        for i in range(steps):
            s, _ = compiled(s, keys[i % 1024])
        box[0] = s

    return run, compile_s


def minatar_runner(env_id: str, steps: int) -> Any:
    """A function running ``steps`` steps of the package's game in a Python loop."""
    import minatar

    game = minatar.Environment(GAMES[env_id])
    game.seed(0)
    game.reset()
    rng = np.random.default_rng(0)

    def run() -> None:
        actions = rng.integers(0, 6, steps)
        for a in actions:
            _, terminal = game.act(int(a))
            if terminal:
                game.reset()

    return run


# gymnax's step as its users run it (jit of vmap(env.step), which auto-resets), one
# timed round of `steps` calls per line read from stdin
GYMNAX = r"""
import json, sys, time
import jax
import gymnax

env_id, num_envs, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
env, params = gymnax.make(env_id)
num_actions = env.action_space(params).n


def step(state, key):
    k_act, k_step = jax.random.split(key)
    action = jax.random.randint(k_act, (num_envs,), 0, num_actions)
    keys = jax.random.split(k_step, num_envs)
    obs, state, reward, done, _ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
        keys, state, action, params
    )
    return state, (obs, reward, done)


_, state = jax.vmap(env.reset, in_axes=(0, None))(
    jax.random.split(jax.random.PRNGKey(0), num_envs), params
)
keys = jax.random.split(jax.random.PRNGKey(1), 1024)
start = time.perf_counter()
compiled = jax.jit(step).lower(state, keys[0]).compile()
compile_s = time.perf_counter() - start
state, out = compiled(state, keys[0])
jax.block_until_ready(out)
print(json.dumps({"compile_s": compile_s, "num_actions": int(num_actions),
                  "jax": jax.__version__, "devices": str(jax.devices())}), flush=True)
i = 0
for line in sys.stdin:
    for _ in range(steps):
        state, out = compiled(state, keys[i % 1024])
        i += 1
    jax.block_until_ready(out)
    print("done", flush=True)
"""


class GymnaxRunner:
    """gymnax's batched step in a JAX subprocess; calling it runs one timed round there."""

    def __init__(self, python: str, env_id: str, num_envs: int, steps: int, threads: int):
        env = {**os.environ, "JAX_PLATFORMS": "cpu"}
        one_core = one_core_jax(env, threads)  # XLA on one thread and core, as torch
        self.proc = subprocess.Popen(
            [python, "-c", GYMNAX, env_id, str(num_envs), str(steps)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            preexec_fn=one_core,
        )
        first = self.proc.stdout.readline()
        if not first:
            raise RuntimeError(f"gymnax subprocess ({python}) for {env_id} exited early")
        self.info = json.loads(first)

    def __call__(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        if self.proc.stdout.readline().strip() != "done":
            raise RuntimeError("gymnax subprocess stopped")

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Breakout at batch 64, short")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--batch", type=int, default=4096, help="envs per batched step")
    parser.add_argument("--steps", type=int, default=50, help="batched steps per timed call")
    parser.add_argument("--repeats", type=int, default=7, help="timed rounds (median)")
    parser.add_argument("--envs", default=",".join(GAMES), help="comma-separated ids")
    parser.add_argument("--jax-python", default="/tmp/jaxvenv/bin/python",
                        help="python with jax and gymnax")  # fmt: skip
    parser.add_argument("--no-gymnax", action="store_true", help="skip gymnax")
    parser.add_argument("--compile-options", default=None,
                        help="JSON inductor options: also time fxrl_compiled_options")  # fmt: skip
    args = parser.parse_args()
    env_ids = args.envs.split(",")
    if args.quick:
        env_ids, args.batch, args.steps, args.repeats = ["Breakout-MinAtar"], 64, 5, 3
    unknown = [e for e in env_ids if e not in GAMES or e not in envs.registered()]
    if unknown:
        parser.error(f"unknown MinAtar ids {unknown}; known: {list(GAMES)}")
    use_gymnax = not args.no_gymnax
    if use_gymnax and not os.path.exists(args.jax_python):
        parser.error(f"--jax-python {args.jax_python} does not exist (or pass --no-gymnax)")
    torch.set_num_threads(args.threads)
    header = {"bench": "minatar", "torch": torch.__version__, "threads": torch.get_num_threads(),
              "cpu": cpu_model(), "batch": args.batch, "quick": args.quick}  # fmt: skip
    print(json.dumps(header), flush=True)
    for env_id in env_ids:
        fxrl_run, compile_s = fxrl_runner(env_id, args.batch, args.steps)
        package_steps = 2000 if args.quick else 20000
        runs = {"fxrl_compiled": fxrl_run, "minatar": minatar_runner(env_id, package_steps)}
        env_steps = {"fxrl_compiled": args.steps * args.batch, "minatar": package_steps}
        compile_times = {"fxrl_compiled": compile_s}
        if args.compile_options:
            options = json.loads(args.compile_options)
            run, compile_times["fxrl_compiled_options"] = fxrl_runner(
                env_id, args.batch, args.steps, options
            )
            runs["fxrl_compiled_options"] = run
            env_steps["fxrl_compiled_options"] = args.steps * args.batch
        gymnax = None
        if use_gymnax:
            try:
                gymnax = GymnaxRunner(args.jax_python, env_id, args.batch, args.steps, args.threads)
            except RuntimeError as e:  # gymnax has no such game (0.0.9 has no Seaquest)
                print(json.dumps({"env": env_id, "impl": "gymnax", "skipped": str(e)}), flush=True)
        if gymnax is not None:
            runs["gymnax"] = gymnax
            env_steps["gymnax"] = args.steps * args.batch
            compile_times["gymnax"] = gymnax.info["compile_s"]
        try:
            times, _ = measure(runs, iters=1, repeats=args.repeats)
        finally:
            if gymnax is not None:
                gymnax.close()
        rates = {
            name: env_steps[name] / (statistics.median(ms) / 1e3) for name, ms in times.items()
        }
        for name, rate in rates.items():
            line = {"env": env_id, "impl": name, "steps_per_s": round(rate)}
            if name in compile_times:
                line |= {"batch": args.batch, "compile_s": round(compile_times[name], 2)}
            if name == "fxrl_compiled_options":
                line |= {"options": json.loads(args.compile_options)}
            if name == "gymnax":
                line |= {"jax": gymnax.info["jax"], "num_actions": gymnax.info["num_actions"]}
            print(json.dumps(line), flush=True)
        for other in [n for n in rates if not n.startswith("fxrl_compiled")]:
            ratio = rates["fxrl_compiled"] / rates[other]
            row = {"env": env_id, "ratio": f"fxrl_compiled/{other}", "value": round(ratio, 2)}
            print(json.dumps(row), flush=True)
            if "fxrl_compiled_options" in rates:
                ratio = rates["fxrl_compiled_options"] / rates[other]
                name = f"fxrl_compiled_options/{other}"
                print(
                    json.dumps({"env": env_id, "ratio": name, "value": round(ratio, 2)}), flush=True
                )


if __name__ == "__main__":
    main()
