"""Fill the compiled core's params structs from torch tensors.

Shared by the CUDA backend (``sinkops._C``) and the SYCL backend (``sinkops._sycl``): both
bind the same structs (csrc/include/sinkops/bind_params.h). Inputs here are already
validated and normalized by ``sinkops.ops`` (last dims contiguous, int32 index tensors,
float32 sinks); this module only copies pointers, shapes and strides.
"""
from __future__ import annotations

import torch

_DTYPE_NAMES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}


def _ptr(t: torch.Tensor | None) -> int:
    return 0 if t is None else t.data_ptr()


def window_attention_params(mod, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                            window_left, window_right, scale, sinks, sink_mode, out, lse):
    p = mod.WindowAttentionParams()
    p.dtype = getattr(mod.DType, _DTYPE_NAMES[q.dtype])
    p.q, p.k, p.v, p.out, p.lse = _ptr(q), _ptr(k), _ptr(v), _ptr(out), _ptr(lse)
    p.cu_seqlens_q, p.cu_seqlens_k, p.sinks = _ptr(cu_seqlens_q), _ptr(cu_seqlens_k), _ptr(sinks)
    p.q_row_stride, p.q_head_stride = q.stride(0), q.stride(1)
    p.k_row_stride, p.k_head_stride = k.stride(0), k.stride(1)
    p.v_row_stride, p.v_head_stride = v.stride(0), v.stride(1)
    p.out_row_stride, p.out_head_stride = out.stride(0), out.stride(1)
    p.lse_head_stride = lse.stride(0)
    p.total_q, p.total_k = q.shape[0], k.shape[0]
    p.batch = cu_seqlens_q.shape[0] - 1
    p.h_q, p.h_k, p.d, p.d_v = q.shape[1], k.shape[1], q.shape[2], v.shape[2]
    p.max_seqlen_q, p.max_seqlen_k = int(max_seqlen_q), int(max_seqlen_k)
    p.window_left, p.window_right = int(window_left), int(window_right)
    p.scale = float(scale)
    p.sink_mode = getattr(mod.SinkMode, sink_mode)
    return p


def sparse_mla_prefill_params(mod, q, kv, indices, sm_scale, d_v, attn_sink, topk_length,
                              out, max_logits, lse):
    p = mod.SparseMlaPrefillParams()
    p.q, p.kv, p.indices = _ptr(q), _ptr(kv), _ptr(indices)
    p.topk_length, p.attn_sink = _ptr(topk_length), _ptr(attn_sink)
    p.out, p.max_logits, p.lse = _ptr(out), _ptr(max_logits), _ptr(lse)
    p.q_row_stride, p.q_head_stride = q.stride(0), q.stride(1)
    p.kv_row_stride = kv.stride(0)
    p.indices_row_stride = indices.stride(0)
    p.out_row_stride, p.out_head_stride = out.stride(0), out.stride(1)
    p.s_q, p.s_kv = q.shape[0], kv.shape[0]
    p.h_q, p.d_qk, p.d_v, p.topk = q.shape[1], q.shape[2], int(d_v), indices.shape[-1]
    p.sm_scale = float(sm_scale)
    return p


def _kv_pool(mod, cache, indices, topk_length):
    pool = mod.KvPool()
    if cache is None:
        return pool
    pool.cache = _ptr(cache)
    pool.block_stride = cache.stride(0) * cache.element_size()
    pool.num_blocks, pool.block_size = cache.shape[0], cache.shape[1]
    pool.indices = _ptr(indices)
    pool.indices_batch_stride, pool.indices_row_stride = indices.stride(0), indices.stride(1)
    pool.topk_length = _ptr(topk_length)
    pool.topk = indices.shape[-1]
    return pool


def sparse_mla_decode_params(mod, q, kv_cache, indices, sm_scale, attn_sink, topk_length, layout,
                             extra_kv_cache, extra_indices, extra_topk_length, out, lse):
    p = mod.SparseMlaDecodeParams()
    p.layout = getattr(mod.KvCacheLayout, layout)
    p.q = _ptr(q)
    p.q_batch_stride, p.q_row_stride, p.q_head_stride = q.stride(0), q.stride(1), q.stride(2)
    p.pool = _kv_pool(mod, kv_cache, indices, topk_length)
    p.extra = _kv_pool(mod, extra_kv_cache, extra_indices, extra_topk_length)
    p.attn_sink = _ptr(attn_sink)
    p.out, p.lse = _ptr(out), _ptr(lse)
    p.b, p.s_q, p.h_q, p.d_qk = q.shape[0], q.shape[1], q.shape[2], q.shape[3]
    p.d_v = out.shape[-1]
    p.sm_scale = float(sm_scale)
    return p
