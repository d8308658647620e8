"""Public API (DESIGN.md §2): validate, pick a backend, run through torch.ops.sinkops.*.

Each op is registered twice with torch.library: a functional op that allocates its outputs
(`sinkops::window_attention`) and an `_out` op that writes into caller-given buffers. Both have
fake impls, so torch.compile(fullgraph=True) traces them and CUDA graphs capture them. The
Python wrappers below do all validation on shapes/dtypes/devices before any launch and never
synchronize with the host (max_seqlen comes from the caller, as in flash-attention).
"""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor

from sinkops import _validate as V
from sinkops import backends

SINK_MODES = ("key0", "null")
KV_LAYOUTS = {"v4": (584, 512), "v32": (656, 576)}  # bytes per token, d_qk
D_V = 512

# ---------------------------------------------------------------------------------------------
# window_attention
# ---------------------------------------------------------------------------------------------


def _window_run(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, window_left,
                window_right, scale, sinks, sink_mode, backend, out, lse):
    if q.shape[0] == 0 or q.shape[1] == 0:
        return
    if k.shape[0] == 0:  # every row sees no key: exact zeros, lse = +inf (DESIGN.md §1)
        out.zero_()
        lse.fill_(math.inf)
        return
    backends.module("window", backend).window_attention_fwd(
        q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, window_left,
        window_right, scale, sinks, sink_mode, out, lse)


@torch.library.custom_op("sinkops::window_attention", mutates_args=())
def _window_attention_op(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor,
                         cu_seqlens_k: Tensor, max_seqlen_q: int, max_seqlen_k: int,
                         window_left: int, window_right: int, scale: float,
                         sinks: Optional[Tensor], sink_mode: str,
                         backend: str) -> tuple[Tensor, Tensor]:
    out = q.new_empty(q.shape[0], q.shape[1], v.shape[2])
    lse = q.new_empty(q.shape[1], q.shape[0], dtype=torch.float32)
    _window_run(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, window_left,
                window_right, scale, sinks, sink_mode, backend, out, lse)
    return out, lse


@_window_attention_op.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, window_left, window_right,
      scale, sinks, sink_mode, backend):
    return (q.new_empty(q.shape[0], q.shape[1], v.shape[2]),
            q.new_empty(q.shape[1], q.shape[0], dtype=torch.float32))


@torch.library.custom_op("sinkops::window_attention_out", mutates_args=("out", "lse"))
def _window_attention_out_op(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor,
                             cu_seqlens_k: Tensor, max_seqlen_q: int, max_seqlen_k: int,
                             window_left: int, window_right: int, scale: float,
                             sinks: Optional[Tensor], sink_mode: str, backend: str,
                             out: Tensor, lse: Tensor) -> None:
    _window_run(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, window_left,
                window_right, scale, sinks, sink_mode, backend, out, lse)


@_window_attention_out_op.register_fake
def _(*args):
    return None


