"""Checkpoints: round trip, atomic writes, and clear errors for corrupt or mismatched files."""

import contextlib
import errno
import os
import resource
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from fxrl import random, tree
from fxrl.run import checkpoint
from fxrl.run.checkpoint import CheckpointError, WriteError


@tree.dataclass
class State:
    params: dict
    key: torch.Tensor
    steps: torch.Tensor
    done: torch.Tensor


def make_state(seed: int = 0, width: int = 3) -> State:
    k1, k2 = random.split(random.key(seed))
    return State(
        params={"w": random.normal(k1, (2, width)), "b": torch.zeros(width, dtype=torch.float64)},
        key=k2,
        steps=torch.tensor(seed, dtype=torch.int64),
        done=torch.tensor([True, False]),
    )


def assert_same(a, b) -> None:
    assert tree.structure(a) == tree.structure(b)
    for x, y in zip(tree.leaves(a), tree.leaves(b), strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)


@given(seed=st.integers(0, 2**31 - 1), width=st.integers(1, 5))
def test_save_then_load_gives_the_same_tree_bit_for_bit(tmp_path_factory, seed, width):
    path = tmp_path_factory.mktemp("ck") / "c.safetensors"
    state = make_state(seed, width)
    checkpoint.save(path, state, {"algorithm": "toy", "iteration": 3})
    loaded, meta = checkpoint.load(path, make_state(0, width))
    assert_same(loaded, state)
    assert meta["algorithm"] == "toy" and meta["iteration"] == 3


def test_load_fills_leaves_by_name_from_the_template_without_using_its_values(tmp_path):
    path = checkpoint.save(tmp_path / "c.safetensors", make_state(7))
    loaded, _ = checkpoint.load(path, make_state(1))
    assert_same(loaded, make_state(7))


def test_a_shared_storage_state_is_saved(tmp_path):
    base = torch.arange(6.0)
    state = {"a": base[:3], "b": base[3:], "c": base}
    path = checkpoint.save(tmp_path / "c.safetensors", state)
    loaded, _ = checkpoint.load(path, state)
    assert_same(loaded, state)


def test_a_truncated_checkpoint_raises_and_the_file_is_left_as_it_is(tmp_path):
    path = checkpoint.save(tmp_path / "c.safetensors", make_state(1))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 10])
    with pytest.raises(CheckpointError, match=r"is corrupt: it should have \d+ bytes but has"):
        checkpoint.load(path, make_state())
    assert path.read_bytes() == data[: len(data) - 10]


@pytest.mark.parametrize("where", ["header", "tensors"])
def test_a_flipped_byte_raises_a_corrupt_checkpoint_error(tmp_path, where):
    path = checkpoint.save(tmp_path / "c.safetensors", make_state(1))
    data = bytearray(path.read_bytes())
    index = 20 if where == "header" else len(data) - 5
    data[index] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="is corrupt"):
        checkpoint.load(path, make_state())


def test_another_algorithm_or_config_is_named_in_the_error(tmp_path):
    meta = {"algorithm": "ppo", "config": {"lr": 0.001, "env": "CartPole-v1"}}
    path = checkpoint.save(tmp_path / "c.safetensors", make_state(), meta)
    with pytest.raises(CheckpointError, match="has algorithm 'ppo', expected 'dqn'"):
        checkpoint.load(path, make_state(), expect={"algorithm": "dqn"})
    other = {"config": {"lr": 0.01, "env": "CartPole-v1"}}
    with pytest.raises(CheckpointError, match=r"another config: lr: 0.001 in the file, 0.01 here"):
        checkpoint.load(path, make_state(), expect=other)


def test_a_different_tree_names_the_leaf_that_differs(tmp_path):
    path = checkpoint.save(tmp_path / "c.safetensors", make_state(width=3))
    with pytest.raises(CheckpointError, match=r"leaf 'params/w' is \[2, 3\].*\[2, 4\]"):
        checkpoint.load(path, make_state(width=4))
    with pytest.raises(CheckpointError, match=r"missing leaves \['extra'\]"):
        checkpoint.load(path, {"extra": torch.zeros(1)})


