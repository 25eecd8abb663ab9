"""Known-answer checks shared by the on- and off-policy refactor tests.

A case's answer is every metric of a few eager updates (as ``float.hex``) and a sha256 of
every leaf of the final state, recorded at one thread. Bit-for-bit equality holds only on
the machine kind that recorded it: torch picks its CPU kernels by instruction set (AVX512,
AVX2...) and its BLAS picks its code path by CPU vendor and model (the same AVX512 build
rounds differently on an Intel Xeon and an AMD EPYC). A cloud CPU's model name can be as
generic as "Intel(R) Xeon(R) Processor" over several generations, so an answer file names the
CPU model, its family, model and stepping numbers, the instruction set and the torch
version it was recorded with; a file recorded before the numbers were kept matches no
machine exactly (the first files, and their digests, are from before; the metrics of the
PPO cases still matched a Xeon of model 207 bit for bit, their final states' digests did
not). A machine that recorded its own file (``<name>.<machine tag>.json`` beside the first
one, written by ``--record``) checks every bit against it; any other machine checks the
numbers against the first file to float32 rounding (rtol 1e-4) and skips the state digest.
"""

from __future__ import annotations

import hashlib
import json
import math
import pathlib
import platform
import re
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


def cpu_model() -> str:
    """The CPU's model name as Linux reports it (``platform.processor()`` elsewhere)."""
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_id() -> str:
    """The CPU's family, model and stepping numbers (``/proc/cpuinfo``), or "unknown"."""
    fields = {}
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("cpu family", "model", "stepping"):
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    if len(fields) < 3:
        return "unknown"
    return f"family {fields['cpu family']} model {fields['model']} stepping {fields['stepping']}"


def machine() -> dict:
    """What decides the last bits of an eager update: CPU model, kernel set, torch."""
    return {
        "cpu": cpu_model(),
        "cpu_id": cpu_id(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch": torch.__version__,
    }


def _tagged(path: pathlib.Path) -> pathlib.Path:
    """This machine's own answer file beside ``path``."""
    m = machine()
    tag = "-".join(m[k] for k in ("cpu", "cpu_id", "cpu_capability", "torch"))
    tag = re.sub(r"[^A-Za-z0-9]+", "_", tag)
    return path.with_name(f"{path.stem}.{tag.strip('_')}{path.suffix}")


def _same_machine(recorded: dict) -> bool:
    here = machine()
    return here["cpu_id"] != "unknown" and all(recorded.get(k) == v for k, v in here.items())


def record(path: pathlib.Path, cases: list[str], run: Callable[[str], dict]) -> None:
    """Write this machine's answers: into ``path`` when it was recorded here (or does
    not exist yet), else into this machine's own file beside it."""
    if path.exists() and not _same_machine(json.loads(path.read_text())[RECORDED_ON]):
        path = _tagged(path)
    answers = {RECORDED_ON: machine()}
    answers.update({name: run(name) for name in sorted(cases)})
    path.write_text(json.dumps(answers, indent=1) + "\n")
    print(f"wrote {path}")


def check(path: pathlib.Path, name: str, got: dict) -> None:
    """``got`` (a case's fresh answer) against the recorded one: see the module doc."""
    for candidate in (path, _tagged(path)):
        if candidate.exists():
            answers = json.loads(candidate.read_text())
            if _same_machine(answers[RECORDED_ON]):
                exact = True
                break
    else:
        answers, exact = json.loads(path.read_text()), False
    want, recorded = answers[name], answers[RECORDED_ON]
    assert got.keys() == want.keys(), f"{name}: metrics {sorted(got)} != {sorted(want)}"
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
