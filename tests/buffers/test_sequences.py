"""sample_sequences: consecutive windows, episode starts marked, never across the cursor."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from fxrl import buffers, random, tree
from fxrl.testing import keys


def example():
    return {
        "step": torch.zeros((), dtype=torch.int64),
        "episode": torch.zeros((), dtype=torch.int64),
        "terminated": torch.zeros((), dtype=torch.bool),
        "truncated": torch.zeros((), dtype=torch.bool),
    }


def stream(lengths, ends):
    """Consecutive steps of episodes of the given lengths; each ends by termination or
    truncation (``ends``), the last one possibly cut off mid-episode."""
    rows = []
    for e, (n, kind) in enumerate(zip(lengths, ends, strict=True)):
        for t in range(n):
            last = t == n - 1
            rows.append((len(rows), e, last and kind == "term", last and kind == "trunc"))
    step, episode, term, trunc = zip(*rows, strict=True)
    return {
        "step": torch.tensor(step),
        "episode": torch.tensor(episode),
        "terminated": torch.tensor(term),
        "truncated": torch.tensor(trunc),
    }


episodes = st.lists(
    st.tuples(st.integers(1, 12), st.sampled_from(["term", "trunc", "cut"])),
    min_size=1,
    max_size=12,
)


@given(eps=episodes, capacity=st.integers(4, 40), chunk=st.integers(1, 9), key=keys())
def test_windows_are_consecutive_and_mark_every_episode_start(eps, capacity, chunk, key):
    lengths, ends = zip(*eps, strict=True)
    ends = [e if i == len(ends) - 1 else ("term" if e == "cut" else e) for i, e in enumerate(ends)]
    data = stream(lengths, ends)
    n = data["step"].shape[0]
    buf = buffers.init(example(), capacity)
    for i in range(0, n, chunk):
        buf = buffers.add(buf, tree.index(data, slice(i, i + chunk)))
    length = min(4, int(buf.size))
    windows, info = buffers.sample_sequences(buf, key, 16, length)
    assert windows["step"].shape == (16, length) and windows["is_init"].shape == (16, length)
    assert torch.equal(windows["step"], buf.storage["step"][info["index"]])
    # Consecutive steps: the window never wraps from the newest to the oldest transition.
    assert (windows["step"].diff(dim=1) == 1).all()
    # Never an unmarked episode boundary, and every marked step really starts an episode
    # (or is the oldest step kept, whose past is gone).
    changed = windows["episode"].diff(dim=1) != 0
    assert (windows["is_init"][:, 1:] | ~changed).all()
    first_of_episode = torch.cat([torch.tensor([True]), data["episode"].diff() != 0])
    oldest = windows["step"] == n - int(buf.size)
    assert torch.equal(windows["is_init"], first_of_episode[windows["step"]] | oldest)


def test_is_init_comes_from_the_batch_when_it_has_such_a_field():
    ex = {"x": torch.zeros(()), "is_init": torch.zeros((), dtype=torch.bool)}
    buf = buffers.init(ex, 10)
    flags = torch.tensor([True, False, False, True, False, False])
    buf = buffers.add(buf, {"x": torch.arange(6.0), "is_init": flags})
    windows, info = buffers.sample_sequences(buf, random.key(0), 8, 6)
    assert torch.equal(info["is_init"], flags.expand(8, 6))
    assert torch.equal(windows["is_init"], info["is_init"])
    assert torch.equal(windows["x"], torch.arange(6.0).expand(8, 6))


def test_vmapped_sample_sequences_over_per_env_buffers_equals_a_loop():
    data = [stream([5, 7], ["term", "cut"]), stream([3, 3, 6], ["trunc", "term", "cut"])]
    bufs = tree.stack([buffers.add(buffers.init(example(), 10), d) for d in data])
    ks = random.split(random.key(2), 2)
    vwin, vinfo = torch.func.vmap(lambda b, k: buffers.sample_sequences(b, k, 4, 3))(bufs, ks)
    for e in range(2):
        win, info = buffers.sample_sequences(
            buffers.add(buffers.init(example(), 10), data[e]), ks[e], 4, 3
        )
        assert torch.equal(vwin["step"][e], win["step"]) and torch.equal(
            vinfo["is_init"][e], info["is_init"]
        )


def test_sample_sequences_longer_than_the_buffer_raises():
    buf = buffers.add(buffers.init(example(), 10), stream([3], ["cut"]))
    with pytest.raises(ValueError, match=r"length=5 but the buffer holds 3 transitions"):
        buffers.sample_sequences(buf, random.key(0), 2, 5)
