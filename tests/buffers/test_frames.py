"""Frame-stacked storage (one frame per slot) and memmap storage equal a naive buffer."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from fxrl import buffers, random, transforms, tree
from fxrl.testing import keys

S = 4


def example():
    return {
        "obs": torch.zeros(S, 2, 3, dtype=torch.uint8),
        "action": torch.zeros((), dtype=torch.int64),
        "next_obs": torch.zeros(S, 2, 3, dtype=torch.uint8),
        "terminated": torch.zeros((), dtype=torch.bool),
        "truncated": torch.zeros((), dtype=torch.bool),
    }


def atari_like_stream(lengths, seed=0):
    """Transitions of episodes of the given lengths, stacked by fxrl.transforms.frame_stack
    (an episode starts with its first frame repeated); episodes alternate between ending
    by termination and by truncation. Every frame is distinct random bytes."""
    g = torch.Generator().manual_seed(seed)
    stacker = transforms.frame_stack(S, dim=-3)
    rows, step = [], 0
    for e, n in enumerate(lengths):
        frame = torch.randint(0, 256, (1, 2, 3), dtype=torch.uint8, generator=g)
        stack = stacker.init(frame)
        for t in range(n):
            frame = torch.randint(0, 256, (1, 2, 3), dtype=torch.uint8, generator=g)
            nxt = stacker.push(stack, frame)
            last = t == n - 1
            rows.append(
                {
                    "obs": stack,
                    "action": torch.tensor(step),
                    "next_obs": nxt,
                    "terminated": torch.tensor(last and e % 2 == 0),
                    "truncated": torch.tensor(last and e % 2 == 1),
                }
            )
            stack, step = nxt, step + 1
    return tree.stack(rows)


@given(
    lengths=st.lists(st.integers(1, 9), min_size=1, max_size=8),
    capacity=st.integers(S, 30),
    chunk=st.integers(1, 7),
    key=keys(),
)
def test_frame_stacked_buffer_rebuilds_exactly_the_stacks_a_naive_buffer_stores(
    lengths, capacity, chunk, key
):
    data = atari_like_stream(lengths)
    naive = buffers.init(example(), capacity)
    small = buffers.init(example(), capacity, frame_stack=S)
    for i in range(0, data["action"].shape[0], chunk):
        part = tree.index(data, slice(i, i + chunk))
        naive, small = buffers.add(naive, part), buffers.add(small, part)
    batch, info = buffers.sample(small, key, 32)
    expected = tree.map(lambda x: x[info["index"]], naive.storage)
    for name in expected:
        assert torch.equal(batch[name], expected[name]), name
    windows, winfo = buffers.sample_sequences(small, key, 4, 1)
    assert torch.equal(windows["obs"][:, 0], naive.storage["obs"][winfo["index"][:, 0]])


def test_every_sampleable_slot_is_rebuilt_and_only_the_oldest_s_minus_1_are_left_out():
    data = atari_like_stream([7, 3, 12, 1, 9])
    small = buffers.add(buffers.init(example(), 20, frame_stack=S), data)
    naive = buffers.add(buffers.init(example(), 20), data)
    _, info = buffers.sample(small, random.key(0), 20 - (S - 1), replace=False)
    oldest = int(small.cursor)
    left_out = {(oldest + k) % 20 for k in range(S - 1)}
    assert set(info["index"].tolist()) == set(range(20)) - left_out
    rebuilt = buffers.frames.gather(small, info["index"])
    assert torch.equal(rebuilt["obs"], naive.storage["obs"][info["index"]])
    assert torch.equal(rebuilt["next_obs"], naive.storage["next_obs"][info["index"]])


def test_an_atari_transition_takes_two_frames_instead_of_eight():
    atari = {
        "obs": torch.zeros(4, 84, 84, dtype=torch.uint8),
        "action": torch.zeros((), dtype=torch.int64),
        "reward": torch.zeros(()),
        "next_obs": torch.zeros(4, 84, 84, dtype=torch.uint8),
        "terminated": torch.zeros((), dtype=torch.bool),
        "truncated": torch.zeros((), dtype=torch.bool),
    }

    def bytes_per_transition(buf):
        leaves = [*tree.leaves(buf.storage), buf.episode_start]
        return sum(x.numel() * x.element_size() for x in leaves) / buf.capacity

    assert bytes_per_transition(buffers.init(atari, 10)) == 2 * 4 * 84 * 84 + 8 + 4 + 2 + 1
    assert bytes_per_transition(buffers.init(atari, 10, frame_stack=4)) == 2 * 84 * 84 + 15


def test_frame_stack_needs_episode_flags_and_matching_stacks():
    no_flags = {k: v for k, v in example().items() if k not in ("terminated", "truncated")}
    with pytest.raises(ValueError, match="needs episode boundaries"):
        buffers.init(no_flags, 10, frame_stack=S)
    with pytest.raises(
        ValueError, match=r"example\['obs'\] has shape \[4, 2, 3\]; with frame_stack=3"
    ):
        buffers.init(example(), 10, frame_stack=3)


def test_memmap_storage_lives_in_files_and_samples_like_memory(tmp_path):
    data = atari_like_stream([5, 6, 4])
    on_disk = buffers.add(buffers.init(example(), 12, storage="memmap", path=str(tmp_path)), data)
    in_ram = buffers.add(buffers.init(example(), 12), data)
    assert (tmp_path / "obs.bin").stat().st_size == 12 * S * 2 * 3
    a, _ = buffers.sample(on_disk, random.key(5), 8)
    b, _ = buffers.sample(in_ram, random.key(5), 8)
    assert all(torch.equal(x, y) for x, y in zip(tree.leaves(a), tree.leaves(b), strict=True))
    with pytest.raises(ValueError, match="storage='memmap' with path=DIRECTORY"):
        buffers.init(example(), 12, storage="memmap")


@given(
    lengths=st.lists(st.integers(1, 9), min_size=1, max_size=8),
    capacity=st.integers(S, 30),
    chunk=st.integers(1, 7),
    key=keys(),
)
def test_prioritized_frame_stacked_buffer_never_draws_a_slot_without_its_history(
    lengths, capacity, chunk, key
):
    data = atari_like_stream(lengths)
    naive = buffers.init(example(), capacity)
    small = buffers.init(example(), capacity, prioritized=True, frame_stack=S)
    drawn = None
    for i in range(0, data["action"].shape[0], chunk):
        part = tree.index(data, slice(i, i + chunk))
        naive, small = buffers.add(naive, part), buffers.add(small, part)
        # Re-prioritize what was drawn before this add, as a DQN loop may: some of those
        # slots have just aged into the S - 1 oldest and must stay at zero.
        if drawn is not None:
            small = buffers.update_priorities(small, drawn, torch.rand(8) + 0.5)
        drawn = buffers.sample(small, random.fold_in(key, i), 8)[1]["index"]
    batch, info = buffers.sample(small, key, 64)
    assert buffers.frames.sampleable(small, info["index"]).all()
    for name in batch:
        assert torch.equal(batch[name], naive.storage[name][info["index"]]), name
    if int(small.size) == capacity:
        zone = [(int(small.cursor) + k) % capacity for k in range(S - 1)]
        assert (small.sums[-1][zone] == 0).all()
