import collections
import importlib
import io
import sys
from typing import NamedTuple

import pytest
import torch
import torch.utils._pytree as torch_pytree
from hypothesis import given
from hypothesis import strategies as st

from fxrl import tree
from fxrl.testing import assert_trees_close, tensors, trees


@tree.dataclass
class Point:
    x: torch.Tensor
    v: torch.Tensor
    label: str = tree.field(static=True, default="p")


class Pair(NamedTuple):
    first: torch.Tensor
    second: torch.Tensor


def test_leaf_order_equals_torch_pytree_for_unsorted_dict_keys_and_none():
    t = {"b": torch.ones(1), "a": [None, torch.zeros(2)], "c": Pair(torch.ones(3), torch.ones(4))}
    ours = tree.leaves(t)
    theirs = torch_pytree.tree_leaves(t)
    assert len(ours) == len(theirs) == 5
    assert all(a is b for a, b in zip(ours, theirs, strict=True))


@given(t=trees())
def test_leaf_order_equals_torch_pytree_for_any_tree(t):
    ours, theirs = tree.leaves(t), torch_pytree.tree_leaves(t)
    assert len(ours) == len(theirs)
    assert all(a is b for a, b in zip(ours, theirs, strict=True))


@given(t=trees())
def test_flatten_then_unflatten_is_identity(t):
    back = tree.unflatten(tree.structure(t), tree.leaves(t))
    assert_trees_close(back, t)


@given(t=trees(), n=st.integers(1, 4))
def test_stack_then_unstack_returns_the_trees(t, n):
    copies = [tree.map(lambda x, i=i: x + i if x.dtype != torch.bool else x, t) for i in range(n)]
    stacked = tree.stack(copies)
    assert all(x.shape[0] == n for x in tree.leaves(stacked))
    for got, want in zip(tree.unstack(stacked), copies, strict=True):
        assert_trees_close(got, want)
    assert_trees_close(tree.index(stacked, n - 1), copies[-1])


@given(t=trees())
def test_concat_of_two_halves_is_the_whole(t):
    doubled = tree.stack([t, t])
    assert_trees_close(
        tree.concat([tree.index(doubled, slice(0, 1)), tree.index(doubled, slice(1, 2))]), doubled
    )


def test_map_over_several_trees_adds_leafwise():
    a = {"w": torch.ones(2), "b": torch.zeros(1)}
    b = {"w": torch.full((2,), 2.0), "b": torch.ones(1)}
    out = tree.map(lambda x, y: x + y, a, b)
    assert_trees_close(out, {"w": torch.full((2,), 3.0), "b": torch.ones(1)})


def test_map_with_mismatched_keys_names_the_first_differing_path():
    a = {"net": {"w": torch.ones(1), "b": torch.ones(1)}}
    b = {"net": {"w": torch.ones(1), "bias": torch.ones(1)}}
    with pytest.raises(ValueError, match=r"at \['net'\]: children \['w', 'b'\] vs \['w', 'bias'\]"):
        tree.map(torch.add, a, b)


def test_stack_with_different_list_lengths_names_the_path():
    with pytest.raises(ValueError, match=r"tree\.stack|tree\.map.*at \['layers'\]"):
        tree.stack([{"layers": [torch.ones(1)]}, {"layers": [torch.ones(1), torch.ones(1)]}])


def test_stack_of_nothing_is_an_error():
    with pytest.raises(ValueError, match="empty sequence"):
        tree.stack([])


def test_where_broadcasts_the_condition_over_trailing_dims():
    a = {"x": torch.ones(3, 2), "t": torch.ones(3, dtype=torch.int64)}
    b = {"x": torch.zeros(3, 2), "t": torch.zeros(3, dtype=torch.int64)}
    cond = torch.tensor([True, False, True])
    out = tree.where(cond, a, b)
    assert out["x"].tolist() == [[1, 1], [0, 0], [1, 1]]
    assert out["t"].tolist() == [1, 0, 1]


def test_where_rejects_a_condition_that_does_not_lead_the_leaves():
    with pytest.raises(ValueError, match=r"condition's shape \[4\]"):
        tree.where(torch.ones(4, dtype=torch.bool), torch.ones(3), torch.zeros(3))
    with pytest.raises(TypeError, match="bool tensor"):
        tree.where(torch.ones(3), torch.ones(3), torch.zeros(3))


def test_paths_use_keys_indices_and_field_names():
    t = {
        "agent": {"obs": torch.ones(1)},
        "h": (torch.ones(1), Pair(torch.ones(1), None)),
        "p": Point(torch.ones(1), torch.zeros(1)),
    }
    assert tree.path_names(t) == ["agent_obs", "h_0", "h_1_first", "h_1_second", "p_x", "p_v"]
    assert tree.path_names(t, sep="/")[0] == "agent/obs"
    assert tree.path_names(torch.ones(2)) == ["x"]
    assert [p for p, _ in tree.flatten_with_paths(t)][2] == ("h", 1, "first")


