"""backplane.nn.functional: PyTorch 1.13's torch.nn.functional names over the core's ops."""
from .. import _C
from .._C._nn import (conv2d, linear, max_pool2d, avg_pool2d, adaptive_avg_pool2d, batch_norm,
                      layer_norm, gelu, cross_entropy, nll_loss, mse_loss, embedding)
from .._C import softmax as _softmax, log_softmax as _log_softmax


def relu(input, inplace=False):
    return input.relu_() if inplace else input.relu()


def dropout(input, p=0.5, training=True, inplace=False):
    if p < 0 or p > 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return _C._nn.dropout(input, p, training, inplace)


def softmax(input, dim):
    return _softmax(input, dim)


def log_softmax(input, dim):
    return _log_softmax(input, dim)


def sigmoid(input):
    return input.sigmoid()


def tanh(input):
    return input.tanh()


__all__ = ["conv2d", "linear", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "batch_norm",
           "layer_norm", "gelu", "cross_entropy", "nll_loss", "mse_loss", "embedding", "relu",
           "dropout", "softmax", "log_softmax", "sigmoid", "tanh"]
