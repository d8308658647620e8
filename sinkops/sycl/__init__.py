"""SYCL backend (Intel GPUs; numerically verified on the SYCL CPU device).

The host module ``sinkops._sycl`` is built by ``pip install .`` when a SYCL runtime is found
(tools/build_sycl.py); its kernels are compiled at first use from source embedded in the module
and cached on disk (see docs/SYCL.md). XPU tensors run on the current XPU stream's queue; CPU
tensors run on the module's own queue on the SYCL CPU device (Intel's OpenCL CPU runtime).
"""
from __future__ import annotations

import os
import sys

import torch

from sinkops.sycl.window_attention import window_attention_fwd
from sinkops.sycl.sparse_mla import sparse_mla_decode_fwd, sparse_mla_prefill_fwd


def _point_icd_at_wheel_cpu_runtime() -> None:
    # The intel-opencl-rt wheel installs the CPU OpenCL driver but no ICD registration; the loader
    # finds it through OCL_ICD_FILENAMES, read when the runtime first enumerates platforms.
    lib = os.path.join(sys.prefix, "lib", "libintelocl.so")
    if "OCL_ICD_FILENAMES" not in os.environ and os.path.exists(lib):
        os.environ["OCL_ICD_FILENAMES"] = lib


_point_icd_at_wheel_cpu_runtime()

try:  # the compiled module is optional: the package works without it
    from sinkops import _sycl
except ImportError as e:  # pragma: no cover - depends on the build
    _sycl = None
    _IMPORT_ERROR = str(e)
else:
    _IMPORT_ERROR = ""

_DEVICE_ERROR: str | None = None  # cached result of the first device probe


def _probe_device() -> str:
    global _DEVICE_ERROR
    if _DEVICE_ERROR is None:
        try:
            _sycl.device_name(0)
            _DEVICE_ERROR = ""
        except RuntimeError as e:
            _DEVICE_ERROR = str(e)
    return _DEVICE_ERROR


def why_unavailable() -> str:
    """'' when the SYCL backend can run here, else a one-line reason."""
    if _sycl is None:
        return ("the SYCL extension sinkops._sycl is not built (install intel-sycl-rt and rebuild with "
                f"SINKOPS_SYCL_ROOT=<its prefix>; import error: {_IMPORT_ERROR})")
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        return ""
    err = _probe_device()
    return f"no usable SYCL device: {err}" if err else ""


def available() -> bool:
    return why_unavailable() == ""


__all__ = ["available", "why_unavailable", "window_attention_fwd", "sparse_mla_prefill_fwd",
           "sparse_mla_decode_fwd"]
