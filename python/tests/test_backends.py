# Backend selection from Python: init(), the BACKPLANE_* variables, backends()
# against `backplane devices`, and DLPack on a device whose memory the host
# cannot address (OpenCL on PoCL).
import os
import subprocess
import sys

import pytest

import backplane as bp


def run_python(code, **env):
    full = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full, timeout=120)


def test_init_selects_the_default_backend():
    r = run_python("import backplane as bp; d = bp.init(backend='sim'); "
                   "print(d, bp.zeros(2).device, bp.default_device())")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["sim:0", "sim:0", "sim:0"]


def test_environment_selects_the_backend():
    r = run_python("import backplane as bp; print(bp.ones(1).device)", BACKPLANE_BACKEND="sim")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "sim:0"


def test_bad_selections_raise_with_the_cores_message():
    r = run_python("import backplane as bp\n"
                   "try:\n  bp.init(backend='cpu_onednn', fallback='sometimes')\n"
                   "except ValueError as e: print('ValueError', e)\n"
                   "try:\n  bp.init(backend='no_such_backend')\n"
                   "except RuntimeError as e: print('RuntimeError', e)\n")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("ValueError") and "unknown policy 'sometimes'" in lines[0]
    assert lines[1].startswith("RuntimeError") and "no_such_backend" in lines[1]


def test_backends_lists_what_backplane_devices_lists():
    cli = os.environ.get("BACKPLANE_CLI")
    if not cli:
        pytest.skip("BACKPLANE_CLI (the backplane program) not set")
    out = subprocess.run([cli, "devices"], capture_output=True, text=True, timeout=120).stdout
    listed = {b["name"] for b in bp.backends()}
    for name in ("cpu_onednn", "sim", "opencl", "cuda"):
        assert (f"  {name}  " in out) == (name in listed), name
    cpu = next(b for b in bp.backends() if b["name"] == "cpu_onednn")
    assert cpu["loaded"] and cpu["devices"][0]["host_addressable"]


def opencl_device():
    try:
        return bp.device("opencl:0")
    except Exception as e:  # no OpenCL platform on this machine
        pytest.skip(f"no OpenCL device: {e}")


def test_opencl_tensors_are_exported_as_cl_mem_and_imported_back():
    dev = opencl_device()
    x = bp.arange(6., device=dev).view(2, 3)[:, 1:]
    assert x.__dlpack_device__() == (4, 0)  # kDLOpenCL
    y = bp.from_dlpack(x.__dlpack__())
    assert y.device == dev and y.tolist() == [[1., 2.], [4., 5.]]
    y.zero_()
    assert x.tolist() == [[0., 0.], [0., 0.]]


def test_numpy_refuses_device_memory():
    import numpy as np
    x = bp.ones(2, device=opencl_device())
    with pytest.raises((RuntimeError, BufferError, TypeError, ValueError)):
        np.from_dlpack(x)
