"""sparse_mla_decode (docs/DESIGN.md §2.3): the args every backend receives, validation and the
per-signature plan, the eager fast path, the torch.library op and the public function."""
from __future__ import annotations

import torch
from torch import Tensor

from sinkops import _validate as V
from sinkops import backends, kv_layout
from sinkops.kv_layout import VALUE_DIM
from sinkops.ops._common import PlanCache, check_values, checked_mode_possible, dispatch, eager, register_op


class SparseMlaDecodeArgs:
    """One validated sparse_mla_decode call, as every backend receives it (backends.py): q with a
    contiguous last dim; the caches as uint8 views (read through their block stride); int32
    indices and topk_length ([B]) or None, the extra pool's likewise or None; float32 attn_sink
    or None; out [B, Sq, Hq, 512] contiguous and lse [B, Hq, Sq] allocated; layout a
    kv_layout.KvLayout."""

    op = "sparse_mla_decode"
    __slots__ = ("q", "kv_cache", "indices", "topk_length", "extra_kv_cache", "extra_indices", "extra_topk_length",
                 "attn_sink", "out", "lse", "batch", "scale", "layout")

    def __init__(self, q, kv_cache, indices, topk_length, extra_kv_cache, extra_indices, extra_topk_length,
                 attn_sink, out, lse, batch, scale, layout):
        self.q, self.kv_cache, self.indices, self.topk_length = q, kv_cache, indices, topk_length
        self.extra_kv_cache, self.extra_indices, self.extra_topk_length = extra_kv_cache, extra_indices, extra_topk_length
        self.attn_sink, self.out, self.lse = attn_sink, out, lse
        self.batch, self.scale, self.layout = batch, scale, layout


class _Plan:
    __slots__ = ("sq", "hq", "topks", "dtype", "device", "scale", "layout", "copy_inputs", "check_values", "launch",
                 "backend")


_PLANS = PlanCache()


def _pool(prefix, cache, indices, topk_length, lay, sq, dev):
    V.tensor(f"{prefix}kv_cache", cache, ndim=4, dtypes=(torch.uint8, torch.float8_e4m3fn), device=dev)
    nb, bs, one, nbytes = cache.shape
    bpt = lay.bytes_per_token
    if one != 1 or nbytes != bpt or bs < 1:
        raise ValueError(f"{prefix}kv_cache: expected shape (num_blocks, block_size, 1, {bpt}) for "
                         f"layout {lay.name!r}, got {tuple(cache.shape)}")
    # Every byte a kernel reads of block i lies in [i * stride(0), i * stride(0) + block_size * bpt):
    # inside the view when its inner dims are dense, whatever the block stride.
    if (bs > 1 and cache.stride(1) != bpt) or cache.stride(3) != 1:
        raise ValueError(f"{prefix}kv_cache: tokens of a block must be {bpt} bytes apart and dense, "
                         f"got strides {cache.stride()}")
    if nb > 1 and cache.stride(0) < bs * bpt:
        raise ValueError(f"{prefix}kv_cache: block stride {cache.stride(0)} B is smaller than one "
                         f"{lay.name} block ({bs * bpt} B for block_size {bs})")
    V.tensor(f"{prefix}indices", indices, ndim=3, dtypes=(torch.int32,), device=dev)
    if indices.shape[1] != sq or indices.shape[2] < 1:
        raise ValueError(f"{prefix}indices: expected shape (B, {sq}, topk>=1), got {tuple(indices.shape)}")
    if topk_length is not None:
        V.tensor(f"{prefix}topk_length", topk_length, ndim=1, dtypes=(torch.int32,), device=dev)


