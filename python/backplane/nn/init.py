"""backplane.nn.init: in-place initialisers, as torch.nn.init's (they record nothing)."""
from .._C._nn import uniform_, normal_, constant_, kaiming_uniform_, xavier_uniform_


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


__all__ = ["uniform_", "normal_", "constant_", "zeros_", "ones_", "kaiming_uniform_",
           "xavier_uniform_"]
