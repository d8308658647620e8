"""Shared pytest setup: the `gpu` marker skips without a CUDA device (a skip is not a pass:
the GPU tests run on the H200 through tools/device_check.sh)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # `import helpers` from any test module

import torch  # noqa: E402

import cuda_target as cuda_target_module  # noqa: E402

# Without a GPU, Triton kernels run in the interpreter. Triton decides at import time, so set
# it here, before any test module imports sinkops.triton.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (runs on the H200, skipped in CI)")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(params=cuda_target_module.TARGETS)
def cuda_target(request):
    """The GPU or the CPU emulator for the CUDA-kernel tests (tests/cuda_target.py)."""
    cuda_target_module.K.target = cuda_target_module.Target(request.param)
    yield cuda_target_module.K
    cuda_target_module.K.target = None
