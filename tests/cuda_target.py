"""Where a CUDA-kernel test runs csrc/cuda/: "gpu" (sinkops._C on a CUDA device; marked `gpu`)
or "emu" (the same kernel C++ on the CPU emulator of tools/cuda_emu; runs in CI).

Each tests/test_cuda_*.py module runs every test on both targets through an autouse
parametrized fixture that sets the module's `K`; tests too large for the emulator, or about
the GPU itself (CUDA graphs, > 2^31 elements), are marked GPU_ONLY.
"""
from __future__ import annotations

import pytest
import torch

TARGETS = [pytest.param("gpu", marks=pytest.mark.gpu), pytest.param("emu")]
GPU_ONLY = pytest.mark.parametrize("cuda_target", [pytest.param("gpu", marks=pytest.mark.gpu)], indirect=True)


class Target:
    """The kernels' entry points (sinkops/cuda/*.py interface) and the device their tensors live on."""

    def __init__(self, name: str):
        self.name = name
        if name == "gpu":
            import sinkops.cuda as cuda_backend

            assert cuda_backend.available(), cuda_backend.why_unavailable()  # built but broken must fail
            from sinkops.cuda import sparse_mla, window_attention

            self.device = "cuda"
        else:
            import cuda_emu_backend as window_attention

            sparse_mla = window_attention
            self.device = "cpu"
        self.window_attention_fwd = window_attention.window_attention_fwd
        self.sparse_mla_prefill_fwd = sparse_mla.sparse_mla_prefill_fwd
        self.sparse_mla_decode_fwd = sparse_mla.sparse_mla_decode_fwd

    def synchronize(self) -> None:
        if self.name == "gpu":
            torch.cuda.synchronize()


class _Current:
    """`K.device`, `K.window_attention_fwd`, ... of the target the running test uses."""

    target: Target | None = None

    def __getattr__(self, name):
        if self.target is None:
            raise RuntimeError("no CUDA target: use the cuda_target fixture (or set K.target)")
        return getattr(self.target, name)


K = _Current()
