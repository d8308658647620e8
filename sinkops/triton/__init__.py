"""The Triton backend: the fallback kernels for CUDA GPUs without our CUDA kernels, and what `auto`
takes where Triton measured faster (backends.AUTO_ORDER). On CPU tensors it runs in the Triton
interpreter when TRITON_INTERPRET=1 (that is how CI tests it)."""
from __future__ import annotations

import importlib.util
import os

import torch

from sinkops import backends

_DTYPES = {"window_attention": (torch.bfloat16, torch.float16, torch.float32),
           "sparse_mla_prefill": (torch.bfloat16,), "sparse_mla_decode": (torch.bfloat16,)}
_DTYPES["window_attention_backward"] = _DTYPES["window_attention"]
_DTYPES["sparse_mla_prefill_backward"] = _DTYPES["sparse_mla_prefill"]
MAX_BACKWARD_HEADS = 256  # sparse MLA prefill backward: the dkv kernel's [positions, heads] tiles


class TritonBackend:
    ops = backends.FORWARD_OPS | backends.BACKWARD_OPS

    name = "triton"

    def why_unavailable(self, device) -> str:
        if importlib.util.find_spec("triton") is None:
            return "triton is not installed (pip install triton)"
        if device.type == "cuda":
            return ""
        if device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1":
            return ""
        return f"Triton runs on CUDA devices (or on CPU with TRITON_INTERPRET=1); tensors are on {device}"

    def supports(self, a) -> str:
        if a.q.dtype not in _DTYPES[a.op]:
            names = ", ".join(str(d)[6:] for d in _DTYPES[a.op])
            return f"q: dtype {str(a.q.dtype)[6:]} has no Triton kernel ({names})"
        if a.op == "sparse_mla_prefill_backward" and a.q.shape[1] > MAX_BACKWARD_HEADS:
            # its dkv kernel holds every head of a query in one tile (sparse_mla_backward.py)
            return f"q: {a.q.shape[1]} heads; the Triton sparse MLA backward takes at most {MAX_BACKWARD_HEADS}"
        return ""

    def prepare(self, a):
        if a.op == "window_attention":
            from sinkops.triton import window_attention
            return window_attention.prepare(a)
        if a.op == "window_attention_backward":
            from sinkops.triton import window_attention_backward
            return window_attention_backward.prepare(a)
        if a.op == "sparse_mla_prefill_backward":
            from sinkops.triton import sparse_mla_backward
            return sparse_mla_backward.prepare(a)
        from sinkops.triton import sparse_mla
        return sparse_mla.prepare_prefill(a) if a.op == "sparse_mla_prefill" else sparse_mla.prepare_decode(a)


backend = TritonBackend()