def window_attention(q, k, v, cu_seqlens_q, cu_seqlens_k=None, max_seqlen_q=None,
                     max_seqlen_k=None, window_size=(-1, -1), causal=False, softmax_scale=None,
                     sinks=None, sink_mode="key0", return_lse=False, out=None, backend="auto"):
    """Varlen (packed) windowed attention with a per-head sink (DESIGN.md §2.1).

    q [Tq, Hq, D], k [Tk, Hk, D], v [Tk, Hk, Dv]; cu_seqlens_q/k int32 [B+1] (k defaults to q's);
    max_seqlen_q: int, an upper bound on any segment's query length (required: no host sync);
    max_seqlen_k: defaults to max_seqlen_q when cu_seqlens_k is None, else to Tk.
    window_size=(left, right) in flash-attention's convention, -1 = unbounded; causal sets right=0.
    sinks float32 [Hq] in natural-log units (never scaled); sink_mode "key0" (bias on each
    segment's first key) or "null" (extra logit in the denominator owning no value).
    Returns out [Tq, Hq, Dv] or (out, lse [Hq, Tq] float32, natural log, +inf for empty rows).
    """
    V.tensor("q", q, ndim=3, dtypes=V.FLOATS)
    dev = q.device
    V.tensor("k", k, ndim=3, dtypes=(q.dtype,), device=dev)
    V.tensor("v", v, ndim=3, dtypes=(q.dtype,), device=dev)
    tq, hq, d = q.shape
    tk, hk, dk = k.shape
    if dk != d:
        raise ValueError(f"k: head dim {dk} must equal q's head dim {d}")
    if tuple(v.shape[:2]) != (tk, hk):
        raise ValueError(f"v: expected shape ({tk}, {hk}, Dv) to match k, got {tuple(v.shape)}")
    dv = v.shape[2]
    if hk == 0 or hq % hk != 0:
        raise ValueError(f"q/k heads: Hq={hq} must be a positive multiple of Hk={hk} (GQA/MQA)")
    if not 1 <= d <= 256 or not 1 <= dv <= 256:
        raise ValueError(f"head dim: D={d}, Dv={dv} not supported (1..256)")
    cu_q = V.cu_seqlens("cu_seqlens_q", cu_seqlens_q, tq, dev)
    if cu_seqlens_k is None:
        if tk != tq:
            raise ValueError(f"cu_seqlens_k: required when k has {tk} tokens and q has {tq}")
        cu_k = cu_q
    else:
        cu_k = V.cu_seqlens("cu_seqlens_k", cu_seqlens_k, tk, dev)
        if cu_k.shape != cu_q.shape:
            raise ValueError(f"cu_seqlens_k: expected shape {tuple(cu_q.shape)} like cu_seqlens_q, "
                             f"got {tuple(cu_k.shape)}")
    if max_seqlen_q is None:
        raise ValueError("max_seqlen_q: required (an upper bound on segment length; reading it "
                         "from cu_seqlens would synchronize with the device)")
    V.non_negative_int("max_seqlen_q", max_seqlen_q)
    if max_seqlen_k is None:
        max_seqlen_k = max_seqlen_q if cu_seqlens_k is None else tk
    V.non_negative_int("max_seqlen_k", max_seqlen_k)
    left, right = V.window_size(window_size, causal)
    if softmax_scale is None:
        softmax_scale = d ** -0.5
    if not isinstance(softmax_scale, (int, float)) or isinstance(softmax_scale, bool):
        raise TypeError(f"softmax_scale: expected a float, got {type(softmax_scale).__name__}")
    if sink_mode not in SINK_MODES:
        raise ValueError(f"sink_mode: expected one of {SINK_MODES}, got {sink_mode!r}")
    sinks = V.sinks("sinks", sinks, hq, dev)
    mode = "none" if sinks is None else sink_mode
    out = V.out_tensor("out", out, (tq, hq, dv), q.dtype, dev)
    name = backends.resolve(backend, dev, "window", cuda_ok=q.dtype in V.LOWP)
    q, k, v = (V.last_dim_contiguous(t) for t in (q, k, v))
    args = (q, k, v, cu_q, cu_k, max_seqlen_q, max_seqlen_k, left, right, float(softmax_scale),
            sinks, mode, name)
    if out is None:
        out, lse = torch.ops.sinkops.window_attention(*args)
    else:
        lse = q.new_empty(hq, tq, dtype=torch.float32)
        torch.ops.sinkops.window_attention_out(*args, out, lse)
    return (out, lse) if return_lse else out


# ---------------------------------------------------------------------------------------------
# sparse_mla_prefill
# ---------------------------------------------------------------------------------------------


def _prefill_run(q, kv, indices, sm_scale, d_v, attn_sink, topk_length, backend, out,
                 max_logits, lse):
    if q.shape[0] == 0 or q.shape[1] == 0:
        return
    if kv.shape[0] == 0:  # no valid index anywhere
        out.zero_()
        max_logits.fill_(-math.inf)
        lse.fill_(math.inf)
        return
    backends.module("mla", backend).sparse_mla_prefill_fwd(
        q, kv, indices, sm_scale, d_v, attn_sink, topk_length, out, max_logits, lse)


