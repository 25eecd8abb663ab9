"""``fxrl.scan``: the rolled loop, ``jax.lax.scan``'s shape, beside ``fxrl.compile``.

    carry, ys = fxrl.scan(body, carry, xs)       # body(carry, x) -> (carry, y)
    carry, ys, vjp_fn = fxrl.scan.scan_vjp(body, params, carry, xs)

In eager code a scan is a Python loop; traced by ``fxrl.compile`` (or ``torch.compile``)
it is torch's ``scan`` operator, one loop in the program whatever its length. The
algorithms, ``fxrl.rollout`` and users write their loops with it. ``scan_vjp`` is its
backpropagation through time (torch's scan operator has no ``torch.func.grad`` rule).
The module is callable: ``fxrl.scan(...)`` is ``fxrl.scan.scan(...)`` (as
``fxrl.compile``, see ``fxrl._callable_module``).
"""

from __future__ import annotations

import dataclasses
import functools
import types
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from fxrl import tree
from fxrl._callable_module import make_callable
from fxrl.compile import is_traced, is_tracing

__all__ = ["scan", "scan_vjp"]


def _copy(out: Any) -> Any:
    # Under scan an output may not alias an input, views included (a passed-through env
    # param, a reshape): copy every leaf; inductor fuses the copies into the producers.
    # Contiguous copies also give init and carry the same strides (vmapped resets make
    # stride-0 params), which scan requires.
    fmt = torch.contiguous_format
    return tree.map(lambda x: x.clone(memory_format=fmt) if isinstance(x, Tensor) else x, out)


def scan(body: Callable[[Any, Any], tuple[Any, Any]], carry: Any, xs: Any) -> tuple[Any, Any]:
    """``carry, ys = scan(body, carry, xs)``: ``body(carry, x) -> (carry, y)`` over the
    leading dim of ``xs`` (a pytree, or an int ``n`` for ``x = 0..n-1``), ``ys`` stacked
    along a new leading dim: ``jax.lax.scan``.

    Traced by ``fxrl.compile`` (or ``torch.compile``) it is torch's ``scan`` operator: the
    body is traced and compiled once and runs as a loop inside the program, whatever the
    length. In eager code it is a Python loop (the same numbers, without the operator's
    eager overheads under vmap). ``y`` must be a dict, tuple or list of tensors. The body
    may read the traced function's tensors through its closure (params, a replay
    buffer): they become the loop's read-only extra inputs, found through closures,
    nested functions, partials and pytrees (registered dataclasses included; not through
    the attributes of other objects: pass such values as pytrees, as the algorithms pass
    their hyperparameters).
    A scan may run inside another scan's body (both rolled: a loop in a loop). A scan
    cannot be differentiated by ``torch.func.grad`` (torch's scan operator has no grad
    rule): differentiate a rolled loop with ``scan_vjp``.
    """
    if isinstance(xs, int):
        xs = torch.arange(xs, device=_device_of(carry))
    if torch.compiler.is_compiling():
        return _dynamo_scan(body, carry, xs)
    if is_tracing():
        return _traced_scan(body, carry, xs)
    ys = []
    length = tree.leaves(xs)[0].shape[0]
    for i in range(length):
        carry, y = body(carry, tree.map(lambda x, i=i: x[i], xs))
        ys.append(y)
    return carry, tree.stack(ys)


def _device_of(tree_: Any) -> torch.device | None:
    """The device of the first tensor in ``tree_`` (None: it holds none)."""
    leaves = [x for x in tree.leaves(tree_) if isinstance(x, Tensor)]
    return leaves[0].device if leaves else None