def test_summary_lists_every_leaf_with_shape_and_dtype():
    text = tree.summary({"w": torch.ones(2, 3), "t": torch.zeros((), dtype=torch.int64)})
    lines = text.splitlines()
    assert lines[0].split() == ["path", "shape", "dtype", "numel"]
    assert lines[2].split() == ["w", "[2,", "3]", "float32", "6"]
    assert lines[3].split() == ["t", "[]", "int64", "1"]
    assert lines[-1] == "2 leaves, 7 elements"


def test_dataclass_is_frozen_and_replace_copies():
    p = Point(torch.zeros(2), torch.ones(2))
    with pytest.raises(AttributeError):
        p.x = torch.ones(2)
    q = p.replace(x=torch.ones(2))
    assert p.x.sum() == 0 and q.x.sum() == 2 and q.v is p.v and q.label == "p"


def test_replace_with_an_unknown_field_suggests_the_close_one():
    p = Point(torch.zeros(2), torch.ones(2))
    with pytest.raises(TypeError, match=r"unknown field\(s\) \['vv'\].*Did you mean 'v'\?"):
        p.replace(vv=torch.ones(2))


def test_static_fields_live_in_the_treespec_not_the_leaves():
    p = Point(torch.zeros(2), torch.ones(2), label="q")
    assert len(tree.leaves(p)) == 2
    assert tree.structure(p) != tree.structure(p.replace(label="r"))
    assert tree.unflatten(tree.structure(p), tree.leaves(p)).label == "q"


def test_dataclass_works_under_vmap_grad_and_compile():
    batch = Point(torch.arange(6.0).reshape(3, 2), torch.ones(3, 2))
    moved = torch.func.vmap(lambda p: p.replace(x=p.x + p.v))(batch)
    assert isinstance(moved, Point) and moved.x.tolist() == [[1, 2], [3, 4], [5, 6]]

    grads = torch.func.grad(lambda p: (p.x * p.v).sum())(
        Point(torch.ones(2), torch.full((2,), 3.0))
    )
    assert isinstance(grads, Point) and grads.x.tolist() == [3.0, 3.0]

    compiled = torch.compile(lambda p: p.replace(x=p.x * 2), backend="eager", fullgraph=True)
    assert compiled(batch).x.tolist() == (batch.x * 2).tolist()


def test_dataclass_round_trips_through_torch_export_save_and_load():
    class Step(torch.nn.Module):
        def forward(self, p: Point) -> Point:
            return p.replace(x=p.x + p.v)

    p = Point(torch.zeros(2), torch.ones(2))
    exported = torch.export.export(Step(), (p,))
    buffer = io.BytesIO()
    torch.export.save(exported, buffer)
    buffer.seek(0)
    loaded = torch.export.load(buffer)
    out = loaded.module()(p)
    assert isinstance(out, Point) and out.x.tolist() == [1.0, 1.0]


def test_registering_the_same_dataclass_twice_on_reimport_is_safe():
    module = type(sys)("fxrl_test_reimport")
    source = "import torch\nfrom fxrl import tree\n@tree.dataclass\nclass S:\n    a: torch.Tensor\n"
    sys.modules["fxrl_test_reimport"] = module
    try:
        exec(compile(source, "fxrl_test_reimport", "exec"), module.__dict__)
        first = module.S
        exec(compile(source, "fxrl_test_reimport", "exec"), module.__dict__)
        second = module.S
        assert first is not second
        for cls in (first, second):
            assert torch_pytree.tree_leaves(cls(torch.ones(1)))[0].item() == 1.0
            assert len(tree.leaves(cls(torch.ones(1)))) == 1
        name = "fxrl_test_reimport.S"
        assert torch_pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE[name] is second
    finally:
        sys.modules.pop("fxrl_test_reimport", None)
    importlib.reload(tree)  # reloading fxrl.tree itself is harmless too
    assert tree.leaves({"b": 1, "a": 2}) == [1, 2]


def test_ordered_dict_and_defaultdict_keep_insertion_order():
    od = collections.OrderedDict([("z", 1), ("a", 2)])
    dd = collections.defaultdict(int, [("z", 1), ("a", 2)])
    assert tree.leaves(od) == [1, 2] and tree.leaves(dd) == [1, 2]


@given(x=tensors())
def test_a_bare_tensor_is_a_one_leaf_tree(x):
    assert tree.leaves(x) == [x] or tree.leaves(x)[0] is x