@torch.library.custom_op("sinkops::sparse_mla_prefill", mutates_args=())
def _sparse_mla_prefill_op(q: Tensor, kv: Tensor, indices: Tensor, sm_scale: float, d_v: int,
                           attn_sink: Optional[Tensor], topk_length: Optional[Tensor],
                           backend: str) -> tuple[Tensor, Tensor, Tensor]:
    out = q.new_empty(q.shape[0], q.shape[1], d_v)
    max_logits = q.new_empty(q.shape[0], q.shape[1], dtype=torch.float32)
    lse = q.new_empty(q.shape[0], q.shape[1], dtype=torch.float32)
    _prefill_run(q, kv, indices, sm_scale, d_v, attn_sink, topk_length, backend, out,
                 max_logits, lse)
    return out, max_logits, lse


@_sparse_mla_prefill_op.register_fake
def _(q, kv, indices, sm_scale, d_v, attn_sink, topk_length, backend):
    return (q.new_empty(q.shape[0], q.shape[1], d_v),
            q.new_empty(q.shape[0], q.shape[1], dtype=torch.float32),
            q.new_empty(q.shape[0], q.shape[1], dtype=torch.float32))


@torch.library.custom_op("sinkops::sparse_mla_prefill_out", mutates_args=("out", "max_logits", "lse"))
def _sparse_mla_prefill_out_op(q: Tensor, kv: Tensor, indices: Tensor, sm_scale: float, d_v: int,
                               attn_sink: Optional[Tensor], topk_length: Optional[Tensor],
                               backend: str, out: Tensor, max_logits: Tensor,
                               lse: Tensor) -> None:
    _prefill_run(q, kv, indices, sm_scale, d_v, attn_sink, topk_length, backend, out,
                 max_logits, lse)


@_sparse_mla_prefill_out_op.register_fake
def _(*args):
    return None


def _check_scale(name, s):
    if isinstance(s, bool) or not isinstance(s, (int, float)):
        raise TypeError(f"{name}: expected a float, got {type(s).__name__}")
    return float(s)


def sparse_mla_prefill(q, kv, indices, sm_scale, d_v=D_V, attn_sink=None, topk_length=None,
                       out=None, backend="auto"):
    """Sparse MLA prefill (DESIGN.md §2.2) with the DeepSeek-V4 null-logit attn_sink.

    q [Sq, Hq, Dqk] bf16, kv [Skv, 1, Dqk] bf16 (values = first d_v channels, K == V),
    indices int32 [Sq, 1, topk] (< 0 or >= Skv invalid; duplicates count), topk_length int32 [Sq].
    Returns (out [Sq, Hq, d_v], max_logits [Sq, Hq], lse [Sq, Hq]); lse excludes the sink.
    """
    V.tensor("q", q, ndim=3, dtypes=V.FLOATS)
    dev = q.device
    V.tensor("kv", kv, ndim=3, dtypes=(q.dtype,), device=dev)
    sq, hq, dqk = q.shape
    if dqk not in (512, 576):
        raise ValueError(f"q: head dim {dqk} not supported (512 for DeepSeek-V4, 576 for V3.2)")
    if kv.shape[1] != 1 or kv.shape[2] != dqk:
        raise ValueError(f"kv: expected shape (Skv, 1, {dqk}), got {tuple(kv.shape)}")
    if d_v != D_V:
        raise ValueError(f"d_v: only {D_V} is supported, got {d_v}")
    V.tensor("indices", indices, ndim=3, dtypes=(torch.int32,), device=dev)
    if indices.shape[0] != sq or indices.shape[1] != 1 or indices.shape[2] < 1:
        raise ValueError(f"indices: expected shape ({sq}, 1, topk>=1), got {tuple(indices.shape)}")
    attn_sink = V.sinks("attn_sink", attn_sink, hq, dev)
    if topk_length is not None:
        V.tensor("topk_length", topk_length, ndim=1, dtypes=(torch.int32,), device=dev)
        V.shape("topk_length", topk_length, (sq,))
        topk_length = topk_length.contiguous()
    sm_scale = _check_scale("sm_scale", sm_scale)
    out = V.out_tensor("out", out, (sq, hq, d_v), q.dtype, dev)
    name = backends.resolve(backend, dev, "prefill", cuda_ok=q.dtype == torch.bfloat16)
    q, kv, indices = (V.last_dim_contiguous(t) for t in (q, kv, indices))
    args = (q, kv, indices, sm_scale, d_v, attn_sink, topk_length, name)
    if out is None:
        return torch.ops.sinkops.sparse_mla_prefill(*args)
    max_logits = q.new_empty(sq, hq, dtype=torch.float32)
    lse = q.new_empty(sq, hq, dtype=torch.float32)
    torch.ops.sinkops.sparse_mla_prefill_out(*args, out, max_logits, lse)
    return out, max_logits, lse


