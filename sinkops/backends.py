"""The backends and how a call picks one (docs/ARCHITECTURE.md).

Every backend implements one interface, for each op's args object (ops/window.py,
ops/prefill.py, ops/decode.py and the backward ops in ops/*_backward.py: `args.op` names the op):

    ops                              the op names it has kernels for (FORWARD_OPS, BACKWARD_OPS)
    why_unavailable(device) -> str   '' when it can run tensors on this device, else the reason
    supports(args) -> str            '' when it can run this call, else the reason (naming the argument)
    prepare(args) -> launch          a launcher for every call with args' signature; ops caches it
                                     per signature and calls launch(args_of_each_call)

`backend="auto"` tries AUTO_ORDER[device type][op] and takes the first backend that is available
and supports the call; a forced backend that is missing or cannot run the call raises an error
that says why. Backends never import one another (nor the oracle, sinkops.reference); tests may
add one (the CUDA emulator) with register().
"""
from __future__ import annotations

import importlib

NAMES = ("auto", "cuda", "triton", "sycl", "torch")
FORWARD_OPS = frozenset({"window_attention", "sparse_mla_prefill", "sparse_mla_decode"})
BACKWARD_OPS = frozenset({"window_attention_backward", "sparse_mla_prefill_backward"})

# name -> module whose `backend` attribute implements the interface (imported on first use)
_MODULES = {"cuda": "sinkops.cuda", "triton": "sinkops.triton", "sycl": "sinkops.sycl", "torch": "sinkops.pytorch"}
_REGISTERED: dict = {}

# The order `auto` tries, per device type and op, from the H200 measurements in bench/NOTES.md.
# On CUDA today the Triton kernels beat our mma.sync CUDA kernels for window attention (MiMo video
# 16x1024 key0: 140 vs 190 µs) and sparse prefill (V4-Pro: 244 vs 201 TFLOP/s); on Hopper the CUDA
# backend's sm_90a prefill (> 32 heads: 490 TFLOP/s) and sm_90a window kernels (d <= 128: 1.05-2.3x
# Triton) come first through CudaBackend.prefers().
# The CUDA decode is 13x faster than Triton at batch 1. torch (vectorized PyTorch) runs anything anywhere, last.
# CPU tensors go to the SYCL CPU device when that backend is built (bench/NOTES.md, "CPU").
AUTO_ORDER = {
    "cuda": {"window_attention": ("triton", "cuda", "torch"),
             "sparse_mla_prefill": ("triton", "cuda", "torch"),
             "sparse_mla_decode": ("cuda", "triton", "torch"),
             # the CUDA window backward (sm_90a) comes first through prefers() where it runs
             "window_attention_backward": ("triton", "cuda", "torch"),
             # the CUDA sparse backward (sm_90a) comes first through prefers() where it runs
             # (bench/NOTES.md "Sparse backward, dkv v4")
             "sparse_mla_prefill_backward": ("triton", "cuda", "torch")},
    "cpu": ("sycl", "torch"),
    "xpu": ("sycl", "torch"),
}


def check_name(name) -> None:
    if not isinstance(name, str) or (name not in NAMES and name not in _REGISTERED):
        raise ValueError(f"backend: expected one of {NAMES + tuple(_REGISTERED)}, got {name!r}")


def get(name: str):
    """The backend object called `name` (imports its module on first use)."""
    check_name(name)
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name == "auto":
        raise ValueError("backend: 'auto' is resolved per call (resolve())")
    try:
        return importlib.import_module(_MODULES[name]).backend
    except ImportError as e:  # a backend whose Python side fails to import is simply unavailable
        return _Missing(name, f"{_MODULES[name]} failed to import: {e}")


def register(name: str, backend) -> None:
    """Adds a backend under `name` (never picked by auto); tests register the CUDA emulator."""
    _REGISTERED[name] = backend


def why_unavailable(name: str, device) -> str:
    return get(name).why_unavailable(device)


def _auto_order(device_type: str, op: str, args=None):
    """AUTO_ORDER's list, with the backends that say they beat the others on this call (a
    `prefers(args)` method; today the CUDA sm_90a sparse prefill) moved to the front."""
    order = AUTO_ORDER.get(device_type, ("torch",))
    order = order[op] if isinstance(order, dict) else order
    if args is None:
        return order
    return sorted(order, key=lambda name: not _prefers(get(name), args))  # stable: keeps the rest in order


def _prefers(b, args) -> bool:
    prefers = getattr(b, "prefers", None)
    return bool(prefers) and args.op in b.ops and not b.why_unavailable(args.q.device) and prefers(args)


def _why_not(b, args) -> str:
    if args.op not in b.ops:
        return f"it has no {args.op} kernel"
    return b.supports(args)


def resolve(name: str, args):
    """The backend that runs this call: `name`, or for "auto" the first in AUTO_ORDER that can."""
    device = args.q.device
    if name != "auto":
        b = get(name)
        why = b.why_unavailable(device)
        if why:
            raise RuntimeError(f"backend={name!r} is not available: {why}")
        why = _why_not(b, args)
        if why:
            raise ValueError(f"backend={name!r} cannot run this {args.op} call: {why}")
        return b
    reasons = []
    for candidate in _auto_order(device.type, args.op, args):
        b = get(candidate)
        why = b.why_unavailable(device) or _why_not(b, args)
        if not why:
            return b
        reasons.append(f"{candidate}: {why}")
    raise RuntimeError(f"no backend can run this {args.op} call on {device}: " + "; ".join(reasons))


def auto_choice(device, op: str, args=None) -> str:
    """Name of the backend auto would take on `device` (args=None: ignoring what the call needs)."""
    for candidate in _auto_order(device.type, op, args):
        b = get(candidate)
        if not b.why_unavailable(device) and op in b.ops and (args is None or not b.supports(args)):
            return candidate
    return "none"


class _Missing:
    ops = FORWARD_OPS | BACKWARD_OPS  # so that the error says why it is missing

    def __init__(self, name, why):
        self.name, self._why = name, why

    def why_unavailable(self, device) -> str:
        return self._why

    def supports(self, args) -> str:
        return self._why

    def prepare(self, args):
        raise RuntimeError(self._why)
