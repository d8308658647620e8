"""CUDA sparse MLA: fills the params structs, launches csrc/cuda/sparse_mla_*.cu."""
from __future__ import annotations

import torch

from sinkops import _native
from sinkops.cuda import _C, device_guard, stream_handle


def sparse_mla_prefill_fwd(q, kv, indices, sm_scale, d_v, attn_sink, topk_length,
                           out, max_logits, lse) -> None:
    p = _native.sparse_mla_prefill_params(_C, q, kv, indices, sm_scale, d_v, attn_sink,
                                          topk_length, out, max_logits, lse)
    with device_guard(q.device):
        _C.sparse_mla_prefill_fwd(p, stream_handle(q.device))


def sparse_mla_decode_fwd(q, kv_cache, indices, sm_scale, attn_sink, topk_length, layout,
                          extra_kv_cache, extra_indices, extra_topk_length, out, lse) -> None:
    p = _native.sparse_mla_decode_params(_C, q, kv_cache, indices, sm_scale, attn_sink,
                                         topk_length, layout, extra_kv_cache, extra_indices,
                                         extra_topk_length, out, lse)
    num_sms = torch.cuda.get_device_properties(q.device).multi_processor_count
    nbytes = _C.sparse_mla_decode_workspace_bytes(p, num_sms)
    # Workspace size depends on shapes only, so this stays capturable in a CUDA graph.
    workspace = torch.empty(max(int(nbytes), 1), dtype=torch.uint8, device=q.device)
    p.workspace, p.workspace_bytes = workspace.data_ptr(), int(nbytes)
    with device_guard(q.device):
        _C.sparse_mla_decode_fwd(p, stream_handle(q.device))
