"""The SYCL backend (Intel GPUs; numerically verified on the SYCL CPU device).

The host module ``sinkops._sycl`` is built by ``pip install .`` when a SYCL runtime is found
(tools/build_sycl.py); its kernels are compiled at first use from source embedded in the module
and cached on disk (docs/SYCL.md). XPU tensors run on the current XPU stream's queue; CPU
tensors run on the module's own queue on the SYCL CPU device (Intel's OpenCL CPU runtime), which
`auto` picks for CPU tensors when this backend is built. Launches fill the same params structs as
the CUDA backend (sinkops/_native.py); the kernels take them by value.
"""
from __future__ import annotations

import os
import sys

import torch

from sinkops import _native, backends


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

_MAX_HEAD_DIM = 256  # csrc/sycl/kernels/window_attention.hpp
_MLA_MAX_QK = 576    # csrc/sycl/kernels/sparse_mla.hpp


def queue_handle(device: torch.device) -> int:
    """The sycl::queue* of the current XPU stream; 0 means the module's own in-order queue on the
    SYCL CPU device (CPU tensors: it waits, since torch CPU ops are synchronous)."""
    if device.type == "cpu":
        return 0
    # Unverified here (no Intel GPU in CI): torch's XPU stream exposes its sycl::queue* as an
    # integer; it is only valid if torch and sinkops._sycl load the same libsycl.
    return int(torch.xpu.current_stream(device).sycl_queue)


class SyclBackend:
    ops = backends.FORWARD_OPS

    name = "sycl"

    def __init__(self, module):
        self.mod = module
        self._device_error = None  # cached result of the first device probe
        if module is not None:
            _native.check_all_call_fields(module)

    def _probe(self) -> str:
        if self._device_error is None:
            try:
                self.mod.device_name(0)
                self._device_error = ""
            except RuntimeError as e:
                self._device_error = str(e)
        return self._device_error

    def why_unavailable(self, device) -> str:
        if self.mod is None:
            return ("the SYCL extension sinkops._sycl is not built (install intel-sycl-rt and rebuild with "
                    f"SINKOPS_SYCL_ROOT=<its prefix>; import error: {_IMPORT_ERROR})")
        if device.type == "xpu":
            return "" if hasattr(torch, "xpu") and torch.xpu.is_available() else "torch sees no XPU device"
        if device.type != "cpu":
            return f"the SYCL backend takes CPU (SYCL CPU device) or XPU tensors, got {device}"
        err = self._probe()
        return f"no usable SYCL device: {err}" if err else ""

    def supports(self, a) -> str:
        if a.op == "window_attention":
            if a.q.dtype not in (torch.bfloat16, torch.float16, torch.float32):
                return f"q: dtype {str(a.q.dtype)[6:]} has no SYCL kernel (bfloat16, float16, float32)"
            d, dv = a.q.shape[2], a.v.shape[2]
            return "" if max(d, dv) <= _MAX_HEAD_DIM else f"head dims must be <= {_MAX_HEAD_DIM}, got {d}/{dv}"
        if a.q.dtype != torch.bfloat16:
            return f"q: dtype {str(a.q.dtype)[6:]} has no SYCL kernel (bfloat16)"
        return "" if a.q.shape[-1] <= _MLA_MAX_QK else f"q: head dim must be <= {_MLA_MAX_QK}"

    def prepare(self, a):
        device = a.q.device
        if device.type == "cpu":
            return _native.launcher(self.mod, a, lambda: (0,))
        return _native.launcher(self.mod, a, lambda: (queue_handle(device),))


backend = SyclBackend(_sycl)
