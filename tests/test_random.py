import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from fxrl import random
from fxrl.testing import assert_trees_close, check_vmap, keys

# Random123's known-answer vectors for threefry2x32 with 20 rounds (kat_vectors):
# (counter, key) -> output, all as 32-bit words.
KNOWN_ANSWERS = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344), (0xC4923A9C, 0x483DF7A0)),
]


@pytest.mark.parametrize(("counter", "key", "expected"), KNOWN_ANSWERS)
def test_threefry_matches_the_random123_known_answer_vectors(counter, key, expected):
    t = lambda v: torch.tensor(v, dtype=torch.int64)
    y0, y1 = random.threefry2x32(t(key[0]), t(key[1]), t(counter[0]), t(counter[1]))
    assert (int(y0), int(y1)) == expected


def test_threefry_agrees_with_a_naive_python_implementation():
    mask = 0xFFFFFFFF

    def rotl(x, r):
        return ((x << r) | (x >> (32 - r))) & mask

    def reference(k0, k1, x0, x1):
        ks = [k0, k1, k0 ^ k1 ^ 0x1BD11BDA]
        rot = [13, 15, 26, 6, 17, 29, 16, 24]
        x0, x1 = (x0 + ks[0]) & mask, (x1 + ks[1]) & mask
        for i in range(20):
            x0 = (x0 + x1) & mask
            x1 = rotl(x1, rot[i % 8]) ^ x0
            if i % 4 == 3:
                s = i // 4 + 1
                x0 = (x0 + ks[s % 3]) & mask
                x1 = (x1 + ks[(s + 1) % 3] + s) & mask
        return x0, x1

    rng = np.random.default_rng(0)
    words = rng.integers(0, 2**32, size=(200, 4), dtype=np.uint64).astype(np.int64)
    t = torch.from_numpy(words)
    y0, y1 = random.threefry2x32(t[:, 0], t[:, 1], t[:, 2], t[:, 3])
    for row, a, b in zip(words.tolist(), y0.tolist(), y1.tolist(), strict=True):
        assert (a, b) == reference(*row)


def test_key_holds_the_high_and_low_words_of_the_seed():
    assert random.key(0).tolist() == [0, 0]
    assert random.key(5).tolist() == [0, 5]
    assert random.key(2**32 + 7).tolist() == [1, 7]
    assert random.key(-1).tolist() == [2**32 - 1, 2**32 - 1]
    assert random.key(torch.tensor([1, 2])).tolist() == [[0, 1], [0, 2]]


