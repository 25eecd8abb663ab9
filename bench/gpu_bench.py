"""fxrl and PureJaxRL side by side on one GPU, in one call of the device machine.

    python bench/gpu_bench.py --prepare --purejaxrl-src PUREJAXRL_CHECKOUT   # here, once
    python bench/gpu_bench.py --out $OUT/gpu_bench.jsonl --total-s 540      # on the GPU
    python bench/gpu_bench.py --quick --out /tmp/gpu_quick.jsonl            # CPU, seconds

Cases (each in its own process, so every compile is cold and one failure or timeout
costs only its case), in order of importance, as many as ``--total-s`` allows:

  ppo_cartpole   PPO on CartPole-v1, PureJaxRL's ``ppo.py`` settings on both sides (4 envs
                 x 128 steps, 4 epochs x 4 minibatches, lr 2.5e-4 annealed), 500k env
                 steps per seed, 8, 1024 and 1 vmapped seeds: fxrl's ``core.batched``
                 update (one ``fxrl.compile`` program) and PureJaxRL's
                 ``jit(vmap(make_train(config)))``
  minatar_ppo    PPO on Breakout-MinAtar, 64 seeds x 1M steps (``ppo.Config.tuned``, the
                 settings of PureJaxRL's MinAtar notebook; gymnax's env on its side)
  sac_pendulum   SAC on Pendulum-v1, fxrl's 8 vmapped seeds against Stable-Baselines3's SAC
                 (one seed, ``device="cuda"``) where SB3 imports, SB3's settings on both

Each line of ``--out`` (JSONL, rewritten after every case, so a call cut short keeps what
finished): a header (GPU and CPU names, torch, jax and jaxlib versions, the command),
then per case ``compile_s`` (fxrl: the first update, which compiles and runs it
once; PureJaxRL: ``jit(...).lower().compile()``), ``run_s`` (the rest of the training),
``steps_per_s`` (env steps per second of all seeds in the run phase), ``final_return``
(the mean return of the episodes that ended in the last 10 updates, as a check that both
learn) and ``status``: ``ok``, ``partial`` (fxrl stopped at the case's time limit; its
figures cover the updates done), ``timeout`` (killed: the compile did not finish),
``skipped`` (with a ``reason``) or ``error``. ``--plan variants`` measures fxrl's compile
options instead (``fxrl.cuda_graph`` off against on).

``--prepare`` writes ``bench/.device/`` (ignored by git; the ``run`` tool's ``carry``):
the wheels the device machine lacks (gymnax, distrax, tfp-nightly... for PureJaxRL; optree
for fxrl; gymnasium and stable-baselines3 for SAC; tyro and its needs for fxrl's CLI) and
a copy of PureJaxRL's ``ppo.py`` and ``wrappers.py`` from a checkout. docs/guide/gpu.md
gives the exact call.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from _common import cpu_model  # bench/_common.py

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
DEVICE_DIR = BENCH / ".device"

# What the device machine (torch 2.11 + CUDA, jax 0.11.2, flax, optax, chex, Python 3.12,
# no network) lacks, pinned: the versions PureJaxRL's PPO ran with there.
WHEELS = (
    "gymnax==0.0.9", "distrax==0.1.9", "tfp-nightly==0.26.0.dev20261027", "dm-tree==0.1.10",
    "gast==0.7.0", "decorator==5.3.1", "optree==0.20.0", "gymnasium==1.4.0",
    "farama-notifications==0.0.6", "tyro==1.0.17", "docstring-parser==0.18.0",
    "typeguard==4.6.1", "shtab==1.13.0", "stable-baselines3==2.9.2",
)  # fmt: skip
PUREJAXRL_FILES = ("purejaxrl/ppo.py", "purejaxrl/wrappers.py", "LICENSE")

# PureJaxRL's CartPole settings (its ppo.py's config), for both sides
PPO_CARTPOLE = {"num_envs": 4, "num_steps": 128, "update_epochs": 4, "num_minibatches": 4,
                "lr": 2.5e-4, "anneal_lr": True}  # fmt: skip
GYMNAX = {"sticky_action_prob": 0.0, "minimal_action_set": True}  # what gymnax's MinAtar is
# PureJaxRL's MinAtar notebook settings: ppo.Config.tuned("Breakout-MinAtar") on fxrl's side
# (tests/test_gpu_bench.py checks they agree)
PPO_MINATAR = {"num_envs": 64, "num_steps": 128, "update_epochs": 4, "num_minibatches": 8,
               "lr": 5e-3, "anneal_lr": True}  # fmt: skip
QUICK_PPO = {"num_envs": 2, "num_steps": 8, "update_epochs": 1, "num_minibatches": 1}
QUICK_SAC = {"learning_starts": 4, "batch_size": 4, "buffer_size": 64, "hidden": (8,)}


def plan(name: str, quick: bool) -> list[dict]:
    """The cases of a plan, most important first; ``timeout_s`` bounds each process."""
    if quick:
        ppo = [{"case": "ppo_cartpole", "impl": impl, "seeds": s, "total_steps": 32,
                "timeout_s": 300} for s in (1, 2) for impl in ("purejaxrl", "fxrl")]  # fmt: skip
        return [
            *ppo,
            {"case": "minatar_ppo", "impl": "purejaxrl", "seeds": 2, "total_steps": 32,
             "timeout_s": 300},
            {"case": "minatar_ppo", "impl": "fxrl", "seeds": 2, "total_steps": 32,
             "timeout_s": 300},
            {"case": "sac_pendulum", "impl": "fxrl", "seeds": 2, "total_steps": 16,
             "timeout_s": 300},
            {"case": "sac_pendulum", "impl": "sb3", "seeds": 1, "total_steps": 16,
             "timeout_s": 300},
        ]  # fmt: skip
    if name == "variants":  # fxrl's compile options against each other (fxrl.cuda_graph)
        return [
            {"case": "ppo_cartpole", "impl": "fxrl", "seeds": s, "total_steps": 500_000,
             "options": {"fxrl.cuda_graph": graph}, "timeout_s": t}
            for s, t in ((8, 90), (1024, 100), (1, 80)) for graph in (False, True)
        ]  # fmt: skip
    ppo = []
    for seeds, (t_pj, t_fx) in ((8, (40, 70)), (1024, (55, 75)), (1, (35, 55))):
        ppo += [
            {"case": "ppo_cartpole", "impl": "purejaxrl", "seeds": seeds,
             "total_steps": 500_000, "timeout_s": t_pj},
            {"case": "ppo_cartpole", "impl": "fxrl", "seeds": seeds, "total_steps": 500_000,
             "timeout_s": t_fx},
        ]  # fmt: skip
    return [
        *ppo,
        {"case": "minatar_ppo", "impl": "purejaxrl", "seeds": 64, "total_steps": 1_000_000,
         "timeout_s": 70},
        {"case": "minatar_ppo", "impl": "fxrl", "seeds": 64, "total_steps": 1_000_000,
         "timeout_s": 65},
        {"case": "sac_pendulum", "impl": "fxrl", "seeds": 8, "total_steps": 20_000,
         "timeout_s": 30},
        {"case": "sac_pendulum", "impl": "sb3", "seeds": 1, "total_steps": 20_000,
         "timeout_s": 20},
    ]  # fmt: skip


# ------------------------------------------------------------------------------ fxrl


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _final_return(history: list) -> float:
    """nanmean of ``episode_return`` over the last 10 updates and every seed."""
    import torch

    if not history:
        return float("nan")
    last = torch.stack([h.float().reshape(-1) for h in history[-10:]])
    return float(last.nanmean())


def run_fxrl(case: dict, deadline: float) -> dict:
    """Train ``case["seeds"]`` vmapped fxrl agents until the budget or ``deadline``."""
    from fxrl import compile as fxrl_compile
    from fxrl import random
    from fxrl.algorithms import core, ppo, sac

    device, quick = case["device"], case["quick"]
    steps = case["total_steps"]
    if case["case"] == "ppo_cartpole":
        config = ppo.Config(env="CartPole-v1", total_steps=steps,
                            **(QUICK_PPO if quick else PPO_CARTPOLE))  # fmt: skip
        algo = ppo.make(config)
    elif case["case"] == "minatar_ppo":
        extra = {**QUICK_PPO, "env_params": GYMNAX} if quick else {"env_params": GYMNAX}
        algo = ppo.make(ppo.Config.tuned("Breakout-MinAtar", total_steps=steps, **extra))
    else:
        algo = sac.make(sac.Config(total_steps=steps, **(QUICK_SAC if quick else {})))
    seeds = case["seeds"]
    init, update = core.batched(algo, seeds, compile=False)
    if not quick:  # --quick runs eager: the CPU check is of the script, not the compiler
        update = fxrl_compile(update, options=case.get("options"))
    updates = max(1, steps // algo.steps_per_update)
    state = init(random.key(0, device=device))
    t0 = time.perf_counter()
    state, metrics = update(state)  # compiles every piece, then runs the first update
    _sync(device)
    compile_s = time.perf_counter() - t0
    history, done = [metrics["episode_return"]], 1
    t0 = time.perf_counter()
    while done < updates and time.perf_counter() < deadline:
        state, metrics = update(state)  # no host read: the GPU runs behind the host
        history.append(metrics["episode_return"])
        done += 1
        if done % 8 == 0:  # the host at most 8 updates ahead, so the deadline holds
            _sync(device)
    _sync(device)
    run_s = time.perf_counter() - t0
    per_update = algo.steps_per_update
    return {
        "status": "ok" if done == updates else "partial",
        "compile_s": round(compile_s, 3),
        "run_s": round(run_s, 3),
        "total_s": round(compile_s + run_s, 3),
        "updates": done,
        "updates_planned": updates,
        "steps_done": done * per_update,
        "steps_per_s": round(seeds * (done - 1) * per_update / run_s) if done > 1 else None,
        "final_return": _final_return(history),
        "options": case.get("options") or {},
    }


# ------------------------------------------------------------------------------ PureJaxRL


def _purejaxrl_dir(path: str) -> Path:
    """The folder holding PureJaxRL's ppo.py: ``path`` itself or its ``purejaxrl/``."""
    p = Path(path)
    return p / "purejaxrl" if (p / "purejaxrl" / "ppo.py").is_file() else p