def _plan(q, kv_cache, indices, sm_scale, attn_sink, topk_length, layout, extra_kv_cache, extra_indices,
          extra_topk_length, out, lse, backend):
    lay = kv_layout.get(layout)
    V.tensor("q", q, ndim=4, dtypes=V.FLOATS[1:])  # bf16 on the GPU backends; fp32/fp64 on torch
    dev = q.device
    _, sq, hq, dqk = q.shape
    if dqk != lay.d_qk:
        raise ValueError(f"q: head dim {dqk} does not match layout {layout!r} (expects {lay.d_qk})")
    _pool("", kv_cache, indices, topk_length, lay, sq, dev)
    if (extra_kv_cache is None) != (extra_indices is None):
        raise ValueError("extra_kv_cache / extra_indices: pass both or neither")
    if extra_kv_cache is None and extra_topk_length is not None:
        raise ValueError("extra_topk_length: given without extra_kv_cache")
    if extra_kv_cache is not None:
        _pool("extra_", extra_kv_cache, extra_indices, extra_topk_length, lay, sq, dev)
    V.sinks("attn_sink", attn_sink, hq, dev)
    scale = V.scale("sm_scale", sm_scale)
    if out is not None:
        V.out_tensor("out", out, (out.shape[0], sq, hq, VALUE_DIM), q.dtype, dev)
        if not out.is_contiguous():
            raise ValueError("out: must be contiguous for sparse_mla_decode")
    if lse is not None:
        V.out_tensor("lse", lse, (lse.shape[0], hq, sq), torch.float32, dev)
        if not lse.is_contiguous():
            raise ValueError("lse: must be contiguous for sparse_mla_decode")
    backends.check_name(backend)
    p = _Plan()
    p.sq, p.hq, p.dtype, p.device, p.scale, p.layout = sq, hq, q.dtype, dev, scale, lay
    p.topks = (indices.shape[2], 0 if extra_indices is None else extra_indices.shape[2])
    p.copy_inputs = q.stride(-1) != 1 or any(
        t is not None and t.stride(-1) != 1 and t.numel() > 1
        for t in (indices, extra_indices, topk_length, extra_topk_length, attn_sink))
    p.check_values = (topk_length is not None or extra_topk_length is not None) and (
        dev.type == "cpu" or checked_mode_possible())
    return p


def _bytes(cache):
    return None if cache is None or cache.dtype == torch.uint8 else cache.view(torch.uint8)


def _args(p: _Plan, q, kv_cache, indices, attn_sink, topk_length, extra_kv_cache, extra_indices,
          extra_topk_length, out, lse, b):
    """Per-call checks the signature does not cover, outputs -> ((out, lse), args or None)."""
    for name, t in (("indices", indices), ("topk_length", topk_length), ("extra_indices", extra_indices),
                    ("extra_topk_length", extra_topk_length), ("out", out), ("lse", lse)):
        if t is not None and t.shape[0] != b:
            raise ValueError(f"{name}: expected {b} rows in dim 0 (the batch of q), got shape {tuple(t.shape)}")
    if out is not None and out.data_ptr() % 16:  # the Hopper kernel stores 16-byte chunks; one rule for all
        raise ValueError("out: must be 16-byte aligned for sparse_mla_decode (got a view at byte offset "
                         f"{out.data_ptr() % 16} mod 16)")
    if p.copy_inputs:  # kernels want unit stride in the last dim (and dense index tensors)
        q = q if q.stride(-1) == 1 else q.contiguous()
        indices, extra_indices, topk_length, extra_topk_length, attn_sink = (
            None if t is None else t.contiguous()
            for t in (indices, extra_indices, topk_length, extra_topk_length, attn_sink))
    if p.check_values and check_values(p.device):
        for name, t, topk in (("topk_length", topk_length, p.topks[0]),
                              ("extra_topk_length", extra_topk_length, p.topks[1])):
            if t is not None and V.plain_tensors(t=t):
                V.topk_length_values(name, t, topk)
    if kv_cache.dtype != torch.uint8:
        kv_cache = kv_cache.view(torch.uint8)
    if extra_kv_cache is not None and extra_kv_cache.dtype != torch.uint8:
        extra_kv_cache = extra_kv_cache.view(torch.uint8)
    if out is None:
        out = q.new_empty(b, p.sq, p.hq, VALUE_DIM)
    if lse is None:
        lse = torch.empty(b, p.hq, p.sq, dtype=torch.float32, device=p.device)
    if b == 0 or p.sq == 0 or p.hq == 0:
        return (out, lse), None
    return (out, lse), SparseMlaDecodeArgs(q, kv_cache, indices, topk_length, extra_kv_cache, extra_indices,
                                           extra_topk_length, attn_sink, out, lse, b, p.scale, p.layout)


def _sig(t):
    return None if t is None else (t.shape[1:], t.stride(), t.dtype, t.device)


