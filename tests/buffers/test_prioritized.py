"""Prioritized replay: frequencies, importance weights, duplicates, sum-tree invariants."""

import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from fxrl import buffers, random, tree
from fxrl.buffers import sumtree


def example():
    return {"x": torch.zeros((), dtype=torch.int64), "reward": torch.zeros(())}


def filled(capacity, n, **kw):
    buf = buffers.init(example(), capacity, prioritized=True, **kw)
    return buffers.add(buf, {"x": torch.arange(n), "reward": torch.zeros(n)})


def test_sampling_frequencies_match_priority_to_the_alpha_by_chi_square():
    scipy_stats = pytest.importorskip("scipy.stats")
    buf = filled(40, 40, alpha=0.7)
    priority = torch.linspace(0.0, 3.0, 40)
    buf = buffers.update_priorities(buf, torch.arange(40), priority)
    for seed in (0, 1):
        _, info = buffers.sample(buf, random.key(seed), 40_000)
        counts = torch.bincount(info["index"], minlength=40).double()
        p = (priority.double() + 1e-6) ** 0.7
        expected = p / p.sum() * counts.sum()
        assert scipy_stats.chisquare(counts.numpy(), expected.numpy()).pvalue > 1e-3


def test_importance_weights_are_n_p_to_the_minus_beta_over_their_maximum():
    buf = filled(8, 6, alpha=0.5, beta=0.4)
    priority = torch.tensor([1.0, 2.0, 0.5, 4.0, 3.0, 0.25])
    buf = buffers.update_priorities(buf, torch.arange(6), priority)
    _, info = buffers.sample(buf, random.key(0), 64)
    p = (priority.double() + 1e-6) ** 0.5
    probs = p / p.sum()
    w_all = (6 * probs) ** -0.4
    expected = (w_all[info["index"]] / w_all.max()).float()
    torch.testing.assert_close(info["weight"], expected)
    _, info = buffers.sample(buf, random.key(0), 64, beta=1.0)
    torch.testing.assert_close(
        info["weight"], ((6 * probs[info["index"]]) ** -1 / (6 * probs).pow(-1).max()).float()
    )


def test_zero_priority_items_are_never_sampled():
    priority = torch.zeros(50)
    priority[[3, 17, 49]] = 1.0
    buf = buffers.init(example(), 64, prioritized=True, eps=0.0)
    buf = buffers.add(buf, {"x": torch.arange(50), "reward": torch.zeros(50)})
    buf = buffers.update_priorities(buf, torch.arange(50), priority)
    _, info = buffers.sample(buf, random.key(0), 2000)
    assert set(info["index"].tolist()) == {3, 17, 49}
    assert torch.equal(info["weight"], torch.ones(2000))


def test_duplicate_indices_keep_the_largest_priority_in_any_order():
    a = buffers.update_priorities(
        filled(10, 10), torch.tensor([2, 5, 2, 2]), torch.tensor([1.0, 4.0, 7.0, 3.0])
    )
    b = buffers.update_priorities(
        filled(10, 10), torch.tensor([2, 2, 5, 2]), torch.tensor([3.0, 7.0, 4.0, 1.0])
    )
    assert torch.equal(a.sums[-1], b.sums[-1])
    assert a.sums[-1][2] == (7.0 + 1e-6) ** 0.6 and a.sums[-1][5] == (4.0 + 1e-6) ** 0.6


def test_new_items_get_the_largest_priority_seen():
    buf = buffers.update_priorities(filled(10, 4), torch.tensor([1]), torch.tensor([9.0]))
    buf = buffers.update_priorities(buf, torch.tensor([1]), torch.tensor([0.5]))
    buf = buffers.add(buf, {"x": torch.tensor([7]), "reward": torch.zeros(1)})
    assert math.isclose(float(buf.sums[-1][4]), (9.0 + 1e-6) ** 0.6)


def test_vmapped_prioritized_sample_and_update_equal_a_loop():
    bufs = tree.stack([filled(20, 15) for _ in range(2)])
    prios = torch.rand(2, 15, generator=torch.Generator().manual_seed(0))
    index = torch.arange(15).expand(2, 15)
    bufs = torch.func.vmap(buffers.update_priorities)(bufs, index, prios)
    ks = random.split(random.key(4), 2)
    _, vinfo = torch.func.vmap(lambda b, k: buffers.sample(b, k, 9))(bufs, ks)
    for s in range(2):
        one = buffers.update_priorities(filled(20, 15), torch.arange(15), prios[s])
        _, info = buffers.sample(one, ks[s], 9)
        assert torch.equal(vinfo["index"][s], info["index"])
        torch.testing.assert_close(vinfo["weight"][s], info["weight"])