def scan_vjp(
    body: Callable[[Any, Any, Any], tuple[Any, Any]], params: Any, carry: Any, xs: Any
) -> tuple[Any, Any, Callable[[Any, Any], tuple[Any, Any, Any]]]:
    """``carry, ys, vjp_fn = scan_vjp(body, params, carry, xs)``: ``scan`` of
    ``body(params, carry, x) -> (carry, y)`` and its vector-Jacobian product, as
    ``torch.func.vjp`` gives one: backpropagation through time over a rolled loop.

    ``vjp_fn(d_carry, d_ys) -> (d_params, d_carry0, d_xs)`` takes cotangents of the final
    carry (``None``: zeros, a carry the loss does not read) and of ``ys``, and returns the
    gradients with respect to ``params``, the initial ``carry`` and ``xs`` (``None`` for
    the leaves of ``xs`` that are not floating point, such as reset flags). The forward
    loop keeps the carry before every step; the backward is a second ``scan``, in reverse,
    whose body takes ``torch.func.vjp`` of ``body`` at that step and adds up the params'
    gradients. Both are rolled under ``fxrl.compile`` (a ``torch.func.grad`` through
    ``scan`` is not possible: torch's scan operator has no grad rule), and both are
    Python loops in eager code.

    ``body`` must read what is differentiated through ``params``, ``carry`` and ``x``
    only: a tensor it reads through its closure gets no gradient. The gradients equal
    autograd's through the unrolled loop up to float rounding (the params' gradients
    are summed over steps in reverse order).
    """

    def forward(c: Any, x: Any) -> tuple[Any, dict]:
        new_c, y = body(params, c, x)
        return new_c, {"y": y, "carry": c}

    final, out = scan(forward, carry, xs)
    ys, carries = out["y"], out["carry"]
    x_leaves, x_spec = tree.leaves(xs), tree.structure(xs)
    is_float = [t.is_floating_point() for t in x_leaves]

    def vjp_fn(d_carry: Any, d_ys: Any) -> tuple[Any, Any, Any]:
        d_carry = tree.map(torch.zeros_like, final) if d_carry is None else d_carry

        def back(acc: tuple, step: tuple) -> tuple[tuple, list]:
            d_c, d_p = acc
            c, x, d_y = step
            x_list = tree.leaves(x)

            def at_step(p: Any, c_: Any, floats: list) -> tuple[Any, Any]:
                it = iter(floats)
                x_ = [next(it) if f else v for v, f in zip(x_list, is_float, strict=True)]
                return body(p, c_, tree.unflatten(x_spec, x_))

            floats = [v for v, f in zip(x_list, is_float, strict=True) if f]
            _, pull = torch.func.vjp(at_step, params, c, floats)
            g_p, g_c, g_x = pull((d_c, d_y))
            return (g_c, tree.map(torch.add, d_p, g_p)), g_x

        rev = tree.map(lambda v: v.flip(0), (carries, xs, d_ys))
        zeros = tree.map(torch.zeros_like, params)
        (d_carry0, d_params), d_floats = scan(back, (d_carry, zeros), rev)
        it = iter(v.flip(0) for v in d_floats)
        d_xs = [next(it) if f else None for f in is_float]
        return d_params, d_carry0, tree.unflatten(x_spec, d_xs)

    return final, ys, vjp_fn


def _lift(obj: Any, found: list[Tensor], seen: set[int], depth: int = 0) -> Any:
    """A template of ``obj`` (a loop body, or what its closure holds) in which every
    tensor of the trace in progress is replaced by its index in ``found``; ``None`` where
    ``obj`` holds none. The rolled loop takes those tensors as extra inputs (torch's scan
    cannot capture another graph's tensors), and ``_build`` makes the body read them.
    Looks through closures, nested functions, partials and pytrees; objects such as envs
    and networks hold real constant tensors, which a loop may read as they are."""
    if depth > 16 or id(obj) in seen:
        return None
    if isinstance(obj, Tensor):
        if not is_traced(obj):
            return None
        for i, t in enumerate(found):
            if t is obj:
                return ("tensor", i)
        found.append(obj)
        return ("tensor", len(found) - 1)
    seen = seen | {id(obj)}
    if isinstance(obj, types.FunctionType) and obj.__closure__:
        cells = [
            _lift(c.cell_contents, found, seen, depth + 1) if _has_contents(c) else None
            for c in obj.__closure__
        ]
        return ("function", obj, cells) if any(c is not None for c in cells) else None
    if isinstance(obj, functools.partial):
        parts = [_lift(v, found, seen, depth + 1) for v in (obj.func, *obj.args)]
        kw = {k: _lift(v, found, seen, depth + 1) for k, v in obj.keywords.items()}
        changed = any(p is not None for p in parts) or any(v is not None for v in kw.values())
        return ("partial", obj, parts, kw) if changed else None
    if isinstance(obj, list | tuple | dict) or (
        dataclasses.is_dataclass(obj) and not isinstance(obj, type)
    ):
        leaves = tree.leaves(obj)
        if len(leaves) == 1 and leaves[0] is obj:  # a dataclass that is no pytree node
            return None
        parts = [_lift(v, found, seen, depth + 1) for v in leaves]
        if any(p is not None for p in parts):
            return ("tree", tree.structure(obj), leaves, parts)
    return None


