"""sparse_mla_prefill (docs/DESIGN.md §2.2): the args every backend receives, validation and the
per-signature plan, the eager fast path, the torch.library op and the public function."""
from __future__ import annotations

import math

import torch
from torch import Tensor

from sinkops import _validate as V
from sinkops import backends
from sinkops.kv_layout import LAYOUTS, VALUE_DIM
from sinkops.ops._common import (EAGER_AUTOGRAD, PlanCache, check_values, checked_mode_possible, dispatch, eager,
                                 no_grad_through_out, plain, register_op)

_D_QK = tuple(sorted({lay.d_qk for lay in LAYOUTS.values()}))  # 512 (DeepSeek-V4), 576 (V3.2)


class SparseMlaPrefillArgs:
    """One validated sparse_mla_prefill call, as every backend receives it (backends.py): q, kv,
    indices with a contiguous last dim; int32 topk_length [Sq] or None; float32 attn_sink [Hq] or
    None; out [Sq, Hq, d_v], max_logits and lse [Sq, Hq] allocated."""

    op = "sparse_mla_prefill"
    __slots__ = ("q", "kv", "indices", "topk_length", "attn_sink", "out", "max_logits", "lse", "s_q", "scale")

    def __init__(self, q, kv, indices, topk_length, attn_sink, out, max_logits, lse, s_q, scale):
        self.q, self.kv, self.indices, self.topk_length, self.attn_sink = q, kv, indices, topk_length, attn_sink
        self.out, self.max_logits, self.lse = out, max_logits, lse
        self.s_q, self.scale = s_q, scale


class _Plan:
    __slots__ = ("hq", "dv", "topk", "dtype", "device", "scale", "copy_inputs", "check_values", "launch", "backend")


_PLANS = PlanCache()


def _plan(q, kv, indices, sm_scale, d_v, attn_sink, topk_length, out, max_logits, lse, backend):
    V.tensor("q", q, ndim=3, dtypes=V.FLOATS)
    dev = q.device
    V.tensor("kv", kv, ndim=3, dtypes=(q.dtype,), device=dev)
    _, hq, dqk = q.shape
    if dqk not in _D_QK:
        raise ValueError(f"q: head dim {dqk} not supported (512 for DeepSeek-V4, 576 for V3.2)")
    if kv.shape[1] != 1 or kv.shape[2] != dqk:
        raise ValueError(f"kv: expected shape (Skv, 1, {dqk}), got {tuple(kv.shape)}")
    if d_v != VALUE_DIM:
        raise ValueError(f"d_v: only {VALUE_DIM} is supported, got {d_v}")
    V.tensor("indices", indices, ndim=3, dtypes=(torch.int32,), device=dev)
    if indices.shape[1] != 1 or indices.shape[2] < 1:
        raise ValueError(f"indices: expected shape (Sq, 1, topk>=1), got {tuple(indices.shape)}")
    V.sinks("attn_sink", attn_sink, hq, dev)
    if topk_length is not None:
        V.tensor("topk_length", topk_length, ndim=1, dtypes=(torch.int32,), device=dev)
    scale = V.scale("sm_scale", sm_scale)
    if out is not None:
        V.out_tensor("out", out, (out.shape[0], hq, d_v), q.dtype, dev)
    for name, t in (("max_logits", max_logits), ("lse", lse)):
        if t is not None:
            V.out_tensor(name, t, (t.shape[0], hq), torch.float32, dev)
            if not t.is_contiguous():
                raise ValueError(f"{name}: must be contiguous")
    backends.check_name(backend)
    p = _Plan()
    p.hq, p.dv, p.topk, p.dtype, p.device, p.scale = hq, d_v, indices.shape[2], q.dtype, dev, scale
    p.copy_inputs = any(t.stride(-1) != 1 and t.numel() > 0 for t in (q, kv, indices)) or any(
        t is not None and t.stride(0) != 1 and t.numel() > 1 for t in (attn_sink, topk_length))
    p.check_values = topk_length is not None and (dev.type == "cpu" or checked_mode_possible())
    return p


def _args(p: _Plan, q, kv, indices, attn_sink, topk_length, out, max_logits, lse, sq):
    """Per-call checks the signature does not cover, outputs -> ((out, max_logits, lse), args or None)."""
    if indices.shape[0] != sq:
        raise ValueError(f"indices: expected shape ({sq}, 1, topk>=1), got {tuple(indices.shape)}")
    if topk_length is not None and topk_length.shape[0] != sq:
        raise ValueError(f"topk_length: expected shape ({sq},), got {tuple(topk_length.shape)}")
    for name, t, shape in (("out", out, (sq, p.hq, p.dv)), ("max_logits", max_logits, (sq, p.hq)),
                           ("lse", lse, (sq, p.hq))):
        if t is not None and t.shape[0] != sq:
            raise ValueError(f"{name}: expected shape {shape}, got {tuple(t.shape)}")
    if p.copy_inputs:  # kernels want unit stride in the last dim (and dense index tensors)
        q, kv, indices = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, kv, indices))
        attn_sink = None if attn_sink is None else attn_sink.contiguous()
        topk_length = None if topk_length is None else topk_length.contiguous()
    if p.check_values and V.plain_tensors(topk_length=topk_length) and check_values(p.device):
        V.topk_length_values("topk_length", topk_length, p.topk)
    if out is None:
        out = q.new_empty(sq, p.hq, p.dv)
    if max_logits is None:
        max_logits = torch.empty(sq, p.hq, dtype=torch.float32, device=p.device)
    if lse is None:
        lse = torch.empty(sq, p.hq, dtype=torch.float32, device=p.device)
    if sq == 0 or p.hq == 0:
        return (out, max_logits, lse), None
    if kv.shape[0] == 0:  # no valid index anywhere
        out.zero_()
        max_logits.fill_(-math.inf)
        lse.fill_(math.inf)
        return (out, max_logits, lse), None
    return (out, max_logits, lse), SparseMlaPrefillArgs(q, kv, indices, topk_length, attn_sink, out, max_logits,
                                                        lse, sq, p.scale)