def test_update_priorities_rejects_negative_priorities_and_uniform_buffers():
    with pytest.raises(ValueError, match="negative, NaN or infinite"):
        buffers.update_priorities(filled(8, 8), torch.arange(2), torch.tensor([1.0, -1.0]))
    uniform = buffers.init(example(), 8)
    with pytest.raises(ValueError, match="this buffer is uniform"):
        buffers.update_priorities(uniform, torch.arange(2), torch.ones(2))
    with pytest.raises(ValueError, match=r"priority is a tensor \[2, 1\] float32"):
        buffers.update_priorities(filled(8, 8), torch.arange(2), torch.ones(2, 1))


@given(capacity=st.integers(1, 5000))
def test_tree_levels_cover_the_capacity_and_shrink_by_the_branching_factor(capacity):
    sizes = sumtree.level_sizes(capacity)
    assert sizes[0] == 1 and sizes[-1] >= capacity
    for parent, child in itertools.pairwise(sizes):
        assert parent * sumtree.BRANCH >= child and child % sumtree.BRANCH == 0


class SumTreeAgainstBruteForce(RuleBasedStateMachine):
    """Random adds and priority updates; the trees must agree with plain Python lists."""

    def __init__(self):
        super().__init__()
        self.capacity = 1100  # four tree levels: (1, 32, 64, 1120)
        self.buf = buffers.init(example(), self.capacity, prioritized=True, alpha=0.5)
        self.leaves = [0.0] * self.capacity
        self.cursor, self.max_p = 0, 1.0

    @rule(n=st.integers(1, 700))
    def add(self, n):
        self.buf = buffers.add(self.buf, {"x": torch.arange(n), "reward": torch.zeros(n)})
        for i in range(n):
            self.leaves[(self.cursor + i) % self.capacity] = self.max_p**0.5
        self.cursor = (self.cursor + n) % self.capacity

    @precondition(lambda self: int(self.buf.size) > 0)
    @rule(data=st.data())
    def update(self, data):
        size = int(self.buf.size)
        index = data.draw(st.lists(st.integers(0, size - 1), min_size=1, max_size=40))
        prio = data.draw(st.lists(st.floats(0.0, 100.0), min_size=len(index), max_size=len(index)))
        self.buf = buffers.update_priorities(
            self.buf, torch.tensor(index), torch.tensor(prio, dtype=torch.float64)
        )
        best = {}
        for i, p in zip(index, prio, strict=True):
            best[i] = max(best.get(i, -1.0), p + 1e-6)
        for i, p in best.items():
            self.leaves[i] = p**0.5
            self.max_p = max(self.max_p, p)

    @invariant()
    def leaves_and_every_parent_agree_with_the_model(self):
        sums, mins = self.buf.sums, self.buf.mins
        torch.testing.assert_close(
            sums[-1][: self.capacity], torch.tensor(self.leaves, dtype=torch.float64)
        )
        for upper, lower in itertools.pairwise(sums):
            padded = torch.zeros(upper.shape[0] * sumtree.BRANCH, dtype=torch.float64)
            padded[: lower.shape[0]] = lower
            torch.testing.assert_close(upper, padded.view(-1, sumtree.BRANCH).sum(-1))
        for upper, lower in itertools.pairwise(mins):
            padded = torch.full((upper.shape[0] * sumtree.BRANCH,), torch.inf, dtype=torch.float64)
            padded[: lower.shape[0]] = lower
            torch.testing.assert_close(upper, padded.view(-1, sumtree.BRANCH).amin(-1))
        filled_ = [p for p in self.leaves if p > 0]
        if filled_:
            assert math.isclose(float(sums[0][0]), sum(self.leaves), rel_tol=1e-12)
            assert math.isclose(float(mins[0][0]), min(filled_), rel_tol=1e-12)


TestSumTreeAgainstBruteForce = SumTreeAgainstBruteForce.TestCase
TestSumTreeAgainstBruteForce.settings = settings(
    stateful_step_count=15, max_examples=20, deadline=None
)


@given(data=st.data())
def test_find_returns_the_leaf_whose_prefix_interval_holds_the_mass(data):
    n = data.draw(st.integers(1, 300))
    values = torch.tensor(
        data.draw(st.lists(st.floats(0.0, 10.0), min_size=n, max_size=n)), dtype=torch.float64
    )
    values[data.draw(st.integers(0, n - 1))] += 1.0  # at least one positive leaf
    sums, mins = sumtree.empty(n)
    sumtree.assign(sums, mins, torch.arange(n), values)
    mass = (
        torch.tensor(
            data.draw(st.lists(st.floats(0.0, 1.0, exclude_max=True), min_size=1, max_size=20)),
            dtype=torch.float64,
        )
        * sums[0][0]
    )
    leaf = sumtree.find(sums, mass)
    cum = torch.cumsum(values, 0)
    for m, i in zip(mass.tolist(), leaf.tolist(), strict=True):
        assert values[i] > 0
        assert cum[i] - values[i] <= m * (1 + 1e-12) + 1e-12 and (
            m < cum[i] * (1 + 1e-12) or i == max(j for j in range(n) if values[j] > 0)
        )