SAMPLERS = {
    "bits": lambda k: random.bits(k, (5,)),
    "uniform": lambda k: random.uniform(k, (5,), -2.0, 3.0),
    "uniform64": lambda k: random.uniform(k, (5,), dtype=torch.float64),
    "normal": lambda k: random.normal(k, (2, 3)),
    "randint": lambda k: random.randint(k, (7,), -3, 9),
    "bernoulli": lambda k: random.bernoulli(k, 0.3, (6,)),
    "categorical": lambda k: random.categorical(k, torch.tensor([0.1, 1.0, -2.0]), (4,)),
    "permutation": lambda k: random.permutation(k, 9),
    "choice": lambda k: random.choice(k, 10, (3,), replace=False),
    "choice_p": lambda k: random.choice(k, 4, (5,), p=torch.tensor([0.1, 0.2, 0.3, 0.4])),
    "choice_p_noreplace": lambda k: random.choice(
        k, 4, (2,), replace=False, p=torch.tensor([0.1, 0.2, 0.3, 0.4])
    ),
    "split": lambda k: random.split(k, 3),
    "fold_in": lambda k: random.fold_in(k, 12345),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
@given(key=keys())
def test_same_key_gives_the_same_numbers_and_leaves_global_rng_alone(name, key):
    before = torch.get_rng_state()
    key_copy = key.clone()
    a, b = SAMPLERS[name](key), SAMPLERS[name](key)
    assert torch.equal(torch.get_rng_state(), before)
    assert torch.equal(key, key_copy)  # inputs are never mutated
    assert_trees_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("name", sorted(SAMPLERS))
@given(key=keys(batch_shape=(3,)))
def test_vmap_over_keys_equals_a_loop_and_batched_keys(name, key):
    out = check_vmap(SAMPLERS[name], key, rtol=0, atol=0)
    assert_trees_close(SAMPLERS[name](key), out, rtol=0, atol=0)


def test_different_keys_give_different_numbers():
    a = random.uniform(random.key(0), (8,))
    b = random.uniform(random.key(1), (8,))
    assert not torch.equal(a, b)


def test_split_children_and_fold_in_and_bits_are_distinct_streams():
    key = random.key(42)
    children = random.split(key, 4)
    folded = torch.stack([random.fold_in(key, i) for i in range(4)])
    words = random.bits(key, (8,)).reshape(4, 2)
    rows = {tuple(r) for r in torch.cat([children, folded, words, key[None]]).tolist()}
    assert len(rows) == 13


def test_1e5_split_keys_never_repeat_a_draw_and_are_uncorrelated():
    ks = random.split(random.key(7), 100_000)
    draws = random.bits(ks, (2,))
    # 64-bit draws: a repeat among 1e5 would have probability ~ 3e-10.
    packed = (draws[:, 0] << 32) | draws[:, 1]
    assert torch.unique(packed).numel() == 100_000
    u = random.uniform(ks, (2,), dtype=torch.float64)
    # Neighbouring keys, and the two draws of one key, are uncorrelated (|r| < 5 sigma).
    sigma = 1 / math.sqrt(100_000)
    assert abs(np.corrcoef(u[:-1, 0], u[1:, 0])[0, 1]) < 5 * sigma
    assert abs(np.corrcoef(u[:, 0], u[:, 1])[0, 1]) < 5 * sigma
    assert abs(np.corrcoef(u[:, 0], random.uniform(random.fold_in(ks, 1), ()))[0, 1]) < 5 * sigma


def test_uniform_passes_a_chi_square_test():
    u = random.uniform(random.key(1), (200_000,))
    assert float(u.min()) >= 0.0 and float(u.max()) < 1.0
    counts = torch.histc(u, bins=100, min=0.0, max=1.0).numpy()
    assert stats.chisquare(counts).pvalue > 1e-3


def test_uniform_respects_bounds_and_float64_has_fine_resolution():
    u = random.uniform(random.key(2), (50_000,), -3.0, -1.0)
    assert float(u.min()) >= -3.0 and float(u.max()) < -1.0
    u64 = random.uniform(random.key(2), (10_000,), dtype=torch.float64)
    # float32 resolution is 2**-24; float64 draws use 52 bits.
    assert ((u64 * 2**24) % 1 != 0).float().mean() > 0.99


def test_randint_passes_a_chi_square_test_and_stays_in_range():
    r = random.randint(random.key(3), (120_000,), -5, 7)
    assert int(r.min()) == -5 and int(r.max()) == 6
    counts = torch.bincount(r + 5, minlength=12).numpy()
    assert stats.chisquare(counts).pvalue > 1e-3


def test_randint_bounds_broadcast_per_element():
    lo = torch.tensor([0, 10, 100])
    r = random.randint(random.key(4), (1000, 3), lo, lo + 3)
    assert ((r >= lo) & (r < lo + 3)).all()


def test_categorical_passes_a_chi_square_test_against_softmax():
    logits = torch.tensor([0.0, 1.0, -1.0, 2.0, 0.5])
    n = 100_000
    draws = random.categorical(random.key(5), logits, (n,))
    counts = torch.bincount(draws, minlength=5).numpy()
    expected = torch.softmax(logits.double(), 0).numpy() * n
    assert stats.chisquare(counts, expected).pvalue > 1e-3


def test_categorical_with_batched_logits_draws_per_row():
    logits = torch.tensor([[0.0, -1e9], [-1e9, 0.0]])
    assert random.categorical(random.key(0), logits).tolist() == [0, 1]


def test_normal_passes_a_kolmogorov_smirnov_test_and_has_unit_moments():
    z = random.normal(random.key(6), (100_000,)).double().numpy()
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert abs(z.mean()) < 5 / math.sqrt(len(z))
    assert abs(z.var() - 1) < 5 * math.sqrt(2 / len(z))


def test_bernoulli_frequency_matches_p():
    b = random.bernoulli(random.key(8), torch.tensor([0.1, 0.5, 0.9]), (40_000, 3))
    assert b.dtype == torch.bool
    freq = b.double().mean(0)
    assert torch.allclose(freq, torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64), atol=0.01)