def run_purejaxrl(case: dict, deadline: float) -> dict:
    """PureJaxRL's ``make_train`` unchanged, seeds vmapped, compile and run timed apart."""
    import types

    import jax
    import jax.numpy as jnp

    sys.path[:0] = [str(_purejaxrl_dir(case["purejaxrl"]))]
    # wrappers.py imports brax and navix at the top but uses them only for their own
    # envs: empty stand-ins, as bench/train_bench.py does
    for name in ("brax", "brax.envs", "brax.envs.wrappers", "brax.envs.wrappers.training",
                 "navix"):  # fmt: skip
        sys.modules[name] = types.ModuleType(name)
    sys.modules["brax"].envs = sys.modules["brax.envs"]  # type: ignore[attr-defined]
    sys.modules["brax.envs.wrappers.training"].EpisodeWrapper = None  # type: ignore[attr-defined]
    sys.modules["brax.envs.wrappers.training"].AutoResetWrapper = None  # type: ignore[attr-defined]
    from ppo import make_train

    quick = case["quick"]
    common = {"GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01,
              "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5, "ANNEAL_LR": True, "DEBUG": False,
              "TOTAL_TIMESTEPS": case["total_steps"]}  # fmt: skip
    if case["case"] == "ppo_cartpole":
        sizes = QUICK_PPO if quick else PPO_CARTPOLE
        config = {**common, "LR": 2.5e-4, "ACTIVATION": "tanh", "ENV_NAME": "CartPole-v1"}
    else:  # PureJaxRL's MinAtar notebook, as fxrl's ppo.Config.tuned
        sizes = QUICK_PPO if quick else PPO_MINATAR
        lr = PPO_MINATAR["lr"]
        config = {**common, "LR": lr, "ACTIVATION": "relu", "ENV_NAME": "Breakout-MinAtar"}
    config.update(NUM_ENVS=sizes["num_envs"], NUM_STEPS=sizes["num_steps"],
                  UPDATE_EPOCHS=sizes["update_epochs"],
                  NUM_MINIBATCHES=sizes["num_minibatches"])  # fmt: skip
    seeds = case["seeds"]
    keys = jax.random.split(jax.random.PRNGKey(0), seeds)
    fn = jax.jit(jax.vmap(make_train(config)))
    t0 = time.perf_counter()
    compiled = fn.lower(keys).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = jax.block_until_ready(compiled(keys))
    run_s = time.perf_counter() - t0
    info = out["metrics"]  # leaves [seeds, updates, num_steps, num_envs]
    done = info["returned_episode"]
    ended = done.sum((2, 3))
    per_update = jnp.where(ended > 0, (info["returned_episode_returns"] * done).sum((2, 3))
                           / jnp.maximum(ended, 1), jnp.nan)  # fmt: skip
    updates = int(per_update.shape[1])
    steps_per_update = config["NUM_ENVS"] * config["NUM_STEPS"]
    return {
        "status": "ok",
        "compile_s": round(compile_s, 3),
        "run_s": round(run_s, 3),
        "total_s": round(compile_s + run_s, 3),
        "updates": updates,
        "steps_done": updates * steps_per_update,
        "steps_per_s": round(seeds * updates * steps_per_update / run_s),
        "final_return": float(jnp.nanmean(per_update[:, -10:])),
        "backend": jax.default_backend(),
    }


