"""Backplane from Python: tensors, autograd and backends as PyTorch names them.

    import backplane as bp
    bp.init(backend="cpu_onednn")          # or BACKPLANE_BACKEND=..., default cpu_onednn
    x = bp.arange(6.).view(2, 3)
    x[1:, 1:].zero_()                      # a view: x changes
    y = bp.from_dlpack(numpy_array)        # zero-copy, both ways (docs/python.md)
"""
import builtins as _builtins
import functools as _functools
import os as _os

from . import _C
from ._C import (Tensor, dtype, device, from_dlpack, manual_seed, is_grad_enabled,
                 default_device, synchronize, add, sub, mul, div, matmul, mm, bmm, relu, exp,
                 log, sqrt, tanh, sigmoid, where, maximum, minimum, softmax, log_softmax)

__all__ = [
    "Tensor", "Size", "dtype", "device", "init", "backends", "tensor", "zeros", "ones", "empty",
    "full", "arange", "linspace", "logspace", "rand", "randn", "zeros_like", "ones_like",
    "empty_like", "full_like", "rand_like", "randn_like", "from_dlpack", "no_grad",
    "enable_grad", "set_grad_enabled", "is_grad_enabled", "manual_seed",
]

_DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32",
           "int64", "bool")
for _name in _DTYPES:
    globals()[_name] = getattr(_C, _name)
_float32, _int64 = _C.float32, _C.int64


class Size(tuple):
    """A tensor's shape: a tuple of ints, printed as backplane.Size([2, 3])."""

    def __repr__(self):
        return f"backplane.Size({list(self)})"

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n


# --- backend selection ------------------------------------------------------
def init(backend="cpu_onednn", plugin_path=(), fallback="deny", reference="", probe="",
         backend_options=()):
    """Selects the default backend, as --backend, --plugin-path, --fallback, --reference,
    --probe and --backend-option do for a C++ program, and loads it now (a misspelt name
    or a missing device raises here). Returns the default device."""
    if isinstance(plugin_path, str):
        plugin_path = [plugin_path]
    if isinstance(backend_options, dict):
        backend_options = [f"{k}={v}" for k, v in backend_options.items()]
    return _C._init(str(backend), [str(p) for p in plugin_path], fallback, reference, probe,
                    list(backend_options))


def backends():
    """Every plugin the loader can see, as `backplane devices` lists them: a dict per file
    with name, path, loaded, verdict, reason, version and devices."""
    return _C._discover()


# --- grad mode ----------------------------------------------------------------
class set_grad_enabled:
    """Turns recording on or off: as a call, a context manager or a decorator."""

    def __init__(self, mode):
        self.prev = is_grad_enabled()
        self.mode = _builtins.bool(mode)
        _C._set_grad_enabled(self.mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)
        return False


class _GradModeScope:
    mode = False

    def __enter__(self):
        self.prev = is_grad_enabled()
        _C._set_grad_enabled(self.mode)
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)
        return False

    def __call__(self, fn):
        @_functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradModeScope):
    """Ops inside record nothing for autograd (a context manager or a decorator)."""
    mode = False


class enable_grad(_GradModeScope):
    """Recording on again inside a no_grad region."""
    mode = True


# --- factories ------------------------------------------------------------------
def _shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return size[0]
    return size


def tensor(data, *, dtype=None, device=None, requires_grad=False):
    """A new leaf holding a copy of `data`: nested lists or tuples of numbers (dtype from
    them as in PyTorch: float -> float32, int -> int64, bool -> bool), a Tensor, or anything
    with __dlpack__ (a numpy array, a torch tensor)."""
    if isinstance(data, Tensor):
        t = data.detach().clone()
    elif hasattr(data, "__dlpack__"):
        t = from_dlpack(data).clone()
    else:
        return _C._tensor(data, dtype, device, requires_grad)
    if device is not None:
        t = t.to(device)
    if dtype is not None:
        t = t.to(dtype)
    return t.requires_grad_(requires_grad) if requires_grad else t


def zeros(*size, dtype=None, device=None, requires_grad=False):
    return _C._factory("zeros", _shape(size), dtype, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    return _C._factory("ones", _shape(size), dtype, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False):
    return _C._factory("empty", _shape(size), dtype, device, requires_grad)


def rand(*size, dtype=None, device=None, requires_grad=False):
    return _C._factory("rand", _shape(size), dtype, device, requires_grad)


def randn(*size, dtype=None, device=None, requires_grad=False):
    return _C._factory("randn", _shape(size), dtype, device, requires_grad)


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    return _C._full(size, fill_value, dtype, device, requires_grad)


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    return _C._arange(start, end, step, dtype, device, requires_grad)


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    return _C._linspace(start, end, steps, dtype, device, requires_grad)


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    return _C._logspace(start, end, steps, _builtins.float(base), dtype, device, requires_grad)


def _like(kind):
    def make(input, *, dtype=None, device=None, requires_grad=False):
        return _C._like(kind, input, dtype, device, requires_grad)
    make.__name__ = make.__qualname__ = f"{kind}_like"
    make.__doc__ = f"{kind} with input's shape, dtype and device unless given (CR-2)."
    return make


zeros_like, ones_like, empty_like = _like("zeros"), _like("ones"), _like("empty")
rand_like, randn_like = _like("rand"), _like("randn")


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False):
    return _C._full_like(input, fill_value, dtype, device, requires_grad)