@given(key=keys(), n=st.integers(0, 50))
def test_permutation_is_a_permutation(key, n):
    p = random.permutation(key, n)
    assert sorted(p.tolist()) == list(range(n))


def test_permutation_positions_are_uniform():
    ks = random.split(random.key(9), 30_000)
    first = random.permutation(ks, 6)[:, 0]
    assert stats.chisquare(torch.bincount(first, minlength=6).numpy()).pvalue > 1e-3


@given(key=keys(), n=st.integers(1, 20), data=st.data())
def test_choice_without_replacement_has_no_repeats(key, n, data):
    k = data.draw(st.integers(0, n))
    picks = random.choice(key, n, (k,), replace=False)
    assert len(set(picks.tolist())) == k and all(0 <= i < n for i in picks.tolist())
    p = torch.rand(n, generator=torch.Generator().manual_seed(k)) + 0.01
    weighted = random.choice(key, n, (k,), replace=False, p=p / p.sum())
    assert len(set(weighted.tolist())) == k


def test_choice_with_p_follows_p_and_never_picks_zero_probability():
    p = torch.tensor([0.5, 0.0, 0.25, 0.25])
    draws = random.choice(random.key(10), 4, (40_000,), p=p)
    counts = torch.bincount(draws, minlength=4)
    assert counts[1] == 0
    assert stats.chisquare(counts[[0, 2, 3]].numpy(), [20_000, 10_000, 10_000]).pvalue > 1e-3


def test_choice_asking_too_many_without_replacement_is_an_error():
    with pytest.raises(ValueError, match="cannot take 5 samples from 3"):
        random.choice(random.key(0), 3, (5,), replace=False)


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (torch.tensor([0, 0], dtype=torch.int32), r"dtype int32; expected int64 with shape \[2\]"),
        (torch.tensor([0.0, 0.0]), r"dtype float32; expected int64"),
        (torch.tensor([0, 0, 0]), r"shape \[3\] and dtype int64; expected int64 with shape \[2\]"),
        (torch.tensor(0), r"shape \[\]"),
        (7, r"key must be an int64 tensor of shape \[2\].*got int 7"),
    ],
)
def test_a_malformed_key_raises_a_value_error_saying_what_was_expected(bad, match):
    for fn in (
        lambda k: random.split(k),
        lambda k: random.uniform(k, (2,)),
        lambda k: random.normal(k),
        lambda k: random.randint(k, (2,), 0, 3),
    ):
        with pytest.raises(ValueError, match=match):
            fn(bad)


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="not a float dtype"):
        random.uniform(random.key(0), (2,), dtype=torch.int64)
    with pytest.raises(ValueError, match="num must be a positive int"):
        random.split(random.key(0), 0)
    with pytest.raises(ValueError, match="negative size"):
        random.normal(random.key(0), (-1,))
    with pytest.raises(ValueError, match=r"p has shape \[3\]; expected \[4\]"):
        random.choice(random.key(0), 4, p=torch.ones(3) / 3)
    with pytest.raises(TypeError, match="seed must be an int"):
        random.key(1.5)


# ------------------------------------------------------------ eager == compiled == exported


def draw_everything(key: torch.Tensor) -> dict[str, torch.Tensor]:
    k = random.split(key, 8)
    return {
        "split": random.split(key, 3),
        "fold_in": random.fold_in(key, 99),
        "bits": random.bits(k[0], (64,)),
        "uniform": random.uniform(k[1], (256,), -1.5, 2.5),
        "uniform64": random.uniform(k[1], (64,), dtype=torch.float64),
        "normal": random.normal(k[2], (512,)),
        "randint": random.randint(k[3], (64,), -7, 11),
        "bernoulli": random.bernoulli(k[4], 0.3, (64,)),
        "categorical": random.categorical(k[5], torch.linspace(-1.0, 1.0, 7), (64,)),
        "permutation": random.permutation(k[6], 32),
        "choice": random.choice(k[7], 20, (5,), replace=False),
    }


