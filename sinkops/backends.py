"""Backend choice (DESIGN.md §3): CUDA kernel when built and the device supports it, else SYCL
on XPU, else Triton on a GPU, else the reference. `backend=` forces one; a missing backend
raises a clear error naming what is missing. Backends never import one another."""
from __future__ import annotations

import importlib
import importlib.util
import os

import torch

NAMES = ("auto", "cuda", "sycl", "triton", "reference")

# op family -> backend -> module implementing the backend interface
_MODULES = {
    "window": {
        "reference": "sinkops.reference",
        "triton": "sinkops.triton.window_attention",
        "cuda": "sinkops.cuda.window_attention",
        "sycl": "sinkops.sycl",
    },
    "mla": {
        "reference": "sinkops.reference",
        "triton": "sinkops.triton.sparse_mla",
        "cuda": "sinkops.cuda.sparse_mla",
        "sycl": "sinkops.sycl",
    },
}


def _triton_usable(device: torch.device) -> str:
    if importlib.util.find_spec("triton") is None:
        return "triton is not installed (pip install triton)"
    if device.type == "cuda":
        return ""
    if device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1":
        return ""
    return f"Triton runs on CUDA devices (or on CPU with TRITON_INTERPRET=1); tensors are on {device}"


def why_unavailable(name: str, device: torch.device) -> str:
    """Empty string when `name` can run on `device`, else the reason."""
    if name == "reference":
        return ""
    if name == "triton":
        return _triton_usable(device)
    if name == "cuda":
        if device.type != "cuda":
            return f"the CUDA backend needs CUDA tensors, got {device}"
        from sinkops import cuda

        return cuda.why_unavailable()
    if name == "sycl":
        if device.type not in ("cpu", "xpu"):
            return f"the SYCL backend takes CPU (SYCL CPU device) or XPU tensors, got {device}"
        try:
            sycl = importlib.import_module("sinkops.sycl")
        except ImportError as e:
            return f"sinkops.sycl failed to import: {e}"
        return sycl.why_unavailable()
    raise ValueError(f"backend: expected one of {NAMES}, got {name!r}")


def resolve(name: str, device: torch.device, cuda_ok: bool = True) -> str:
    """Turn `auto` into a concrete backend; check a forced one. `cuda_ok=False` when the
    CUDA kernels do not cover this input (e.g. float32), so auto falls through to Triton."""
    if not isinstance(name, str) or name not in NAMES:
        raise ValueError(f"backend: expected one of {NAMES}, got {name!r}")
    if name != "auto":
        why = why_unavailable(name, device)
        if why:
            raise RuntimeError(f"backend={name!r} is not available: {why}")
        return name
    if device.type == "cuda":
        if cuda_ok and not why_unavailable("cuda", device):
            return "cuda"
        if not why_unavailable("triton", device):
            return "triton"
        return "reference"
    if device.type == "xpu" and not why_unavailable("sycl", device):
        return "sycl"
    return "reference"


def module(family: str, name: str):
    return importlib.import_module(_MODULES[family][name])
