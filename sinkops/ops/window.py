"""window_attention (docs/DESIGN.md §2.1): the args every backend receives, validation and the
per-signature plan, the eager fast path, the torch.library op and the public function."""
from __future__ import annotations

import math

import torch
from torch import Tensor

from sinkops import _validate as V
from sinkops import backends
from sinkops.ops._common import (EAGER_AUTOGRAD, SINK_MODE_NAMES, PlanCache, SinkMode, check_values,
                                 checked_mode_possible, dispatch, eager, no_grad_through_out, plain, register_op)


class WindowAttentionArgs:
    """One validated window_attention call, as every backend receives it (backends.py): q, k, v
    with a contiguous last dim; int32 cu_seqlens (k's defaults to q's); float32 sinks or None;
    out [Tq, Hq, Dv] and lse [Hq, Tq] (or None: not asked for) allocated; causal folded into
    window_right = 0; scale resolved; sink_mode NONE whenever sinks is None."""

    op = "window_attention"
    __slots__ = ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "sinks", "out", "lse", "total_q", "total_k",
                 "batch", "max_seqlen_q", "max_seqlen_k", "window_left", "window_right", "scale", "sink_mode")

    def __init__(self, q, k, v, cu_seqlens_q, cu_seqlens_k, sinks, out, lse, total_q, total_k, batch,
                 max_seqlen_q, max_seqlen_k, window_left, window_right, scale, sink_mode):
        self.q, self.k, self.v = q, k, v
        self.cu_seqlens_q, self.cu_seqlens_k, self.sinks = cu_seqlens_q, cu_seqlens_k, sinks
        self.out, self.lse = out, lse
        self.total_q, self.total_k, self.batch = total_q, total_k, batch
        self.max_seqlen_q, self.max_seqlen_k = max_seqlen_q, max_seqlen_k
        self.window_left, self.window_right = window_left, window_right
        self.scale, self.sink_mode = scale, sink_mode


class _Plan:
    """What one call signature fixes: the validated scalars, the output shape, the backend and
    its prepared launcher."""

    __slots__ = ("hq", "dv", "dtype", "device", "left", "right", "scale", "sink_mode", "copy_inputs", "check_values",
                 "launch", "backend")


_PLANS = PlanCache()


def _plan(q, k, v, cu_q, cu_k, sinks, out, lse, window_size, causal, softmax_scale, sink_mode, backend):
    """Full validation of a call signature not seen before (every error is raised here)."""
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
    V.cu_seqlens("cu_seqlens_q", cu_q, dev)
    if cu_k is not None:
        V.cu_seqlens("cu_seqlens_k", cu_k, dev)
    left, right = V.window_size(window_size, causal)
    scale = d ** -0.5 if softmax_scale is None else V.scale("softmax_scale", softmax_scale)
    mode = SINK_MODE_NAMES.get(sink_mode) if isinstance(sink_mode, str) else None
    if mode is None:
        raise ValueError(f"sink_mode: expected one of ('key0', 'null', 'none'), got {sink_mode!r}")
    V.sinks("sinks", sinks, hq, dev)
    if sinks is None:
        mode = SinkMode.NONE
    elif mode == SinkMode.NONE:
        raise ValueError("sink_mode: 'none' given together with a sinks tensor")
    V.out_tensor("out", out, (tq, hq, dv), q.dtype, dev)
    if lse is not None:
        V.out_tensor("lse", lse, (hq, tq), torch.float32, dev)
    backends.check_name(backend)
    p = _Plan()
    p.hq, p.dv, p.dtype, p.device = hq, dv, q.dtype, dev
    p.left, p.right, p.scale, p.sink_mode = left, right, scale, mode
    p.copy_inputs = any(t.stride(-1) != 1 and t.numel() > 0 for t in (q, k, v)) or any(
        t is not None and t.stride(0) != 1 and t.numel() > 1 for t in (cu_q, cu_k, sinks))
    p.check_values = dev.type == "cpu" or checked_mode_possible()
    return p