def run(q, kv_cache, indices, sm_scale, attn_sink, topk_length, layout, extra_kv_cache, extra_indices,
        extra_topk_length, out, lse, backend):
    """Validate (once per signature), allocate, launch -> (out, lse)."""
    try:
        # The signature: everything the validation looks at except the batch and pool sizes.
        key = (q.shape[1:], q.stride(), q.dtype, q.device, kv_cache.shape[1:], kv_cache.stride(), kv_cache.dtype,
               kv_cache.device, indices.shape[1:], indices.stride(), indices.dtype, indices.device,
               _sig(topk_length), _sig(extra_kv_cache), _sig(extra_indices), _sig(extra_topk_length),
               None if attn_sink is None else (attn_sink.shape, attn_sink.dtype, attn_sink.device, attn_sink.stride()),
               _sig(out), _sig(lse), sm_scale, layout, backend)
        b = q.shape[0]
    except (AttributeError, TypeError, IndexError):  # not tensors: the full check names the argument
        key = b = None
    return dispatch(_PLANS, key, _plan, _args,
                    (q, kv_cache, indices, sm_scale, attn_sink, topk_length, layout, extra_kv_cache, extra_indices,
                     extra_topk_length, out, lse, backend),
                    (q, kv_cache, indices, attn_sink, topk_length, extra_kv_cache, extra_indices, extra_topk_length,
                     out, lse, b),
                    backend)


# ------------------------------------------------------------------------------ torch.library

_SCHEMA = ("Tensor q, Tensor kv_cache, Tensor indices, float sm_scale, Tensor? attn_sink, Tensor? topk_length, "
           "str layout, Tensor? extra_kv_cache, Tensor? extra_indices, Tensor? extra_topk_length, str backend")
_RETURNS = "(Tensor out, Tensor lse)"


def _op(q, kv_cache, indices, sm_scale, attn_sink, topk_length, layout, extra_kv_cache, extra_indices,
        extra_topk_length, backend):
    return run(q, kv_cache, indices, sm_scale, attn_sink, topk_length, layout, extra_kv_cache, extra_indices,
               extra_topk_length, None, None, backend)


def _op_out(q, kv_cache, indices, sm_scale, attn_sink, topk_length, layout, extra_kv_cache, extra_indices,
            extra_topk_length, backend, *, out, lse):
    run(q, kv_cache, indices, sm_scale, attn_sink, topk_length, layout, extra_kv_cache, extra_indices,
        extra_topk_length, out, lse, backend)


def _fake(q, kv_cache, indices, sm_scale, attn_sink, topk_length, layout, extra_kv_cache, extra_indices,
          extra_topk_length, backend):
    b, sq, hq, _ = q.shape
    return q.new_empty(b, sq, hq, VALUE_DIM), q.new_empty(b, hq, sq, dtype=torch.float32)



register_op("sparse_mla_decode", _SCHEMA, _RETURNS, "Tensor(a!) out, Tensor(b!) lse", _op, _op_out, _fake)


# ------------------------------------------------------------------------------ public function

def sparse_mla_decode(q: Tensor, kv_cache: Tensor, indices: Tensor, sm_scale: float, attn_sink: Tensor | None = None,
                      topk_length: Tensor | None = None, layout: str = "v4", extra_kv_cache: Tensor | None = None,
                      extra_indices: Tensor | None = None, extra_topk_length: Tensor | None = None,
                      out: Tensor | None = None, backend: str = "auto"):
    """Sparse MLA decode over a paged FP8 KV cache (docs/DESIGN.md §2.3).

    q [B, Sq, Hq, Dqk] bf16 (Dqk 512 for layout "v4", 576 for "v32"); kv_cache
    [num_blocks, block_size, 1, bytes_per_token] uint8/e4m3 view read through its block stride;
    indices int32 [B, Sq, topk] of slots (block * block_size + offset; -1 invalid);
    topk_length int32 [B]; the optional extra pool is attended in the same softmax.
    Returns (out [B, Sq, Hq, 512], lse [B, Hq, Sq] float32).
    """
    if eager(q, attn_sink):  # straight to the launcher: no dispatcher, no autograd wrapper
        return run(q, kv_cache, indices, sm_scale, attn_sink, topk_length, layout, extra_kv_cache, extra_indices,
                   extra_topk_length, out, None, backend)
    V.tensor("q", q, ndim=4)
    kv_layout.get(layout)
    ops_args = (q, kv_cache, indices, V.scale("sm_scale", sm_scale), attn_sink, topk_length, layout, extra_kv_cache,
                extra_indices, extra_topk_length, backend)
    if out is None:
        return torch.ops.sinkops.sparse_mla_decode(*ops_args)
    lse = q.new_empty(q.shape[0], q.shape[2], q.shape[1], dtype=torch.float32)
    torch.ops.sinkops.sparse_mla_decode_out(*ops_args, out=out, lse=lse)
    return out, lse
