"""PPO and recurrent PPO reproduce answers recorded before their refactor, bit for bit.

``data/onpolicy_known_answer.json`` was written by this file (``python
tests/algorithms/test_onpolicy_known_answer.py --record``) from the code before
``fxrl.algorithms.onpolicy`` was split out of ``ppo.make``: two eager updates at one thread
per case, every metric (as ``float.hex``) and a sha256 of every leaf of the final
TrainState. A refactor that changes one bit of any number fails here on a machine kind
with its own recorded file (CPU model, instruction set, torch); elsewhere the numbers
must agree to float32 rounding: see _known_answer.py.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch
from _known_answer import check, record, run_updates

from fxrl import random
from fxrl.algorithms import core, ppo, recurrent_ppo

DATA = pathlib.Path(__file__).parent / "data" / "onpolicy_known_answer.json"

_PPO = {"num_envs": 4, "num_steps": 16, "update_epochs": 2, "num_minibatches": 2,
        "total_steps": 256}  # fmt: skip
_RNN = {"num_envs": 4, "num_steps": 8, "update_epochs": 2, "num_minibatches": 2,
        "total_steps": 128, "rnn_hidden": 8}  # fmt: skip
CASES = {
    "ppo_discrete": (ppo, {**_PPO, "env": "CartPole-v1"}, 1),
    "ppo_continuous": (ppo, {**_PPO, "env": "Pendulum-v1"}, 1),
    "ppo_shared": (ppo, {**_PPO, "env": "CartPole-v1", "shared": True}, 1),
    "ppo_normalize_obs": (ppo, {**_PPO, "env": "Pendulum-v1", "normalize_obs": True}, 1),
    "ppo_two_seeds": (ppo, {**_PPO, "env": "CartPole-v1", "anneal_lr": False}, 2),
    "rppo_gru": (recurrent_ppo, {**_RNN, "cell": "gru"}, 1),
    "rppo_lstm": (recurrent_ppo, {**_RNN, "cell": "lstm"}, 1),
}


def run_case(name: str) -> dict:
    module, fields, num_seeds = CASES[name]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        algo = module.make(module.Config(**fields))
        init, update = core.batched(algo, num_seeds, False)
        return run_updates(update, init(random.key(3)), 2)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("name", sorted(CASES))
def test_updates_reproduce_the_recorded_answer(name: str) -> None:
    check(DATA, name, run_case(name))


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    record(DATA, list(CASES), run_case)