# ------------------------------------------------------------------------------ SB3


def run_sb3(case: dict, deadline: float) -> dict:
    """Stable-Baselines3's SAC on Pendulum-v1, one seed, on the case's device, until the
    step budget or ``deadline``, in chunks: ms per training step past learning_starts."""
    import warnings

    warnings.simplefilter("ignore")
    from stable_baselines3 import SAC

    quick = case["quick"]
    starts = QUICK_SAC["learning_starts"] if quick else 1000  # fxrl's sac.Config default
    kw = {"batch_size": QUICK_SAC["batch_size"], "buffer_size": QUICK_SAC["buffer_size"],
          "policy_kwargs": {"net_arch": list(QUICK_SAC["hidden"])}} if quick else {}  # fmt: skip
    device = "cuda" if case["device"].startswith("cuda") else "cpu"
    model = SAC("MlpPolicy", "Pendulum-v1", learning_starts=starts, seed=0, device=device,
                verbose=0, **kw)  # fmt: skip
    t0 = time.perf_counter()
    model.learn(total_timesteps=starts + 1)  # past learning_starts: the steps timed learn
    warm_s = time.perf_counter() - t0
    chunk = 4 if quick else 500
    done, t0 = 0, time.perf_counter()
    while done + starts + 1 < case["total_steps"] and time.perf_counter() < deadline:
        model.learn(total_timesteps=chunk, reset_num_timesteps=False)
        done += chunk
    run_s = time.perf_counter() - t0
    ms = run_s / done * 1e3 if done else None
    return {
        "status": "ok" if done + starts + 1 >= case["total_steps"] else "partial",
        "warmup_s": round(warm_s, 3),
        "run_s": round(run_s, 3),
        "steps_done": done,
        "ms_per_step": round(ms, 4) if ms else None,
        "steps_per_s": round(done / run_s) if done else None,
        "projected_s_20k": round(20_000 * ms / 1e3, 1) if ms else None,
        "sb3": importlib.metadata.version("stable-baselines3"),
    }


