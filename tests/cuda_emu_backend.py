"""The CUDA backend's kernels run on the CPU by the emulator (tools/cuda_emu/README.md).

Same interface as sinkops/cuda/{window_attention,sparse_mla}.py, on CPU tensors: the params
structs are filled by the same sinkops._native code and the launch goes through the same host
code (csrc/cuda/*.cu) into the same kernel C++, only compiled by g++ with the PTX wrappers
executed on the CPU. Imported by tests only; building takes ~30 s once (cached in build/).
"""
from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import torch

from sinkops import _native

_ROOT = Path(__file__).resolve().parents[1]
_emu = None
# A small device: emulated tests use 1/8 of the GPU tests' batch and still take the same
# split-k / single-pass decode paths (the split plan reads the SM count).
SM_COUNT = 16
os.environ.setdefault("SINKOPS_EMU_SM_COUNT", str(SM_COUNT))


def module():
    """Build (cached) and import sinkops_cuda_emu."""
    global _emu
    if _emu is None:
        sys.path.insert(0, str(_ROOT / "tools"))
        try:
            import build_cuda_emu
        finally:
            sys.path.pop(0)
        sys.path.insert(0, str(build_cuda_emu.build()))
        _emu = importlib.import_module(build_cuda_emu.MODULE)
    return _emu


def window_attention_fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                         window_left, window_right, scale, sinks, sink_mode, out, lse) -> None:
    emu = module()
    p = _native.window_attention_params(emu, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                        max_seqlen_k, window_left, window_right, scale, sinks,
                                        sink_mode, out, lse)
    emu.window_attention_fwd(p, 0)


def sparse_mla_prefill_fwd(q, kv, indices, sm_scale, d_v, attn_sink, topk_length,
                           out, max_logits, lse) -> None:
    emu = module()
    p = _native.sparse_mla_prefill_params(emu, q, kv, indices, sm_scale, d_v, attn_sink,
                                          topk_length, out, max_logits, lse)
    emu.sparse_mla_prefill_fwd(p, 0)


def sparse_mla_decode_fwd(q, kv_cache, indices, sm_scale, attn_sink, topk_length, layout,
                          extra_kv_cache, extra_indices, extra_topk_length, out, lse) -> None:
    emu = module()
    p = _native.sparse_mla_decode_params(emu, q, kv_cache, indices, sm_scale, attn_sink,
                                         topk_length, layout, extra_kv_cache, extra_indices,
                                         extra_topk_length, out, lse)
    nbytes = emu.sparse_mla_decode_workspace_bytes(p, int(os.environ["SINKOPS_EMU_SM_COUNT"]))
    workspace = torch.empty(max(int(nbytes), 1), dtype=torch.uint8)
    p.workspace, p.workspace_bytes = workspace.data_ptr(), int(nbytes)
    emu.sparse_mla_decode_fwd(p, 0)
