"""window_attention's backward (docs/DESIGN.md §6): the args every backend receives, the op
sinkops::window_attention_backward and the autograd formula of sinkops::window_attention.

The saved state is the forward's (out, lse), as in flash-attention: nothing O(T^2). The backward
op is also public (torch.ops.sinkops.window_attention_backward) for callers that keep their own
autograd, and torch.compile traces it through its fake.
"""
from __future__ import annotations

import torch

from sinkops import _validate as V
from sinkops.ops import window
from sinkops.ops._common import (SINK_MODE_NAMES, PlanCache, backward_backend, dispatch, register_autograd,
                                 register_functional_op)


class WindowAttentionBackwardArgs(window.WindowAttentionArgs):
    """The forward call's args (q, k, v, cu_seqlens, sinks, out, lse: what it saw and returned)
    plus dout [Tq, Hq, Dv] (q's dtype), dlse [Hq, Tq] float32 or None (the gradient of the returned
    lse; +inf entries of lse take none), the gradients to write: dq, dk, dv (the inputs' shapes
    and dtype, dense, uninitialized: a backend writes every element, zeros in rows of no segment),
    dsinks float32 [Hq] (or None without sinks; uninitialized too), and
    deterministic (same inputs -> same bits; the kernels here are by construction)."""

    op = "window_attention_backward"
    __slots__ = ("dout", "dlse", "dq", "dk", "dv", "dsinks", "deterministic")

    def zero_gradients(self) -> None:
        """For a backend's launch where nothing attends (batch or max_seqlen 0): every gradient is
        0, and they come uninitialized."""
        for g in (self.dq, self.dk, self.dv, self.dsinks):
            if g is not None:
                g.zero_()


class _Plan:
    __slots__ = ("fwd", "launch", "backend")


_PLANS = PlanCache()


def _plan(dout, dlse, q, k, v, out, lse, cu_q, cu_k, window_size, scale, sinks, sink_mode, backend):
    p = _Plan()
    p.fwd = window._plan(q, k, v, cu_q, cu_k, sinks, out, lse, window_size, False, scale, sink_mode, backend)
    V.saved_and_grads(q, out, lse, dout, dlse)
    return p


def _args(p, dout, dlse, q, k, v, out, lse, cu_q, cu_k, sinks, max_q, max_k, deterministic):
    fp = p.fwd
    tq, tk = q.shape[0], k.shape[0]
    if v.shape[0] != tk:
        raise ValueError(f"v: expected shape ({tk}, ...) to match k, got {tuple(v.shape)}")
    for name, t, shape in (("out", out, (tq, fp.hq, fp.dv)), ("dout", dout, (tq, fp.hq, fp.dv)),
                           ("lse", lse, (fp.hq, tq)), ("dlse", dlse, (fp.hq, tq))):
        if t is not None and tuple(t.shape) != shape:
            raise ValueError(f"{name}: expected shape {shape}, got {tuple(t.shape)}")
    if cu_k.shape != cu_q.shape:
        raise ValueError(f"cu_seqlens_k: expected shape {tuple(cu_q.shape)} like cu_seqlens_q, got {tuple(cu_k.shape)}")
    V.non_negative_int("max_seqlen_q", max_q)
    V.non_negative_int("max_seqlen_k", max_k)
    # autograd hands over expanded gradients (stride 0) for losses like out.sum(): densify those
    lse, dlse = lse.contiguous(), None if dlse is None else dlse.contiguous()
    if fp.copy_inputs or dout.stride(-1) != 1:
        q, k, v, out, dout = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v, out, dout))
        cu_q, cu_k = cu_q.contiguous(), cu_k.contiguous()
        sinks = None if sinks is None else sinks.contiguous()
    has_sinks = fp.sink_mode != window.SinkMode.NONE
    if tq == 0 or tk == 0 or fp.hq == 0:  # nothing attends: every gradient is exactly 0
        dsinks = torch.zeros(fp.hq if has_sinks else 0, dtype=torch.float32, device=fp.device)
        return (torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v), dsinks), None
    # Uninitialized: every backend writes every element (a zero fill here cost the CUDA backward
    # three memsets, 7 % of MiMo video's time). Dense whatever the inputs' strides (empty_like would
    # copy a view's strides when it has one token): a backend's per-signature template may keep
    # them, and the signature holds the shapes.
    dq, dk, dv = (torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))
    dsinks = torch.empty(fp.hq if has_sinks else 0, dtype=torch.float32, device=fp.device)
    a = WindowAttentionBackwardArgs(q, k, v, cu_q, cu_k, sinks, out, lse, tq, tk, cu_q.shape[0] - 1, max_q, max_k,
                                    fp.left, fp.right, fp.scale, fp.sink_mode)
    a.dout, a.dlse, a.dq, a.dk, a.dv = dout, dlse, dq, dk, dv
    a.dsinks, a.deterministic = (dsinks if has_sinks else None), deterministic
    return (dq, dk, dv, dsinks), a


