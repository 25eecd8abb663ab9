"""The Weights & Biases logger, in wandb's offline mode: the run's metrics are read back from
the files W&B wrote (its ``.wandb`` transaction log) and compared with ``metrics.jsonl``."""

import json
import struct
import time
import zlib
from pathlib import Path

import pytest
import toy_algo

from fxrl.run.loop import resume, train
from fxrl.run.metrics import read_rows

pytest.importorskip("wandb")  # the wandb extra (part of dev)
from wandb.proto import wandb_internal_pb2

BLOCK, HEADER = 32768, 7  # the .wandb file is LevelDB's log format, 32 KiB blocks


def wandb_records(path: Path) -> list:
    """Every record of a ``.wandb`` file written so far, each chunk's CRC checked."""
    data = path.read_bytes()
    assert data[:4] == b":W&B", path
    pos, records, parts = HEADER, [], b""
    while pos + HEADER <= len(data):
        if BLOCK - pos % BLOCK < HEADER:  # a block's tail too short for a header: padding
            pos += BLOCK - pos % BLOCK
            continue
        crc, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        if pos + HEADER + length > len(data):  # a chunk still being written
            break
        chunk = data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        assert crc == zlib.crc32(chunk, zlib.crc32(bytes([kind]))), "corrupt chunk"
        parts = chunk if kind in (1, 2) else parts + chunk  # full/first, middle/last
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(parts)
            records.append(record)
    return records


def finished_records(path: Path, timeout: float = 60.0) -> list:
    """The records of a run's ``.wandb`` file once it ends with the run's exit record:
    ``run.finish()`` can return before wandb's service has written the file (seen with
    wandb 0.31: a resumed run's file still held only its header)."""
    deadline = time.monotonic() + timeout
    while True:
        records = wandb_records(path)
        if records and records[-1].WhichOneof("record_type") == "exit":
            return records
        assert time.monotonic() < deadline, f"{path} has no exit record after {timeout} s"
        time.sleep(0.1)


def offline_runs(run_dir: Path) -> list[list]:
    """The records of each offline W&B run under the run directory, oldest first."""
    files = sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb"))
    return [finished_records(f) for f in files]


def history(records: list) -> dict[int, dict]:
    """``{step: {key: value}}`` of the records' history rows (W&B's own ``_`` keys left out)."""
    out = {}
    for r in records:
        if r.WhichOneof("record_type") == "history":
            items = {
                i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item
            }
            out[r.history.step.num] = {k: v for k, v in items.items() if not k.startswith("_")}
    return out


def expected(rows: list[dict]) -> dict[int, dict]:
    """What the logger should have sent for metrics.jsonl's rows."""
    out: dict[int, dict] = {}
    for r in rows:
        values = out.setdefault(r["steps"], {})
        for k, v in r.items():
            if k not in ("iteration", "seed", "steps") and isinstance(v, int | float):
                values[f"seed{r['seed']}/{k}"] = v
    return out


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_PROJECT", "fxrl-tests")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)


def config(total_steps=128):
    return toy_algo.Config(total_steps=total_steps)


def test_an_offline_wandb_run_holds_every_metric_of_metrics_jsonl(tmp_path):
    run_dir = tmp_path / "toy-run"
    train("toy_algo", config(), run_dir, num_seeds=2, quiet=True, compile=False, wandb=True)
    [records] = offline_runs(run_dir)
    rows = read_rows(run_dir / "metrics.jsonl")
    assert len(rows) == 2 * 128 // 16
    logged = history(records)
    assert logged == expected(rows)
    assert {"seed0/loss", "seed1/loss", "seed0/episode_return"} <= set(logged[16])
    [run] = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert run.display_name == "toy-run" and run.project == "fxrl-tests"
    assert run.run_id == (run_dir / "wandb_id").read_text()
    config_items = {i.key: json.loads(i.value_json) for i in run.config.update}
    assert config_items["algorithm"] == "toy_algo" and config_items["num_seeds"] == 2


def test_a_resumed_run_continues_its_wandb_run_and_together_they_hold_every_iteration(tmp_path):
    whole, part = tmp_path / "whole", tmp_path / "part"
    train("toy_algo", config(), whole, num_seeds=2, quiet=True, compile=False)
    train("toy_algo", config(), part, num_seeds=2, quiet=True, compile=False, wandb=True,
          max_iterations=3, checkpoint_every=0.0)  # fmt: skip
    resume(part, quiet=True, wandb=True)
    first, second = offline_runs(part)
    ids = {r.run.run_id for r in [*first, *second] if r.WhichOneof("record_type") == "run"}
    assert ids == {(part / "wandb_id").read_text()}
    logged = {**history(first), **history(second)}
    assert sorted(history(first)) == [16, 32, 48]
    want = expected(read_rows(whole / "metrics.jsonl"))
    strip = lambda d: {s: {k: v for k, v in m.items() if not k.endswith(("steps_per_s", "/time"))}
                       for s, m in d.items()}  # fmt: skip
    assert strip(logged) == strip(want)


def test_wandb_without_its_package_is_a_one_line_error_before_anything_is_written(
    tmp_path, monkeypatch
):
    import sys

    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'fxrl\[wandb\]'$"):
        train("toy_algo", config(), tmp_path / "r", quiet=True, compile=False, wandb=True)
    assert not (tmp_path / "r").exists()