def _args(p: _Plan, q, k, v, cu_q, cu_k, sinks, out, lse, max_q, max_k, want_lse, tq, tk, tv):
    """Per-call checks the signature does not cover, outputs -> ((out, lse), args or None).
    tq, tk, tv: the token counts of q, k, v."""
    if tv != tk:
        raise ValueError(f"v: expected shape ({tk}, ...) to match k, got {tuple(v.shape)}")
    if cu_k is None:
        if tk != tq:
            raise ValueError(f"cu_seqlens_k: required when k has {tk} tokens and q has {tq}")
        cu_k = cu_q
    elif cu_k.shape != cu_q.shape:
        raise ValueError(f"cu_seqlens_k: expected shape {tuple(cu_q.shape)} like cu_seqlens_q, got {tuple(cu_k.shape)}")
    if type(max_q) is not int or not 0 <= max_q <= V.INT32_MAX:
        if max_q is None:
            raise ValueError("max_seqlen_q: required (an upper bound on segment length; reading it "
                             "from cu_seqlens would synchronize with the device)")
        V.non_negative_int("max_seqlen_q", max_q)
    if max_k is None:
        max_k = max_q if cu_k is cu_q else tk
    elif type(max_k) is not int or not 0 <= max_k <= V.INT32_MAX:
        V.non_negative_int("max_seqlen_k", max_k)
    if out is not None and out.shape[0] != tq:
        raise ValueError(f"out: expected shape ({tq}, {p.hq}, {p.dv}), got {tuple(out.shape)}")
    if lse is not None and lse.shape[1] != tq:
        raise ValueError(f"lse: expected shape ({p.hq}, {tq}), got {tuple(lse.shape)}")
    if p.copy_inputs:  # kernels want unit stride in the last dim (and dense index tensors)
        q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
        cu_q, cu_k = cu_q.contiguous(), cu_k.contiguous()
        sinks = None if sinks is None else sinks.contiguous()
    if p.check_values and V.plain_tensors(cu_q=cu_q, cu_k=cu_k) and check_values(p.device):
        V.cu_seqlens_values("cu_seqlens_q", cu_q, tq, max_q, "max_seqlen_q")
        if cu_k is not cu_q:
            V.cu_seqlens_values("cu_seqlens_k", cu_k, tk, max_k, "max_seqlen_k")
    if out is None:
        out = q.new_empty(tq, p.hq, p.dv)
    if lse is None and want_lse:
        lse = torch.empty(p.hq, tq, dtype=torch.float32, device=p.device)
    if tq == 0 or p.hq == 0:
        return (out, lse), None
    if tk == 0:  # every row sees no key: exact zeros, lse = +inf (docs/DESIGN.md §1)
        out.zero_()
        if lse is not None:
            lse.fill_(math.inf)
        return (out, lse), None
    return (out, lse), WindowAttentionArgs(q, k, v, cu_q, cu_k, sinks, out, lse, tq, tk, cu_q.shape[0] - 1, max_q,
                                           max_k, p.left, p.right, p.scale, p.sink_mode)


def run(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, window_size, causal, softmax_scale,
        sinks, sink_mode, out, lse, want_lse, backend):
    """Validate (once per signature), allocate, launch -> (out, lse or None)."""
    cu_q, cu_k = cu_seqlens_q, cu_seqlens_k
    try:
        qs, ks, vs = q.shape, k.shape, v.shape
        # The signature: everything the validation looks at except the token / batch counts.
        key = (qs[1], qs[2], ks[1], ks[2], vs[1], vs[2], q.stride(), k.stride(), v.stride(), q.dtype, k.dtype,
               v.dtype, q.device, k.device, v.device, cu_q.dtype, cu_q.device, cu_q.stride(),
               None if cu_k is None else (cu_k.dtype, cu_k.device, cu_k.stride()),
               None if sinks is None else (sinks.shape, sinks.dtype, sinks.device, sinks.stride()),
               None if out is None else (out.shape[1:], out.stride(), out.dtype, out.device),
               None if lse is None else (lse.shape[0], lse.stride(), lse.dtype, lse.device),
               want_lse, window_size, causal, softmax_scale, sink_mode, backend)
        tq, tk, tv = qs[0], ks[0], vs[0]
    except (AttributeError, TypeError, IndexError):  # not 3-D tensors: the full check names the argument
        key = tq = tk = tv = None
    return dispatch(_PLANS, key, _plan, _args,
                    (q, k, v, cu_q, cu_k, sinks, out, lse, window_size, causal, softmax_scale, sink_mode, backend),
                    (q, k, v, cu_q, cu_k, sinks, out, lse, max_seqlen_q, max_seqlen_k, want_lse, tq, tk, tv),
                    backend)


# ------------------------------------------------------------------------------ torch.library

_SCHEMA = ("Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q, "
           "int max_seqlen_k, int window_left, int window_right, float softmax_scale, Tensor? sinks, "
           "str sink_mode, str backend")
_RETURNS = "(Tensor out, Tensor lse)"