def run(dout, dlse, q, k, v, out, lse, cu_q, cu_k, max_q, max_k, left, right, scale, sinks, sink_mode,
        deterministic, backend):
    """Validate (once per signature), allocate the gradients, launch -> (dq, dk, dv, dsinks)."""
    try:
        key = (q.shape[1:], k.shape[1:], v.shape[1:], q.stride(), k.stride(), v.stride(), q.dtype, q.device,
               k.dtype, v.dtype, out.stride(), out.dtype, lse.stride(), dout.stride(), dout.dtype,
               None if dlse is None else (dlse.stride(), dlse.dtype, dlse.device),
               cu_q.dtype, cu_q.device, cu_k.dtype, cu_k.device,
               None if sinks is None else (sinks.shape, sinks.dtype, sinks.device, sinks.stride()),
               left, right, scale, sink_mode, bool(deterministic), backend)
    except (AttributeError, TypeError, IndexError):
        key = None
    return dispatch(_PLANS, key, _plan, _args,
                    (dout, dlse, q, k, v, out, lse, cu_q, cu_k, (left, right), scale, sinks, sink_mode, backend),
                    (dout, dlse, q, k, v, out, lse, cu_q, cu_k, sinks, max_q, max_k, deterministic), backend)


_SCHEMA = ("Tensor dout, Tensor? dlse, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, Tensor cu_seqlens_q, "
           "Tensor cu_seqlens_k, int max_seqlen_q, int max_seqlen_k, int window_left, int window_right, "
           "float softmax_scale, Tensor? sinks, str sink_mode, bool deterministic, str backend")


def _fake(dout, dlse, q, k, v, out, lse, cu_q, cu_k, max_q, max_k, left, right, scale, sinks, sink_mode,
          deterministic, backend):
    n = q.shape[1] if sinks is not None and sink_mode != "none" else 0
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), q.new_empty(n, dtype=torch.float32)


register_functional_op("window_attention_backward", _SCHEMA, "(Tensor dq, Tensor dk, Tensor dv, Tensor dsinks)",
                       run, _fake)


# ------------------------------------------------------------------------------ autograd of the forward op

def _setup_context(ctx, inputs, output):
    q, k, v, cu_q, cu_k, max_q, max_k, left, right, scale, sinks, sink_mode, backend = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, cu_q, cu_k, sinks, out, lse)
    ctx.scalars = (max_q, max_k, left, right, scale, sink_mode,
                   backward_backend(backend, "window_attention_backward"))


def _backward(ctx, dout, dlse):
    q, k, v, cu_q, cu_k, sinks, out, lse = ctx.saved_tensors
    max_q, max_k, left, right, scale, sink_mode, backend = ctx.scalars
    if dout is None:  # only lse was used
        dout = torch.zeros_like(out)
    mode = sink_mode if sinks is not None and SINK_MODE_NAMES.get(sink_mode) else "none"
    op = run if getattr(ctx, "direct", False) else torch.ops.sinkops.window_attention_backward
    dq, dk, dv, dsinks = op(
        dout, dlse, q, k, v, out, lse, cu_q, cu_k, max_q, max_k, left, right, scale, sinks, mode,
        torch.are_deterministic_algorithms_enabled(), backend)
    ds = dsinks if sinks is not None and mode != "none" else None
    return dq, dk, dv, None, None, None, None, None, None, None, ds, None, None


register_autograd("window_attention", window._op, _setup_context, _backward)
