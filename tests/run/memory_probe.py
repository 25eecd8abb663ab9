"""Train ``steady_algo`` compiled for many updates in this process and print its memory.

    python tests/run/memory_probe.py OUT_DIR UPDATES WARMUP SEEDS

The whole run loop runs as ``fxrl train`` runs it (compiled update, metrics files,
checkpoints and plots every second, the progress bar drawn to a terminal) and prints one
JSON line: ``{"marks": {iteration: {"rss": KiB, "peak": KiB}}, "peak_reset": bool}``.
After ``WARMUP`` updates (compiled, warm) the kernel's peak-RSS counter is reset
(``/proc/self/clear_refs``), so ``peak`` at a later iteration is the largest resident
memory since the warm-up; where that counter cannot be reset, ``peak`` is the largest
``rss`` sampled every 10 updates since then.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import steady_algo
import torch

from fxrl.run import loop


def status() -> dict[str, int]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            out[name] = int(value.split()[0])
    return out


class Terminal(io.TextIOBase):
    """Where the progress bar draws: a terminal that throws its output away."""

    def write(self, text: str) -> int:
        return len(text)

    def isatty(self) -> bool:
        return True


def main(out: str, updates: int, warmup: int, seeds: int) -> None:
    torch.set_num_threads(1)
    marks: dict[int, dict[str, int]] = {}
    probe = {"reset": False, "sampled": 0}

    class Measured(loop.Progress):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "quiet": False, "stream": Terminal()})

        def update(self, steps, rows):
            super().update(steps, rows)
            iteration = rows[0]["iteration"]
            if iteration == warmup:
                try:
                    Path("/proc/self/clear_refs").write_text("5")
                    probe["reset"] = True
                except OSError:
                    probe["reset"] = False
            if iteration >= warmup and iteration % 10 == 0:
                now = status()
                probe["sampled"] = max(probe["sampled"], now["VmRSS"])
                peak = now["VmHWM"] if probe["reset"] else probe["sampled"]
                if iteration % 500 == 0 or iteration == warmup:
                    marks[iteration] = {"rss": now["VmRSS"], "peak": peak}

    loop.Progress = Measured
    config = steady_algo.Config(total_steps=updates * steady_algo.Config.num_steps)
    loop.train("steady_algo", config, out, num_seeds=seeds, checkpoint_every=1.0, plot_every=1.0)
    print(json.dumps({"marks": marks, "peak_reset": probe["reset"]}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