# --- Tensor methods written in Python -------------------------------------------
class _Node:
    """The autograd node that made a tensor (Tensor.grad_fn)."""

    def __init__(self, name):
        self._name = name

    def name(self):
        return self._name

    def __repr__(self):
        return f"<{self._name} object at {hex(id(self))}>"


def _size(self, dim=None):
    sizes = self._sizes()
    return Size(sizes) if dim is None else sizes[dim]


def _grad_fn(self):
    name = self._grad_fn_name()
    return _Node(name) if name else None


def _to(self, *args, **kwargs):
    dev, dt = kwargs.pop("device", None), kwargs.pop("dtype", None)
    kwargs.pop("copy", None)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
    for a in args:
        if isinstance(a, dtype):
            dt = a
        elif isinstance(a, Tensor):
            dev, dt = a.device, a.dtype
        elif isinstance(a, (str, device)):
            dev = a
        else:
            raise TypeError(f"to() received an invalid argument of type {type(a).__name__}")
    if isinstance(dev, str):
        dev = device(dev)
    if dev is not None and dt is not None:
        return self._to(dev, dt)
    if dev is not None:
        return self if dev == self.device else self._to_device(dev)
    if dt is not None:
        return self if dt == self.dtype else self._to_dtype(dt)
    return self


def _cpu(self):
    host = device("cpu_onednn")
    return self if self.device == host else self._to_device(host)


def _numpy(self):
    if self.requires_grad:
        raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                           "Use tensor.detach().numpy() instead.")
    import numpy
    return numpy.from_dlpack(self)


def _new(kind):
    def make(self, *size, dtype=None, device=None, requires_grad=False):
        return _C._new(kind, self, _shape(size), dtype, device, requires_grad)
    make.__name__ = f"new_{kind}"
    return make


def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
    return _C._new_full(self, size, fill_value, dtype, device, requires_grad)


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    """A copy of `data`, a leaf; dtype and device from this tensor unless given (CR-3)."""
    if not isinstance(data, Tensor):
        data = tensor(data, dtype=dtype if dtype is not None else self.dtype,
                      device=device if device is not None else self.device)
        return data.requires_grad_(True) if requires_grad else data
    return _C._new_tensor(self, data, dtype, device, requires_grad)


def _repr(self):
    """PyTorch's text: the C++ side's, with backplane's dtype names and the autograd suffix
    (grad_fn=<MulBackward0>, or requires_grad=True for a leaf that requires grad)."""
    text = self._text().replace(", dtype=", ", dtype=backplane.")
    name = self._grad_fn_name()
    if name:
        return f"{text[:-1]}, grad_fn=<{name}>)"
    if self.requires_grad:
        return f"{text[:-1]}, requires_grad=True)"
    return text


def _varargs_shape(name):
    def method(self, *shape):
        return getattr(self, name)(list(_shape(shape)))
    method.__name__ = name[1:]
    return method


def _type_conversion(dt):
    return lambda self: self.to(dt)


Tensor.shape = property(lambda self: Size(self._sizes()))
Tensor.size = _size
Tensor.view, Tensor.reshape = _varargs_shape("_view"), _varargs_shape("_reshape")
Tensor.expand, Tensor.permute = _varargs_shape("_expand"), _varargs_shape("_permute")
Tensor.grad_fn = property(_grad_fn)
Tensor.to = _to
Tensor.cpu = _cpu
Tensor.numpy = _numpy
Tensor.new_zeros, Tensor.new_ones, Tensor.new_empty = _new("zeros"), _new("ones"), _new("empty")
Tensor.new_full = _new_full
Tensor.new_tensor = _new_tensor
Tensor.float, Tensor.double = _type_conversion(_C.float32), _type_conversion(_C.float64)
Tensor.half, Tensor.bfloat16 = _type_conversion(_C.float16), _type_conversion(_C.bfloat16)
Tensor.long, Tensor.int = _type_conversion(_C.int64), _type_conversion(_C.int32)
Tensor.bool = _type_conversion(_C.bool)
Tensor.is_floating_point = lambda self: self.dtype.is_floating_point
Tensor.__repr__ = Tensor.__str__ = _repr

# BACKPLANE_BACKEND and BACKPLANE_FALLBACK select as init() does (BACKPLANE_PLUGIN_PATH,
# BACKPLANE_REFERENCE and BACKPLANE_PROBE are read by the core itself).
if _os.environ.get("BACKPLANE_BACKEND") or _os.environ.get("BACKPLANE_FALLBACK"):
    init(backend=_os.environ.get("BACKPLANE_BACKEND") or "cpu_onednn",
         fallback=_os.environ.get("BACKPLANE_FALLBACK") or "deny")

from . import nn, optim  # noqa: E402  (they use the Tensor methods set above)

# PyTorch's short names, last: they shadow builtins in this module's namespace.
float, double, half = _C.float32, _C.float64, _C.float16
long, int, short = _C.int64, _C.int32, _C.int16
