"""SYCL sparse MLA: fills the params structs, launches csrc/sycl/kernels/sparse_mla.hpp."""
from __future__ import annotations

from sinkops import _native
from sinkops.sycl._queue import module, queue_handle


def sparse_mla_prefill_fwd(q, kv, indices, sm_scale, d_v, attn_sink, topk_length,
                           out, max_logits, lse) -> None:
    mod = module()
    p = _native.sparse_mla_prefill_params(mod, q, kv, indices, sm_scale, d_v, attn_sink,
                                          topk_length, out, max_logits, lse)
    mod.sparse_mla_prefill_fwd(p, queue_handle(q.device))


def sparse_mla_decode_fwd(q, kv_cache, indices, sm_scale, attn_sink, topk_length, layout,
                          extra_kv_cache, extra_indices, extra_topk_length, out, lse) -> None:
    # No workspace: one work-group owns a whole (row, head chunk), so there are no split-k partials.
    mod = module()
    p = _native.sparse_mla_decode_params(mod, q, kv_cache, indices, sm_scale, attn_sink,
                                         topk_length, layout, extra_kv_cache, extra_indices,
                                         extra_topk_length, out, lse)
    mod.sparse_mla_decode_fwd(p, queue_handle(q.device))
