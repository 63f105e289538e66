# DLPack from Python: zero-copy with numpy and PyTorch 1.13 both ways, views
# and strides kept, ownership, the capsule protocol and the device rules.
import gc
import weakref

import pytest

import backplane as bp

import numpy as np


def test_numpy_to_backplane_shares_memory():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = bp.from_dlpack(a)
    assert t.shape == (2, 3) and t.dtype is bp.float32 and t.is_leaf
    t.add_(1)
    assert a.tolist() == [[1., 2., 3.], [4., 5., 6.]]
    assert t._version == 1  # its own counter, bumped by its own write only


def test_numpy_strides_and_offset_are_kept():
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    view = base[1:, ::2].T
    t = bp.from_dlpack(view)
    assert t.shape == view.shape and t.tolist() == view.tolist()
    assert t.stride() == tuple(s // 8 for s in view.strides)
    t.zero_()
    assert (base[1:, ::2] == 0).all() and base[0].tolist() == list(range(6))


def test_backplane_to_numpy_shares_memory():
    t = bp.arange(8.).view(2, 4)[:, 1:]
    a = np.from_dlpack(t)
    assert a.shape == (2, 3) and a.strides == (16, 4)
    t.mul_(10)
    assert a.tolist() == [[10., 20., 30.], [50., 60., 70.]]


def test_an_imported_tensor_keeps_the_producer_alive_until_it_goes():
    class Holder:  # numpy arrays take no weak references; their owner does
        pass
    h = Holder()
    h.array = np.arange(4, dtype=np.int64)
    alive = weakref.ref(h)
    t = bp.from_dlpack(h.array.__dlpack__())
    del h
    gc.collect()
    assert t.tolist() == [0, 1, 2, 3]
    # The capsule's producer is the array alone; the holder may go.
    assert alive() is None


def test_torch_both_ways_share_memory(torch):
    src = torch.arange(6.).view(2, 3)
    t = bp.from_dlpack(src)
    t[0].fill_(-1)
    assert src.tolist()[0] == [-1., -1., -1.]
    back = torch.from_dlpack(bp.arange(4.).view(2, 2).t())
    assert back.stride() == (1, 2) and back.tolist() == [[0., 2.], [1., 3.]]
    x = bp.zeros(3)
    tx = torch.from_dlpack(x)
    tx += 5
    assert x.tolist() == [5., 5., 5.] and x._version == 0  # a consumer's write is not counted


def test_a_tensor_that_requires_grad_is_exported_detached(torch):
    w = bp.ones(2, requires_grad=True)
    tw = torch.from_dlpack(w)
    assert not tw.requires_grad and tw.tolist() == [1., 1.]


def test_a_capsule_is_consumed_once():
    cap = bp.arange(3.).__dlpack__()
    t = bp.from_dlpack(cap)
    assert t.tolist() == [0., 1., 2.]
    with pytest.raises(ValueError, match="already consumed"):
        bp.from_dlpack(cap)


def test_an_unconsumed_capsule_frees_its_tensor():
    x = bp.arange(3.)
    cap = x.__dlpack__()
    del cap
    gc.collect()
    assert x.tolist() == [0., 1., 2.]


def test_bad_inputs_are_type_errors():
    with pytest.raises(TypeError, match="__dlpack__"):
        bp.from_dlpack([1, 2])
    with pytest.raises(TypeError, match="stream"):
        bp.arange(2.).__dlpack__(stream="now")


def test_dlpack_device():
    assert bp.arange(2.).__dlpack_device__() == (1, 0)  # kDLCPU
