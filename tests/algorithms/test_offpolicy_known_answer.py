"""SAC, TD3 and DQN reproduce answers recorded before their refactor, bit for bit.

``data/offpolicy_known_answer.json`` was written by this file (``python
tests/algorithms/test_offpolicy_known_answer.py --record``) from the code before
``fxrl.algorithms.offpolicy`` was split out of ``sac.py`` and ``dqn.py``: three eager
updates at one thread per case (the pure update, the vmapped one, and ``train_host`` on
gymnasium), every metric (as ``float.hex``) and a sha256 of
every leaf of the final TrainState. A refactor that changes one bit of any number fails
here on a machine kind with its own recorded file (CPU model, instruction set, torch);
elsewhere the numbers must agree to float32 rounding: see _known_answer.py.
"""

from __future__ import annotations

import pathlib
import sys

import pytest
import torch
from _known_answer import check, digest, number, record, run_updates

from fxrl import envs, random, tree
from fxrl.algorithms import core, dqn, offpolicy, sac, td3

DATA = pathlib.Path(__file__).parent / "data" / "offpolicy_known_answer.json"

# learning starts within the first update (8 env steps), so every update learns
_AC = {"num_envs": 2, "num_steps": 4, "gradient_steps": 2, "buffer_size": 64,
       "batch_size": 8, "learning_starts": 8, "hidden": (16, 16), "total_steps": 24}  # fmt: skip
_DQN = {"num_envs": 2, "num_steps": 4, "gradient_steps": 2, "buffer_size": 64,
        "batch_size": 8, "learning_starts": 8, "hidden": (16,), "total_steps": 24}  # fmt: skip
_PER = {"prioritized": True, "double": True, "n_step": 2, "loss": "huber", "max_grad_norm": 1.0,
        "tau": 0.5, "target_update_every": 2}  # fmt: skip
# name: (module, Config fields, seeds, how: "pure" | "host")
CASES = {
    "sac": (sac, _AC, 1, "pure"),
    "sac_fixed_alpha": (sac, {**_AC, "learn_alpha": False, "alpha_init": 0.2}, 1, "pure"),
    "sac_host": (sac, _AC, 1, "host"),
    "td3": (td3, _AC, 1, "pure"),
    "td3_ou": (td3, {**_AC, "noise_type": "ou"}, 1, "pure"),
    "td3_two_seeds": (td3, _AC, 2, "pure"),
    "td3_ou_host": (td3, {**_AC, "noise_type": "ou"}, 1, "host"),
    "dqn": (dqn, _DQN, 1, "pure"),
    "dqn_two_seeds": (dqn, _DQN, 2, "pure"),
    "dqn_prioritized_nstep": (dqn, {**_DQN, **_PER}, 1, "pure"),
    "dqn_nstep_two_seeds": (dqn, {**_DQN, "n_step": 3, "double": True}, 2, "pure"),
}


def run_case(name: str) -> dict:
    module, fields, num_seeds, how = CASES[name]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        algo = module.make(module.Config(**fields))
        out = {}
        if how == "host":
            env = envs.gym(algo.config.env, num_envs=algo.config.num_envs)
            state, history = offpolicy.train_host(algo, env, random.key(3))
            for i, metrics in enumerate(history):
                out.update({f"{i}/{k}": number(v) for k, v in sorted(metrics.items())})
            out["state_sha256"] = digest(tree.map(torch.as_tensor, state))
            return out
        init, update = core.batched(algo, num_seeds, False)
        return run_updates(update, init(random.key(3)), 3)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("name", sorted(CASES))
def test_updates_reproduce_the_recorded_answer(name: str) -> None:
    check(DATA, name, run_case(name))


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    record(DATA, list(CASES), run_case)
