import pytest
import torch
from hypothesis import find, given
from hypothesis import strategies as st

from fxrl import random, specs, tree
from fxrl.testing import all_specs, assert_trees_close, check_vmap, from_spec, keys, trees


def test_assert_trees_close_names_path_shape_and_worst_element():
    a = {"net": {"w": torch.zeros(2, 3)}}
    b = {"net": {"w": torch.zeros(2, 3)}}
    b["net"]["w"][1, 2] = 0.5
    b["net"]["w"][0, 0] = 0.1
    with pytest.raises(AssertionError) as info:
        assert_trees_close(a, b)
    msg = str(info.value)
    assert "['net']['w']" in msg and "2 of 6 elements not close" in msg
    assert "shape [2, 3]" in msg and "worst at index [1, 2]: 0.0 vs 0.5" in msg


def test_assert_trees_close_compares_integers_exactly_and_reports_structure():
    with pytest.raises(
        AssertionError, match=r"\['a'\]: 1 of 3 elements differ.*index \[2\]: 3 vs 4"
    ):
        assert_trees_close({"a": torch.tensor([1, 2, 3])}, {"a": torch.tensor([1, 2, 4])})
    with pytest.raises(AssertionError, match=r"structure at <root>: children \['a'\] vs \['b'\]"):
        assert_trees_close({"a": torch.ones(1)}, {"b": torch.ones(1)})
    with pytest.raises(AssertionError, match=r"dtypes differ: torch.float32 vs torch.float64"):
        assert_trees_close(torch.ones(2), torch.ones(2, dtype=torch.float64))
    with pytest.raises(AssertionError, match=r"shapes differ: \[2\] vs \[3\]"):
        assert_trees_close(torch.ones(2), torch.ones(3))


def test_assert_trees_close_accepts_small_differences_and_matching_nans():
    x = torch.tensor([1.0, float("nan"), float("inf")])
    assert_trees_close(x, x.clone())
    assert_trees_close(torch.tensor([1.0]), torch.tensor([1.0 + 1e-7]))
    with pytest.raises(AssertionError):
        assert_trees_close(torch.tensor([1.0]), torch.tensor([1.0 + 1e-7]), rtol=0, atol=0)
    with pytest.raises(AssertionError):
        assert_trees_close(torch.tensor([float("nan")]), torch.tensor([0.0]))


@given(t=trees())
def test_a_tree_is_close_to_itself(t):
    assert_trees_close(t, tree.map(lambda x: x.clone(), t), rtol=0, atol=0)


def test_check_vmap_passes_for_a_pure_function_and_returns_the_batched_output():
    ks = random.split(random.key(0), 4)
    out = check_vmap(
        lambda k, scale: scale * random.normal(k, (2,)), ks, torch.tensor(2.0), in_dims=(0, None)
    )
    assert out.shape == (4, 2)


def test_check_vmap_catches_hidden_state():
    calls = []

    def impure(x):
        calls.append(1)  # vmap traces once, a loop calls once per element
        return x * len(calls)

    with pytest.raises(AssertionError, match="elements not close"):
        check_vmap(impure, torch.ones(3, 2))


def test_check_vmap_rejects_global_rng_use():
    with pytest.raises(RuntimeError, match="randomness"):
        check_vmap(lambda x: x + torch.rand(()), torch.zeros(3))


def test_check_vmap_rejects_arguments_with_different_batch_sizes():
    with pytest.raises(ValueError, match="share one leading size"):
        check_vmap(torch.add, torch.zeros(3), torch.zeros(4))


def test_keys_strategy_draws_valid_distinct_keys():
    k = find(keys(batch_shape=(2, 3)), lambda k: True)
    assert k.shape == (2, 3, 2) and k.dtype == torch.int64
    distinct = find(st.lists(keys(), min_size=2, max_size=2), lambda ks: not torch.equal(*ks))
    assert not torch.equal(*distinct)


def test_from_spec_reaches_the_boundaries():
    box = specs.Box(-2.4, 2.4, shape=(1,))
    find(from_spec(box), lambda x: bool(x[0] == box.high[0]))
    find(from_spec(box), lambda x: bool(x[0] == box.low[0]))
    assert int(find(from_spec(specs.Discrete(5)), lambda x: int(x) == 4)) == 4


def test_all_specs_builds_every_kind_of_spec():
    for kind in (specs.Box, specs.Discrete, specs.MultiDiscrete, specs.Binary, specs.Composite):
        assert isinstance(find(all_specs(), lambda s, kind=kind: isinstance(s, kind)), kind)
