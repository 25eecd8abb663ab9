"""save/load: exact round trips (same sample for the same key), atomic, clear errors."""

import json

import pytest
import torch

from fxrl import buffers, random, tree


def example():
    return {
        "obs": torch.zeros(4, 3, 2, dtype=torch.uint8),
        "action": torch.zeros((), dtype=torch.int64),
        "info": {"lives": torch.zeros((), dtype=torch.int32)},
        "next_obs": torch.zeros(4, 3, 2, dtype=torch.uint8),
        "terminated": torch.zeros((), dtype=torch.bool),
        "truncated": torch.zeros((), dtype=torch.bool),
    }


def batch(n, seed):
    g = torch.Generator().manual_seed(seed)
    return {
        "obs": torch.randint(0, 256, (n, 4, 3, 2), dtype=torch.uint8, generator=g),
        "action": torch.arange(n),
        "info": {"lives": torch.full((n,), 3, dtype=torch.int32)},
        "next_obs": torch.randint(0, 256, (n, 4, 3, 2), dtype=torch.uint8, generator=g),
        "terminated": torch.rand(n, generator=g) < 0.1,
        "truncated": torch.zeros(n, dtype=torch.bool),
    }


def same(a, b):
    return tree.structure(a) == tree.structure(b) and all(
        torch.equal(x, y) for x, y in zip(tree.leaves(a), tree.leaves(b), strict=True)
    )


@pytest.mark.parametrize("kind", ["uniform", "prioritized"])
def test_a_loaded_buffer_equals_the_saved_one_and_draws_the_same_sample(tmp_path, kind):
    buf = buffers.init(example(), 50, prioritized=kind == "prioritized", alpha=0.7)
    buf = buffers.add(buffers.add(buf, batch(30, 0)), batch(30, 1))
    if kind == "prioritized":
        buf = buffers.update_priorities(buf, torch.arange(0, 50, 3), torch.linspace(0, 5, 17))
    buffers.save(buf, tmp_path / "buf")
    loaded = buffers.load(tmp_path / "buf")
    assert same(loaded, buf) and loaded.alpha == 0.7 and loaded.capacity == 50
    assert same(buffers.sample(loaded, random.key(9), 16), buffers.sample(buf, random.key(9), 16))
    # The loaded buffer keeps working: the next adds land where the original's would.
    assert same(buffers.add(loaded, batch(5, 2)).storage, buffers.add(buf, batch(5, 2)).storage)


def test_a_frame_stacked_buffer_round_trips(tmp_path):
    buf = buffers.add(buffers.init(example(), 40, frame_stack=4), batch(25, 3))
    buffers.save(buf, tmp_path / "b")
    loaded = buffers.load(tmp_path / "b")
    assert loaded.frame_stack == 4
    assert same(buffers.sample(loaded, random.key(1), 8), buffers.sample(buf, random.key(1), 8))


def test_saving_over_an_existing_save_replaces_it(tmp_path):
    buffers.save(buffers.add(buffers.init(example(), 10), batch(3, 0)), tmp_path / "b")
    buffers.save(buffers.add(buffers.init(example(), 10), batch(7, 1)), tmp_path / "b")
    assert int(buffers.load(tmp_path / "b").size) == 7
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]


def test_a_truncated_tensor_file_raises_and_loads_nothing(tmp_path):
    buffers.save(buffers.add(buffers.init(example(), 10), batch(3, 0)), tmp_path / "b")
    file = tmp_path / "b" / "tensors.safetensors"
    file.write_bytes(file.read_bytes()[:-100])
    with pytest.raises(
        ValueError, match=r"tensors.safetensors has \d+ bytes but buffer.json records"
    ):
        buffers.load(tmp_path / "b")


def test_a_corrupt_byte_in_the_tensor_file_raises(tmp_path):
    buffers.save(buffers.add(buffers.init(example(), 10), batch(3, 0)), tmp_path / "b")
    file = tmp_path / "b" / "tensors.safetensors"
    data = bytearray(file.read_bytes())
    data[-1] ^= 0xFF
    file.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"does not match the SHA-256 .* corrupt"):
        buffers.load(tmp_path / "b")


def test_a_truncated_or_foreign_description_raises(tmp_path):
    buffers.save(buffers.init(example(), 10), tmp_path / "b")
    meta = tmp_path / "b" / "buffer.json"
    text = meta.read_text()
    meta.write_text(text[: len(text) // 2])
    with pytest.raises(ValueError, match=r"buffer\.json is not valid JSON"):
        buffers.load(tmp_path / "b")
    meta.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ValueError, match="does not describe an fxrl buffer"):
        buffers.load(tmp_path / "b")
    with pytest.raises(ValueError, match="is not a saved buffer"):
        buffers.load(tmp_path / "missing")


def test_adding_to_a_loaded_buffer_leaves_the_saved_files_unchanged(tmp_path):
    buffers.save(buffers.add(buffers.init(example(), 10), batch(3, 0)), tmp_path / "b")
    before = (tmp_path / "b" / "tensors.safetensors").read_bytes()
    buffers.add(buffers.load(tmp_path / "b"), batch(8, 1))
    assert (tmp_path / "b" / "tensors.safetensors").read_bytes() == before
    assert int(buffers.load(tmp_path / "b").size) == 3


def test_save_refuses_keys_whose_joined_names_collide(tmp_path):
    ex = {"a": {"b": torch.zeros(())}, "a.b": torch.zeros(())}
    with pytest.raises(ValueError, match="get the same name"):
        buffers.save(buffers.init(ex, 4), tmp_path / "b")
    assert not (tmp_path / "b").exists()