# ------------------------------------------------------------------------------ the plan


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def gpu_name() -> str:
    """The GPU's name (nvidia-smi, else torch), or "none"."""
    smi = shutil.which("nvidia-smi")
    if smi:
        out = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True)  # fmt: skip
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip().splitlines()[0]
    return "none"


def _missing(python: str, modules: tuple[str, ...]) -> list[str]:
    """The ``modules`` that ``python`` cannot find."""
    code = (
        "import importlib.util as u, sys; "
        "print(','.join(m for m in sys.argv[1:] if not u.find_spec(m)))"
    )
    out = subprocess.run([python, "-c", code, *modules], capture_output=True, text=True)
    return [m for m in out.stdout.strip().split(",") if m] if out.returncode == 0 else [python]


def _skip_reason(case: dict) -> str | None:
    """Why a case cannot run here (a missing package or PureJaxRL copy), else None."""
    if case["impl"] == "purejaxrl":
        missing = _missing(case["jax_python"], ("jax", "flax", "optax", "distrax", "gymnax"))
        if missing:
            return f"not installed here: {', '.join(missing)}"
        if not (_purejaxrl_dir(case["purejaxrl"]) / "ppo.py").is_file():
            return f"no PureJaxRL ppo.py under {case['purejaxrl']} (bench/gpu_bench.py --prepare)"
    if case["impl"] == "sb3" and importlib.util.find_spec("stable_baselines3") is None:
        return "stable-baselines3 does not import here: fxrl's SAC alone"
    return None


