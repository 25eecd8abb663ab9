"""Where the compile of a whole update goes, phase by phase, cold and warm.

For each case, two fresh processes share one fresh inductor cache
(``TORCHINDUCTOR_CACHE_DIR``): ``cold`` compiles the update from nothing, ``warm`` is a
second process that finds the program in that cache. Each process first compiles a
trivial function (inductor's one-time set-up: its vector-ISA probes and precompiled
headers, reported apart as ``setup_cpu_s``), then calls the update once (the compile and
its first run, reported apart) and a few more times (``steady_cpu_ms``).

Times are CPU seconds of the process and of the compilers it runs (``os.times``, children
included), not wall seconds, so that a loaded machine inflates them less; inductor's
compile workers are turned off (``compile_threads=1``) so that every g++ is a child of the
process and is counted, and the wrapper's and the kernels' g++ run one after the other
(``FXRL_PARALLEL_BUILD=0`` unless the environment sets it), so that each is charged to
its own phase. A phase is charged the CPU spent while it is the innermost phase
running (nested phases are not counted twice):

- ``trace``: ``make_fx`` over fake tensors (``fxrl.compile``'s own trace);
- ``fxrl_passes``: fxrl's graph edits before inductor (lifted loop constants, pruned outputs);
- ``aot_metadata``, ``aot_capture``: AOTAutograd's functionalized runs over the graph (the
  output/mutation analysis, then the functional graph it hands to inductor);
- ``cache``: the FX graph and AOTAutograd caches' keys, lookups and saves;
- ``graph_passes``: inductor's pre-grad, joint-graph and post-grad passes, and
  ``scan_to_while``, the post-grad pass that turns each rolled ``scan`` into a ``while_loop``
  (tracing its body again);
- ``lowering``: ``GraphLowering.run`` (aten ops to inductor IR);
- ``scheduling``: ``Scheduler.__init__`` (dependencies, fusion), per graph and loop body;
- ``kernel_codegen``: generating C++ kernels (``Scheduler.codegen``, loop bodies included);
- ``wrapper_codegen``: the C++ wrapper around the kernels;
- ``gxx_kernels``, ``gxx_wrapper``, ``gxx_link``, ``gxx_pch``, ``gxx_other``: g++ on the
  kernels' file, the wrapper's file, the link, precompiled headers and anything else;
- ``load``: loading the built program; ``other``: the rest of the first call's compile.

``first_run_cpu_s`` is the first call of the built program; ``steady_cpu_ms`` the mean
CPU milliseconds per update over ``--updates`` more calls (torch at ``--threads``).

Usage: ``python bench/compile_phases.py [--cases ppo_8seeds,ppo_1seed,rppo_gru_128,
sac_1seed,dqn_8seeds] [--threads 1] [--updates 5]``. Prints JSON lines: a header (torch,
threads, CPU model), then one line per case and cache state.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

from _common import cpu_model, cpu_s  # bench/_common.py

CASES = ("ppo_8seeds", "ppo_1seed", "rppo_gru_128", "sac_1seed", "dqn_8seeds")

# inductor's timed events (torch._dynamo.utils.dynamo_timed names) -> phase
EVENTS = {
    "aot_collect_metadata": "aot_metadata",
    "create_aot_dispatcher_function": "aot_capture",
    "compile_fx.<locals>.fw_compiler_base": "other",
    "_recursive_pre_grad_passes": "graph_passes",
    "_recursive_joint_graph_passes": "graph_passes",
    "_recursive_post_grad_passes": "graph_passes",
    "pass.post_grad_passes.decompose_scan_to_while_loop": "scan_to_while",
    "GraphLowering.run": "lowering",
    "Scheduler.__init__": "scheduling",
    "Scheduler.codegen": "kernel_codegen",
    "CppWrapperCpu.generate": "wrapper_codegen",
    "PyCodeCache.load_by_key_path": "load",
    "AOTAutogradCache.inductor_load": "load",
}


class Phases:
    """CPU seconds charged to the innermost phase open at each moment."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}
        self.stack = ["other"]
        self.last = cpu_s()

    def _flush(self) -> None:
        now = cpu_s()
        self.cpu[self.stack[-1]] = self.cpu.get(self.stack[-1], 0.0) + now - self.last
        self.last = now

    def enter(self, phase: str) -> None:
        self._flush()
        self.stack.append(phase)

    def exit(self) -> None:
        self._flush()
        self.stack.pop()

    def span(self, phase: str, fn: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            self.enter(phase)
            try:
                return fn(*args, **kwargs)
            finally:
                self.exit()

        return wrapped


def _gxx_phase(cmd_line: str) -> str:
    if "-x c++-header" in cmd_line:
        return "gxx_pch"
    if ".optimized.cpp" in cmd_line:
        return "gxx_kernels"
    if ".main.cpp" in cmd_line:
        return "gxx_wrapper"
    if ".main.o " in cmd_line and " -c " not in cmd_line:
        return "gxx_link"
    return "gxx_other"


def instrument(phases: Phases) -> None:
    """Hook inductor's timed events, fxrl's trace and each g++ run into ``phases``."""
    from torch._dynamo.utils import ChromiumEventLogger
    from torch._inductor import codecache, cpp_builder

    import fxrl.compile  # noqa: F401  (the module, not the function fxrl exports)

    fc = sys.modules["fxrl.compile"]
    start, end = ChromiumEventLogger.log_event_start, ChromiumEventLogger.log_event_end
    open_events: list[bool] = []

    def log_start(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        phase = EVENTS.get(name)
        if phase is None and ("cache" in name.lower() or "hash" in name.lower()):
            phase = "cache"
        open_events.append(phase is not None)
        if phase is not None:
            phases.enter(phase)
        return start(self, name, *args, **kwargs)

    def log_end(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        if open_events.pop():
            phases.exit()
        return end(self, name, *args, **kwargs)

    ChromiumEventLogger.log_event_start = log_start
    ChromiumEventLogger.log_event_end = log_end
    fc._trace = phases.span("trace", fc._trace)
    run = cpp_builder._run_compile_cmd

    def run_gxx(cmd_line: str, cwd: str) -> None:
        phases.enter(_gxx_phase(cmd_line))
        try:
            run(cmd_line, cwd)
        finally:
            phases.exit()

    cpp_builder._run_compile_cmd = run_gxx
    passes = ("_lift_loop_constants", "_hoist_unchanged_carries", "_drop_unread_loop_inputs")
    for name in (*passes, "_prune_outputs"):
        setattr(fc, name, phases.span("fxrl_passes", getattr(fc, name)))
    from torch._functorch._aot_autograd import autograd_cache

    for cls, name in ((codecache.FxGraphCache, "prepare_key"),
                      (codecache.FxGraphCache, "_lookup_graph"),
                      (codecache.FxGraphCache, "_save_graph"),
                      (autograd_cache.AOTAutogradCache, "try_load"),
                      (autograd_cache.AOTAutogradCache, "save")):  # fmt: skip
        setattr(cls, name, staticmethod(phases.span("cache", getattr(cls, name))))


def make_case(case: str) -> tuple[Any, Any]:
    import fxrl
    from fxrl import random
    from fxrl.algorithms import core, dqn, ppo, recurrent_ppo, sac, td3

    makers = {"ppo": ppo, "sac": sac, "td3": td3, "dqn": dqn}
    name, _, rest = case.partition("_")
    if name in makers and rest.endswith(("seed", "seeds")):
        seeds = int(rest.removesuffix("seeds").removesuffix("seed"))
        algo = makers[name].make(makers[name].Config())
        init, update = core.batched(algo, seeds, compile=True)
    elif case.startswith("step_"):  # step_<env id>: 64 auto-resetting envs, one program
        from fxrl import envs

        batch = envs.batch(envs.make(case.removeprefix("step_")), 64)
        step = fxrl.compile(batch.step)
        action = batch.env.action_spec.sample(random.key(1), 64)
        return batch.reset(random.key(0))[0], lambda s: step(s, action)
    elif case.startswith("rppo_gru_"):
        config = recurrent_ppo.Config(cell="gru", num_steps=int(case.rsplit("_", 1)[1]))
        init, update = core.batched(recurrent_ppo.make(config), 1, compile=True)
    else:
        raise ValueError(f"compile_phases: unknown case {case!r}; expected one of {CASES}")
    return init(random.key(0)), update


def child(case: str, threads: int, updates: int, options: dict[str, Any]) -> dict[str, Any]:
    # fxrl._build_patch's side-by-side g++ would charge the wrapper's and the kernels' g++
    # to whichever phase is innermost when each ends: one after the other unless the
    # caller set the variable (bench/direct_ab.py's --variable FXRL_PARALLEL_BUILD)
    os.environ.setdefault("FXRL_PARALLEL_BUILD", "0")
    import torch

    torch.set_num_threads(threads)
    torch._inductor.config.compile_threads = 1  # every g++ a child of this process
    import fxrl

    import_cpu = cpu_s()  # since the process started: the interpreter and the imports
    sys.modules["fxrl.compile"].DEFAULT_OPTIONS.update(options)

    begin = cpu_s()
    fxrl.compile(lambda x: x + 1)(torch.zeros(3))  # inductor's one-time set-up
    setup = cpu_s() - begin
    phases = Phases()
    instrument(phases)
    state, update = make_case(case)
    fc = sys.modules["fxrl.compile"]
    first_run: list[float] = []
    call = fc._Program.__call__

    def timed_call(self: Any, *args: Any) -> Any:
        phases.enter("run")
        begin = cpu_s()
        try:
            return call(self, *args)
        finally:
            first_run.append(cpu_s() - begin)
            phases.exit()

    fc._Program.__call__ = timed_call
    wall, phases.last, phases.cpu = time.perf_counter(), cpu_s(), {}
    state, _ = update(state)
    wall = time.perf_counter() - wall
    fc._Program.__call__ = call
    begin = time.process_time()  # os.times ticks are too coarse for one update
    for _ in range(updates):
        state, _ = update(state)
    steady = 1e3 * (time.process_time() - begin) / max(updates, 1)
    phases.cpu.pop("run", None)
    return {
        "import_cpu_s": round(import_cpu, 2),
        "setup_cpu_s": round(setup, 2),
        "compile_cpu_s": round(sum(phases.cpu.values()), 2),
        "compile_wall_s": round(wall - sum(first_run), 2),
        "phases_cpu_s": {
            k: round(v, 2) for k, v in sorted(phases.cpu.items(), key=lambda kv: -kv[1])
        },
        "first_run_cpu_s": round(sum(first_run), 3),
        "steady_cpu_ms": round(steady, 2) if updates else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--updates", type=int, default=5)
    parser.add_argument(
        "--options", default="{}", help="inductor options over fxrl.compile's defaults (JSON)"
    )
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        options = json.loads(args.options)
        print(json.dumps(child(args.child, args.threads, args.updates, options)), flush=True)
        return
    import torch

    header = {"torch": torch.__version__, "threads": args.threads, "cpu": cpu_model(),
              "cpus": os.cpu_count(), "options": json.loads(args.options)}  # fmt: skip
    print(json.dumps(header), flush=True)
    for case in args.cases.split(","):
        with tempfile.TemporaryDirectory() as cache:
            for state in ("cold", "warm"):
                env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
                cmd = [sys.executable, __file__, "--child", case, "--threads", str(args.threads),
                       "--updates", str(args.updates), "--options", args.options]  # fmt: skip
                done = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if done.returncode != 0:
                    line = {"error": done.stderr.strip().splitlines()[-1:]}
                else:
                    line = json.loads(done.stdout.strip().splitlines()[-1])
                print(json.dumps({"case": case, "cache": state, **line}), flush=True)


if __name__ == "__main__":
    main()