class DrawEverything(torch.nn.Module):
    def forward(self, key: torch.Tensor) -> dict[str, torch.Tensor]:
        return draw_everything(key)


KEYS = [random.key(s) for s in (0, 1, 2**40 + 3, -5)]


def draw_core(key: torch.Tensor) -> dict[str, torch.Tensor]:
    # Inductor takes seconds per Threefry instance, so the compiled check covers the
    # integer core and each float transform once; export and ONNX cover everything.
    return {
        "split": random.split(key, 3),
        "uniform": random.uniform(key, (256,), -1.5, 2.5),
        "normal": random.normal(key, (512,)),
        "randint": random.randint(key, (64,), -7, 11),
        "categorical": random.categorical(key, torch.linspace(-1.0, 1.0, 7), (64,)),
    }


@pytest.fixture(scope="module")
def compiled_draw():
    # torch.compile's defaults, as users call it: the cipher is fxrl's one op there
    # (fxrl/_threefry_op.py), which inductor lowers to one loop; as plain ops, inductor
    # copied the rounds into every consumer and took minutes over this program
    return torch.compile(draw_core, fullgraph=True, dynamic=False)


@pytest.fixture(scope="module")
def exported_draw():
    return torch.export.export(DrawEverything(), (KEYS[0],))


def test_compiled_draws_are_bit_identical_to_eager(compiled_draw):
    for key in KEYS:
        assert_trees_close(compiled_draw(key), draw_core(key), rtol=0, atol=0)


def test_exported_draws_are_bit_identical_to_eager(exported_draw):
    module = exported_draw.module()
    for key in KEYS:
        assert_trees_close(module(key), draw_everything(key), rtol=0, atol=0)


def test_onnx_runtime_draws_are_bit_identical_to_eager(exported_draw, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    from fxrl import _onnx_patch

    # as fxrl.export.to_onnx exports: optimize=False (its docstring: the exporter's
    # optimizer costs time, not ONNX Runtime speed; ONNX Runtime optimizes when it loads)
    # and the program lowered call by call (fxrl/_onnx_patch.py), the path users' files take
    lowered = _onnx_patch.counts["lowered"]
    with _onnx_patch.applied():
        program = torch.onnx.export(exported_draw, dynamo=True, verbose=False, optimize=False)
    assert _onnx_patch.counts["lowered"] == lowered + _onnx_patch.applies()
    path = tmp_path / "draw.onnx"
    program.save(str(path))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (input_name,) = [i.name for i in session.get_inputs()]
    names = list(draw_everything(KEYS[0]))
    for key in KEYS:
        outputs = session.run(None, {input_name: key.numpy()})
        got = {n: torch.from_numpy(np.asarray(o)) for n, o in zip(names, outputs, strict=True)}
        assert_trees_close(got, draw_everything(key), rtol=0, atol=0)


class DrawPerRow(torch.nn.Module):
    def forward(self, key: torch.Tensor, obs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        n = obs.shape[0]
        return (
            random.normal(key, obs.shape) + obs,
            random.uniform(key, (n, 3), dtype=torch.float64),
            random.randint(key, (n,), 0, 5),
            random.categorical(key, obs),
        )


def test_draw_sizes_stay_symbolic_under_export_with_a_dynamic_batch():
    batch = torch.export.Dim("batch", min=1)
    exported = torch.export.export(
        DrawPerRow(), (random.key(0), torch.zeros(4, 8)), dynamic_shapes=({}, {0: batch})
    )
    for n in (1, 4, 7):
        obs = torch.linspace(-1, 1, n * 8).reshape(n, 8)
        got = exported.module()(random.key(3), obs)
        assert_trees_close(got, DrawPerRow()(random.key(3), obs), rtol=0, atol=0)
