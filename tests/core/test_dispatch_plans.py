"""Op._plans: a signature's checks run once, then its plan (kernel, output shapes and dtypes, expanded
strides) is reused. A plan must never change an answer: calls that differ only in what the signature does
not cover (values, offsets) reuse it, calls that differ in shape, strides, dtype or attributes get their own,
and bad input keeps raising the same errors after good calls planned the op."""

from __future__ import annotations

import numpy as np
import pytest

import rumus as rm
from rumus.ops import get as op
from rumus_contracts import DTypeError, ShapeError


def test_a_repeated_signature_is_planned_once_and_gives_the_same_values() -> None:
    add = op("add")
    a, b = rm.randn(5, 7), rm.randn(5, 7)
    add._plans.clear()  # another test may have run this signature already: start from no plans
    before = len(add._plans)
    r1 = (a + b).numpy()
    r2 = (a + b).numpy()
    assert len(add._plans) == before + 1
    np.testing.assert_array_equal(r1, a.numpy() + b.numpy())
    np.testing.assert_array_equal(r2, r1)


def test_broadcast_plans_keep_each_operands_expansion() -> None:
    x, row, col = rm.randn(4, 6), rm.randn(6), rm.randn(4, 1)
    for _ in range(2):
        np.testing.assert_array_equal((x + row).numpy(), x.numpy() + row.numpy())
        np.testing.assert_array_equal((x + col).numpy(), x.numpy() + col.numpy())
        np.testing.assert_array_equal((x * 2.5).numpy(), x.numpy() * np.float32(2.5))


def test_views_with_other_strides_or_offsets_get_the_right_values() -> None:
    base = rm.randn(8, 8)
    other = rm.randn(8, 8)
    for _ in range(2):
        np.testing.assert_array_equal((base + other).numpy(), base.numpy() + other.numpy())  # plans (8, 8) + (8, 8)
        t = base.mT  # same shape as `other`, other strides: its own plan
        np.testing.assert_array_equal((t + other).numpy(), base.numpy().T + other.numpy())
        for i in range(3):  # same shape and strides, another offset: the plan is reused, the offset is not
            s = base[i:i + 4]
            np.testing.assert_array_equal((s + other[:4]).numpy(), base.numpy()[i:i + 4] + other.numpy()[:4])


def test_promotion_is_decided_per_call_not_taken_from_a_plan() -> None:
    f = rm.randn(3, 3)
    i = rm.tensor(np.arange(9).reshape(3, 3))
    for _ in range(2):
        np.testing.assert_array_equal((f + f).numpy(), f.numpy() * 2)
        out = f + i
        assert out.dtype == rm.float32
        np.testing.assert_allclose(out.numpy(), f.numpy() + np.arange(9).reshape(3, 3), rtol=1e-6)


def test_bad_input_still_raises_after_good_calls_planned_the_op() -> None:
    a, b = rm.randn(2, 3), rm.randn(3, 4)
    for _ in range(2):
        a @ b
    with pytest.raises(ShapeError):
        a @ rm.randn(4, 4)
    with pytest.raises(DTypeError):
        a @ rm.randn(3, 4, dtype=rm.float64)
    x, y = rm.randn(2, 3), rm.randn(2, 3)
    for _ in range(2):
        x + y
    with pytest.raises(ShapeError):
        x + rm.randn(3, 2)


def test_attributes_are_part_of_the_signature() -> None:
    x = rm.randn(4, 5)
    for _ in range(2):
        np.testing.assert_allclose(x.sum(0).numpy(), x.numpy().sum(0), rtol=1e-5)
        np.testing.assert_allclose(x.sum(1).numpy(), x.numpy().sum(1), rtol=1e-5)


def test_a_plan_without_expanded_inputs_reads_fresh_inputs_each_call() -> None:
    """The plan of a signature whose inputs all bind as they are stores no per-input strides; a planned call
    still binds this call's tensors (new buffers, views at other offsets), never the planning call's."""
    mul = op("mul")
    mul._plans.clear()
    base = rm.randn(6, 4)
    first = rm.randn(6, 4)
    np.testing.assert_array_equal((base * first).numpy(), base.numpy() * first.numpy())
    assert all(plan[3] is None for plan in mul._plans.values())
    for i in range(3):
        other = rm.randn(6, 4)
        np.testing.assert_array_equal((base * other).numpy(), base.numpy() * other.numpy())
        rows = rm.randn(9, 4)[i:i + 6]  # same shape and strides, another offset
        np.testing.assert_array_equal((rows * other).numpy(), rows.numpy() * other.numpy())


