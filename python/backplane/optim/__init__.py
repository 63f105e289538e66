"""backplane.optim: PyTorch 1.13's optimisers (the C++ core's updates) and LR schedulers."""
from .. import _C, enable_grad
from . import lr_scheduler

_BOOL_OPTIONS = {"nesterov", "maximize", "amsgrad"}


class _GroupView(dict):
    """One param group as PyTorch shows it: a dict; setting a number (g["lr"] = 0.1)
    reaches the optimiser."""

    def __init__(self, opt, index):
        self._opt, self._index = opt, index
        options = opt._impl._group_options(index)
        super().__init__({k: (bool(v) if k in _BOOL_OPTIONS else v) for k, v in options.items()})
        dict.__setitem__(self, "params", opt._impl._group_params(index))

    def __setitem__(self, key, value):
        if key == "params":
            raise KeyError("a param group's params are fixed once given")
        self._opt._impl._set_group_option(self._index, key, float(value))
        dict.__setitem__(self, key, value)


class Optimizer:
    def __init__(self, impl):
        self._impl = impl

    @property
    def param_groups(self):
        return [_GroupView(self, i) for i in range(self._impl._num_groups())]

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        self._impl.step()
        return loss

    def zero_grad(self, set_to_none=False):
        self._impl.zero_grad(set_to_none)

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(g):
                if k != "params":
                    lines.append(f"    {k}: {g[k]}")
        return "\n".join(lines) + "\n)"


def _params(params):
    params = list(params)
    if not params:
        raise ValueError("optimizer got an empty parameter list")
    return params


class SGD(Optimizer):
    def __init__(self, params, lr, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(_C._SGD(_params(params), lr, momentum, dampening, weight_decay,
                                 nesterov, maximize))


class Adam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, maximize=False):
        super().__init__(_C._Adam(_params(params), lr, betas[0], betas[1], eps,
                                  float(weight_decay), amsgrad, maximize))


class AdamW(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False):
        super().__init__(_C._AdamW(_params(params), lr, betas[0], betas[1], eps,
                                   float(weight_decay), amsgrad, maximize))


__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]