def test_a_non_tensor_leaf_is_refused_with_the_fix(tmp_path):
    with pytest.raises(TypeError, match=r"leaf 'n' of the state is a int.*static=True"):
        checkpoint.save(tmp_path / "c.safetensors", {"n": 3})


def test_a_crash_between_write_and_rename_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = checkpoint.save(tmp_path / "c.safetensors", make_state(1), {"iteration": 1})

    def killed(src, dst):
        raise KeyboardInterrupt("killed between write and rename")

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save(path, make_state(2), {"iteration": 2})
    monkeypatch.undo()
    loaded, meta = checkpoint.load(path, make_state())
    assert_same(loaded, make_state(1))
    assert meta["iteration"] == 1
    assert [p.name for p in Path(tmp_path).iterdir() if p.name.startswith(".c.")]  # the tmp file


def test_a_missing_file_says_so(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        checkpoint.load(tmp_path / "nope.safetensors", make_state())


# ------------------------------------------------------------------ writes that fail


@contextlib.contextmanager
def file_size_limit(nbytes: int):
    """A real full disk for this process, briefly: writes past ``nbytes`` fail with EFBIG
    (Python ignores SIGXFSZ, which would otherwise kill it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_a_checkpoint_that_does_not_fit_leaves_latest_and_previous_as_they_were(tmp_path):
    latest, previous = tmp_path / "latest.safetensors", tmp_path / "previous.safetensors"
    checkpoint.save(latest, make_state(1), {"iteration": 1})
    checkpoint.save(latest, make_state(2), {"iteration": 2}, keep=previous)
    before = {p.name: p.read_bytes() for p in (latest, previous)}
    with file_size_limit(latest.stat().st_size // 2), pytest.raises(WriteError) as raised:
        checkpoint.save(latest, make_state(3), {"iteration": 3}, keep=previous)
    assert raised.value.errno == errno.EFBIG and raised.value.path == latest
    assert str(raised.value) == (
        f"could not write {latest}: File too large. latest.safetensors was left as it was. "
        "Raise the file-size limit (ulimit -f), or write to another disk."
    )
    assert {p.name: p.read_bytes() for p in (latest, previous)} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(before)  # no temporary file
    checkpoint.save(latest, make_state(3), {"iteration": 3}, keep=previous)  # room again
    assert previous.read_bytes() == before["latest.safetensors"]
    assert checkpoint.load(latest, make_state())[1]["iteration"] == 3


def test_an_append_that_does_not_fit_cuts_the_file_back_to_whole_lines(tmp_path):
    path = tmp_path / "metrics.jsonl"
    checkpoint.append_text(path, "row 1\n")
    with file_size_limit(10), pytest.raises(WriteError, match=r"could not write .*File too large"):
        checkpoint.append_text(path, "row 2, longer than the room left\n")
    assert path.read_text() == "row 1\n"


@pytest.mark.parametrize(
    ("code", "fix"),
    [
        (errno.ENOSPC, "Free space on the disk of"),
        (errno.EDQUOT, "raise your quota"),
        (errno.EACCES, "writable (it is read-only or not yours)"),
        (errno.EROFS, "writable (it is read-only or not yours)"),
    ],
)
def test_each_cause_of_a_failed_write_names_its_fix(tmp_path, monkeypatch, code, fix):
    def full(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    path = tmp_path / "config.json"
    path.write_text("{}")
    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(WriteError) as raised:
        checkpoint.atomic_write(path, b'{"new": 1}')
    assert os.strerror(code) in str(raised.value) and fix in str(raised.value)
    assert path.read_text() == "{}" and [p.name for p in tmp_path.iterdir()] == ["config.json"]