def test_a_planned_op_with_two_outputs_gives_both_each_call() -> None:
    stats = op("batch_norm_stats")
    for _ in range(3):
        x = rm.randn(5, 3, 2)
        mean, var = stats.multi(x)
        ref = x.numpy().astype(np.float64)
        np.testing.assert_allclose(mean.numpy(), ref.mean(axis=(0, 2)), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(var.numpy(), ref.var(axis=(0, 2)), rtol=1e-5, atol=1e-6)


def test_signed_zero_scalars_are_told_apart() -> None:
    """0.0 and -0.0 compare equal (and hash alike) but divide to opposite infinities: the cached 0-d
    constants must keep them apart, whichever was used first."""
    x = rm.tensor([1.0, -2.0])
    for _ in range(2):
        np.testing.assert_array_equal((x / 0.0).numpy(), np.array([np.inf, -np.inf], np.float32))
        np.testing.assert_array_equal((x / -0.0).numpy(), np.array([-np.inf, np.inf], np.float32))
        assert np.signbit((x * -0.0).numpy()).tolist() == [True, False]


def test_planned_calls_follow_their_attributes_in_any_order() -> None:
    """The planned path keys a call by its attributes as given: the same values under other names, or in
    another order, are other calls."""
    clamp = op("clamp")
    x = rm.tensor([-3.0, -1.0, 0.5, 2.0, 4.0])
    for _ in range(2):
        np.testing.assert_array_equal(clamp(x, min=-1.0, max=2.0).numpy(), np.clip(x.numpy(), -1.0, 2.0))
        np.testing.assert_array_equal(clamp(x, max=-1.0, min=-2.0).numpy(), np.clip(x.numpy(), -2.0, -1.0))
        np.testing.assert_array_equal(clamp(x, min=2.0).numpy(), np.maximum(x.numpy(), 2.0))


def test_planned_calls_record_the_graph_when_grad_mode_changes() -> None:
    """A signature planned under no_grad records autograd in grad mode, and a planned call from a view of a
    tensor that requires grad records it too."""
    w = rm.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = rm.tensor([0.5, 0.5, 0.5])
    with rm.no_grad():
        for _ in range(2):
            assert not (w * b).requires_grad
    (w * b).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), b.numpy())
    big = rm.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    for _ in range(2):
        big.grad = None
        (big[1] * b).sum().backward()
        np.testing.assert_array_equal(big.grad.numpy(), [[0.0, 0.0, 0.0], [0.5, 0.5, 0.5]])


def test_planned_calls_are_seen_by_trace_dispatch() -> None:
    from rumus.backend_api import trace_dispatch
    a, b = rm.randn(3), rm.randn(3)
    for _ in range(2):
        a - b
    with trace_dispatch() as log:
        a - b
    assert log == [("sub", "cpu", "kernel")]


def test_clearing_the_plans_forgets_the_planned_path_too() -> None:
    """Code that changes kernel choices clears Op._plans; the planned path must not keep running the kernel
    it learnt before."""
    sub = op("sub")
    a, b = rm.randn(4), rm.randn(4)
    for _ in range(2):
        a - b
    assert sub._quick_plans
    sub._plans.clear()
    assert not sub._quick_plans
    np.testing.assert_array_equal((a - b).numpy(), a.numpy() - b.numpy())


def test_calls_the_planned_path_cannot_take_keep_their_route() -> None:
    """Promoted inputs, a composite without a kernel, a decomposition: the planned path remembers that the
    key is not its own and each later call still takes the general route, with the same answers."""
    f, i = rm.randn(3), rm.tensor([1, 2, 3])
    for _ in range(3):
        out = f + i
        assert out.dtype == rm.float32
        np.testing.assert_allclose(out.numpy(), f.numpy() + np.array([1, 2, 3]), rtol=1e-6)
    x = rm.randn(2, 3).to("float16")
    w, b = rm.randn(4, 3).to("float16"), rm.randn(4).to("float16")
    ref = (x.float().numpy() @ w.float().numpy().T + b.float().numpy())
    for _ in range(3):
        y = op("linear")(x, w, b)  # float16 on the cpu backend: linear's composite
        np.testing.assert_allclose(y.float().numpy(), ref, rtol=2e-2, atol=2e-2)


def test_the_planned_paths_tensor_has_every_field_make_tensor_gives() -> None:
    # fresh_tensor writes Tensor's fields out (the planned path's allocation) instead of calling _init: a field
    # added to _init and missed there would be absent only on tensors the planned path made
    from rumus._tensor_base import _contiguous, fresh_tensor, make_tensor
    from rumus_contracts import TensorArg
    x = rm.ones(2, 3)
    st = x._storage
    planned = fresh_tensor(st.buffer, st.device, st.dtype, st.backend, st.numel, (2, 3), _contiguous((2, 3)),
                           TensorArg(st.buffer, (2, 3), _contiguous((2, 3)), 0, st.dtype))
    plain = make_tensor(st, (2, 3))
    slots = [s for cls in type(plain).__mro__ for s in getattr(cls, "__slots__", ()) if s != "__weakref__"]
    assert slots, "Tensor keeps its fields in __slots__"
    missing = [s for s in slots if hasattr(plain, s) and not hasattr(planned, s)]
    assert not missing, missing
    assert {s for s in ("buffer", "device", "dtype", "backend", "numel", "version") if hasattr(st, s)} == \
        {s for s in ("buffer", "device", "dtype", "backend", "numel", "version") if hasattr(planned._storage, s)}