def _child(case: dict, timeout: float) -> dict:
    """Run one case in a fresh process; its result, or why there is none."""
    env = dict(os.environ)
    if case["impl"] == "purejaxrl" and not case["device"].startswith("cuda"):
        env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    python = case["jax_python"] if case["impl"] == "purejaxrl" else sys.executable
    cmd = [python, str(Path(__file__).resolve()), "--case", json.dumps(case)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "timeout_s": round(timeout, 1)}
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"status": "error", "error": tail[:500]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _write(path: Path, rows: list[dict]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.replace(tmp, path)


def run_plan(args: argparse.Namespace) -> list[dict]:
    start = time.perf_counter()
    device = args.device or ("cuda" if gpu_name() != "none" else "cpu")
    header = {
        "bench": "gpu_bench", "gpu": gpu_name(), "device": device, "cpu": cpu_model(),
        "torch": _version("torch"), "jax": _version("jax"), "jaxlib": _version("jaxlib"),
        "python": sys.version.split()[0], "quick": args.quick, "plan": args.plan,
        "command": "python bench/gpu_bench.py " + " ".join(sys.argv[1:]),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }  # fmt: skip
    rows = [header]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    _write(out, rows)
    print(json.dumps(header), flush=True)
    for case in plan(args.plan, args.quick):
        case = {**case, "device": device, "quick": args.quick, "purejaxrl": args.purejaxrl,
                "jax_python": args.jax_python}  # fmt: skip
        left = args.total_s - (time.perf_counter() - start)
        reason = _skip_reason(case)
        if reason is None and left < case["timeout_s"]:
            reason = f"out of time: {left:.0f} s left of --total-s {args.total_s:g}"
        if reason is not None:
            result = {"status": "skipped", "reason": reason}
        else:
            result = _child(case, case["timeout_s"])
        local = ("purejaxrl", "jax_python")  # paths of this machine, not results
        row = {"bench": "gpu_bench", **{k: v for k, v in case.items() if k not in local},
               **result}  # fmt: skip
        rows.append(row)
        _write(out, rows)
        print(json.dumps(row), flush=True)
    extra = ratios(rows)
    rows += extra
    _write(out, rows)
    for r in extra:
        print(json.dumps(r), flush=True)
    return rows


def ratios(rows: list[dict]) -> list[dict]:
    """fxrl against its peer per case and seed count: wall to the full budget (compile
    included) and steady steps/s, where both finished."""
    out = []
    done = {(r.get("case"), r.get("impl"), r.get("seeds")): r for r in rows
            if r.get("status") == "ok" and not r.get("options")}  # fmt: skip
    for (case, impl, seeds), fx in done.items():
        if impl != "fxrl":
            continue
        peer = done.get((case, "purejaxrl", seeds))
        if peer is None:
            continue
        wall = round(fx["total_s"] / peer["total_s"], 3)
        out.append({"bench": "gpu_bench", "case": case, "seeds": seeds,
                    "ratio": "wall fxrl/purejaxrl", "value": wall})  # fmt: skip
        out.append({"bench": "gpu_bench", "case": case, "seeds": seeds,
                    "ratio": "steps_per_s fxrl/purejaxrl",
                    "value": round(fx["steps_per_s"] / peer["steps_per_s"], 3)
                    if fx.get("steps_per_s") and peer.get("steps_per_s") else None})  # fmt: skip
    return out


# ------------------------------------------------------------------------------ prepare


def prepare(source: str | None) -> None:
    """Fill bench/.device/: the wheels (pip download, Python 3.12, manylinux x86-64) and a
    copy of PureJaxRL's files from ``source`` (a checkout)."""
    wheels = DEVICE_DIR / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    platforms = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64",
                 "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64"]  # fmt: skip
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--python-version", "3.12", "--implementation", "cp", "-d", str(wheels)]  # fmt: skip
    for p in platforms:
        cmd += ["--platform", p]
    subprocess.run([*cmd, *WHEELS], check=True)
    if source is not None:
        dest = DEVICE_DIR / "purejaxrl"
        dest.mkdir(parents=True, exist_ok=True)
        for rel in PUREJAXRL_FILES:
            shutil.copy(Path(source) / rel, dest / Path(rel).name)
    size = sum(f.stat().st_size for f in DEVICE_DIR.rglob("*") if f.is_file())
    print(f"{DEVICE_DIR}: {size / 2**20:.1f} MiB (the run tool carries at most 64 MiB)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny cases, eager, on the CPU")
    p.add_argument("--plan", choices=("main", "variants"), default="main")
    p.add_argument("--out", default=str(ROOT / "docs" / "results" / "gpu_bench.jsonl"))
    p.add_argument("--device", default=None, help="default: cuda where a GPU is, else cpu")
    p.add_argument("--total-s", type=float, default=540.0, help="stop starting cases after")
    p.add_argument("--purejaxrl", default=str(DEVICE_DIR / "purejaxrl"),
                   help="PureJaxRL's ppo.py folder (or a checkout)")  # fmt: skip
    p.add_argument("--jax-python", default=sys.executable,
                   help="the Python that runs PureJaxRL (default: this one, as there)")  # fmt: skip
    p.add_argument("--prepare", action="store_true", help="fill bench/.device/ and exit")
    p.add_argument("--purejaxrl-src", default=None, help="with --prepare: a PureJaxRL checkout")
    p.add_argument("--case", default=None, help=argparse.SUPPRESS)  # one case, in a child
    args = p.parse_args()
    if args.prepare:
        prepare(args.purejaxrl_src)
        return
    if args.case is not None:
        case = json.loads(args.case)
        deadline = time.perf_counter() + case["timeout_s"] - 10  # room to report
        run = {"fxrl": run_fxrl, "purejaxrl": run_purejaxrl, "sb3": run_sb3}[case["impl"]]
        result = run(case, deadline)
        print(json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v)
                          for k, v in result.items()}), flush=True)  # fmt: skip
        return
    if args.quick:
        args.device = args.device or "cpu"
    run_plan(args)


if __name__ == "__main__":
    main()
