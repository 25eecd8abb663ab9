"""bench/gpu_bench.py runs as written: its --quick plan on the CPU (PureJaxRL's side where
jax is installed, else reported as skipped), and its GPU plan fits one device call."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
import gpu_bench  # noqa: E402

HAS_JAX = all(importlib.util.find_spec(m) for m in ("jax", "flax", "distrax", "gymnax"))


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_bench") / "quick.jsonl"
    done = subprocess.run(
        [sys.executable, str(BENCH / "gpu_bench.py"), "--quick", "--out", str(out)],
        capture_output=True, text=True, timeout=900,
        env={**os.environ, "SB3_LOGDIR": str(out.parent / "sb3")},  # not /tmp/SB3-<date>
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_the_quick_plan_writes_a_header_and_one_line_per_case(quick):
    header, *rows = quick
    # the header docs/hooks/results.py reads: no "case" key
    assert "case" not in header and header["quick"] is True and header["device"] == "cpu"
    assert {"gpu", "cpu", "torch", "jax", "jaxlib", "command", "date"} <= set(header)
    cases = [r for r in rows if "ratio" not in r]
    assert len(cases) == len(gpu_bench.plan("main", quick=True))


def test_every_fxrl_case_trains_and_reports_compile_and_run_apart(quick):
    fxrl = [r for r in quick if r.get("impl") == "fxrl"]
    assert {r["case"] for r in fxrl} == {"ppo_cartpole", "minatar_ppo", "sac_pendulum"}
    for r in fxrl:
        assert r["status"] == "ok", r
        assert r["compile_s"] > 0 and r["run_s"] > 0 and r["steps_per_s"] > 0
        assert r["updates"] == r["updates_planned"] and r["steps_done"] == r["total_steps"]


def test_the_peers_run_where_installed_and_say_why_not_elsewhere(quick):
    for r in quick:
        if r.get("impl") == "purejaxrl":
            if HAS_JAX:
                assert r["status"] == "ok" and r["steps_per_s"] > 0, r
            else:
                assert r["status"] == "skipped" and "not installed here: jax" in r["reason"]
        if r.get("impl") == "sb3":
            assert r["status"] in ("ok", "skipped"), r


def test_the_gpu_plan_fits_one_ten_minute_call():
    """Every case's time limit within --total-s, which leaves room for the wheels'
    install and the machine's own start inside run's 600 s."""
    for name in ("main", "variants"):
        total = sum(c["timeout_s"] for c in gpu_bench.plan(name, quick=False))
        assert total <= 540, (name, total)


def test_ratios_pair_fxrl_with_purejaxrl_where_both_finished():
    rows = [
        {"case": "ppo_cartpole", "impl": "fxrl", "seeds": 8, "status": "ok", "total_s": 30.0,
         "steps_per_s": 2e5},
        {"case": "ppo_cartpole", "impl": "purejaxrl", "seeds": 8, "status": "ok",
         "total_s": 20.0, "steps_per_s": 4e5},
        {"case": "ppo_cartpole", "impl": "fxrl", "seeds": 1, "status": "partial",
         "total_s": 50.0, "steps_per_s": 1e4},
        {"case": "ppo_cartpole", "impl": "purejaxrl", "seeds": 1, "status": "ok",
         "total_s": 19.0, "steps_per_s": 5e4},
    ]  # fmt: skip
    got = {r["ratio"]: r["value"] for r in gpu_bench.ratios(rows)}
    assert got == {"wall fxrl/purejaxrl": 1.5, "steps_per_s fxrl/purejaxrl": 0.5}


def test_both_sides_of_minatar_run_the_settings_of_ppo_config_tuned():
    from fxrl.algorithms import ppo

    tuned = ppo.Config.tuned("Breakout-MinAtar")
    assert {k: getattr(tuned, k) for k in gpu_bench.PPO_MINATAR} == gpu_bench.PPO_MINATAR
    cartpole = ppo.Config()  # fxrl's defaults are PureJaxRL's CartPole settings
    assert {k: getattr(cartpole, k) for k in gpu_bench.PPO_CARTPOLE} == gpu_bench.PPO_CARTPOLE


def test_the_wheels_are_pinned_once_each():
    names = [w.split("==")[0] for w in gpu_bench.WHEELS]
    assert all("==" in w for w in gpu_bench.WHEELS) and len(set(names)) == len(names)