def test_prioritized_sampling_without_replacement_draws_distinct_items_by_priority():
    scipy_stats = pytest.importorskip("scipy.stats")
    buf = buffers.init(example(), 40, prioritized=True, alpha=1.0, eps=0.0)
    buf = buffers.add(buf, {"x": torch.arange(30), "reward": torch.zeros(30)})
    priority = torch.zeros(30)
    priority[:6] = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    buf = buffers.update_priorities(buf, torch.arange(30), priority)
    _, info = buffers.sample(buf, random.key(0), 6, replace=False)
    assert sorted(info["index"].tolist()) == list(range(6))
    # The first pick of a draw without replacement is a draw in proportion to priority.
    keys = random.split(random.key(1), 4000)
    first = torch.func.vmap(lambda k: buffers.sample(buf, k, 2, replace=False)[1]["index"][0])(keys)
    counts = torch.bincount(first, minlength=6).double()
    expected = priority[:6].double() / priority.sum() * 4000
    assert scipy_stats.chisquare(counts.numpy(), expected.numpy()).pvalue > 1e-3
    with pytest.raises(ValueError, match=r"batch_size=7 without replacement .* holds 6"):
        buffers.sample(buf, random.key(0), 7, replace=False)


def test_sampling_when_every_priority_is_zero_raises():
    buf = buffers.init(example(), 8, prioritized=True, eps=0.0)
    buf = buffers.add(buf, {"x": torch.arange(4), "reward": torch.zeros(4)})
    buf = buffers.update_priorities(buf, torch.arange(4), torch.zeros(4))
    with pytest.raises(ValueError, match="every priority in the buffer is zero"):
        buffers.sample(buf, random.key(0), 2)


def test_find_agrees_with_searchsorted_over_all_leaves_at_100k_items():
    gen = torch.Generator().manual_seed(0)
    values = torch.rand(100_000, dtype=torch.float64, generator=gen) ** 4
    values[torch.randint(100_000, (5000,), generator=gen)] = 0.0
    sums, mins = sumtree.empty(100_000)
    assert len(sums) == 5  # root and four levels: (1, 32, 128, 3136, 100000)
    sumtree.assign(sums, mins, torch.arange(100_000), values)
    cum = values.cumsum(0)
    mass = torch.rand(20_000, dtype=torch.float64, generator=gen) * cum[-1]
    got = sumtree.find(sums, mass)
    want = torch.searchsorted(cum, mass, right=True)
    # Sums over different groupings round differently: only a mass within rounding of a
    # leaf boundary may land in the neighbouring leaf, and never in a zero one.
    differ = got != want
    near = (
        (mass - cum[want.clamp(max=99_999) - 1])
        .abs()
        .minimum((cum[want.clamp(max=99_999)] - mass).abs())
    )
    assert (near[differ] < 1e-9 * cum[-1]).all() and differ.sum() <= 2
    assert (values[got] > 0).all()
    assert mins[0][0] == values[values > 0].min()


def test_vmapped_sampling_of_an_all_zero_buffer_stays_in_range():
    # Under vmap the eager "every priority is zero" check cannot run; indices stay valid.
    bufs = tree.stack([buffers.init(example(), 40, prioritized=True) for _ in range(2)])
    _, info = torch.func.vmap(lambda b, k: buffers.sample(b, k, 5))(
        bufs, random.split(random.key(0), 2)
    )
    assert ((info["index"] >= 0) & (info["index"] < 40)).all()


def test_compiled_sample_and_update_priorities_agree_with_eager():
    def step(buf, key):
        batch, info = buffers.sample(buf, key, 16)
        return buffers.update_priorities(buf, info["index"], batch["x"].float() / 10), info

    compiled = torch.compile(step, backend="aot_eager", fullgraph=True)
    got_buf, got = compiled(filled(100, 60), random.key(3))
    want_buf, want = step(filled(100, 60), random.key(3))
    assert torch.equal(got["index"], want["index"]) and torch.equal(got["weight"], want["weight"])
    # The compiled update wrote the trees in place, as the eager one does.
    assert all(torch.equal(a, b) for a, b in zip(got_buf.sums, want_buf.sums, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(got_buf.mins, want_buf.mins, strict=True))
    assert torch.equal(got_buf.max_priority, want_buf.max_priority)
