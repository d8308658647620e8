"""The torch backend: every op in vectorized PyTorch, on any device and dtype.

What CPU callers run when the SYCL backend is not built, and the fallback for inputs no kernel
takes (float64, other devices). Unlike the oracle (sinkops.reference, which loops over segments
in Python and is for tests only) it never synchronizes with the host and has no per-segment or
per-batch Python loop: index tensors stay on the device (segments are found with searchsorted,
keys gathered with clamped indices), and loops run over fixed-size chunks whose count depends on
shapes alone, with an online softmax across key chunks. Computes in float32 (float64 for float64
inputs). Semantics as every backend's: docs/DESIGN.md §1-2.
"""
from __future__ import annotations

from sinkops import backends
from sinkops.pytorch.attention import sparse_mla_decode, sparse_mla_prefill, window_attention
from sinkops.pytorch.backward import sparse_mla_prefill_backward, window_attention_backward

_RUN = {"window_attention": window_attention, "sparse_mla_prefill": sparse_mla_prefill,
        "sparse_mla_decode": sparse_mla_decode, "window_attention_backward": window_attention_backward,
        "sparse_mla_prefill_backward": sparse_mla_prefill_backward}


class TorchBackend:
    ops = backends.FORWARD_OPS | backends.BACKWARD_OPS

    name = "torch"

    def why_unavailable(self, device) -> str:
        return ""

    def supports(self, args) -> str:
        return ""

    def prepare(self, args):
        return _RUN[args.op]


backend = TorchBackend()
