"""Backend choice (DESIGN.md §3): on a CUDA device the fastest verified kernel per op (see
AUTO_ORDER_ON_CUDA), SYCL on XPU, else the reference. `backend=` forces one; a missing backend
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


# Order `auto` tries on a CUDA device, per op, from the H200 measurements in bench/NOTES.md.
# Today the Triton kernels beat our mma.sync CUDA kernels for window attention (MiMo video
# 16x1024 key0: 140 vs 190 µs) and sparse prefill (V4-Pro: 244 vs 201 TFLOP/s), and those two
# CUDA kernels have not yet passed the GPU test suite; the CUDA decode has, and is 13x faster
# than Triton at batch 1. Revisit when a CUDA kernel overtakes (backend="cuda" forces it).
AUTO_ORDER_ON_CUDA = {
    "window": ("triton", "cuda"),
    "prefill": ("triton", "cuda"),
    "decode": ("cuda", "triton"),
}


def resolve(name: str, device: torch.device, op: str, cuda_ok: bool = True) -> str:
    """Turn `auto` into a concrete backend for `op` ("window" | "prefill" | "decode"); check a
    forced one. `cuda_ok=False` when the CUDA kernels do not cover this input (e.g. float32)."""
    if not isinstance(name, str) or name not in NAMES:
        raise ValueError(f"backend: expected one of {NAMES}, got {name!r}")
    if name != "auto":
        why = why_unavailable(name, device)
        if why:
            raise RuntimeError(f"backend={name!r} is not available: {why}")
        return name
    if device.type == "cuda":
        for candidate in AUTO_ORDER_ON_CUDA[op]:
            if candidate == "cuda" and not cuda_ok:
                continue
            if not why_unavailable(candidate, device):
                return candidate
        return "reference"
    if device.type == "xpu" and not why_unavailable("sycl", device):
        return "sycl"
    return "reference"


def module(family: str, name: str):
    return importlib.import_module(_MODULES[family][name])
