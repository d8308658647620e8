"""The CUDA backend's kernels on the CPU emulator (tools/cuda_emu/README.md), as a backend named
"cuda-emu": sinkops.cuda.CudaBackend itself, over the module tools/build_cuda_emu.py builds from
the same csrc/cuda/ C++ (host launchers, bindings and kernels compiled by g++, PTX emulated), on
CPU tensors. Registered by conftest.py; the module is built (~30 s, cached in build/) on first use.
"""
from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

from sinkops import backends

_ROOT = Path(__file__).resolve().parents[1]
# A small device: emulated tests use 1/8 of the GPU tests' decode batch and still take the same
# split-k / single-pass paths (the split plan reads the SM count).
SM_COUNT = 16
os.environ.setdefault("SINKOPS_EMU_SM_COUNT", str(SM_COUNT))


def _module():
    sys.path.insert(0, str(_ROOT / "tools"))
    try:
        import build_cuda_emu
    finally:
        sys.path.pop(0)
    sys.path.insert(0, str(build_cuda_emu.build()))
    return importlib.import_module(build_cuda_emu.MODULE)


class LazyEmulatorBackend:
    """Builds the emulator module when a test first asks for this backend."""

    name = "cuda-emu"
    ops = backends.FORWARD_OPS

    def __init__(self):
        self._backend = None

    def _get(self):
        if self._backend is None:
            from sinkops.cuda import CudaBackend

            self._backend = CudaBackend(_module(), name="cuda-emu", device_type="cpu")
        return self._backend

    def why_unavailable(self, device):
        return "" if device.type == "cpu" else f"the emulator takes CPU tensors, got {device}"

    def supports(self, args):
        return self._get().supports(args)

    def prepare(self, args):
        return self._get().prepare(args)
