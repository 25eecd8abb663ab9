"""bench/_common.py's A/B timing of compiled updates: the order rotates round by round,
states move on in place, and the summary is the rounds' median, min and max."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from _common import (  # noqa: E402  (bench/_common.py)
    ab_args,
    ms_summary,
    state_max_abs_diff,
    time_updates,
)


def test_time_updates_rotates_the_order_and_moves_the_states_on():
    calls: list[str] = []

    def program(name):
        def update(state):
            calls.append(name)
            return state + 1, {}

        return update

    programs = {n: [program(n), 0] for n in ("a", "b", "c")}
    ms = time_updates(programs, rounds=3, updates=2, warmup=1)
    assert calls[:3] == ["a", "b", "c"]  # the warm-up
    rounds = [calls[3 + 6 * r : 3 + 6 * (r + 1) : 2] for r in range(3)]
    assert rounds == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"]]
    assert {n: p[1] for n, p in programs.items()} == {"a": 7, "b": 7, "c": 7}
    assert all(len(xs) == 3 and all(x >= 0 for x in xs) for xs in ms.values())


def test_ms_summary_is_the_median_min_and_max_of_the_rounds():
    out = ms_summary([3.0, 1.0, 2.0, 10.0, 2.5])
    assert out == {"ms": 2.5, "ms_min": 1.0, "ms_max": 10.0,
                   "rounds_ms": [3.0, 1.0, 2.0, 10.0, 2.5]}  # fmt: skip


def test_ab_args_refuses_an_unknown_case_in_one_line(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["x", "--cases", "ppo,sac", "--rounds", "3"])
    with pytest.raises(SystemExit, match="x_ab: unknown case 'sac'; expected one of"):
        ab_args("doc", ("ppo", "dqn"), "x_ab")
    monkeypatch.setattr(sys, "argv", ["x", "--cases", "dqn", "--rounds", "3"])
    args = ab_args("doc", ("ppo", "dqn"), "x_ab")
    assert args.cases == ["dqn"] and args.rounds == 3 and args.threads == 1


def test_state_max_abs_diff_is_the_largest_float_difference_and_skips_the_rest():
    import torch

    a = {"w": torch.tensor([1.0, 2.0]), "steps": torch.tensor(3), "b": torch.tensor(0.5)}
    b = {"w": torch.tensor([1.25, 1.0]), "steps": torch.tensor(9), "b": torch.tensor(0.5)}
    assert state_max_abs_diff(a, b) == 1.0  # |2 - 1|; the int leaf's 6 does not count
    assert state_max_abs_diff(a, a) == 0.0
    with pytest.raises(ValueError):  # leaves paired strictly
        state_max_abs_diff(a, {"w": a["w"]})
