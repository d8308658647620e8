"""CUDA backend: thin wrappers that fill a params struct and launch on the current stream.

The kernels live in csrc/cuda/ and are compiled into ``sinkops._C`` by ``pip install .``
when nvcc is found. ``available()`` says whether this backend can run here.
"""
from __future__ import annotations

import contextlib

import torch

try:  # the compiled module is optional: the package works without it (Triton / reference)
    from sinkops import _C
except ImportError as e:  # pragma: no cover - depends on the build
    _C = None
    _IMPORT_ERROR = str(e)
else:
    _IMPORT_ERROR = ""


def available() -> bool:
    return _C is not None and torch.cuda.is_available()


def why_unavailable() -> str:
    if _C is None:
        return ("the CUDA extension sinkops._C is not built (reinstall with nvcc on PATH; "
                f"import error: {_IMPORT_ERROR})")
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return ""


def stream_handle(device: torch.device) -> int:
    return torch.cuda.current_stream(device).cuda_stream


def device_guard(device: torch.device):
    """sinkops._C launches on the calling thread's current CUDA device (its runtime is linked
    statically): make that q's device for the call, as flash-attention's CUDAGuard does."""
    if device.index is None or device.index == torch.cuda.current_device():
        return contextlib.nullcontext()
    return torch.cuda.device(device)
