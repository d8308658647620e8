"""Which sycl::queue a launch goes to, as the integer the host module expects."""
from __future__ import annotations

import torch


def queue_handle(device: torch.device) -> int:
    if device.type == "cpu":
        return 0  # the module's own in-order queue on the SYCL CPU device (waits: CPU ops are synchronous)
    if device.type == "xpu":
        # Unverified here (no Intel GPU in CI): torch's XPU stream exposes its sycl::queue* as an
        # integer; it is only valid if torch and sinkops._sycl load the same libsycl.
        return int(torch.xpu.current_stream(device).sycl_queue)
    raise ValueError(f"the SYCL backend runs on cpu or xpu tensors, got {device}")


def module():
    from sinkops.sycl import _sycl, why_unavailable

    if _sycl is None:
        raise RuntimeError(why_unavailable())
    return _sycl
