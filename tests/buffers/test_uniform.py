"""Uniform replay: storage, wrap-around order, sampling, vmap over seeds, bad input."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from fxrl import buffers, random, tree
from fxrl.testing import assert_trees_close, keys


def example():
    return {
        "obs": torch.zeros(3, 2, dtype=torch.uint8),
        "action": torch.zeros((), dtype=torch.int64),
        "reward": torch.zeros(()),
        "terminated": torch.zeros((), dtype=torch.bool),
    }


def numbered(start, n):
    """n transitions whose every field encodes its global step number."""
    t = torch.arange(start, start + n)
    return {
        "obs": (t % 256).to(torch.uint8).view(n, 1, 1).expand(n, 3, 2).contiguous(),
        "action": t,
        "reward": t.float(),
        "terminated": t % 5 == 4,
    }


def test_storage_is_preallocated_with_the_example_dtypes():
    buf = buffers.init(example(), 100)
    assert buf.storage["obs"].shape == (100, 3, 2) and buf.storage["obs"].dtype == torch.uint8
    assert buf.storage["action"].dtype == torch.int64
    assert int(buf.size) == 0 and int(buf.cursor) == 0


@given(sizes=st.lists(st.integers(1, 25), min_size=1, max_size=8), capacity=st.integers(1, 20))
def test_add_keeps_the_last_capacity_transitions_in_ring_order(sizes, capacity):
    buf, step = buffers.init(example(), capacity), 0
    for n in sizes:
        buf = buffers.add(buf, numbered(step, n))
        step += n
    # Naive model: a Python list of step numbers written one by one into a ring.
    ring = [0] * capacity
    for i in range(step):
        ring[i % capacity] = i
    size = min(step, capacity)
    assert int(buf.size) == size and int(buf.cursor) == step % capacity
    assert buf.storage["action"][:size].tolist() == ring[:size]
    assert torch.equal(buf.storage["obs"][:, 0, 0], buf.storage["action"].to(torch.uint8))


@given(key=keys(), n=st.integers(1, 40))
def test_sample_returns_stored_transitions_of_filled_slots_only(key, n):
    buf = buffers.add(buffers.init(example(), 32), numbered(100, n))
    batch, info = buffers.sample(buf, key, 64)
    assert set(batch) == set(example()) and batch["obs"].shape == (64, 3, 2)
    assert ((info["index"] >= 0) & (info["index"] < min(n, 32))).all()
    assert torch.equal(batch["action"], buf.storage["action"][info["index"]])
    assert torch.equal(info["weight"], torch.ones(64))


def test_sample_is_pure_same_key_same_batch_and_buffer_unchanged():
    buf = buffers.add(buffers.init(example(), 50), numbered(0, 40))
    before = tree.map(torch.clone, buf)
    a, _ = buffers.sample(buf, random.key(3), 16)
    b, _ = buffers.sample(buf, random.key(3), 16)
    assert all(torch.equal(x, y) for x, y in zip(tree.leaves(a), tree.leaves(b), strict=True))
    assert all(
        torch.equal(x, y) for x, y in zip(tree.leaves(buf), tree.leaves(before), strict=True)
    )


def test_uniform_sampling_frequencies_are_flat_by_chi_square():
    scipy_stats = pytest.importorskip("scipy.stats")
    buf = buffers.add(buffers.init(example(), 50), numbered(0, 50))
    _, info = buffers.sample(buf, random.key(0), 50_000)
    counts = torch.bincount(info["index"], minlength=50).double()
    assert scipy_stats.chisquare(counts.numpy()).pvalue > 1e-3


def test_sample_without_replacement_draws_distinct_filled_slots():
    buf = buffers.add(buffers.init(example(), 64), numbered(0, 20))
    _, info = buffers.sample(buf, random.key(1), 20, replace=False)
    assert sorted(info["index"].tolist()) == list(range(20))


def test_vmapped_add_and_sample_over_seeds_equal_a_loop():
    seeds = 3
    bufs = tree.stack([buffers.init(example(), 16) for _ in range(seeds)])
    batches = tree.stack([numbered(10 * s, 7) for s in range(seeds)])
    ks = random.split(random.key(0), seeds)
    vadd = torch.func.vmap(buffers.add)
    vbufs = vadd(vadd(bufs, batches), batches)
    vbatch, vinfo = torch.func.vmap(lambda b, k: buffers.sample(b, k, 5))(vbufs, ks)
    for s in range(seeds):
        one = buffers.init(example(), 16)
        one = buffers.add(buffers.add(one, numbered(10 * s, 7)), numbered(10 * s, 7))
        batch, info = buffers.sample(one, ks[s], 5)
        assert torch.equal(vbufs.storage["action"][s], one.storage["action"])
        assert torch.equal(vinfo["index"][s], info["index"])
        assert torch.equal(vbatch["obs"][s], batch["obs"])


@pytest.mark.parametrize("prioritized", [False, True])
def test_vmapped_init_gives_every_seed_its_own_storage_even_for_unbatched_leaves(prioritized):
    # Under vmap(init) only "reward" is batched here (it comes from the seed); the other
    # leaves are constants. Every array must still be one per seed: add writes in place,
    # and a storage shared across seeds would mix their transitions.
    seeds = 3

    def init(seed_reward):
        return buffers.init({**example(), "reward": seed_reward}, 16, prioritized=prioritized)

    bufs = torch.func.vmap(init)(torch.zeros(seeds))
    for leaf in tree.leaves(bufs):
        assert leaf.shape[0] == seeds and leaf.stride(0) != 0
    batches = tree.stack([numbered(10 * s, 7) for s in range(seeds)])
    bufs = torch.func.vmap(buffers.add)(bufs, batches)
    for s in range(seeds):
        one = buffers.add(buffers.init(example(), 16, prioritized=prioritized), numbered(10 * s, 7))
        assert_trees_close(tree.index(bufs.storage, s), one.storage, rtol=0, atol=0)
        assert torch.equal(bufs.size[s], one.size)


def test_add_rejects_a_batch_with_a_wrong_dtype_naming_the_path_and_both():
    buf = buffers.init(example(), 8)
    bad = numbered(0, 4)
    bad["obs"] = bad["obs"].float()
    with pytest.raises(
        ValueError,
        match=r"batch\['obs'\] has shape \[4, 3, 2\] float32; "
        r"expected \[n, 3, 2\] uint8",
    ):
        buffers.add(buf, bad)


def test_add_rejects_a_single_transition_and_says_how_to_add_a_batch_dim():
    buf = buffers.init(example(), 8)
    with pytest.raises(ValueError, match=r"add a leading dim"):
        buffers.add(buf, example())


def test_add_rejects_a_batch_with_missing_or_extra_keys():
    buf = buffers.init(example(), 8)
    bad = numbered(0, 4)
    bad["done"] = bad.pop("terminated")
    with pytest.raises(ValueError, match=r"missing \['terminated'\], unexpected \['done'\]"):
        buffers.add(buf, bad)


def test_sampling_an_empty_buffer_raises():
    with pytest.raises(ValueError, match="the buffer is empty"):
        buffers.sample(buffers.init(example(), 8), random.key(0), 4)


def test_sampling_more_than_size_without_replacement_raises():
    buf = buffers.add(buffers.init(example(), 8), numbered(0, 3))
    with pytest.raises(ValueError, match=r"batch_size=4 without replacement .* holds 3"):
        buffers.sample(buf, random.key(0), 4, replace=False)


def test_compiled_add_and_sample_agree_with_eager():
    step = torch.compile(
        lambda b, batch, k: buffers.sample(buffers.add(b, batch), k, 6), backend="aot_eager"
    )
    compiled_buf = buffers.add(buffers.init(example(), 12), numbered(0, 9))
    eager_buf = buffers.add(buffers.init(example(), 12), numbered(0, 9))
    got = step(compiled_buf, numbered(9, 5), random.key(7))
    want = buffers.sample(buffers.add(eager_buf, numbered(9, 5)), random.key(7), 6)
    assert all(torch.equal(x, y) for x, y in zip(tree.leaves(got), tree.leaves(want), strict=True))
    # The compiled add wrote the storage in place, as the eager one does.
    assert torch.equal(compiled_buf.storage["action"], eager_buf.storage["action"])


def test_add_rejects_a_nested_leaf_of_the_wrong_shape_naming_its_path():
    ex = {"obs": torch.zeros(2), "info": {"lives": torch.zeros((), dtype=torch.int32)}}
    buf = buffers.init(ex, 8)
    bad = {"obs": torch.zeros(3, 2), "info": {"lives": torch.zeros(3, 1, dtype=torch.int32)}}
    with pytest.raises(
        ValueError,
        match=r"batch\['info.lives'\] has shape \[3, 1\] int32; "
        r"expected \[n\] int32",
    ):
        buffers.add(buf, bad)


def test_add_rejects_one_transition_of_scalars():
    buf = buffers.init({"reward": torch.zeros(())}, 8)
    with pytest.raises(
        ValueError, match=r"batch\['reward'\] has shape \[\] float32; .*leading dim"
    ):
        buffers.add(buf, {"reward": torch.zeros(())})


def test_init_rejects_an_example_leaf_that_is_not_a_tensor():
    with pytest.raises(TypeError, match=r"example leaf 'reward' is float; expected a tensor"):
        buffers.init({"obs": torch.zeros(2), "reward": 0.0}, 8)


def test_adding_tensors_that_require_grad_stores_plain_values():
    buf = buffers.init({"q": torch.zeros(2)}, 4)
    q = torch.ones(3, 2, requires_grad=True) * 2
    buf = buffers.add(buf, {"q": q})
    assert not buf.storage["q"].requires_grad and buf.storage["q"][:3].eq(2).all()
