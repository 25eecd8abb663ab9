"""fxrl.compile reuses inductor's on-disk FX graph cache across processes (rolled loops
included), and never serves a stale program for a changed function or loop body."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import torch
    torch.set_num_threads(1)
    from torch._dynamo.utils import counters
    import torch._inductor.compile_fx as compile_fx
    import fxrl

    from fxrl.scan import scan

    joint = []  # inductor's joint-graph passes, run by a compile that misses the index
    real_joint = compile_fx._recursive_joint_graph_passes
    def counted(*args, **kwargs):
        joint.append(1)
        return real_joint(*args, **kwargs)

    compile_fx._recursive_joint_graph_passes = counted

    SCALE = float(sys.argv[1])

    def f(params, x):
        h = torch.tanh(x @ params["w1"] + params["b1"])
        # a rolled loop whose body holds the constant the third run changes
        _, ys = scan(lambda c, row: (c + row, {"y": (c + row) * SCALE}), torch.zeros(8), h)
        return {"y": (h @ params["w2"]) * SCALE, "h": h, "cum": ys["y"]}

    params = {"w1": torch.ones(4, 8) / 8, "b1": torch.zeros(8), "w2": torch.ones(8, 2)}
    x = torch.linspace(-1.0, 1.0, 12).reshape(3, 4)
    out = fxrl.compile(f)(params, x)
    ref = f(params, x)
    print(json.dumps({
        "cache": {k: v for k, v in counters["inductor"].items() if k.startswith("fxgraph")},
        "y": out["y"].tolist(),
        "equal": all(torch.allclose(out[k], ref[k]) for k in ("y", "h", "cum")),
        "joint_passes": len(joint),
    }))
    """
)


def _run(cache_dir: str, scale: float) -> dict:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache_dir, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(scale)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    cache = str(tmp_path_factory.mktemp("inductor-cache"))
    # a cold cache, the same program again in a new process, then a changed function
    return [_run(cache, 2.0), _run(cache, 2.0), _run(cache, 3.0)]


def test_a_second_process_loads_the_program_from_the_cache(runs: list[dict]) -> None:
    first, second, _ = runs
    assert first["cache"].get("fxgraph_cache_miss") == 1, first
    assert second["cache"].get("fxgraph_cache_hit") == 1, second
    assert second["cache"].get("fxgraph_cache_miss", 0) == 0, second
    assert first["equal"] and second["equal"]
    assert first["y"] == second["y"]


def test_a_second_process_finds_the_program_without_inductors_joint_graph_passes(
    runs: list[dict],
) -> None:
    # fxrl._direct's index, keyed by the graph before those passes, names the program
    from fxrl import _direct

    if not _direct.applies([]):
        pytest.skip("fxrl._direct is for torch 2.13")
    first, second, changed = runs
    assert first["joint_passes"] >= 1 and changed["joint_passes"] >= 1
    assert second["joint_passes"] == 0, second


def test_a_changed_function_compiles_anew_instead_of_reusing_a_stale_program(
    runs: list[dict],
) -> None:
    first, _, changed = runs
    assert changed["cache"].get("fxgraph_cache_miss") == 1, changed
    assert changed["cache"].get("fxgraph_cache_hit", 0) == 0, changed
    assert changed["equal"]  # equal to its own eager result, so not first's program
    for new, old in zip(changed["y"], first["y"], strict=True):
        assert new == pytest.approx([v * 1.5 for v in old], rel=1e-6)
