"""backplane.nn: modules as PyTorch 1.13's torch.nn (Module in Python, the ops in C++)."""
from . import functional, init
from .module import Module, ModuleList, Parameter, Sequential
from .layers import (AdaptiveAvgPool2d, AvgPool2d, BatchNorm2d, Conv2d, CrossEntropyLoss,
                     Dropout, Embedding, Flatten, GELU, Identity, LayerNorm, Linear, MaxPool2d,
                     MSELoss, NLLLoss, ReLU, Sigmoid, Softmax, Tanh)