def _build(obj: Any, template: Any, values: list[Tensor]) -> Any:
    """``obj`` rebuilt from ``_lift``'s template with ``values`` in place of the lifted
    tensors (a new function object with new closure cells; the original is untouched)."""
    if template is None:
        return obj
    kind = template[0]
    if kind == "tensor":
        return values[template[1]]
    if kind == "function":
        fn, cells = template[1], template[2]
        closure = tuple(
            c if t is None else types.CellType(_build(c.cell_contents, t, values))
            for c, t in zip(fn.__closure__, cells, strict=True)
        )
        new = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, closure)
        new.__kwdefaults__, new.__qualname__ = fn.__kwdefaults__, fn.__qualname__
        return new
    if kind == "partial":
        p, parts, kw = template[1], template[2], template[3]
        func, *args = (_build(v, t, values) for v, t in zip((p.func, *p.args), parts, strict=True))
        keywords = {k: _build(v, kw[k], values) for k, v in p.keywords.items()}
        return functools.partial(func, *args, **keywords)
    spec, leaves, parts = template[1], template[2], template[3]
    return tree.unflatten(spec, [_build(v, t, values) for v, t in zip(leaves, parts, strict=True)])


def _batched_like(tensors: list[Tensor], refs: Sequence[Any]) -> list[Tensor]:
    """``tensors`` batched along every vmap level any of ``refs`` is batched at (values
    unchanged). Under vmap, a carry that starts unbatched (zeros) but becomes batched in
    the body (it reads a batched param) would change shape between iterations, which
    torch's scan refuses; so every carry leaf, going in and coming out, is batched alike."""
    from torch._C import _functorch

    def levels(t: Any) -> tuple[int, ...]:
        out = []
        while isinstance(t, Tensor) and _functorch.is_batchedtensor(t):
            out.append(_functorch.maybe_get_level(t))
            t = _functorch.get_unwrapped(t)
        return tuple(out)

    # one (the smallest) reference per distinct set of vmap levels: reading every
    # batched input would make the loop read all of them (a whole replay buffer, which
    # inductor then copies rather than write it in place after the loop)
    by_levels: dict[tuple[int, ...], Tensor] = {}
    for r in refs:
        if isinstance(r, Tensor) and _functorch.is_batchedtensor(r) and r.numel():
            key = levels(r)
            if key not in by_levels or r.numel() < by_levels[key].numel():
                by_levels[key] = r
    batched = list(by_levels.values())
    if not batched:
        return tensors
    needed = {level for key in by_levels for level in key}
    flag = torch.zeros_like(batched[0].reshape(-1)[:1], dtype=torch.bool).squeeze(0)
    for r in batched[1:]:
        flag = flag | torch.zeros_like(r.reshape(-1)[:1], dtype=torch.bool).squeeze(0)
    # a leaf batched at every level already is left as it is: where(flag, t, t) would
    # only copy it (a whole rollout's frames each minibatch step, through a slow masked
    # byte copy on the CPU)
    return [t if needed <= set(levels(t)) else torch.where(flag, t, t) for t in tensors]


