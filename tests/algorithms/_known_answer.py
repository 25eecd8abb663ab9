"""Known-answer checks shared by the on- and off-policy refactor tests.

A case's answer is every metric of a few eager updates (as ``float.hex``) and a sha256 of
every leaf of the final state, recorded at one thread. Bit-for-bit equality holds only on
the kernels that recorded it: torch picks its CPU kernels by instruction set (AVX512 here,
AVX2 on many other x86 machines), and their float sums round differently. So the answer
file names the instruction set it was recorded with; on that instruction set every bit
must match, on another the numbers must agree to float32 rounding (rtol 1e-4) and the
state digest is not compared.
"""

from __future__ import annotations

import hashlib
import json
import math
import pathlib
from collections.abc import Callable

import torch

from fxrl import tree

RECORDED_ON = "_recorded_on"


def digest(state: object) -> str:
    """sha256 over the bytes of every leaf of ``state``."""
    h = hashlib.sha256()
    for leaf in tree.leaves(state):
        h.update(leaf.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def number(v: object) -> list[str]:
    """A metric as a list of ``float.hex`` strings (exact, JSON-safe)."""
    return [float(x).hex() for x in torch.as_tensor(v).double().flatten().tolist()]


def run_updates(update: Callable, state: object, updates: int) -> dict:
    """A case's answer: every metric of ``updates`` calls of ``update`` from ``state``, and
    the final state's digest."""
    out = {}
    for i in range(updates):
        state, metrics = update(state)
        out.update({f"{i}/{k}": number(v) for k, v in sorted(metrics.items())})
    out["state_sha256"] = digest(state)
    return out


def capability() -> str:
    return torch.backends.cpu.get_cpu_capability()


def record(path: pathlib.Path, cases: list[str], run: Callable[[str], dict]) -> None:
    answers = {RECORDED_ON: {"cpu_capability": capability(), "torch": torch.__version__}}
    answers.update({name: run(name) for name in sorted(cases)})
    path.write_text(json.dumps(answers, indent=1) + "\n")


def check(path: pathlib.Path, name: str, got: dict) -> None:
    """``got`` (a case's fresh answer) against the recorded one: see the module doc."""
    answers = json.loads(path.read_text())
    want, recorded = answers[name], answers[RECORDED_ON]
    assert got.keys() == want.keys(), f"{name}: metrics {sorted(got)} != {sorted(want)}"
    exact = recorded["cpu_capability"] == capability()
    for k in want:
        if exact:
            assert got[k] == want[k], f"{name}: {k} differs"
        elif k != "state_sha256":
            a = [float.fromhex(x) for x in got[k]]
            b = [float.fromhex(x) for x in want[k]]
            assert len(a) == len(b), f"{name}: {k} has {len(a)} numbers, expected {len(b)}"
            for x, y in zip(a, b, strict=True):
                same = (math.isnan(x) and math.isnan(y)) or math.isclose(
                    x, y, rel_tol=1e-4, abs_tol=1e-6
                )
                assert same, f"{name}: {k} = {x!r}, recorded {y!r} (on {recorded})"
