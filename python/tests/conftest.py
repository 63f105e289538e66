# Shared by the Python tests: PyTorch 1.13 (Debian's python3-torch, which
# quickstart.sh installs) is the reference for names, values and text; a
# machine without it fails these tests rather than skipping them.
import pytest


@pytest.fixture(scope="session")
def torch():
    import torch
    return torch