def _has_contents(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:  # an empty cell (a name assigned later)
        return False
    return True


def _traced_scan(body: Callable, carry: Any, xs: Any) -> tuple[Any, Any]:
    """``scan`` as torch's scan operator, called directly: its Python wrapper runs dynamo,
    which refuses to trace under an enclosing vmap (``fxrl.compile(vmap(update))``)."""
    carry_leaves, carry_spec = tree.leaves(carry), tree.structure(carry)
    xs_leaves, xs_spec = tree.leaves(xs), tree.structure(xs)
    n, m = len(carry_leaves), len(xs_leaves)
    y_spec: list[Any] = []
    # tensors of the traced function that the body reads through its closure: passed in
    # as the loop's extra (read-only, not copied) inputs
    consts: list[Tensor] = []
    template = _lift(body, consts, set())

    def flat_body(*args: Tensor) -> list[Tensor]:
        fn = _build(body, template, list(args[n + m :]))
        new_c, y = fn(
            tree.unflatten(carry_spec, list(args[:n])),
            tree.unflatten(xs_spec, list(args[n : n + m])),
        )
        y_leaves = tree.leaves(y)
        y_spec.append(tree.structure(y))
        return _copy(_batched_like([*tree.leaves(new_c), *y_leaves], args))

    init = _copy(_batched_like(carry_leaves, [*carry_leaves, *xs_leaves, *consts]))
    out = _scan_op_batch_first(flat_body, init, xs_leaves, list(consts))
    return tree.unflatten(carry_spec, list(out[:n])), tree.unflatten(y_spec[-1], list(out[n:]))


def _scan_op_batch_first(
    fn: Callable[..., list[Tensor]], init: list[Tensor], xs: list[Tensor], consts: list[Tensor]
) -> list[Tensor]:
    """torch's scan operator on ``fn(*carry, *x, *consts) -> [*carry, *y]``, batched by
    this function under an enclosing ``vmap`` with the vmapped dim first.

    torch's own batching rule for the operator moves every vmapped dim to the end of the
    loop's carry, ``xs`` and extra inputs, runs the body with it there and moves the
    body's outputs' vmapped dims to the end again. Most of the body's batching rules want
    that dim in front, so a vmapped loop permuted its inputs on entering and permuted and
    copied its values in every iteration (the 8-seed PPO update's minibatch loop body
    held 152 permutes). Here each vmap level is taken off once, outside the loop: the
    carry and extra inputs with their vmapped dim moved to 0, ``xs`` to 1 (0 is the
    scanned dim, so each step's ``x`` has it at 0), the body run under ``vmap`` with
    ``in_dims`` 0 and its outputs' vmapped dims moved to 0 (``_copy`` has made them
    contiguous there already: no copy), the stacked ``ys`` wrapped back at dim 1. The
    values are the same; only the layout differs. Other transforms (``grad``, ``jvp``)
    and no transform at all go to torch's operator as they are.
    """
    from torch._C._functorch import TransformType, peek_interpreter_stack
    from torch._functorch.pyfunctorch import coerce_cinterpreter
    from torch._functorch.vmap import restore_vmap, wrap_batched
    from torch._higher_order_ops.scan import scan_op

    top = peek_interpreter_stack()
    if top is None or top.key() != TransformType.Vmap:
        return list(scan_op(fn, init, xs, tuple(consts)))
    vmap = coerce_cinterpreter(top)
    level = vmap.level()

    def front(values: list[Tensor], to: int) -> tuple[list[Tensor], list[int | None]]:
        out, dims = [], []
        for v in values:
            u, d = torch._C._functorch._unwrap_batched(v, level)
            out.append(u if d is None or d == to else u.movedim(d, to))
            dims.append(None if d is None else to)
        return out, dims

    init_u, init_dims = front(init, 0)
    xs_u, xs_dims = front(xs, 1)
    consts_u, consts_dims = front(consts, 0)
    # each step's x has the vmapped dim at 0 (xs had it at 1)
    in_dims = (*init_dims, *(None if d is None else 0 for d in xs_dims), *consts_dims)
    out_dims: list[int | None] = []

    def body(*args: Tensor) -> list[Tensor]:
        outs, dims = restore_vmap(fn, in_dims, vmap.batch_size(), vmap.randomness())(*args)
        out_dims[:] = [None if d is None else 0 for d in dims]
        return [
            o if d is None or d == 0 else o.movedim(d, 0) for o, d in zip(outs, dims, strict=True)
        ]

    with vmap.lower():
        out = _scan_op_batch_first(body, init_u, xs_u, consts_u)
    n = len(init)
    if out_dims[:n] != init_dims:  # _batched_like gives carry in and out the same levels
        raise AssertionError(f"fxrl.scan: carry vmapped {init_dims} in, {out_dims[:n]} out")
    # the stacked ys: the scanned dim first, the vmapped dim after it
    dims = [*out_dims[:n], *(None if d is None else 1 for d in out_dims[n:])]
    return list(wrap_batched(tuple(out), tuple(dims), level))


def _dynamo_scan(body: Callable, carry: Any, xs: Any) -> tuple[Any, Any]:
    # scan's body must return containers of tensors, not dataclasses: flatten the carry
    # (its structure is known before tracing); ys must be dicts/tuples/lists of tensors.
    from torch._higher_order_ops.scan import scan as _scan

    carry_spec, xs_spec = tree.structure(carry), tree.structure(xs)

    def flat_body(c: list, x: list) -> tuple[list, Any]:
        new_c, y = body(tree.unflatten(carry_spec, c), tree.unflatten(xs_spec, x))
        return _copy(tree.leaves(new_c)), _copy(y)

    c, ys = _scan(flat_body, _copy(tree.leaves(carry)), tree.leaves(xs))
    return tree.unflatten(carry_spec, c), ys


# ``fxrl.scan(body, carry, xs)`` is this module called: the function above
make_callable(__name__, scan)