def run(q, kv, indices, sm_scale, d_v, attn_sink, topk_length, out, max_logits, lse, backend):
    """Validate (once per signature), allocate, launch -> (out, max_logits, lse)."""
    try:
        qs = q.shape
        # The signature: everything the validation looks at except the token counts.
        key = (qs[1], qs[2], q.stride(), q.dtype, q.device, kv.shape[1:], kv.stride(), kv.dtype, kv.device,
               indices.shape[1:], indices.stride(), indices.dtype, indices.device,
               None if attn_sink is None else (attn_sink.shape, attn_sink.dtype, attn_sink.device, attn_sink.stride()),
               None if topk_length is None else (topk_length.dtype, topk_length.device, topk_length.stride()),
               None if out is None else (out.shape[1:], out.stride(), out.dtype, out.device),
               None if max_logits is None else (max_logits.shape[1:], max_logits.stride(), max_logits.dtype,
                                                max_logits.device),
               None if lse is None else (lse.shape[1:], lse.stride(), lse.dtype, lse.device),
               sm_scale, d_v, backend)
        sq = qs[0]
    except (AttributeError, TypeError, IndexError):  # not 3-D tensors: the full check names the argument
        key = sq = None
    return dispatch(_PLANS, key, _plan, _args,
                    (q, kv, indices, sm_scale, d_v, attn_sink, topk_length, out, max_logits, lse, backend),
                    (q, kv, indices, attn_sink, topk_length, out, max_logits, lse, sq), backend)


# ------------------------------------------------------------------------------ torch.library

_SCHEMA = ("Tensor q, Tensor kv, Tensor indices, float sm_scale, int d_v, Tensor? attn_sink, Tensor? topk_length, "
           "str backend")
_RETURNS = "(Tensor out, Tensor max_logits, Tensor lse)"


def _op(q, kv, indices, sm_scale, d_v, attn_sink, topk_length, backend):
    return run(q, kv, indices, sm_scale, d_v, attn_sink, topk_length, None, None, None, backend)


def _op_out(q, kv, indices, sm_scale, d_v, attn_sink, topk_length, backend, *, out, max_logits, lse):
    run(q, kv, indices, sm_scale, d_v, attn_sink, topk_length, out, max_logits, lse, backend)


def _fake(q, kv, indices, sm_scale, d_v, attn_sink, topk_length, backend):
    sq, hq = q.shape[0], q.shape[1]
    return (q.new_empty(sq, hq, d_v), q.new_empty(sq, hq, dtype=torch.float32),
            q.new_empty(sq, hq, dtype=torch.float32))



register_op("sparse_mla_prefill", _SCHEMA, _RETURNS, "Tensor(a!) out, Tensor(b!) max_logits, Tensor(c!) lse",
            _op, _op_out, _fake)


# ------------------------------------------------------------------------------ public function

def sparse_mla_prefill(q: Tensor, kv: Tensor, indices: Tensor, sm_scale: float, d_v: int = VALUE_DIM,
                       attn_sink: Tensor | None = None, topk_length: Tensor | None = None,
                       out: Tensor | None = None, backend: str = "auto"):
    """Sparse MLA prefill (docs/DESIGN.md §2.2) with the DeepSeek-V4 null-logit attn_sink.

    q [Sq, Hq, Dqk] bf16, kv [Skv, 1, Dqk] bf16 (values = first d_v channels, K == V),
    indices int32 [Sq, 1, topk] (< 0 or >= Skv invalid; duplicates count), topk_length int32 [Sq].
    Returns (out [Sq, Hq, d_v], max_logits [Sq, Hq], lse [Sq, Hq]); lse excludes the sink.
    Differentiable in q, kv and attn_sink, lse included (docs/DESIGN.md §6; not with out=).
    """
    if eager(q, kv, attn_sink):  # straight to the launcher: no dispatcher, no autograd wrapper
        return run(q, kv, indices, sm_scale, d_v, attn_sink, topk_length, out, None, None, backend)
    no_grad_through_out(out, q, kv, attn_sink)
    V.tensor("q", q, ndim=3)
    ops_args = (q, kv, indices, V.scale("sm_scale", sm_scale), d_v, attn_sink, topk_length, backend)
    if out is None:  # autograd on plain tensors: our autograd.Function; traced: the dispatcher
        return (EAGER_AUTOGRAD["sparse_mla_prefill"] if plain(q) else torch.ops.sinkops.sparse_mla_prefill)(*ops_args)
    max_logits = q.new_empty(q.shape[0], q.shape[1], dtype=torch.float32)
    lse = q.new_empty(q.shape[0], q.shape[1], dtype=torch.float32)
    torch.ops.sinkops.sparse_mla_prefill_out(*ops_args, out=out, max_logits=max_logits, lse=lse)
    return out, max_logits, lse