def _op(q, k, v, cu_q, cu_k, max_q, max_k, left, right, scale, sinks, sink_mode, backend):
    return run(q, k, v, cu_q, cu_k, max_q, max_k, (left, right), False, scale, sinks, sink_mode, None, None, True,
               backend)


def _op_out(q, k, v, cu_q, cu_k, max_q, max_k, left, right, scale, sinks, sink_mode, backend, *, out, lse):
    run(q, k, v, cu_q, cu_k, max_q, max_k, (left, right), False, scale, sinks, sink_mode, out, lse, True, backend)


def _fake(q, k, v, cu_q, cu_k, max_q, max_k, left, right, scale, sinks, sink_mode, backend):
    return (q.new_empty(q.shape[0], q.shape[1], v.shape[2]),
            q.new_empty(q.shape[1], q.shape[0], dtype=torch.float32))



register_op("window_attention", _SCHEMA, _RETURNS, "Tensor(a!) out, Tensor(b!) lse", _op, _op_out, _fake)


# ------------------------------------------------------------------------------ public function

def window_attention(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor | None = None,
                     max_seqlen_q: int | None = None, max_seqlen_k: int | None = None, window_size=(-1, -1),
                     causal: bool = False, softmax_scale: float | None = None, sinks: Tensor | None = None,
                     sink_mode: str = "key0", return_lse: bool = False, out: Tensor | None = None,
                     backend: str = "auto"):
    """Varlen (packed) windowed attention with a per-head sink (docs/DESIGN.md §2.1).

    q [Tq, Hq, D], k [Tk, Hk, D], v [Tk, Hk, Dv]; cu_seqlens_q/k int32 [B+1] (k defaults to q's);
    max_seqlen_q: int, an upper bound on any segment's query length (required: no host sync);
    max_seqlen_k: defaults to max_seqlen_q when cu_seqlens_k is None, else to Tk.
    window_size=(left, right) in flash-attention's convention, -1 = unbounded; causal sets right=0.
    sinks float32 [Hq] in natural-log units (never scaled); sink_mode "key0" (bias on each
    segment's first key) or "null" (extra logit in the denominator owning no value).
    Returns out [Tq, Hq, Dv] or (out, lse [Hq, Tq] float32, natural log, +inf for empty rows).
    Differentiable in q, k, v and sinks, lse included (docs/DESIGN.md §6; not with out=).
    backend: "auto" | "cuda" | "triton" | "sycl" | "torch" (backends.py).
    """
    if eager(q, k, v, sinks):  # straight to the launcher: no dispatcher, no autograd wrapper
        out, lse = run(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, window_size, causal,
                       softmax_scale, sinks, sink_mode, out, None, return_lse, backend)
        return (out, lse) if return_lse else out
    # Traced (torch.compile, FakeTensor), a tensor subclass, or autograd: through torch.ops (or, for
    # autograd on plain tensors, the same formula without the dispatcher), with the scalars normalized
    # here so the schema stays simple.
    no_grad_through_out(out, q, k, v, sinks)
    left, right = V.window_size(window_size, causal)
    V.tensor("q", q, ndim=3)
    if cu_seqlens_k is None:
        cu_seqlens_k = cu_seqlens_q
        max_seqlen_k = max_seqlen_q if max_seqlen_k is None else max_seqlen_k
    if max_seqlen_q is None:
        raise ValueError("max_seqlen_q: required (an upper bound on segment length; reading it "
                         "from cu_seqlens would synchronize with the device)")
    if max_seqlen_k is None:
        max_seqlen_k = k.shape[0]
    scale = q.shape[-1] ** -0.5 if softmax_scale is None else V.scale("softmax_scale", softmax_scale)
    if not isinstance(sink_mode, str) or sink_mode not in SINK_MODE_NAMES:
        raise ValueError(f"sink_mode: expected one of ('key0', 'null', 'none'), got {sink_mode!r}")
    mode = sink_mode if sinks is not None else "none"
    ops_args = (q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, left, right, scale, sinks, mode,
                backend)
    if out is None:
        # autograd on plain tensors: our autograd.Function; traced or a subclass: the dispatcher
        fn = EAGER_AUTOGRAD["window_attention"] if plain(q) else torch.ops.sinkops.window_attention
        out, lse = fn(*ops_args)
    else:
        lse = q.new_empty(q.shape[1], q.shape[0], dtype=torch.float32)
        torch.ops.sinkops.window_attention_out(*ops_args, out=out, lse=lse)
    return (out, lse) if return_lse else out
