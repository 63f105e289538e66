# backplane.nn and backplane.optim against PyTorch 1.13: the same network with
# the same weights gives the same outputs, gradients and parameters after
# optimiser steps; names, state dicts, text and module rules as PyTorch's.
import pytest

import backplane as bp


def nets(torch):
    def make(m):
        return m.nn.Sequential(
            m.nn.Conv2d(1, 4, 3, padding=1), m.nn.ReLU(inplace=True), m.nn.MaxPool2d(2),
            m.nn.BatchNorm2d(4), m.nn.Flatten(), m.nn.Linear(4 * 4 * 4, 10))
    ours, theirs = make(bp), make(torch)
    # The same weights: PyTorch's, copied in through DLPack.
    ours.load_state_dict({k: bp.from_dlpack(v.detach().clone())
                          for k, v in theirs.state_dict().items()})
    return ours, theirs


def close(a, b, tol=1e-5):
    x, y = a.reshape(-1).tolist(), b.reshape(-1).tolist()
    return x == pytest.approx(y, rel=tol, abs=tol)


def test_names_state_dict_and_text_are_pytorchs(torch):
    ours, theirs = nets(torch)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert repr(ours) == repr(theirs)
    assert repr(ours[3:]) == repr(theirs[3:])


@pytest.mark.parametrize("opt", ["sgd", "sgd_momentum", "adam", "adamw"])
def test_training_steps_match_pytorch(torch, opt):
    ours, theirs = nets(torch)
    make = {
        "sgd": lambda m, p: m.optim.SGD(p, lr=0.1),
        "sgd_momentum": lambda m, p: m.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-4),
        "adam": lambda m, p: m.optim.Adam(p, lr=1e-2),
        "adamw": lambda m, p: m.optim.AdamW(p, lr=1e-2),
    }[opt]
    o_ours, o_theirs = make(bp, ours.parameters()), make(torch, theirs.parameters())
    torch.manual_seed(0)
    x = torch.randn(8, 1, 8, 8)
    y = torch.randint(0, 10, (8,))
    xb, yb = bp.from_dlpack(x.clone()), bp.from_dlpack(y.clone())
    for _ in range(3):
        losses = []
        for m, o, inp, tgt, F in ((ours, o_ours, xb, yb, bp.nn.functional),
                                  (theirs, o_theirs, x, y, torch.nn.functional)):
            o.zero_grad()
            loss = F.cross_entropy(m(inp), tgt)
            loss.backward()
            o.step()
            losses.append(loss)
        assert close(losses[0], losses[1].detach(), 1e-4)
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert close(p, q.detach(), 1e-4), name
    for (name, b), (_, c) in zip(ours.named_buffers(), theirs.named_buffers()):
        assert close(b, c, 1e-4), name


def test_relu_inplace_after_conv_changes_the_conv_output_and_keeps_gradients(torch):
    def run(m):
        conv = m.nn.Conv2d(1, 2, 3, padding=1)
        relu = m.nn.ReLU(inplace=True)
        return conv, relu
    (c, r), (tc, tr) = run(bp), run(torch)
    c.load_state_dict({k: bp.from_dlpack(v.detach().clone()) for k, v in tc.state_dict().items()})
    x = torch.randn(1, 1, 4, 4)
    out, tout = c(bp.from_dlpack(x.clone())), tc(x)
    same = r(out)
    assert same is out and r(out)._version == out._version
    tr(tout)
    assert out.grad_fn.name() == tout.grad_fn.name()
    out.sum().backward()
    tout.sum().backward()
    assert close(c.weight.grad, tc.weight.grad)


def test_weight_tying_counts_a_parameter_once(torch):
    for m in (bp, torch):
        a, b = m.nn.Linear(3, 3), m.nn.Linear(3, 3)
        b.weight = a.weight
        seq = m.nn.Sequential(a, b)
        assert len(list(seq.parameters())) == 3
        assert list(seq.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias"]


def test_buffers_persistent_or_not_and_module_rules():
    m = bp.nn.Module()
    m.register_buffer("kept", bp.zeros(2))
    m.register_buffer("scratch", bp.zeros(2), persistent=False)
    assert list(m.state_dict()) == ["kept"] and len(list(m.buffers())) == 2
    with pytest.raises(KeyError, match=r'contain "\."'):
        m.register_buffer("a.b", bp.zeros(1))
    with pytest.raises(TypeError, match="Parameter or None"):
        lin = bp.nn.Linear(2, 2)
        lin.weight = bp.zeros(2, 2)
    assert m.eval() is m and not m.training and m.train() is m and m.training


def test_load_state_dict_strict_names_the_keys_and_copies_nothing():
    lin = bp.nn.Linear(2, 2)
    before = lin.weight.tolist()
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "bias"'):
        lin.load_state_dict({"weight": bp.zeros(2, 2)})
    assert lin.weight.tolist() == before
    result = lin.load_state_dict({"weight": bp.zeros(2, 2)}, strict=False)
    assert result.missing_keys == ["bias"] and lin.weight.tolist() == [[0., 0.], [0., 0.]]


def test_zero_grad_zeroes_by_default_as_pytorch_1_13(torch):
    for m in (bp, torch):
        lin = m.nn.Linear(2, 1)
        opt = m.optim.SGD(lin.parameters(), lr=0.1)
        lin(m.ones(1, 2)).sum().backward()
        opt.zero_grad()
        assert lin.weight.grad is not None and lin.weight.grad.tolist() == [[0., 0.]]
        opt.zero_grad(set_to_none=True)
        assert lin.weight.grad is None


def test_step_lr_changes_the_optimisers_rate(torch):
    lrs = []
    for m in (bp, torch):
        opt = m.optim.SGD([m.nn.Parameter(m.ones(1))], lr=1.0)
        sched = m.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        seen = []
        for _ in range(5):
            opt.step()
            sched.step()
            seen.append(opt.param_groups[0]["lr"])
        lrs.append(seen)
    assert lrs[0] == lrs[1]


def test_parameter_text_and_identity():
    p = bp.nn.Parameter(bp.ones(2))
    assert isinstance(p, bp.Tensor) and p.requires_grad and p.is_leaf
    assert repr(p) == "Parameter containing:\ntensor([1., 1.], requires_grad=True)"