# ---------------------------------------------------------------------------------------------
# sparse_mla_decode
# ---------------------------------------------------------------------------------------------


def _decode_run(q, kv_cache, indices, sm_scale, attn_sink, topk_length, layout, extra_kv_cache,
                extra_indices, extra_topk_length, backend, out, lse):
    if q.numel() == 0:
        return
    backends.module("mla", backend).sparse_mla_decode_fwd(
        q, kv_cache, indices, sm_scale, attn_sink, topk_length, layout, extra_kv_cache,
        extra_indices, extra_topk_length, out, lse)


@torch.library.custom_op("sinkops::sparse_mla_decode", mutates_args=())
def _sparse_mla_decode_op(q: Tensor, kv_cache: Tensor, indices: Tensor, sm_scale: float,
                          attn_sink: Optional[Tensor], topk_length: Optional[Tensor], layout: str,
                          extra_kv_cache: Optional[Tensor], extra_indices: Optional[Tensor],
                          extra_topk_length: Optional[Tensor],
                          backend: str) -> tuple[Tensor, Tensor]:
    b, sq, hq, _ = q.shape
    out = q.new_empty(b, sq, hq, D_V)
    lse = q.new_empty(b, hq, sq, dtype=torch.float32)
    _decode_run(q, kv_cache, indices, sm_scale, attn_sink, topk_length, layout, extra_kv_cache,
                extra_indices, extra_topk_length, backend, out, lse)
    return out, lse


@_sparse_mla_decode_op.register_fake
def _(q, kv_cache, indices, sm_scale, attn_sink, topk_length, layout, extra_kv_cache,
      extra_indices, extra_topk_length, backend):
    b, sq, hq, _ = q.shape
    return q.new_empty(b, sq, hq, D_V), q.new_empty(b, hq, sq, dtype=torch.float32)


@torch.library.custom_op("sinkops::sparse_mla_decode_out", mutates_args=("out", "lse"))
def _sparse_mla_decode_out_op(q: Tensor, kv_cache: Tensor, indices: Tensor, sm_scale: float,
                              attn_sink: Optional[Tensor], topk_length: Optional[Tensor],
                              layout: str, extra_kv_cache: Optional[Tensor],
                              extra_indices: Optional[Tensor],
                              extra_topk_length: Optional[Tensor], backend: str, out: Tensor,
                              lse: Tensor) -> None:
    _decode_run(q, kv_cache, indices, sm_scale, attn_sink, topk_length, layout, extra_kv_cache,
                extra_indices, extra_topk_length, backend, out, lse)


@_sparse_mla_decode_out_op.register_fake
def _(*args):
    return None


