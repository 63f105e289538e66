# backplane.Tensor against PyTorch 1.13: views, in-place ops, autograd,
# factories, printing and errors, each checked by running the same code on both.
import pytest

import backplane as bp


def both(torch, fn):
    """fn(module) on backplane and on torch, as Python lists."""
    return fn(bp).tolist(), fn(torch).tolist()


def test_slice_of_a_view_zeroed_changes_the_base(torch):
    def run(m):
        x = m.arange(12.).view(3, 4)
        x[1:, 1:].zero_()
        x[0, ::2] = 7.0
        return x
    a, b = both(torch, run)
    assert a == b


def test_views_share_memory_and_version_counter():
    x = bp.zeros(2, 3)
    v = x.t()
    assert v._shares_storage(x) and v.stride() == (1, 3)
    before = x._version
    v.add_(1)
    assert x._version == before + 1 and v._version == x._version
    assert x.tolist() == [[1.0] * 3] * 2


def test_inplace_operators_return_the_same_object_and_bump_the_version():
    x = bp.ones(3)
    alias = x
    x += 2
    x *= bp.tensor([1., 2., 3.])
    assert x is alias and x._version == 2
    assert x.tolist() == [3.0, 6.0, 9.0]


def test_scalar_operands_keep_pytorchs_dtype_rules(torch):
    for fn in (lambda m: m.arange(4) + 2, lambda m: m.arange(4) + 2.5,
               lambda m: 2 - m.arange(4), lambda m: 1 / m.tensor([1., 2.]),
               lambda m: m.arange(4) * True, lambda m: m.tensor([1, 2]) / 2):
        a, b = fn(bp), fn(torch)
        assert str(a.dtype).split(".")[1] == str(b.dtype).split(".")[1]
        assert a.tolist() == pytest.approx(b.tolist())


def test_indexing_forms_match_pytorch(torch):
    for key in (1, -1, slice(1, None), (slice(None), 2), (Ellipsis, 1), (None, 0),
                (slice(None, None, 2), slice(1, 3))):
        a, b = both(torch, lambda m: m.arange(24.).view(2, 3, 4)[key])
        assert a == b, key


def test_factories_match_pytorch(torch):
    cases = [
        lambda m: m.arange(5), lambda m: m.arange(1, 4, 0.5), lambda m: m.linspace(0, 1, 5),
        lambda m: m.logspace(0, 2, 3), lambda m: m.logspace(0, 3, 4, base=2.0),
        lambda m: m.zeros(2, 3), lambda m: m.ones((2,)), lambda m: m.full((2, 2), 1.5),
        lambda m: m.tensor([[1, 2], [3, 4]]), lambda m: m.tensor([True, False]),
        lambda m: m.zeros_like(m.ones(2, dtype=m.float64)),
        lambda m: m.ones(2, 2).new_zeros(3), lambda m: m.ones(2, dtype=m.float64).new_tensor([1, 2]),
    ]
    for fn in cases:
        a, b = fn(bp), fn(torch)
        assert a.shape == tuple(b.shape)
        assert a.reshape(-1).tolist() == pytest.approx(b.reshape(-1).tolist())
        assert str(a.dtype).split(".")[1] == str(b.dtype).split(".")[1]


def test_tensor_from_ragged_lists_is_a_value_error():
    with pytest.raises(ValueError, match="expected sequence of length 2 at dim 1"):
        bp.tensor([[1, 2], [3]])
    with pytest.raises(TypeError, match="Could not infer dtype"):
        bp.tensor(["a"])


def test_printing_is_pytorchs(torch):
    cases = [
        lambda m: m.arange(12).view(3, 4), lambda m: m.tensor(3.5), lambda m: m.zeros(0),
        lambda m: m.linspace(0, 1, 7), lambda m: m.tensor([1e10, 1.]),
        lambda m: m.tensor([[1.5, -2.25], [1e-5, 3.]]), lambda m: m.tensor([True, False]),
        lambda m: m.tensor([1., 2.], requires_grad=True),
        lambda m: m.tensor([1., 2.], requires_grad=True) * 2,
        lambda m: m.tensor([1., 2.], dtype=m.float64), lambda m: m.arange(3, dtype=m.int32),
    ]
    for fn in cases:
        assert str(fn(bp)) == str(fn(torch)).replace("torch.", "backplane.")


def test_backward_grad_retain_grad_and_leaves(torch):
    def run(m):
        w = m.tensor([1., 2., 3.], requires_grad=True)
        h = w * w
        h.retain_grad()
        loss = (h * 2).sum()
        loss.backward()
        return w, h, loss
    (w, h, loss), (tw, th, tloss) = run(bp), run(torch)
    assert w.grad.tolist() == tw.grad.tolist() and h.grad.tolist() == th.grad.tolist()
    assert (w.is_leaf, h.is_leaf, loss.is_leaf) == (tw.is_leaf, th.is_leaf, tloss.is_leaf)
    assert loss.grad_fn.name() == tloss.grad_fn.name() == "SumBackward0"
    assert w.grad_fn is None


def test_backward_with_a_gradient(torch):
    def run(m):
        x = m.ones(3, requires_grad=True)
        (x * 3).backward(m.tensor([1., 0.5, 2.]))
        return x.grad
    a, b = both(torch, run)
    assert a == b


def test_no_grad_as_context_and_decorator():
    w = bp.ones(2, requires_grad=True)
    with bp.no_grad():
        assert not (w * 2).requires_grad
        with bp.enable_grad():
            assert (w * 2).requires_grad

    @bp.no_grad()
    def f():
        return w * 2
    assert not f().requires_grad and bp.is_grad_enabled()


def test_detach_data_and_detach_():
    w = bp.ones(3, requires_grad=True)
    y = w * 2
    d = y.detach()
    assert not d.requires_grad and d._shares_storage(y)
    d.zero_()
    assert y.tolist() == [0.0] * 3
    assert not w.data.requires_grad and w.data._shares_storage(w)
    y.detach_()
    assert y.is_leaf and y.grad_fn is None


def test_errors_are_pythons_types_and_leave_inputs_unchanged():
    x = bp.arange(6.).view(2, 3)
    with pytest.raises(IndexError, match="out of range"):
        x[5]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0]
    with pytest.raises(ValueError, match="do not broadcast"):
        x.add_(bp.ones(4))
    with pytest.raises(TypeError, match="valid indices"):
        x["a"]
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x[::-1]
    assert x.tolist() == [[0., 1., 2.], [3., 4., 5.]] and x._version == 0


def test_devices_and_to():
    x = bp.tensor([1., 2.])
    assert x.device == bp.default_device() and x.device.type == "cpu_onednn"
    s = x.to("sim")
    assert s.device == bp.device("sim:0") and s.tolist() == [1., 2.]
    assert repr(s.device) == "device(type='sim', index=0)"
    assert s.cpu().device.type == "cpu_onednn"
    assert x.to(bp.float64).dtype is bp.float64 and x.to(bp.float32) is x
