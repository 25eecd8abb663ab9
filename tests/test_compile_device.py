"""fxrl.compile's options per device: the C++ wrapper for CPU programs (torch 2.13), one
CUDA graph per program on a GPU (``fxrl.cuda_graph``), the caller's word over both. The
graphs themselves run on a GPU only (bench/gpu_bench.py measures them); here, the choice."""

from types import SimpleNamespace

import pytest
import torch

from fxrl import compile as fxrl_compile
from fxrl import random
from fxrl.algorithms import core, dqn, ppo
from fxrl.compile import _options, _own_options, _writes_inputs, trace


def on(*devices: str) -> list[SimpleNamespace]:
    """Stand-ins for input tensors on ``devices`` (no GPU needed to choose options)."""
    return [SimpleNamespace(device=torch.device(d)) for d in devices]


def test_a_program_on_one_gpu_runs_as_a_cuda_graph_by_default():
    assert _own_options({}, on("cuda:0", "cuda:0")) == {"fxrl.cuda_graph": True}
    assert "cpp_wrapper" not in _options({}, on("cuda:0"))  # the C++ wrapper is for CPUs


@pytest.mark.parametrize(
    "devices", [("cpu",), ("cuda:0", "cpu"), ("cuda:0", "cuda:1"), ("meta",), ()]
)
def test_a_program_elsewhere_is_not_graphed(devices):
    assert _own_options({}, on(*devices)) == {"fxrl.cuda_graph": False}


def test_the_callers_word_wins_and_fxrl_options_never_reach_inductor():
    assert _own_options({"fxrl.cuda_graph": False}, on("cuda:0")) == {"fxrl.cuda_graph": False}
    given = {"fxrl.cuda_graph": False, "realize_reads_threshold": 4}
    inductor = _options(given, on("cuda:0"))
    assert inductor["realize_reads_threshold"] == 4
    assert not any(k.startswith("fxrl.") for k in inductor)


def test_asking_for_a_cuda_graph_off_the_gpu_or_an_unknown_option_is_a_clear_error():
    with pytest.raises(ValueError, match=r"needs every input on one CUDA device.*\['cpu'\]"):
        _own_options({"fxrl.cuda_graph": True}, on("cpu"))
    with pytest.raises(ValueError, match=r"unknown fxrl option\(s\) \['fxrl.cuda_graphs'\]"):
        _own_options({"fxrl.cuda_graphs": True}, on("cuda:0"))


def test_a_cpu_call_asking_for_a_cuda_graph_fails_before_compiling():
    f = fxrl_compile(lambda x: x * 2, options={"fxrl.cuda_graph": True})
    with pytest.raises(ValueError, match="needs every input on one CUDA device"):
        f(torch.ones(3))


def test_programs_that_write_an_input_are_told_apart_from_pure_ones():
    """A CUDA graph replays on copies of the inputs: a program writing one in place (DQN's
    replay buffer) must run as compiled; in-place writes into its own tensors are fine."""
    assert _writes_inputs(trace(lambda b, x: (b[1:].add_(x), b.sum())[1], torch.zeros(4),
                                torch.ones(3)))  # fmt: skip
    assert not _writes_inputs(trace(lambda x: (x * 2).add_(1), torch.zeros(3)))
    tiny = {"num_envs": 2, "num_steps": 2}
    cases = [
        (ppo.make(ppo.Config(**tiny, update_epochs=1, num_minibatches=1)), False),
        (dqn.make(dqn.Config(**tiny, buffer_size=16, batch_size=4, learning_starts=2,
                             hidden=(8,))), True),
    ]  # fmt: skip
    for algo, writes in cases:
        init, update = core.batched(algo, 2, compile=False)
        assert _writes_inputs(trace(update, init(random.key(0)))) is writes
