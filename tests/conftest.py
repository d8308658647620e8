"""Shared pytest setup. The `gpu` marker skips without a CUDA device (a skip is not a pass: the
GPU tests run on the H200 through tools/device_check.sh). Without a GPU, Triton kernels run in
the interpreter (Triton decides at import time, so that is set here, before anything imports it),
and the CUDA emulator registers as the backend "cuda-emu" (tests/cuda_emu.py)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # `import helpers` from any test module

import torch  # noqa: E402

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from sinkops import backends  # noqa: E402

import cuda_emu  # noqa: E402

backends.register("cuda-emu", cuda_emu.LazyEmulatorBackend())


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (runs on the H200, skipped in CI)")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