def _kv_pool(prefix, cache, indices, topk_length, layout, b, sq, dev):
    bpt, _ = KV_LAYOUTS[layout]
    V.tensor(f"{prefix}kv_cache", cache, ndim=4, dtypes=(torch.uint8, torch.float8_e4m3fn), device=dev)
    cache = cache.view(torch.uint8)
    nb, bs, one, nbytes = cache.shape
    if one != 1 or nbytes != bpt or bs < 1:
        raise ValueError(f"{prefix}kv_cache: expected shape (num_blocks, block_size, 1, {bpt}) for "
                         f"layout {layout!r}, got {tuple(cache.shape)}")
    min_block = bs * bpt if layout == "v32" else -(-bs * bpt // 576) * 576
    if nb > 1 and cache.stride(0) < min_block:
        raise ValueError(f"{prefix}kv_cache: block stride {cache.stride(0)} B is smaller than one "
                         f"{layout} block ({min_block} B for block_size {bs})")
    V.tensor(f"{prefix}indices", indices, ndim=3, dtypes=(torch.int32,), device=dev)
    if indices.shape[0] != b or indices.shape[1] != sq or indices.shape[2] < 1:
        raise ValueError(f"{prefix}indices: expected shape ({b}, {sq}, topk>=1), got "
                         f"{tuple(indices.shape)}")
    if topk_length is not None:
        V.tensor(f"{prefix}topk_length", topk_length, ndim=1, dtypes=(torch.int32,), device=dev)
        V.shape(f"{prefix}topk_length", topk_length, (b,))
        topk_length = topk_length.contiguous()
    return cache, V.last_dim_contiguous(indices), topk_length


def sparse_mla_decode(q, kv_cache, indices, sm_scale, attn_sink=None, topk_length=None,
                      layout="v4", extra_kv_cache=None, extra_indices=None,
                      extra_topk_length=None, out=None, backend="auto"):
    """Sparse MLA decode over a paged FP8 KV cache (DESIGN.md §2.3).

    q [B, Sq, Hq, Dqk] bf16 (Dqk 512 for layout "v4", 576 for "v32"); kv_cache
    [num_blocks, block_size, 1, bytes_per_token] uint8/e4m3 view read through its block stride;
    indices int32 [B, Sq, topk] of slots (block * block_size + offset; -1 invalid);
    topk_length int32 [B]; the optional extra pool is attended in the same softmax.
    Returns (out [B, Sq, Hq, 512] bf16, lse [B, Hq, Sq] float32).
    """
    if layout not in KV_LAYOUTS:
        raise ValueError(f"layout: expected one of {tuple(KV_LAYOUTS)}, got {layout!r}")
    V.tensor("q", q, ndim=4, dtypes=(torch.bfloat16,) + V.FLOATS[2:])
    dev = q.device
    b, sq, hq, dqk = q.shape
    if dqk != KV_LAYOUTS[layout][1]:
        raise ValueError(f"q: head dim {dqk} does not match layout {layout!r} "
                         f"(expects {KV_LAYOUTS[layout][1]})")
    kv_cache, indices, topk_length = _kv_pool("", kv_cache, indices, topk_length, layout, b, sq, dev)
    extras = (extra_kv_cache, extra_indices)
    if any(t is not None for t in extras) and any(t is None for t in extras):
        raise ValueError("extra_kv_cache / extra_indices: pass both or neither")
    if extra_kv_cache is None and extra_topk_length is not None:
        raise ValueError("extra_topk_length: given without extra_kv_cache")
    if extra_kv_cache is not None:
        extra_kv_cache, extra_indices, extra_topk_length = _kv_pool(
            "extra_", extra_kv_cache, extra_indices, extra_topk_length, layout, b, sq, dev)
    attn_sink = V.sinks("attn_sink", attn_sink, hq, dev)
    sm_scale = _check_scale("sm_scale", sm_scale)
    if out is not None:
        V.out_tensor("out", out, (b, sq, hq, D_V), q.dtype, dev)
        if not out.is_contiguous():
            raise ValueError("out: must be contiguous for sparse_mla_decode")
    name = backends.resolve(backend, dev, "decode", cuda_ok=q.dtype == torch.bfloat16)
    q = V.last_dim_contiguous(q)
    args = (q, kv_cache, indices, sm_scale, attn_sink, topk_length, layout, extra_kv_cache,
            extra_indices, extra_topk_length, name)
    if out is None:
        return torch.ops.sinkops.sparse_mla_decode(*args)
    lse = q.new_empty(b, hq, sq, dtype=torch.float32)
    torch.ops.sinkops.sparse_mla_decode_out(*args, out, lse)
    return out, lse
