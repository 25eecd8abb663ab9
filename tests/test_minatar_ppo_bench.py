"""bench/minatar_ppo.py --quick: the fxrl half of the MinAtar PPO comparison end to end
(training, greedy evaluation, JSON lines, curves and the overlay PNG) in seconds."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))  # the script imports bench/_common.py


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("minatar_ppo", ROOT / "bench" / "minatar_ppo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _main(bench, monkeypatch, *args: str) -> None:
    monkeypatch.setattr(sys, "argv", ["minatar_ppo.py", *args])
    threads = torch.get_num_threads()
    try:
        bench.main()
    finally:
        torch.set_num_threads(threads)


def test_quick_fxrl_run_writes_rows_curves_and_the_png(bench, tmp_path, monkeypatch, capsys):
    _main(bench, monkeypatch, "--quick", "--impl", "fxrl", "--games", "Breakout-MinAtar",
          "--out-dir", str(tmp_path))  # fmt: skip
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0]["bench"] == "minatar_ppo" and rows[0]["quick"] is True
    assert rows[0]["env_params"] == {"sticky_action_prob": 0.0, "minimal_action_set": True}
    (row,) = rows[1:]
    assert (row["game"], row["impl"], row["seeds"], row["updates"]) == (
        "Breakout-MinAtar", "fxrl", 2, 2)  # fmt: skip
    assert row["compile_s"] > 0 and row["run_s"] > 0 and row["steps_per_s"] > 0
    # greedy returns: per seed the mean of its 2 episodes; Breakout's rewards are brick hits
    assert len(row["greedy_per_seed"]) == 2
    assert all(v >= 0 and float(v * 2).is_integer() for v in row["greedy_per_seed"])
    curves = json.loads((tmp_path / "minatar_ppo_curves.json").read_text())
    fx = curves["Breakout-MinAtar"]["fxrl"]
    assert fx["steps"] == [128, 256] and len(fx["returns"]) == 2
    assert all(len(r) == 2 for r in fx["returns"])
    png = (tmp_path / "minatar_ppo_Breakout-MinAtar.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_unknown_game_is_one_line(bench, tmp_path, monkeypatch):
    with pytest.raises(SystemExit) as e:
        _main(bench, monkeypatch, "--quick", "--games", "Pong-MinAtar", "--out-dir",
              str(tmp_path / "out"))  # fmt: skip
    message = str(e.value.code)
    assert "unknown game(s) ['Pong-MinAtar']" in message and "Breakout-MinAtar" in message
    assert "\n" not in message and not (tmp_path / "out").exists()


def test_greedy_evaluation_matches_a_per_seed_loop(bench):
    # the batched evaluation (every seed's params on its own envs) against evaluate_pure's
    # one-seed-at-a-time loop with the same reset key layout: the same returns
    from fxrl import random, tree
    from fxrl.algorithms import core, ppo

    algo = ppo.make(bench.fxrl_config("Breakout-MinAtar", 256, quick=True))
    state = core.batched(algo, 2, compile=False)[0](random.key(0))
    got = bench.fxrl_greedy(algo, state.params, 2, 3, seed=5, max_steps=30)
    from fxrl import envs

    env = envs.batch(algo.env, 6)
    s, ts = env.reset(random.key(5))
    want = torch.zeros(6, dtype=torch.float64)
    done = torch.zeros(6, dtype=torch.bool)
    for _ in range(30):
        action = torch.cat([algo.policy(tree.index(state.params, i), ts.obs[3 * i : 3 * i + 3])
                            for i in range(2)])  # fmt: skip
        s, ts = env.step(s, action)
        want += torch.where(done, 0.0, ts.reward.double())
        done |= ts.terminated | ts.truncated
    assert got == want.reshape(2, 3).tolist()


def test_a_failed_run_is_an_error_row_and_the_others_still_run(bench, tmp_path, monkeypatch,
                                                              capsys):  # fmt: skip
    # PureJaxRL's python missing: its row says why; fxrl's row, curve and PNG are written
    _main(bench, monkeypatch, "--quick", "--games", "Breakout-MinAtar", "--out-dir",
          str(tmp_path), "--jax-python", str(tmp_path / "no-python"))  # fmt: skip
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()][1:]
    assert [(r["impl"], "error" in r) for r in rows] == [("fxrl", False), ("purejaxrl", True)]
    assert "no-python" in rows[1]["error"]
    assert (tmp_path / "minatar_ppo_Breakout-MinAtar.png").is_file()


def test_a_library_run_alone_joins_the_others_curves_at_the_same_budget(
    bench, tmp_path, monkeypatch, capsys
):
    # PureJaxRL's curves from an earlier run (2 seeds, 256 steps: --quick's budget), one
    # update without a finished episode (null); an entry at another budget is replaced
    earlier = {"steps": [128, 256], "returns": [[None, 1.0], [0.5, 2.0]]}
    path = tmp_path / "minatar_ppo_curves.json"
    path.write_text(json.dumps({
        "Breakout-MinAtar": {"total_steps": 256, "seeds": 2, "purejaxrl": earlier},
        "SpaceInvaders-MinAtar": {"total_steps": 999, "seeds": 2, "purejaxrl": earlier},
    }))  # fmt: skip
    _main(bench, monkeypatch, "--quick", "--impl", "fxrl", "--out-dir", str(tmp_path))
    saved = json.loads(path.read_text())
    assert saved["Breakout-MinAtar"]["purejaxrl"] == earlier
    assert set(saved["Breakout-MinAtar"]) == {"total_steps", "seeds", "purejaxrl", "fxrl"}
    assert "purejaxrl" not in saved["SpaceInvaders-MinAtar"]
    assert bench.read_curves(path)["Breakout-MinAtar"]["purejaxrl"]["returns"][0][1] == 1.0
    assert (tmp_path / "minatar_ppo_SpaceInvaders-MinAtar.png").is_file()
